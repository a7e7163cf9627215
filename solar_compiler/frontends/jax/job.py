"""The JAX frontend's job, run in the sandboxed child (imports jax, so the parent never does): load
the file, capture, translate, check bounds, validate against the JAX function's own outputs."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

# XLA compiles every jitted function it runs (the reference, the parameter and input initialisers):
# on CPU at its lowest backend optimisation level that takes a fraction of the time and computes
# the same values (validation compares within the dtype's tolerance anyway).
os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS"),
                                                 "--xla_backend_optimization_level=0"]))

import jax  # noqa: E402

from solar_compiler.errors import SolarError
from solar_compiler.executor.trace import IndirectTrace
from solar_compiler.frontends import FrontendOptions, Translation
from solar_compiler.frontends.captured_program import CaptureError
from solar_compiler.frontends.model_file import JAX_FORMAT, ModelFileError, ModelSpec, load_model_file
from solar_compiler.frontends.validation import (
    SAMPLE_SEEDS,
    as_array,
    has_indirect,
    traced_records,
    validate_sized,
)
from solar_compiler.loopir.domain import check_bounds

from .capture import JaxModel, capture, load_model
from .reference import feed, file_inputs, fresh_inputs, real_params, reference
from .train import train_model
from .translate import JaxTranslation, translate_program

# XLA's CPU client (its thread pools' address space) starts with this module, which the sandboxed
# child imports while loading its work: before its memory limit, which then counts the model only
jax.devices()


def translate_job(path: str, options: FrontendOptions) -> Translation:
    """Capture, translate and validate `path`; every failure is a one-line SolarError."""
    t0 = time.perf_counter()
    try:
        spec = load_model_file(path, JAX_FORMAT)
        model, prog = build_capture(spec, options)
    except (ModelFileError, CaptureError) as e:
        raise SolarError(str(e), error_class=e.error_class) from None
    t1 = time.perf_counter()
    tt = translate_program(prog, kernel_name=Path(path).stem)
    check_bounds(tt.kernel)
    t2 = time.perf_counter()
    # what the indirect accesses touch on get_inputs(), recorded by a full-size validation only
    trace = IndirectTrace() if has_indirect(tt.kernel) else None
    full = (model, prog, tt)
    if options.validate:
        record = validate_sized(spec, tt.kernel, full, options, lambda s: build(s, options, tt),
                                lambda s, built: run_samples(*built, trace if built is full else None))
    else:
        record = {"validated": False, "method": None, "reason": "validation disabled (validate=false)",
                  "max_rel_err": None, "samples": 0, "sizes": None, "elements_checked": 0}
    t3 = time.perf_counter()
    step = {"step": "train", "optimizer": options.optimizer or None} if options.step == "train" else {}
    record = {"frontend": "jax-jaxpr", **record, "mode": options.mode, **step,
              "seconds": {"capture": round(t1 - t0, 3), "translate": round(t2 - t1, 3),
                          "validate": round(t3 - t2, 3)}}
    notes = list(tt.notes)
    traced: list[dict[str, Any]] = []
    if trace is not None:
        if record.get("validated") and record.get("method") == "full":
            traced = traced_records(tt.kernel, trace)
        else:
            notes.append("indirect accesses counted at their minimum over all index values: no traced "
                         "sample at full size")
    return Translation([tt.kernel], record, [], notes, tt.source_ops, traced=traced)


def build_capture(spec: ModelSpec, options: FrontendOptions):
    """The file's model (its forward, or with `--step train` one training step: `train.py`) and its
    capture."""
    model = load_model(spec, options.mode)
    if options.step == "train":
        model = train_model(model, options.optimizer)
    return model, capture(model)


def build(spec: ModelSpec, options: FrontendOptions, full: JaxTranslation):
    """A (reduced) instance captured and translated, for the shared size-reduction rules."""
    try:
        model, prog = build_capture(spec, options)
    except (ModelFileError, CaptureError) as e:
        raise SolarError(str(e), error_class=e.error_class) from None
    tt = translate_program(prog, kernel_name=full.kernel.name)
    return tt.kernel, (model, prog, tt)


def run_samples(model: JaxModel, prog, tt: JaxTranslation, trace: IndirectTrace | None = None) \
        -> dict[str, Any]:
    """Compare on get_inputs() and fresh samples, each output within its dtype's tolerance grown with
    the reduction length feeding it (`summation_tolerances`); a mismatch fails the translation.
    `trace` records the get_inputs() sample's indirect footprints."""
    import math

    from solar_compiler.executor import compare, execute
    from solar_compiler.executor.compare import summation_tolerances

    kernel = tt.kernel
    dtypes = {t.name: t.dtype for t in kernel.tensors}
    tols = summation_tolerances(kernel)
    params = real_params(model)
    run_reference = reference(model)
    base = file_inputs(model)
    worst = 0.0
    for seed in (None, *SAMPLE_SEEDS):
        inputs = base if seed is None else fresh_inputs(base, seed)
        outs = run_reference(params, inputs)
        values = feed(prog, params, inputs)
        got = execute(kernel, {tt.inputs[n]: as_array(a, kernel.tensor(tt.inputs[n]))
                               for n, a in values.items()}, trace=trace if seed is None else None)
        ref = dict(zip(tt.outputs, outs, strict=True))
        cmp = compare(ref, got, dtypes, tolerances=tols)
        what = "get_inputs()" if seed is None else f"fresh sample (seed {seed})"
        if not cmp.ok:
            raise SolarError(f"{model.spec.path}: validation failed on {what}: {cmp.first_mismatch}",
                             error_class="validate")
        worst = max(worst, cmp.max_rel_err)
    return {"validated": True, "max_rel_err": worst, "samples": 1 + len(SAMPLE_SEEDS),
            "elements_checked": sum(math.prod(t.shape) for t in kernel.by_role("output"))}
