"""Loading KernelBench-style model files (every framework frontend).

A model file is a Python file with module-level size constants, an entry point and
``def get_inputs()``. The entry point is what the file's format says (`ModelFormat`): for PyTorch
(`TORCH_FORMAT`) ``class Model(nn.Module)`` built from ``get_init_inputs()``; for JAX
(`JAX_FORMAT`) ``def model(*inputs)``, or ``class Model`` (a Flax NNX module) with an optional
``get_init_inputs()``. :func:`load_model_file` executes it under a fresh module name and returns a
:class:`ModelSpec`; :meth:`ModelSpec.with_sizes` re-executes the same source with some integer
constants replaced (a size-reduced instance of the same program, used for validation).

Every error is a :class:`ModelFileError` whose message is one line, ``<file>:<line>: <what>``.
This module imports no framework itself (the model file usually does).
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import sys
import traceback
import types
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solar_compiler.errors import SolarError

__all__ = ["JAX_FORMAT", "TORCH_FORMAT", "ModelFileError", "ModelFormat", "ModelSpec", "load_model_file",
           "source_where", "user_line"]

_COUNTER = itertools.count()
# import name -> distribution name where they differ; the `kernelbench` extra of pyproject.toml
_PACKAGE_OF = {"yaml": "pyyaml", "cv2": "opencv-python", "sklearn": "scikit-learn", "PIL": "pillow",
               "skimage": "scikit-image"}
_KERNELBENCH_EXTRA = {"einops"}


class ModelFileError(SolarError):
    """A model file could not be loaded or does not follow the expected format (one-line message)."""

    error_class = "input"


def user_line(exc: BaseException, filename: str) -> int | None:
    """Line of the innermost traceback frame of ``exc`` that lies in ``filename``."""
    target = str(Path(filename).resolve())
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        try:
            if str(Path(frame.filename).resolve()) == target:
                line = frame.lineno
        except (OSError, ValueError):
            continue
    return line


def source_where(exc: BaseException, module: types.ModuleType | dict, path: str, fallback: int | None) -> str:
    """`<file>:<line>` of the innermost frame of ``exc`` in the user's own source: the file a generated
    model file names as its source (a module global `__solar_source__`: a SOL-ExecBench problem's
    reference.py, whose code the generated file runs), else the model file `path`; `fallback` is the
    line when neither has a frame (None: the file alone)."""
    env = module if isinstance(module, dict) else vars(module)
    source = env.get("__solar_source__")
    if isinstance(source, str) and (line := user_line(exc, source)):
        return f"{source}:{line}"
    line = user_line(exc, str(Path(path).resolve())) or fallback
    return f"{path}:{line}" if line else path


def _one_line(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= 300 else text[:297] + "..."


def exception_summary(exc: BaseException) -> str:
    """``TypeName: first line of the message``."""
    msg = str(exc).strip().splitlines()
    first = msg[0] if msg else ""
    name = type(exc).__name__
    return _one_line(f"{name}: {first}" if first else name)


@dataclass(frozen=True)
class ModelFormat:
    """What a model file must define: one of `entries` (the first defined one is used; a name
    starting with an upper-case letter must be a class, any other a function), `get_inputs`, and
    `get_init_inputs` when `init_required`. `expected` is the missing-name message's hint."""

    entries: tuple[str, ...]
    init_required: bool
    expected: str


TORCH_FORMAT = ModelFormat(("Model",), True, "class Model, get_inputs, get_init_inputs")
JAX_FORMAT = ModelFormat(("model", "Model"), False,
                         "def model(*inputs) or class Model, get_inputs, optionally get_init_inputs")


@dataclass
class ModelSpec:
    """A loaded model file."""

    path: str  # path as given by the caller (used in messages and locations)
    source: str  # the executed source text
    module: types.ModuleType
    Model: Any  # the entry point: the class Model, or the function `model` of a JAX file
    get_inputs: Any
    get_init_inputs: Any  # None when the format allows leaving it out and the file does
    size_constants: dict[str, int] = field(default_factory=dict)  # size site key -> value (find_size_sites)
    # repeat counts (`NAME = repeated(32)`: a number of identical layers) -> value: a reduced instance
    # may lower them when its kernel is checked to be the full one with fewer copies of its blocks
    repeat_counts: dict[str, int] = field(default_factory=dict)
    format: ModelFormat = TORCH_FORMAT
    # a shipped configuration's values set by a reduced instance (`config.KEY` sites: zoo/hub.py)
    config_overrides: dict[str, int] = field(default_factory=dict)

    @property
    def entry(self) -> str:
        """The name of the entry point the file defines ("Model" or "model")."""
        return next(n for n in self.format.entries if getattr(self.module, n, None) is self.Model)

    @property
    def abspath(self) -> str:
        return str(Path(self.path).resolve())

    def _line_of(self, name: str) -> int:
        obj = getattr(self.module, name, None)
        code = getattr(obj, "__code__", None)
        if code is not None:
            return code.co_firstlineno
        lines = getattr(obj, "__firstlineno__", None)
        return lines if isinstance(lines, int) else 1

    def _resolving(self) -> AbstractContextManager:
        return _resolving(self.source, self.config_overrides)

    def _call(self, name: str, *args: Any) -> list:
        fn = getattr(self.module, name)
        try:
            with self._resolving():
                result = fn(*args)
        except Exception as exc:  # noqa: BLE001 - reported as one line
            where = source_where(exc, self.module, self.path, self._line_of(name))
            raise ModelFileError(f"{where}: {name}() raised {exception_summary(exc)}") from exc
        if not isinstance(result, (list, tuple)):
            raise ModelFileError(
                f"{self.path}:{self._line_of(name)}: {name}() must return a list or tuple, "
                f"got {type(result).__name__}"
            )
        return list(result)

    def sample_inputs(self) -> list:
        """Call ``get_inputs()`` (checked to return a list/tuple)."""
        return self._call("get_inputs")

    def fresh_sample_inputs(self, seed: int) -> list | None:
        """The file's own fresh sample for validation, ``get_fresh_inputs(seed)`` (a generated
        SOL-ExecBench file runs its workload's input generator again: only it knows which integer
        inputs its structure fixes), or None when the file defines none."""
        own = getattr(self.module, "get_fresh_inputs", None)
        return self._call("get_fresh_inputs", seed) if callable(own) else None

    def init_inputs(self) -> list:
        """Call ``get_init_inputs()`` (checked to return a list/tuple); [] when the file has none."""
        return [] if self.get_init_inputs is None else self._call("get_init_inputs")

    def build_model(self):
        """``Model(*get_init_inputs())``; errors become :class:`ModelFileError`."""
        init = self.init_inputs()
        try:
            with self._resolving():
                return self.Model(*init)
        except Exception as exc:  # noqa: BLE001
            where = source_where(exc, self.module, self.path, self._line_of("Model"))
            raise ModelFileError(f"{where}: Model.__init__ raised {exception_summary(exc)}") from exc

    def with_sizes(self, overrides: dict[str, int]) -> ModelSpec:
        """Re-execute the source with the given size sites (keys of `size_constants`) replaced.

        Names defined from other names (`hidden = 4 * dim`) are not sites: they follow their sources
        when the file is executed again, which keeps derived sizes consistent. `config.KEY` sites
        (a shipped configuration's values, zoo/hub.py) are set where the configuration is resolved."""
        from solar_compiler.frontends.zoo.hub import CONFIG_PREFIX

        config = {**self.config_overrides, **{k.removeprefix(CONFIG_PREFIX): v for k, v in overrides.items()
                                              if k.startswith(CONFIG_PREFIX)}}
        overrides = {k: v for k, v in overrides.items() if not k.startswith(CONFIG_PREFIX)}
        if not overrides:
            return _load_source(self.path, self.source, self.format, config)
        sites = find_size_sites(ast.parse(self.source))
        unknown = sorted(set(overrides) - set(sites))
        if unknown:
            raise ModelFileError(
                f"{self.path}:1: no module-level size named {', '.join(unknown)} "
                f"(known: {', '.join(sites) or 'none'})"
            )
        offsets = _line_offsets(self.source)
        raw = self.source.encode("utf-8")
        edits = []
        for key, value in overrides.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise ModelFileError(f"{self.path}:{sites[key].line}: size override {key} must be an int")
            s = sites[key]
            edits.append((offsets[s.line - 1] + s.col, offsets[s.end_line - 1] + s.end_col, str(value)))
        # Replace from the end of the file so earlier offsets stay valid.
        for a, b, text in sorted(edits, reverse=True):
            raw = raw[:a] + text.encode("utf-8") + raw[b:]
        return _load_source(self.path, raw.decode("utf-8"), self.format, config)


def _line_offsets(source: str) -> list[int]:
    """Byte offset of the start of every line (ast column offsets are UTF-8 byte offsets)."""
    out, pos = [], 0
    for line in source.encode("utf-8").splitlines(keepends=True):
        out.append(pos)
        pos += len(line)
    return out or [0]


@dataclass(frozen=True)
class SizeSite:
    """One integer a module-level size definition spells out: a literal or a name-free constant
    expression (`2048 * 2`, `2 ** 20`), the whole right-hand side or one element of a tuple, list or
    dict there. `key` names it: `N`, `hidden_layer_sizes[1]`, `cfg['dim']`, `shape[0][2]`."""

    key: str
    value: int
    line: int
    col: int
    end_line: int
    end_col: int
    repeat: bool = False  # the count inside `repeated(N)`


_INT_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
            ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
            ast.LShift: lambda a, b: a << b if b < 64 else None,
            ast.Pow: lambda a, b: a ** b if 0 <= b < 64 else None}


def _const_int(node: ast.expr) -> int | None:
    """The value of an integer expression built from literals only (`2048 * 2`, `-(1 << 10)`,
    `int(1e6)`), or None."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _const_int(node.operand)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPS:
        a, b = _const_int(node.left), _const_int(node.right)
        if a is None or b is None or (isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b == 0):
            return None
        v = _INT_OPS[type(node.op)](a, b)
        return v if isinstance(v, int) and abs(v) < 2**63 else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int" \
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant) \
            and type(node.args[0].value) in (int, float) and float(node.args[0].value).is_integer():
        return int(node.args[0].value)
    return None


def _sites_in(node: ast.expr, key: str, out: dict[str, SizeSite]) -> None:
    value = _const_int(node)
    if value is not None:
        out[key] = SizeSite(key, value, node.lineno, node.col_offset, node.end_lineno or node.lineno,
                            node.end_col_offset or node.col_offset)
        return
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "repeated" \
            and len(node.args) == 1 and not node.keywords and (count := _const_int(node.args[0])) is not None:
        a = node.args[0]
        out[key] = SizeSite(key, count, a.lineno, a.col_offset, a.end_lineno or a.lineno,
                            a.end_col_offset or a.col_offset, repeat=True)
        return
    if isinstance(node, (ast.Tuple, ast.List)):
        for i, e in enumerate(node.elts):
            _sites_in(e, f"{key}[{i}]", out)
    elif isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values, strict=True):
            if isinstance(k, ast.Constant) and isinstance(k.value, (str, int)):
                _sites_in(v, f"{key}[{k.value!r}]", out)
    # anything else (names, calls, comprehensions) derives from other definitions: not a site


def find_size_sites(tree: ast.Module) -> dict[str, SizeSite]:
    """The integer sites of module-level assignments `NAME = ...` (or annotated, or `A, B = x, y`),
    in source order; a name assigned several times keeps its last assignment."""
    found: dict[str, SizeSite] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) > 1:
            # `height = width = 128`: one literal, one site named after every target
            if all(isinstance(t, ast.Name) for t in stmt.targets):
                for t in stmt.targets:
                    for k in [k for k in found if k == t.id or k.startswith(t.id + "[")]:
                        del found[k]
                _sites_in(stmt.value, "=".join(t.id for t in stmt.targets), found)
            continue
        if isinstance(stmt, ast.Assign):
            pairs = [(t, stmt.value) for t in stmt.targets]
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            pairs = [(stmt.target, stmt.value)]
        else:
            continue
        for target, value in pairs:
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and \
                    len(target.elts) == len(value.elts):
                pairs += list(zip(target.elts, value.elts, strict=True))
                continue
            if not isinstance(target, ast.Name):
                continue
            for k in [k for k in found if k == target.id or k.startswith(target.id + "[")]:
                del found[k]  # keep source order of the last assignment
            _sites_in(value, target.id, found)
    return found


def _resolving(source: str, config_overrides: dict[str, int]) -> AbstractContextManager:
    """Where `source` calls `from_pretrained`: the context that resolves shipped configurations under
    `config_overrides` and lists them (zoo/hub.py)."""
    if "from_pretrained" not in source:
        return nullcontext([])
    from solar_compiler.frontends.zoo.hub import resolving

    return resolving(config_overrides)


def _load_source(path: str, source: str, fmt: ModelFormat,
                 config_overrides: dict[str, int] | None = None) -> ModelSpec:
    abspath = str(Path(path).resolve())
    try:
        tree = ast.parse(source, filename=abspath)
    except SyntaxError as exc:
        raise ModelFileError(f"{path}:{exc.lineno or 1}: syntax error: {exc.msg}") from None
    try:
        code = compile(tree, abspath, "exec")
    except (SyntaxError, ValueError) as exc:
        raise ModelFileError(f"{path}:{getattr(exc, 'lineno', 1) or 1}: syntax error: {exc}") from None

    stem = "".join(c if c.isalnum() else "_" for c in Path(path).stem)
    mod_name = f"solar_model_{stem}_{next(_COUNTER)}"
    spec = importlib.util.spec_from_loader(mod_name, loader=None, origin=abspath)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = abspath
    sys.modules[mod_name] = module  # dataclasses/pickle look modules up here
    if any(w in source for w in ("torchvision", "timm", "transformers")):
        from solar_compiler.frontends.zoo.vision_runtime import prepare_torchvision

        prepare_torchvision()  # PyPI's CUDA torchvision beside a CPU torch (zoo/vision_runtime.py)
    if "from_pretrained" in source:  # transformers' hub loaders resolve shipped configurations
        from solar_compiler.frontends.zoo.hub import offline_hub

        offline_hub()
    config_overrides = dict(config_overrides or {})
    try:
        with _resolving(source, config_overrides) as resolved:
            exec(code, module.__dict__)
    except ModuleNotFoundError as exc:
        sys.modules.pop(mod_name, None)
        line = user_line(exc, abspath) or 1
        top = (exc.name or "").split(".")[0]
        if not top:
            raise ModelFileError(f"{path}:{line}: executing the file raised {exception_summary(exc)}") \
                from exc
        package = _PACKAGE_OF.get(top, top)
        extra = " or pip install 'solar-opt[kernelbench]'" if package in _KERNELBENCH_EXTRA else \
            " or pip install 'solar-opt[zoo]'" if package == "transformers" else ""
        raise ModelFileError(f"{path}:{line}: the model file needs the Python package '{package}' (import "
                             f"{top}), which is not installed: pip install {package}{extra}") from exc
    except Exception as exc:  # noqa: BLE001
        sys.modules.pop(mod_name, None)
        where = source_where(exc, module, path, 1)
        raise ModelFileError(f"{where}: executing the file raised {exception_summary(exc)}") from exc

    last_line = max(1, len(source.splitlines()))
    entry = next((n for n in fmt.entries if hasattr(module, n)), None)
    missing = [] if entry is not None else [" or ".join(f"'{n}'" for n in fmt.entries)]
    missing += [f"'{n}'" for n in ("get_inputs", "get_init_inputs")
                if not hasattr(module, n) and (n == "get_inputs" or fmt.init_required)]
    if missing:
        raise ModelFileError(f"{path}:{last_line}: missing {', '.join(missing)} (expected {fmt.expected})")
    assert entry is not None
    model = getattr(module, entry)
    if entry[0].isupper() and not isinstance(model, type):
        raise ModelFileError(f"{path}:1: '{entry}' must be a class")
    if not entry[0].isupper() and not callable(model):
        raise ModelFileError(f"{path}:1: '{entry}' must be a function")
    for n in ("get_inputs", "get_init_inputs"):
        if hasattr(module, n) and not callable(getattr(module, n)):
            raise ModelFileError(f"{path}:1: '{n}' must be a function")
    sites = find_size_sites(tree)
    sizes = {key: site.value for key, site in sites.items() if not site.repeat}
    counts = {key: site.value for key, site in sites.items() if site.repeat}
    if resolved:
        from solar_compiler.frontends.zoo.hub import config_sites

        widths, layers = config_sites(resolved)
        sizes, counts = {**sizes, **widths}, {**counts, **layers}
    return ModelSpec(
        path=str(path),
        source=source,
        module=module,
        Model=model,
        get_inputs=module.get_inputs,
        get_init_inputs=getattr(module, "get_init_inputs", None),
        size_constants=sizes,
        repeat_counts=counts,
        format=fmt,
        config_overrides=config_overrides,
    )


def load_model_file(path: str | Path, fmt: ModelFormat = TORCH_FORMAT) -> ModelSpec:
    """Load a KernelBench-style model file of format `fmt` under a unique module name."""
    path = str(path)
    try:
        source = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{path}:1: cannot read file: {exc.strerror or exc}") from None
    return _load_source(path, source, fmt)
