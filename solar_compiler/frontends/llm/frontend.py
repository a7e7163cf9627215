"""The whole program through the LLM: `--frontend=llm`, and `auto` when capture fails.

Runs in the sandboxed child (the model file is user code), through the translation cache like every
frontend (a rerun is a cache hit: no request, no validation). The prompt carries the source, the
tensors the kernel must have (shapes from a fake-tensor run: nothing full-size is allocated), the
checking rules and a reference input/output pair. Every answer is parsed, verified,
signature-checked and validated exactly as the deterministic path validates its own translations
(`torch.validation.at_size`): executed whole on get_inputs() and fresh samples when that fits the
time and memory budgets, else the framework at full size against the kernel's backward slice on
sampled output elements. When neither fits, the LLM also translates a size-reduced instance of the
file (module-level sizes scaled down, as the deterministic path does); that one is validated the
same way and must be the same program as the full-size kernel with only sizes changed. An
unvalidated LLM translation never reaches a bound; when no instance can be validated, the error
says what to change.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import replace
from pathlib import Path

from solar_compiler import progress
from solar_compiler.errors import SolarError
from solar_compiler.frontends import CaptureFailed, FrontendOptions, Translation, cache
from solar_compiler.frontends.cache import SHARED_SOURCES, fingerprint
from solar_compiler.frontends.job import translate_cached
from solar_compiler.frontends.validation import estimate
from solar_compiler.loopir.ast import Kernel, statements

from .check import Rejected, check_signature, extract, parse, verify
from .config import MANUAL, LLMConfig, transcript_dir
from .prompt import PROMPT_VERSION, render
from .session import Outcome, Session, Task
from .session import fingerprint as task_fingerprint

WHOLE = "the whole program"


FRONTEND_VERSION = "3"
# what else shapes a whole-program translation: the torch side of it (the model file's description,
# the reference runs, validation) besides the shared modules of every frontend
SHARED = (*SHARED_SOURCES, "frontends/torch/validation.py", "frontends/torch/translate.py",
          "frontends/torch/capture/*.py", "executor/*.py")


class LLMFrontend:
    name = "llm"
    extensions = (".py",)

    def translate(self, path: str, options: FrontendOptions) -> Translation:
        cfg = options.llm or LLMConfig.resolve()
        cfg.require(f"{path}:1: {WHOLE} is to be translated by an LLM", "input")
        options = replace(options, llm=cfg)
        return translate_cached(translate_whole, path, options, cache_key(path, options),
                                extra_timeout=2 * cfg.attempts * cfg.timeout, label="the LLM")


def cache_key(path: str, options: FrontendOptions) -> str:
    """The translation cache's key: a rerun with the same source, model (or replayed transcript, or
    the manual answers given so far), prompt and options is a cache hit, with no request and no
    validation."""
    from importlib.metadata import version

    assert options.llm is not None
    answers = hashlib.sha256()
    if options.llm.model == MANUAL and options.llm.replay is None:
        folder = transcript_dir(options.llm, path)
        for p in sorted(folder.rglob("*.response.md")) if folder.is_dir() else ():
            answers.update(p.relative_to(folder).as_posix().encode() + b"\0" + p.read_bytes())
    print_ = fingerprint(f"{FRONTEND_VERSION} prompt {PROMPT_VERSION} {answers.hexdigest()}",
                         Path(__file__).parent, SHARED)
    return cache.cache_key(path, options, f"torch {version('torch')}", print_)


def translate_whole(path: str, options: FrontendOptions) -> Translation:
    from solar_compiler.frontends.model_file import load_model_file
    from solar_compiler.frontends.torch.capture import sanitize

    from .reference import describe

    assert options.llm is not None
    t0 = time.perf_counter()
    spec = load_model_file(path)
    session = Session(options.llm, path)
    name = sanitize(Path(path).stem)
    progress.phase("translate", f"{path}: the whole program, by the LLM ({session.cfg.model_label})")
    src = describe(spec, options.mode)
    full, record, why = _ask(session, src, name, options, "program")
    if record is None:  # too large to validate at full size: a reduced instance, the same program
        record = _reduced(session, src, name, options, full.kernel, why)
    record = {**record, "validated": True, "frontend": "llm", "mode": options.mode, "model": full.model,
              "attempts": full.attempts, "seconds": {"total": round(time.perf_counter() - t0, 3)},
              "translated_by": [{"op": WHOLE, "loc": f"{path}:1", "by": "llm", "model": full.model,
                                 "attempts": full.attempts, "cached": full.cached, "tokens": full.tokens,
                                 "cost": full.cost}]}
    # one source op, written by the LLM: its arithmetic is not priced as written (docs/llm-frontend.md),
    # and the unfused bound takes the program as one kernel (the source's own kernels are unknown)
    whole = [{"op": WHOLE, "loc": f"{path}:1", "first": 0, "count": len(statements(full.kernel)),
              "module": None, "by": "llm"}]
    return Translation([full.kernel], record, [], [], whole)


def _ask(session: Session, src, name: str, options: FrontendOptions,
         key: str) -> tuple[Outcome, dict | None, str]:
    """The LLM's kernel for the program `src` and its validation record, as the deterministic path
    validates (`torch.validation.at_size`: whole on get_inputs() and fresh samples when it fits the
    budgets, else the framework at full size and the kernel's backward slice on sampled output
    elements), or (outcome, None, why) when neither fits at this size."""
    from .reference import reference_pair

    where = "at full size" if key == "program" else "on the reduced instance"
    text = render("program", path=src.spec.path, mode=options.mode, source=src.spec.source.rstrip(),
                  kernel=name, params="\n".join(f"- `{p.text()}`" for p in src.params),
                  outputs=", ".join(f"`{o}`" for o in src.outputs), reference=reference_pair(src, options),
                  tolerance=_tolerance_text())
    results: dict[int, tuple[dict | None, str]] = {}

    def check(response: str) -> tuple[Kernel, float]:
        kernel = parse(extract(response))
        check_signature(kernel, src.params)
        verify(kernel)
        record, why = _validate(src, kernel, options, where)
        results[id(kernel)] = (record, why)
        return kernel, record["max_rel_err"] if record is not None else 0.0

    task = Task(f"program {Path(src.spec.path).name}" + ("" if key == "program" else f" {key}"), text,
                task_fingerprint("program", text), check)
    outcome = session.solve(task)
    record, why = results[id(outcome.kernel)]
    return outcome, record, why


def _validate(src, kernel: Kernel, options: FrontendOptions, where: str) -> tuple[dict | None, str]:
    """`at_size` on the kernel; a disagreement with the framework, or a kernel the executor cannot
    run, is a rejection the model sees."""
    from solar_compiler.frontends.torch.translate import TorchTranslation
    from solar_compiler.frontends.torch.validation import at_size
    from solar_compiler.loopir.ast import LoopIRError

    names = {p.name: p.name for p in src.params if p.role != "output"}
    tt = TorchTranslation(kernel, names, list(src.outputs), {})
    try:
        return at_size(src.spec, src.program, tt, options, where=where)
    except CaptureFailed as e:   # "PATH: validation failed on get_inputs(): out[3, 1]: got ..."
        raise Rejected(str(e).removeprefix(f"{src.spec.path}: ")) from None
    except LoopIRError as e:
        raise Rejected(f"execution failed: {e}") from None
    except (ArithmeticError, IndexError, ValueError, MemoryError) as e:
        raise Rejected(f"execution failed: {type(e).__name__}: {e}") from None


def _tolerance_text() -> str:
    from solar_compiler.executor.compare import TOLERANCE

    return ", ".join(f"{d} {t:g}" for d, t in TOLERANCE.items())


def _reduced(session: Session, src, name: str, options: FrontendOptions, full: Kernel, why: str) -> dict:
    """The record of a size-reduced instance's validation: the mildest reduction of the module-level
    sizes whose tensors scale the full-size kernel's estimated cost into the budgets (as the
    deterministic path reduces), translated by the LLM too, validated, and checked to be the same
    program as the full-size kernel with only sizes changed."""
    from solar_compiler.frontends.validation import REDUCIBLE, candidates
    from solar_compiler.loopir.ast import DTYPES
    from solar_compiler.loopir.same_program import same_program

    from .reference import describe

    spec = src.spec
    hint = ("define the sizes get_inputs() and Model use as module-level integer constants (`N = 4096`) so "
            "that a reduced instance can be validated, or raise the validation budgets: --frontend-options "
            "'time-budget=S memory-budget-gb=G memory-gb=G' (the last is the sandbox's limit)")
    sizes = {k: v for k, v in spec.size_constants.items() if v >= REDUCIBLE}
    if not sizes:
        raise SolarError(f"{spec.path}:1: the LLM's kernel is too large to validate at full size ({why}) and "
                         f"the file has no module-level size to scale down: {hint}", error_class="validate")

    def nbytes(s) -> int:
        return sum(math.prod(p.shape) * DTYPES[p.dtype] for p in s.params)

    cost = estimate(full)
    budget_b = options.memory_budget_gb * 2**30
    chosen = None
    for _, ov in candidates(sizes):
        if not ov:
            continue
        small = describe(spec.with_sizes(ov), options.mode)
        ratio = nbytes(src) / max(1, nbytes(small))
        if cost.seconds / ratio <= options.time_budget and cost.kernel_bytes / ratio <= budget_b:
            chosen = ov, small
            break
    if chosen is None:
        raise SolarError(f"{spec.path}:1: the LLM's kernel is too large to validate at full size ({why}) and "
                         f"no reduction of its module-level sizes fits the budget: {hint}",
                         error_class="validate")
    ov, small = chosen
    shown = ", ".join(f"{k}={v} (of {spec.size_constants[k]})" for k, v in ov.items())
    progress.phase("validate", f"not at full size ({why}): the LLM translates the reduced instance {shown}")
    reduced, record, why_r = _ask(session, small, name, options, "reduced")
    if record is None:
        raise SolarError(f"{spec.path}:1: even the reduced instance {shown} is too large to validate "
                         f"({why_r}): {hint}", error_class="validate")
    diff = same_program(full, reduced.kernel)
    if diff is not None:
        raise SolarError(f"{spec.path}:1: the LLM's full-size and reduced ({shown}) translations are "
                         f"different programs ({diff}): not validated", error_class="validate")
    return {**record, "method": "reduced", "reduced_method": record["method"], "sizes": f"reduced: {shown}",
            "full_size_same_program": True, "why_reduced": why,
            "reduced_attempts": reduced.attempts}
