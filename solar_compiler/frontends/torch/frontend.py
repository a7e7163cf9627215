"""The PyTorch frontend: capture (in a sandboxed child process), translate, validate, cache.

Validation (`validation.py`) runs the loop IR on real data (the executor) and compares it with
the model's own outputs: whole at full size, on a backward slice of sampled output elements at full
size, or on a size-reduced instance checked to be the same program. The record says which. The
sandboxed child, the model-file loader and the translation cache are shared with the other
frontends (`frontends/job.py`, `sandbox.py`, `model_file.py`, `cache.py`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from solar_compiler import progress
from solar_compiler.errors import SolarError
from solar_compiler.executor.trace import IndirectTrace
from solar_compiler.frontends import CaptureFailed, FrontendOptions, Translation, cache
from solar_compiler.frontends.cache import fingerprint
from solar_compiler.frontends.job import translate_cached

FRONTEND_VERSION = "2"


class TorchFrontend:
    name = "torch"
    extensions = (".py",)

    def translate(self, path: str, options: FrontendOptions) -> Translation:
        return translate_cached(translate_job, path, options, cache_key(path, options),
                                extra_timeout=_llm_allowance(options), label="torch",
                                key_of=lambda p: cache_key(p, options), batch_job=translate_batch_job)


# ---- the job (runs in the sandboxed child) -------------------------------------------------------
def translate_job(path: str, options: FrontendOptions) -> Translation:
    """Capture, translate and validate `path`; every failure is a one-line SolarError."""
    return _finish(_captured(path, options), options)


def _captured(path: str, options: FrontendOptions) -> dict[str, Any]:
    """Capture and translate `path` (no validation yet): spec, prog, tt, filler and the times."""
    from solar_compiler.frontends.model_file import ModelFileError, load_model_file
    from solar_compiler.loopir.domain import check_bounds

    from .capture import CaptureError, capture
    from .translate import translate_program

    t0 = time.perf_counter()
    what = "forward" if options.step == "forward" else \
        f"a training step{' with ' + options.optimizer if options.optimizer else ''}"
    progress.phase("capture", f"{path}: building the model and tracing {what} ({options.mode} mode)")
    try:
        spec = load_model_file(path)
        prog = capture(spec, mode=options.mode, step=options.step, optimizer=options.optimizer or None)
    except ModelFileError as e:
        raise SolarError(str(e), error_class=e.error_class) from None
    except CaptureError as e:
        raise capture_failure(spec, options, str(e)) from None
    t1 = time.perf_counter()
    progress.phase("translate", f"{len(prog.nodes)} ATen ops (captured by {prog.method}) to loop IR")
    filler = op_filler(spec, prog, options)
    tt = translate_program(prog, kernel_name=Path(path).stem, filler=filler)
    check_bounds(tt.kernel)
    return {"path": path, "spec": spec, "prog": prog, "tt": tt, "filler": filler,
            "t": [t0, t1, time.perf_counter()]}


def _finish(c: dict[str, Any], options: FrontendOptions, record: dict[str, Any] | None = None) -> Translation:
    """Validate a `_captured` program (unless `record` is given: validation carried over from
    another workload of the batch) and build its Translation."""
    from solar_compiler.frontends.validation import has_indirect, traced_records

    from .validation import validate

    spec, prog, tt, filler = c["spec"], c["prog"], c["tt"], c["filler"]
    t0, t1, t2 = c["t"]
    tv = time.perf_counter()  # a batch validates after capturing all its programs
    trace = IndirectTrace() if has_indirect(tt.kernel) else None
    if record is not None:
        pass
    elif options.validate:
        record = validate(spec, prog, tt, options, filler, trace)
    else:
        record = {"validated": False, "method": None, "reason": "validation disabled (validate=false)",
                  "max_rel_err": None, "samples": 0, "sizes": None, "elements_checked": 0}
    t3 = time.perf_counter()
    if prog.step == "train":
        record["step"] = "train"
        record["optimizer"] = prog.optimizer
    record = {"frontend": f"torch-{prog.method}", **record, "mode": options.mode,
              "seconds": {"capture": round(t1 - t0, 3), "translate": round(t2 - t1, 3),
                          "validate": round(t3 - tv, 3)}}
    if prog.fallback_reason:
        record["export_failed"] = prog.fallback_reason
    notes = list(tt.notes)
    traced: list[dict[str, Any]] = []
    if trace is not None:
        if record.get("method") == "full" and record.get("samples"):
            # the whole program ran at full size on get_inputs() and agreed (validated, or a
            # value-dependent program compared on its traced sample alone: the traced-values contract)
            traced = traced_records(tt.kernel, trace)
        else:
            why = "validation was disabled" if not options.validate else \
                "validation did not run the whole program at full size" if record.get("validated") else \
                "validation did not run"
            notes.append(f"indirect accesses counted at their minimum over all index values: no traced "
                         f"sample at full size ({why})")
    if filler is not None and filler.filled:
        record["translated_by"] = filler.attribution(tt.source_ops)
    return Translation([tt.kernel], record, list(prog.value_dependent), notes, tt.source_ops, tt.aliases,
                       traced)


def translate_batch_job(paths: list[str], options: FrontendOptions) -> list[Translation | SolarError]:
    """Several model files that are one program at several shapes (the workloads of a SOL-ExecBench
    problem), in this one process: each is captured and translated at its own shapes. In order of
    validation cost, each is either validated as `translate_job` would, or, when its kernel is an
    already validated one's with only sizes changed (`same_program`, the check of reduced-size
    validation), carries that one's record over (method "other-workload"; like "reduced": validated
    at other sizes, the same program). A program with indirect accesses or value-dependent work is
    always validated on its own. Each result is a Translation or its one-line diagnostic."""
    from solar_compiler.frontends.job import diagnostic
    from solar_compiler.frontends.validation import estimate, has_indirect
    from solar_compiler.loopir.same_program import same_program

    out: list[Translation | SolarError | None] = [None] * len(paths)
    caps: list[tuple[float, int, dict[str, Any]]] = []
    for i, p in enumerate(paths):
        try:
            c = _captured(p, options)
            caps.append((estimate(c["tt"].validation_kernel()).seconds, i, c))
        except SolarError as e:
            out[i] = diagnostic(e, p, options)
    refs: list[tuple[dict[str, Any], Translation]] = []  # validated on their own, cheapest first
    for _, i, c in sorted(caps, key=lambda x: (x[0], x[1])):
        plain = not c["prog"].value_dependent and not has_indirect(c["tt"].kernel)
        carried = None
        ref = next((r for r in refs if same_program(r[0]["tt"].kernel, c["tt"].kernel,
                                                    (c["path"], r[0]["path"])) is None), None) \
            if plain and options.validate else None
        if ref is not None:
            v = ref[1].validation
            carried = {k: v[k] for k in ("validated", "max_rel_err", "samples", "elements_checked") if k in v}
            carried.update(method="other-workload", workload_method=v.get("method"),
                           sizes=f"of workload {Path(ref[0]['path']).stem} ({v.get('sizes')} there)",
                           full_size_same_program=True)
        try:
            t = _finish(c, options, carried)
        except SolarError as e:
            out[i] = diagnostic(e, c["path"], options)
            continue
        out[i] = t
        if carried is None and plain and t.validation.get("validated"):
            refs.append((c, t))
    return [x for x in out if x is not None]


def capture_failure(spec, options: FrontendOptions, message: str) -> SolarError:
    """`CaptureFailed` (the whole program may go to the LLM) when the capture is what failed: the
    program itself runs eagerly. When forward raises eagerly too, the program is wrong, not the
    capture: a plain error. (Checked only when an LLM fallback is possible.)"""
    if options.llm is None:
        return CaptureFailed(message)
    import torch

    from .capture.util import WideMatrixProducts, quiet

    try:
        torch.manual_seed(0)
        model, sample = spec.build_model(), spec.sample_inputs()
        if options.mode == "eval":
            model.eval()
        with torch.no_grad(), quiet(), WideMatrixProducts():
            model(*sample)
    except Exception:  # noqa: BLE001 - any failure of the program itself
        return SolarError(message, error_class="capture")
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


# ---- cache ---------------------------------------------------------------------------------------
def cache_key(path: str, options: FrontendOptions) -> str:
    from importlib.metadata import version

    return cache.cache_key(path, options, f"torch {version('torch')}",
                           fingerprint(FRONTEND_VERSION, Path(__file__).parent))
