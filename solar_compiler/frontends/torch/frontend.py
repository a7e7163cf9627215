"""The PyTorch frontend: capture (in a sandboxed child process), translate, validate, cache.

Validation runs the loop IR on real data (the executor) and compares it with the model's own
outputs, on the file's `get_inputs()` and on two fresh samples (one sample when the program is
value-dependent: another sample may trace a different program), at full size or on a size-reduced
instance, by the rules every frontend shares (`frontends/validation.py`). The sandboxed child, the
model-file loader and the translation cache are shared too (`frontends/job.py`, `sandbox.py`,
`model_file.py`, `cache.py`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from solar_compiler.errors import SolarError
from solar_compiler.frontends import CaptureFailed, FrontendOptions, Translation, cache
from solar_compiler.frontends.cache import fingerprint
from solar_compiler.frontends.job import translate_cached
from solar_compiler.frontends.validation import SAMPLE_SEEDS, as_array, validate_sized

FRONTEND_VERSION = "1"


class TorchFrontend:
    name = "torch"
    extensions = (".py",)

    def translate(self, path: str, options: FrontendOptions) -> Translation:
        return translate_cached(translate_job, path, options, cache_key(path, options),
                                extra_timeout=_llm_allowance(options))


# ---- the job (runs in the sandboxed child) -------------------------------------------------------
def translate_job(path: str, options: FrontendOptions) -> Translation:
    """Capture, translate and validate `path`; every failure is a one-line SolarError."""
    from solar_compiler.analysis.polyhedral import check_bounds
    from solar_compiler.frontends.model_file import ModelFileError, load_model_file

    from .capture import CaptureError, capture
    from .translate import translate_program

    t0 = time.perf_counter()
    try:
        spec = load_model_file(path)
        prog = capture(spec, mode=options.mode)
    except ModelFileError as e:
        raise SolarError(str(e)) from None
    except CaptureError as e:
        raise capture_failure(spec, options, str(e)) from None
    t1 = time.perf_counter()
    filler = op_filler(spec, prog, options)
    tt = translate_program(prog, kernel_name=Path(path).stem, filler=filler)
    check_bounds(tt.kernel)
    t2 = time.perf_counter()
    if options.validate:
        record = validate(spec, prog, tt, options, filler)
    else:
        record = {"validated": False, "reason": "validation disabled (validate=false)", "max_rel_err": None,
                  "samples": 0, "sizes": None}
    t3 = time.perf_counter()
    record = {"frontend": f"torch-{prog.method}", **record, "mode": options.mode,
              "seconds": {"capture": round(t1 - t0, 3), "translate": round(t2 - t1, 3),
                          "validate": round(t3 - t2, 3)}}
    if prog.fallback_reason:
        record["export_failed"] = prog.fallback_reason
    notes = list(tt.notes)
    if filler is not None and filler.filled:
        record["translated_by"] = filler.attribution(tt.source_ops)
    return Translation([tt.kernel], record, list(prog.value_dependent), notes, tt.source_ops)


def capture_failure(spec, options: FrontendOptions, message: str) -> SolarError:
    """`CaptureFailed` (the whole program may go to the LLM) when the capture is what failed: the
    program itself runs eagerly. When forward raises eagerly too, the program is wrong, not the
    capture: a plain error. (Checked only when an LLM fallback is possible.)"""
    if options.llm is None:
        return CaptureFailed(message)
    import torch

    from .capture.util import quiet

    try:
        torch.manual_seed(0)
        model, sample = spec.build_model(), spec.sample_inputs()
        if options.mode == "eval":
            model.eval()
        with torch.no_grad(), quiet():
            model(*sample)
    except Exception:  # noqa: BLE001 - any failure of the program itself
        return SolarError(message)
    return CaptureFailed(message)


def op_filler(spec, prog, options: FrontendOptions, parent=None):
    """The LLM's per-op fill-in for ops without a template, when the LLM path is enabled (a reduced
    instance's filler continues the run of its full-size `parent`: one budget, one transcript)."""
    if options.llm is None:
        return None
    from solar_compiler.frontends.llm.ops import TorchOpFiller

    return TorchOpFiller(spec, prog, options, session=parent.session if parent is not None else None)


def _llm_allowance(options: FrontendOptions) -> float:
    """Extra sandbox seconds for LLM requests made inside the child (two ops' worth of attempts)."""
    llm = options.llm
    return 0.0 if llm is None or not llm.available else 2 * llm.attempts * llm.timeout


# ---- validation -----------------------------------------------------------------------------------
def validate(spec, prog, tt, options: FrontendOptions, filler=None) -> dict[str, Any]:
    """Execute and compare at full size when the budget allows, else on a reduced instance (the
    shared rules of `frontends/validation.py`): a reduced file is re-captured and re-translated (its
    op fill-in continuing the full-size one's)."""
    from .capture import CaptureError, capture
    from .translate import translate_program

    def build(spec_r):
        try:
            prog_r = capture(spec_r, mode=options.mode)
        except CaptureError as e:
            raise SolarError(str(e)) from None
        tt_r = translate_program(prog_r, kernel_name=tt.kernel.name,
                                 filler=op_filler(spec_r, prog_r, options, filler))
        return tt_r.kernel, (prog_r, tt_r)

    return validate_sized(spec, tt.kernel, (prog, tt), options, build,
                          lambda s, built: run_samples(s, *built, options.mode))


def run_samples(spec, prog, tt, mode: str) -> dict[str, Any]:
    """Compare on get_inputs() and fresh samples; a mismatch fails the translation."""
    from solar_compiler.executor import compare, execute

    from .capture import fresh_inputs, run_reference

    kernel = tt.validation_kernel()
    dtypes = {t.name: t.dtype for t in kernel.tensors}
    seeds: list[int | None] = [None] if prog.value_dependent else [None, *SAMPLE_SEEDS]
    worst = 0.0
    for seed in seeds:
        inputs = None if seed is None else fresh_inputs(spec, seed)
        ins, ws, outs, rnd = run_reference(spec, mode, inputs=inputs, seed=0, program=prog)
        feed = {tt.inputs[n]: a for n, a in {**ins, **ws}.items()}
        feed.update({tt.random[n]: a for n, a in rnd.items()})
        feed = {k: as_array(a, kernel.tensor(k)) for k, a in feed.items()}
        got = execute(kernel, feed)
        ref = {k: outs[n] for k, n in zip(tt.outputs, prog.outputs, strict=True)}
        cmp = compare(ref, got, dtypes)
        what = "get_inputs()" if seed is None else f"fresh sample (seed {seed})"
        if not cmp.ok:  # the captured program is not the source program (or a template is wrong)
            raise CaptureFailed(f"{spec.path}: validation failed on {what}: {cmp.first_mismatch}")
        worst = max(worst, cmp.max_rel_err)
    record: dict[str, Any] = {"validated": True, "max_rel_err": worst, "samples": len(seeds)}
    if prog.value_dependent:
        record["reason"] = "value-dependent program: validated on the traced sample only"
    return record


# ---- cache ---------------------------------------------------------------------------------------
def cache_key(path: str, options: FrontendOptions) -> str:
    from importlib.metadata import version

    return cache.cache_key(path, options, f"torch {version('torch')}",
                           fingerprint(FRONTEND_VERSION, Path(__file__).parent))
