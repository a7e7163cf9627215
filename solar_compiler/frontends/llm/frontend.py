"""The whole program through the LLM: `--frontend=llm`, and `auto` when capture fails.

Runs in the sandboxed child (the model file is user code): the source and the tensors the kernel
must have go into the prompt; every answer is parsed, verified, signature-checked and executed on
the deterministic path's samples (get_inputs() and two fresh samples, the model's own outputs, the
same tolerances). When the kernel is too large to run within the validation budget, the LLM also
translates a size-reduced instance of the file (module-level size constants scaled down, as the
deterministic path does); that one is validated and must be the same program as the full-size
kernel with only sizes changed. An unvalidated LLM translation never reaches a bound.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from solar_compiler.errors import SolarError
from solar_compiler.frontends import FrontendOptions, Translation
from solar_compiler.loopir.ast import Kernel

from .check import check_signature, extract, parse, run, verify
from .config import LLMConfig
from .prompt import render
from .session import Outcome, Session, Task, fingerprint

WHOLE = "the whole program"


class LLMFrontend:
    name = "llm"
    extensions = (".py",)

    def translate(self, path: str, options: FrontendOptions) -> Translation:
        from solar_compiler.frontends.sandbox import SandboxError, run_in_child

        cfg = options.llm or LLMConfig.resolve()
        cfg.require(f"{path}:1: {WHOLE} is to be translated by an LLM", "input")
        options = replace(options, llm=cfg)
        try:
            result = run_in_child(whole_program_job, path, options,
                                  timeout_s=options.timeout + 2 * cfg.attempts * cfg.timeout,
                                  memory_limit_gb=options.memory_gb, user_file=path)
        except SandboxError as e:
            raise SolarError(str(e), error_class=e.error_class) from None
        if isinstance(result, SolarError):
            raise result
        return result


def whole_program_job(path: str, options: FrontendOptions) -> Translation | SolarError:
    """`translate_whole`, its diagnostics (every one a SolarError: LoopIRError, ModelFileError,
    CaptureError, ...) returned on one line, of the same class and error class."""
    try:
        return translate_whole(path, options)
    except SolarError as e:
        return e.flattened()


def translate_whole(path: str, options: FrontendOptions) -> Translation:
    from solar_compiler.frontends.model_file import load_model_file
    from solar_compiler.frontends.torch.capture import sanitize

    assert options.llm is not None
    t0 = time.perf_counter()
    spec = load_model_file(path)
    session = Session(options.llm, path)
    name = sanitize(Path(path).stem)
    full, err = _ask(session, spec, name, options, "program")
    sizes, samples = "full", 3
    if err is None:  # too large to run: validate a reduced instance, the same program
        ov, err = _reduced(session, spec, name, options, full.kernel)
        sizes = "reduced: " + ", ".join(f"{k}={v}" for k, v in ov.items())
    record = {"validated": True, "frontend": "llm", "max_rel_err": err, "samples": samples, "sizes": sizes,
              "mode": options.mode, "model": full.model, "attempts": full.attempts,
              "seconds": {"total": round(time.perf_counter() - t0, 3)},
              "translated_by": [{"op": WHOLE, "loc": f"{path}:1", "by": "llm", "model": full.model,
                                 "attempts": full.attempts, "cached": full.cached, "tokens": full.tokens,
                                 "cost": full.cost}]}
    if sizes != "full":
        record["full_size_same_program"] = True
    return Translation([full.kernel], record, [], [], [])


def _ask(session: Session, spec, name: str, options: FrontendOptions,
         key: str) -> tuple[Outcome, float | None]:
    """The LLM's kernel for `spec` and its largest relative error (None: too large to run)."""
    from solar_compiler.frontends.validation import estimate

    from .reference import describe, samples

    src = describe(spec, options.mode)
    text = render("program", path=spec.path, mode=options.mode, source=spec.source.rstrip(), kernel=name,
                  params="\n".join(f"- `{p.text()}`" for p in src.params),
                  outputs=", ".join(f"`{o}`" for o in src.outputs))
    cache: dict[str, list] = {}
    errors: dict[int, float | None] = {}

    def check(response: str) -> tuple[Kernel, float]:
        kernel = parse(extract(response))
        check_signature(kernel, src.params)
        verify(kernel)
        cost = estimate(kernel)
        secs, nbytes = cost.seconds, cost.kernel_bytes
        if secs > options.time_budget or nbytes > options.memory_budget_gb * 2**30:
            errors[id(kernel)] = None
            return kernel, 0.0
        if "s" not in cache:
            cache["s"] = samples(src, options.mode)
        err = run(kernel, cache["s"])
        errors[id(kernel)] = err
        return kernel, err

    task = Task(f"program {Path(spec.path).name}" + ("" if key == "program" else f" {key}"), text,
                fingerprint("program", text), check)
    outcome = session.solve(task)
    return outcome, errors.get(id(outcome.kernel), outcome.max_rel_err)


def _reduced(session: Session, spec, name: str, options: FrontendOptions, full: Kernel):
    from solar_compiler.frontends.validation import REDUCIBLE, estimate, shrink
    from solar_compiler.loopir.same_program import same_program

    sizes = dict(spec.size_constants)
    if not any(v >= REDUCIBLE for v in sizes.values()):
        raise SolarError(f"{spec.path}:1: the LLM's kernel is too large to validate within budget and the "
                         "file has no module-level size constant to scale down")
    cost = estimate(full)
    secs, nbytes = cost.seconds, cost.kernel_bytes
    factor = 2
    while factor <= 2**16:
        ov = {k: shrink(v, factor) for k, v in sizes.items()}
        ov = {k: v for k, v in ov.items() if v != sizes[k]}
        fits = secs / factor <= options.time_budget and nbytes / factor <= options.memory_budget_gb * 2**30
        if ov and fits:
            break
        factor *= 2
    reduced, err = _ask(session, spec.with_sizes(ov), name, options, "reduced")
    if err is None:
        raise SolarError(f"{spec.path}:1: even the reduced instance {ov} is too large to validate "
                         "within budget")
    diff = same_program(full, reduced.kernel)
    if diff is not None:
        raise SolarError(f"{spec.path}:1: the LLM's full-size and reduced ({ov}) translations are different "
                         f"programs ({diff}): not validated")
    return ov, err
