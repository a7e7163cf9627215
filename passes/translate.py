"""`translate`: a source program (the module names it in its `solar.program` record) -> loop-IR
kernels.

The module body is replaced by the translated `loop.kernel`s, and the record is completed
(`records.ProgramInfo`): the frontend's name, its validation record (validated, frontend,
max_rel_err, samples, sizes, ...; see docs/torch-frontend.md), the ops whose work depends on input
values (the bound holds for the traced sample) and notes. Each statement gets its `origin`: which
source op, i.e. which eager kernel, it implements.

`frontend` is `auto` (the deterministic frontend for the file, with per-op LLM fill-in where an op
has no template and the whole program through the LLM when capture fails), a deterministic
frontend by name (`torch`: no LLM at all), or `llm` (the whole program through the LLM). The
`llm-*` options configure the LLM path (docs/llm-frontend.md); an empty `llm-model` means
$SOLAR_LLM_MODEL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from solar_compiler.analysis.manager import invalidate_analyses
from solar_compiler.errors import PassError
from solar_compiler.loopir.ast import Kernel, Origin, Traced, statements, typecheck
from solar_compiler.records import ProgramInfo
from solar_compiler.transforms.kernels import seed_kernels


@dataclass(frozen=True)
class TranslatePass(ModulePass):
    name = "translate"
    # its ops are verified here, or were when the translation entered the cache (`Translation`)
    verifies_output: ClassVar[bool] = True

    # Numeric options are `int | float`: xDSL's option parser types `memory-gb=1` as an int and
    # rejects it for a plain `float` field (and `timeout=2.5` for a plain `int` one).
    frontend: str = "auto"
    mode: str = "eval"
    step: str = "forward"
    optimizer: str = ""
    no_cache: bool = False
    timeout: int | float = 120
    memory_gb: int | float = 8.0
    validate: bool = True
    time_budget: int | float = 20.0
    memory_budget_gb: int | float = 4.0
    llm_model: str = ""
    llm_api_base: str = ""
    llm_attempts: int = 4
    llm_transcript_dir: str = ""
    llm_replay: str = ""
    llm_timeout: int | float = 120.0
    llm_max_tokens: int = 200_000
    llm_max_cost: int | float = 2.0
    llm_max_response: int = 64_000
    llm_ops: str = ""  # comma-separated: ops the LLM writes even where a template exists
    sandboxed: bool = False  # the caller isolates this process already (solar-bench's forked workers)

    def check_options(self) -> None:
        """The options that need no source file, checked before any work starts (the driver)."""
        from solar_compiler.frontends import frontend_names

        if self.mode not in ("eval", "train"):
            raise PassError(f"translate: mode must be eval or train, got '{self.mode}'")
        self._check_step()
        if self.frontend not in frontend_names():
            raise PassError(f"translate: unknown frontend '{self.frontend}' "
                             f"(known: {', '.join(frontend_names())})")
        if self.llm_ops.strip() and self.frontend != "auto":
            raise PassError(f"translate: llm-ops sends ops to the LLM inside the deterministic "
                            f"translation: it needs frontend auto, not '{self.frontend}'")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from solar_compiler.dialects.convert import kernels_to_module
        from solar_compiler.frontends import LLM_FRONTEND, FrontendOptions, get_frontend

        info = ProgramInfo.load(op)
        if info is None:
            raise PassError("translate: the module names no source program (solar.program)")
        path = info.source
        if self.mode not in ("eval", "train"):
            raise PassError(f"translate: mode must be eval or train, got '{self.mode}'")
        self._check_step()
        if any(op.body.block.ops) and info.frontend is not None:
            raise PassError(f"{path}: translate: the module is already translated")
        fe = get_frontend(self.frontend, path)
        if self.llm_ops.strip() and fe.name != "torch":
            raise PassError(f"{path}: translate: llm-ops sends ops of the torch translation to the LLM; "
                            f"the {fe.name} frontend has no per-op fill-in")
        if self.step == "train" and fe.name not in ("torch", "jax"):
            raise PassError(f"{path}: translate: training steps (step=train) are captured by the torch "
                            f"and JAX frontends only, not {fe.name}")
        options = FrontendOptions(mode=self.mode, step=self.step, optimizer=self.optimizer,
                                  no_cache=self.no_cache, timeout=float(self.timeout),
                                  memory_gb=float(self.memory_gb), validate=self.validate,
                                  time_budget=float(self.time_budget),
                                  memory_budget_gb=float(self.memory_budget_gb),
                                  llm=self._llm_config() if self.frontend in ("auto", LLM_FRONTEND) else None,
                                  sandboxed=self.sandboxed)
        result = fe.translate(path, options)
        stamp_origins(result.kernels, result.source_ops)
        stamp_traced(result.kernels, result.traced)
        new = kernels_to_module(result.kernels)
        if not result.ops_verified:
            new.verify()
        for old in list(op.body.block.ops):
            old.detach()
            old.erase()
        for k in list(new.body.block.ops):
            k.detach()
            op.body.block.add_op(k)
        ProgramInfo(path, fe.name, result.validation, list(result.value_dependent),
                    list(result.notes), list(result.aliases)).store(op)
        invalidate_analyses(op)
        seed_kernels(op, [typecheck(k) for k in result.kernels])  # the kernels just built

    def _check_step(self) -> None:
        if self.step not in ("forward", "train"):
            raise PassError(f"translate: step must be forward or train, got '{self.step}'")
        if self.optimizer not in ("", "sgd", "adamw"):
            raise PassError(f"translate: optimizer must be sgd or adamw, got '{self.optimizer}'")
        if self.optimizer and self.step != "train":
            raise PassError("translate: an optimizer is appended to a training step only (step=train)")

    def _llm_config(self):
        from solar_compiler.frontends.llm.config import LLMConfig

        return LLMConfig.resolve(self.llm_model, api_base=self.llm_api_base or None,
                                 attempts=int(self.llm_attempts),
                                 transcript_dir=self.llm_transcript_dir or None,
                                 replay=self.llm_replay or None, timeout=float(self.llm_timeout),
                                 max_tokens=int(self.llm_max_tokens), max_cost=float(self.llm_max_cost),
                                 max_response=int(self.llm_max_response), use_cache=not self.no_cache,
                                 ops=tuple(o.strip() for o in self.llm_ops.split(",") if o.strip()))



def stamp_origins(kernels: list[Kernel], source_ops: list[dict]) -> None:
    """Give every statement the source op it implements (`Assign.origin`), from the frontend's
    record of runs of statements (`Translation.source_ops`: `{"op", "loc", "first", "count"}` over
    the statements of its single kernel, optionally `"module"`, `"phase"`, and `"by"` for an op
    whose loop nest stands in for its algorithm: "llm" or "stand-in", `Origin.by`). A record that does
    not cover the statements exactly, in order, is an error: the kernels of the unfused bound would be
    wrong."""
    if not source_ops:
        return
    if len(kernels) != 1:
        raise PassError(f"translate: a source-op record describes one kernel, the frontend gave "
                        f"{len(kernels)}", error_class="translate")
    ctxs = statements(kernels[0])
    at = 0
    for i, o in enumerate(source_ops):
        if o.get("first") != at or not isinstance(o.get("count"), int) or o["count"] <= 0:
            break
        for c in ctxs[at:at + o["count"]]:
            c.stmt.origin = Origin(i, str(o["op"]), o.get("module"), o.get("phase"), o.get("by"))
        at += o["count"]
    if at != len(ctxs):
        raise PassError(f"kernel {kernels[0].name}: the frontend's source-op record does not cover its "
                        f"{len(ctxs)} statements in order", error_class="translate")


def stamp_traced(kernels: list[Kernel], traced: list[dict]) -> None:
    """Put the frontend's traced footprints of indirect accesses (`Translation.traced`, over the
    statements of its single kernel) on the statements (`Assign.traced`). A record naming a statement
    that does not exist is an error."""
    if not traced:
        return
    if len(kernels) != 1:
        raise PassError(f"translate: traced footprints describe one kernel, the frontend gave "
                        f"{len(kernels)}", error_class="translate")
    ctxs = statements(kernels[0])
    for t in traced:
        i = t.get("stmt")
        if not isinstance(i, int) or not 0 <= i < len(ctxs):
            raise PassError(f"kernel {kernels[0].name}: a traced footprint names statement {i!r}, "
                            f"the kernel has {len(ctxs)}", error_class="translate")
        s = ctxs[i].stmt
        among = int(t.get("among", 0))
        s.traced = (*s.traced, Traced(str(t["tensor"]), bool(t["write"]), int(t["elements"]),
                                      int(t["points"]), int(t["accesses"]), int(t.get("union", 0)), among,
                                      int(t.get("member", 0)), str(t["tensor"]) if among else ""))
