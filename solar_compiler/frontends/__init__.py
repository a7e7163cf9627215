"""Source-language frontends: the one interface every frontend implements, and a lazy registry.

A frontend turns a program file into loop-IR kernels and says how far the translation was
checked. `translate` (the pass) only talks to this interface; a frontend module is imported
when a file needs it, so `solar-opt` on `.loop` input never imports torch.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from solar_compiler.errors import SolarError
from solar_compiler.loopir.ast import Kernel


@dataclass(frozen=True)
class FrontendOptions:
    """Options of the `translate` pass, shared by all frontends (each uses what applies)."""

    mode: str = "eval"               # torch: eval() or train() semantics
    no_cache: bool = False           # bypass the translation cache (read and write)
    timeout: float = 120.0           # seconds for the sandboxed capture + translation + validation
    memory_gb: float = 8.0           # address-space limit of the sandbox, above its start-up size
    validate: bool = True            # execute the loop IR and compare with the framework
    time_budget: float = 20.0        # seconds validation is expected to take (full, sampled, reduced)
    memory_budget_gb: float = 4.0    # memory the validation's framework run and executor may take


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


class SourceFrontend(Protocol):
    name: str
    extensions: tuple[str, ...]

    def translate(self, path: str, options: FrontendOptions) -> Translation: ...


# name -> "module:Class"; extension -> frontend name. Jax and LLM frontends add lines here.
FRONTENDS: dict[str, str] = {
    "torch": "solar_compiler.frontends.torch.frontend:TorchFrontend",
}
EXTENSIONS: dict[str, str] = {
    ".py": "torch",
}


def get_frontend(name: str, path: str) -> SourceFrontend:
    """The frontend called `name`, or for "auto" the one registered for the file's extension."""
    if name == "auto":
        ext = Path(path).suffix
        if ext not in EXTENSIONS:
            known = ", ".join(sorted(EXTENSIONS))
            raise SolarError(f"{path}:1: no frontend for '{ext or path}' files (known: {known})")
        name = EXTENSIONS[ext]
    if name not in FRONTENDS:
        raise SolarError(f"{path}:1: unknown frontend '{name}' (known: {', '.join(sorted(FRONTENDS))})")
    module, _, cls = FRONTENDS[name].partition(":")
    return getattr(importlib.import_module(module), cls)()
