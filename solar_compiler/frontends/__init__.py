"""Source-language frontends: the one interface every frontend implements, and a lazy registry.

A frontend turns a program file into loop-IR kernels and says how far the translation was
checked. `translate` (the pass) only talks to this interface; a frontend module is imported
when a file needs it, so `solar-opt` on `.loop` input never imports torch.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from solar_compiler.errors import SolarError
from solar_compiler.loopir.ast import Kernel

if TYPE_CHECKING:
    from solar_compiler.frontends.llm.config import LLMConfig


#: the update `--optimizer` appends to a training step, in every frontend: torch's defaults
#: (`torch.optim.SGD` lr 1e-3 without momentum; `torch.optim.AdamW`), docs/training.md
OPTIMIZER_DEFAULTS: dict[str, dict[str, Any]] = {
    "sgd": {"lr": 1e-3},
    "adamw": {"lr": 1e-3, "weight_decay": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8},
}
OPTIMIZERS = tuple(OPTIMIZER_DEFAULTS)


@dataclass(frozen=True)
class FrontendOptions:
    """Options of the `translate` pass, shared by all frontends (each uses what applies)."""

    mode: str = "eval"               # torch: eval() or train() semantics
    step: str = "forward"            # torch: "forward", or "train": one training step (docs/training.md)
    optimizer: str = ""              # train step: "" (gradients only), "sgd" or "adamw"
    no_cache: bool = False           # bypass the translation cache (read and write)
    timeout: float = 120.0           # seconds for the sandboxed capture + translation + validation
    memory_gb: float = 8.0           # address-space limit of the sandbox, above its start-up size
    validate: bool = True            # execute the loop IR and compare with the framework
    time_budget: float = 20.0        # seconds validation is expected to take (full, sampled, reduced)
    memory_budget_gb: float = 4.0    # memory the validation's framework run and executor may take
    llm: LLMConfig | None = None     # None: deterministic only; else LLM per-op fill-in / whole program
    sandboxed: bool = False          # the caller already isolates this process (time and memory
                                     # limits, crash containment): run in-process, no child of our own


class CaptureFailed(SolarError):
    """A deterministic frontend could not capture the program faithfully (its capture rejected the
    program, or the translation does not reproduce it on fresh samples), as opposed to bad input:
    under `--frontend=auto` the whole program then goes to the LLM frontend."""

    error_class = "capture"  # a translation that disagrees with the framework says "validate"


@dataclass
class Translation:
    """What a frontend returns. `validation` is the record the reports print (keys: validated,
    frontend, max_rel_err, samples, sizes, ...); `value_dependent` names the ops whose work
    depends on input values (the bound holds for the traced sample only); `source_ops` says which
    source-level op (one eager kernel) each run of statements implements, in program order:
    `{"op", "loc", "first", "count"}` over the statements of the (single) kernel."""

    kernels: list[Kernel]
    validation: dict[str, Any]
    value_dependent: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    source_ops: list[dict[str, Any]] = field(default_factory=list)
    # outputs that alias an input, a weight or another output (no statement prices them):
    # {"position", "output", "of", "role", "how"}
    aliases: list[dict[str, Any]] = field(default_factory=list)
    # what the indirect accesses touched on the traced sample, per statement of the (single) kernel:
    # {"stmt", "tensor", "write", "elements", "points", "accesses"}, and "union", "member", "among"
    # for a tensor several statements gather (`ast.Traced`; the translate pass puts them on the
    # statements)
    traced: list[dict[str, Any]] = field(default_factory=list)
    # the `loop` ops `kernels` convert to verified (`translate_cached` checks before caching; the
    # cache key covers the converter and the dialects), so the translate pass need not again
    ops_verified: bool = False


class SourceFrontend(Protocol):
    name: str
    extensions: tuple[str, ...]

    def translate(self, path: str, options: FrontendOptions) -> Translation: ...


# name -> "module:Class"; extension -> the deterministic frontend of its files by default.
FRONTENDS: dict[str, str] = {
    "torch": "solar_compiler.frontends.torch.frontend:TorchFrontend",
    "jax": "solar_compiler.frontends.jax.frontend:JaxFrontend",
    "llm": "solar_compiler.frontends.llm.frontend:LLMFrontend",
}
EXTENSIONS: dict[str, str] = {
    ".py": "torch",
}
# A source file's framework, by the top-level packages it imports: the frontend of the one framework
# it imports; a file importing none (or that does not parse) gets its extension's default.
IMPORTS: dict[str, str] = {"torch": "torch", "jax": "jax", "flax": "jax"}
LLM_FRONTEND = "llm"   # the fallback of `auto`, and the frontend that needs `FrontendOptions.llm`


def frontend_names() -> list[str]:
    return ["auto", *sorted(FRONTENDS)]


def source_frontend(path: str) -> str:
    """The deterministic frontend for `path` under `auto`: by its imports (IMPORTS), else by its
    extension."""
    ext = Path(path).suffix
    if ext not in EXTENSIONS:
        known = ", ".join(sorted(EXTENSIONS))
        raise SolarError(f"{path}:1: no frontend for '{ext or path}' files (known: {known})")
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return EXTENSIONS[ext]  # the frontend reports the unreadable file or the syntax error
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        for n in names:
            fe = IMPORTS.get(n.split(".")[0])
            if fe is not None:
                found.setdefault(fe, node.lineno)
    if len(found) > 1:
        which = " and ".join(f"{fe} (line {line})" for fe, line in sorted(found.items(), key=lambda x: x[1]))
        raise SolarError(f"{path}:{min(found.values())}: imports {which}: choose the frontend with "
                         f"frontend={'|'.join(sorted(found))}")
    return next(iter(found), EXTENSIONS[ext])


def get_frontend(name: str, path: str) -> SourceFrontend:
    """The frontend called `name`; "auto" is the deterministic one of the file's framework
    (`source_frontend`), falling back to the LLM frontend when it cannot capture the program."""
    if name == "auto":
        return AutoFrontend(_load(source_frontend(path), path))
    return _load(name, path)


def _load(name: str, path: str) -> SourceFrontend:
    if name not in FRONTENDS:
        raise SolarError(f"{path}:1: unknown frontend '{name}' (known: {', '.join(frontend_names())})")
    module, _, cls = FRONTENDS[name].partition(":")
    return getattr(importlib.import_module(module), cls)()


class AutoFrontend:
    """Deterministic first (with per-op LLM fill-in when `options.llm` is set: the deterministic
    frontend asks for it where an op has no template); the whole program through the LLM frontend
    when the deterministic frontend raises `CaptureFailed`. The result says which path ran."""

    extensions: tuple[str, ...] = ()

    def __init__(self, deterministic: SourceFrontend):
        self.deterministic = deterministic
        self.name = deterministic.name

    def translate(self, path: str, options: FrontendOptions) -> Translation:
        try:
            return self.deterministic.translate(path, options)
        except CaptureFailed as e:
            if options.llm is None:
                raise
            options.llm.require(str(e), e.error_class)
            fallback = _load(LLM_FRONTEND, path)
            self.name = fallback.name
            # its own transcript folder: per-op requests of the failed attempt may already be there
            llm = options.llm.in_subfolder(path, "whole-program")
            result = fallback.translate(path, replace(options, llm=llm))
            result.validation["deterministic_failed"] = str(e)
            result.notes.append(f"{self.deterministic.name} frontend failed ({e}); whole program "
                                "translated by the LLM frontend")
            return result
