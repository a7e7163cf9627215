"""The PyTorch frontend: capture (in a sandboxed child process), translate, validate, cache.

Validation (`validation.py`) runs the loop IR on real data (the executor) and compares it with
the model's own outputs: whole at full size, on a backward slice of sampled output elements at full
size, or on a size-reduced instance checked to be the same program. The record says which.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
import time
from pathlib import Path
from typing import Any

from solar_compiler.errors import SolarError
from solar_compiler.executor.trace import IndirectTrace
from solar_compiler.frontends import CaptureFailed, FrontendOptions, Translation

from .validation import REDUCIBLE, as_array, has_indirect, run_samples, shrink, traced_records  # noqa: F401 - used by the LLM frontend

FRONTEND_VERSION = "2"


class TorchFrontend:
    name = "torch"
    extensions = (".py",)

    def translate(self, path: str, options: FrontendOptions) -> Translation:
        from .sandbox import SandboxError, run_in_child, run_in_process

        key = cache_key(path, options)
        if not options.no_cache:
            hit = cache_load(key)
            if hit is not None:
                hit.notes.append("translation cache hit")
                return hit
        try:
            if options.sandboxed:  # already in a sandbox of the caller's: same job, same messages
                result = run_in_process(sandboxed_job, path, options, memory_limit_gb=options.memory_gb,
                                        user_file=path)
            else:
                result = run_in_child(sandboxed_job, path, options,
                                      timeout_s=options.timeout + _llm_allowance(options),
                                      memory_limit_gb=options.memory_gb, user_file=path)
        except SandboxError as e:
            raise SolarError(str(e)) from None
        if isinstance(result, str):
            raise SolarError(result)
        if isinstance(result, SolarError):  # its class says what failed (CaptureFailed, LLM exit 3)
            raise result
        if not options.no_cache:
            cache_store(key, result)
        return result


# ---- the job (runs in the child) ------------------------------------------------------------------
def sandboxed_job(path: str, options: FrontendOptions) -> Translation | SolarError | str:
    """`translate_job`, with its diagnostics (SolarError, LoopIRError) returned as the one-line
    message itself (a SolarError keeps its class), so that the parent shows them unchanged. A
    diagnostic caused by a failed allocation (the capture reports it as "forward raised
    RuntimeError: ... can't allocate memory") is the sandbox's memory limit at work, and says so."""
    from solar_compiler.loopir.ast import LoopIRError

    from .sandbox import memory_limit_message

    try:
        return translate_job(path, options)
    except (SolarError, LoopIRError) as e:
        mem = memory_limit_message(e, path, options.memory_gb)
        if mem is None and isinstance(e, SolarError):
            return type(e)(" ".join(str(e).split()))
        return mem or " ".join(str(e).split())


def translate_job(path: str, options: FrontendOptions) -> Translation:
    """Capture, translate and validate `path`; every failure is a one-line SolarError."""
    from solar_compiler.analysis.polyhedral import check_bounds

    from .capture import CaptureError, capture
    from .model_file import ModelFileError, load_model_file
    from .translate import translate_program
    from .validation import validate

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
    trace = IndirectTrace() if has_indirect(tt.kernel) else None
    if options.validate:
        record = validate(spec, prog, tt, options, filler, trace)
    else:
        record = {"validated": False, "method": None, "reason": "validation disabled (validate=false)",
                  "max_rel_err": None, "samples": 0, "sizes": None, "elements_checked": 0}
    t3 = time.perf_counter()
    record = {"frontend": f"torch-{prog.method}", **record, "mode": options.mode,
              "seconds": {"capture": round(t1 - t0, 3), "translate": round(t2 - t1, 3),
                          "validate": round(t3 - t2, 3)}}
    if prog.fallback_reason:
        record["export_failed"] = prog.fallback_reason
    notes = list(tt.notes)
    traced: list[dict[str, Any]] = []
    if trace is not None:
        if record.get("validated") and record.get("method") == "full":
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


# ---- validation (validation.py); names the LLM frontend imports from here ------------------------
def estimate(kernel) -> tuple[float, int]:
    """(expected seconds of one whole-execution validation sample, bytes of all kernel tensors)."""
    from .validation import estimate as cost_of

    cost = cost_of(kernel)
    return cost.seconds, cost.kernel_bytes


# ---- cache ---------------------------------------------------------------------------------------
def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "solar-opt" / "translations"


# loop-IR modules whose code shapes a translation (simplification, random-draw stripping, the
# reduced-size check), relative to the solar_compiler package
_SHARED_SOURCES = ("loopir/simplify.py", "loopir/rewrite.py", "loopir/same_program.py",
                   "analysis/slicing.py", "executor/compare.py")


def _frontend_fingerprint() -> str:
    """FRONTEND_VERSION plus the frontend's own source and the loop-IR rewrites it uses, so an edited
    template or simplification invalidates the cache."""
    h = hashlib.sha256(FRONTEND_VERSION.encode())
    root = Path(__file__).parent
    for p in sorted(root.rglob("*.py")):
        h.update(p.relative_to(root).as_posix().encode())
        h.update(p.read_bytes())
    package = root.parent.parent
    for rel in _SHARED_SOURCES:
        h.update(rel.encode())
        h.update((package / rel).read_bytes())
    return h.hexdigest()


def cache_key(path: str, options: FrontendOptions) -> str:
    from importlib.metadata import version

    try:
        source = Path(path).read_bytes()
    except OSError as e:
        raise SolarError(f"{path}:1: cannot read file: {e.strerror}") from None
    h = hashlib.sha256()
    opts = (options.mode, options.validate, options.time_budget, options.memory_budget_gb,
            options.llm.cache_tag() if options.llm is not None else None)
    for part in (source, path.encode(), version("torch").encode(), _frontend_fingerprint().encode(),
                 repr(opts).encode()):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


def cache_load(key: str) -> Translation | None:
    p = cache_dir() / f"{key}.pkl"
    try:
        with open(p, "rb") as f:
            value = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None
    return value if isinstance(value, Translation) else None


def cache_store(key: str, value: Translation) -> None:
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, d / f"{key}.pkl")
    except OSError as e:  # a cache that cannot be written only costs time: say so
        value.notes.append(f"translation cache not written ({d}: {e.strerror})")
