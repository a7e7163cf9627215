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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["JAX_FORMAT", "TORCH_FORMAT", "ModelFileError", "ModelFormat", "ModelSpec", "load_model_file",
           "user_line"]

_COUNTER = itertools.count()


class ModelFileError(Exception):
    """A model file could not be loaded or does not follow the expected format (one-line message)."""


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
    size_constants: dict[str, int] = field(default_factory=dict)
    format: ModelFormat = TORCH_FORMAT

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

    def _call(self, name: str) -> list:
        fn = getattr(self.module, name)
        try:
            result = fn()
        except Exception as exc:  # noqa: BLE001 - reported as one line
            line = user_line(exc, self.abspath) or self._line_of(name)
            raise ModelFileError(f"{self.path}:{line}: {name}() raised {exception_summary(exc)}") from exc
        if not isinstance(result, (list, tuple)):
            raise ModelFileError(
                f"{self.path}:{self._line_of(name)}: {name}() must return a list or tuple, "
                f"got {type(result).__name__}"
            )
        return list(result)

    def sample_inputs(self) -> list:
        """Call ``get_inputs()`` (checked to return a list/tuple)."""
        return self._call("get_inputs")

    def init_inputs(self) -> list:
        """Call ``get_init_inputs()`` (checked to return a list/tuple); [] when the file has none."""
        return [] if self.get_init_inputs is None else self._call("get_init_inputs")

    def build_model(self):
        """``Model(*get_init_inputs())``; errors become :class:`ModelFileError`."""
        init = self.init_inputs()
        try:
            return self.Model(*init)
        except Exception as exc:  # noqa: BLE001
            line = user_line(exc, self.abspath) or self._line_of("Model")
            raise ModelFileError(
                f"{self.path}:{line}: Model.__init__ raised {exception_summary(exc)}"
            ) from exc

    def with_sizes(self, overrides: dict[str, int]) -> ModelSpec:
        """Re-execute the source with the given module-level int constants replaced."""
        if not overrides:
            return _load_source(self.path, self.source, self.format)
        tree = ast.parse(self.source)
        spans = {name: span for name, (_, span) in _find_size_constants(tree).items()}
        unknown = sorted(set(overrides) - set(spans))
        if unknown:
            raise ModelFileError(
                f"{self.path}:1: no module-level int constant named {', '.join(unknown)} "
                f"(known: {', '.join(spans) or 'none'})"
            )
        lines = self.source.splitlines(keepends=True)
        # Replace from the end of the file so earlier spans stay valid.
        for name in sorted(overrides, key=lambda n: spans[n], reverse=True):
            value = overrides[name]
            if isinstance(value, bool) or not isinstance(value, int):
                raise ModelFileError(f"{self.path}:{spans[name][0]}: size override {name} must be an int")
            lineno, col, end_col = spans[name]
            text = lines[lineno - 1]
            lines[lineno - 1] = _replace_in_line(text, col, end_col, str(value))
        return _load_source(self.path, "".join(lines), self.format)


def _replace_in_line(text: str, col: int, end_col: int, new: str) -> str:
    # ast offsets are UTF-8 byte offsets.
    raw = text.encode("utf-8")
    return (raw[:col] + new.encode("utf-8") + raw[end_col:]).decode("utf-8")


def _find_size_constants(tree: ast.Module) -> dict[str, tuple[int, tuple[int, int, int]]]:
    """Module-level ``NAME = <int literal>`` (or annotated, or ``A, B = <int>, <int>``) assignments, in
    source order.

    Returns name -> (value, (lineno, col_offset, end_col_offset)) of the literal; a name
    assigned several times keeps its last assignment.
    """
    found: dict[str, tuple[int, tuple[int, int, int]]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        pairs: list[tuple[ast.expr, ast.expr]] = [(target, value)]
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and \
                len(target.elts) == len(value.elts):
            pairs = list(zip(target.elts, value.elts, strict=True))  # B, T, D = 8, 64, 128
        for t, v in pairs:
            if not isinstance(t, ast.Name):
                continue
            if not (isinstance(v, ast.Constant) and type(v.value) is int):
                found.pop(t.id, None)
                continue
            if v.lineno != v.end_lineno:
                continue
            found.pop(t.id, None)  # keep source order of the last assignment
            found[t.id] = (v.value, (v.lineno, v.col_offset, v.end_col_offset))
    return found


def _load_source(path: str, source: str, fmt: ModelFormat) -> ModelSpec:
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
    try:
        exec(code, module.__dict__)
    except Exception as exc:  # noqa: BLE001
        sys.modules.pop(mod_name, None)
        line = user_line(exc, abspath) or 1
        raise ModelFileError(f"{path}:{line}: executing the file raised {exception_summary(exc)}") from exc

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
    sizes = {name: value for name, (value, _) in _find_size_constants(tree).items()}
    return ModelSpec(
        path=str(path),
        source=source,
        module=module,
        Model=model,
        get_inputs=module.get_inputs,
        get_init_inputs=getattr(module, "get_init_inputs", None),
        size_constants=sizes,
        format=fmt,
    )


def load_model_file(path: str | Path, fmt: ModelFormat = TORCH_FORMAT) -> ModelSpec:
    """Load a KernelBench-style model file of format `fmt` under a unique module name."""
    path = str(path)
    try:
        source = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{path}:1: cannot read file: {exc.strerror or exc}") from None
    return _load_source(path, source, fmt)
