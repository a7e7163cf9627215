"""`translate`: a source program (the module names it in `solar.source`) -> loop-IR kernels.

The module body is replaced by the translated `loop.kernel`s. Attributes set: `solar.frontend`
(the frontend's name), `solar.validation` (JSON: validated, frontend, max_rel_err, samples,
sizes, ...; see docs/torch-frontend.md), `solar.value_dependent` (JSON list of the ops whose
work depends on input values: the bound holds for the traced sample) and `solar.source_ops` (JSON:
which source op, i.e. which eager kernel, each run of statements implements).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from solar_compiler.errors import SolarError


@dataclass(frozen=True)
class TranslatePass(ModulePass):
    name = "translate"

    # Numeric options are `int | float`: xDSL's option parser types `memory-gb=1` as an int and
    # rejects it for a plain `float` field (and `timeout=2.5` for a plain `int` one).
    frontend: str = "auto"
    mode: str = "eval"
    no_cache: bool = False
    timeout: int | float = 120
    memory_gb: int | float = 8.0
    validate: bool = True
    time_budget: int | float = 2.0
    memory_budget_gb: int | float = 2.0
    sandboxed: bool = False  # the caller isolates this process already (solar-bench's forked workers)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from solar_compiler.frontends import FrontendOptions, get_frontend
        from solar_compiler.loopir.convert import kernels_to_module

        src = op.attributes.get("solar.source")
        if not isinstance(src, StringAttr):
            raise SolarError("translate: the module names no source program (solar.source)")
        path = src.data
        if self.mode not in ("eval", "train"):
            raise SolarError(f"translate: mode must be eval or train, got '{self.mode}'")
        if any(op.body.block.ops) and op.attributes.get("solar.frontend") is not None:
            raise SolarError(f"{path}: translate: the module is already translated")
        fe = get_frontend(self.frontend, path)
        options = FrontendOptions(mode=self.mode, no_cache=self.no_cache, timeout=float(self.timeout),
                                  memory_gb=float(self.memory_gb), validate=self.validate,
                                  time_budget=float(self.time_budget),
                                  memory_budget_gb=float(self.memory_budget_gb), sandboxed=self.sandboxed)
        result = fe.translate(path, options)
        new = kernels_to_module(result.kernels)
        for old in list(op.body.block.ops):
            old.detach()
            old.erase()
        for k in list(new.body.block.ops):
            k.detach()
            op.body.block.add_op(k)
        op.attributes["solar.frontend"] = StringAttr(fe.name)
        op.attributes["solar.validation"] = StringAttr(json.dumps(result.validation))
        op.attributes["solar.value_dependent"] = StringAttr(json.dumps(result.value_dependent))
        op.attributes["solar.source_ops"] = StringAttr(json.dumps(result.source_ops))
        op.attributes["solar.notes"] = StringAttr(json.dumps(result.notes))
