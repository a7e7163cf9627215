"""The PyTorch frontend: capture (in a sandboxed child process), translate, validate, cache.

Validation runs the loop IR on real data (the executor) and compares it with the model's own
outputs, on the file's `get_inputs()` and on two fresh samples (one sample when the program is
value-dependent: another sample may trace a different program). Full-size data is used only when
the reference forward is expected to take under `time_budget` seconds and every tensor fits in
`memory_budget_gb`; otherwise the module-level size constants are scaled down (`with_sizes`), the
reduced instance is re-captured, re-translated and validated, and the full-size kernel is checked
to be the same program with only sizes changed (`same_program`). The record says which was done.
"""

from __future__ import annotations

import hashlib
import math
import os
import pickle
import tempfile
import time
from pathlib import Path
from typing import Any

from solar_compiler.errors import SolarError
from solar_compiler.frontends import FrontendOptions, Translation

FRONTEND_VERSION = "1"
SAMPLE_SEEDS = (1, 2)   # fresh samples besides get_inputs()
MIN_REDUCED = 8         # a reduced size constant stays at least this large
REDUCIBLE = 16          # constants below this (kernel sizes, strides, heads, layers) are kept
# Points per second of one validation sample (reference forward, fresh inputs, loop-IR execution and
# comparison together; measured here: about 2e7/s for elementwise statements): conservative, so
# that "fits the time budget" means the whole validation stays within a few budgets.
MATRIX_RATE = 2e9       # a contraction statement (executed with einsum/BLAS)
VECTOR_RATE = 2e7       # any other statement


class TorchFrontend:
    name = "torch"
    extensions = (".py",)

    def translate(self, path: str, options: FrontendOptions) -> Translation:
        from solar_compiler.frontends.sandbox import SandboxError, run_in_child

        key = cache_key(path, options)
        if not options.no_cache:
            hit = cache_load(key)
            if hit is not None:
                hit.notes.append("translation cache hit")
                return hit
        try:
            result = run_in_child(sandboxed_job, path, options, timeout_s=options.timeout,
                                  memory_limit_gb=options.memory_gb, user_file=path)
        except SandboxError as e:
            raise SolarError(str(e)) from None
        if isinstance(result, str):
            raise SolarError(result)
        if not options.no_cache:
            cache_store(key, result)
        return result


# ---- the job (runs in the child) ------------------------------------------------------------------
def sandboxed_job(path: str, options: FrontendOptions) -> Translation | str:
    """`translate_job`, with its diagnostics (SolarError, LoopIRError) returned as the one-line
    message itself, so that the parent shows them unchanged. A diagnostic caused by a failed
    allocation (the capture reports it as "forward raised RuntimeError: ... can't allocate memory")
    is the sandbox's memory limit at work, and says so."""
    from solar_compiler.frontends.sandbox import memory_limit_message
    from solar_compiler.loopir.ast import LoopIRError

    try:
        return translate_job(path, options)
    except (SolarError, LoopIRError) as e:
        return memory_limit_message(e, path, options.memory_gb) or " ".join(str(e).split())


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
    except (ModelFileError, CaptureError) as e:
        raise SolarError(str(e)) from None
    t1 = time.perf_counter()
    tt = translate_program(prog, kernel_name=Path(path).stem)
    check_bounds(tt.kernel)
    t2 = time.perf_counter()
    if options.validate:
        record = validate(spec, prog, tt, options)
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
    return Translation([tt.kernel], record, list(prog.value_dependent), notes, tt.source_ops)


# ---- validation -----------------------------------------------------------------------------------
def validate(spec, prog, tt, options: FrontendOptions) -> dict[str, Any]:
    """Execute and compare at full size when the budget allows, else on a reduced instance."""
    seconds, nbytes = estimate(tt.kernel)
    if seconds <= options.time_budget and nbytes <= options.memory_budget_gb * 2**30:
        return {**run_samples(spec, prog, tt, options.mode), "sizes": "full"}
    reduced = reduce_instance(spec, prog, tt, options)
    if isinstance(reduced, str):
        return {"validated": False, "max_rel_err": None, "samples": 0, "sizes": None,
                "reason": f"too large to validate within budget (estimated {seconds:.1f} s, "
                          f"{nbytes / 2**30:.2f} GB) and {reduced}"}
    overrides, spec_r, prog_r, tt_r = reduced
    sizes = "reduced: " + ", ".join(f"{k}={v}" for k, v in overrides.items())
    return {**run_samples(spec_r, prog_r, tt_r, options.mode), "sizes": sizes,
            "full_size_same_program": True}


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
        feed = {k: _as_array(a, kernel.tensor(k)) for k, a in feed.items()}
        got = execute(kernel, feed)
        ref = {k: outs[n] for k, n in zip(tt.outputs, prog.outputs, strict=True)}
        cmp = compare(ref, got, dtypes)
        what = "get_inputs()" if seed is None else f"fresh sample (seed {seed})"
        if not cmp.ok:
            raise SolarError(f"{spec.path}: validation failed on {what}: {cmp.first_mismatch}")
        worst = max(worst, cmp.max_rel_err)
    record: dict[str, Any] = {"validated": True, "max_rel_err": worst, "samples": len(seeds)}
    if prog.value_dependent:
        record["reason"] = "value-dependent program: validated on the traced sample only"
    return record


def _as_array(a, decl):
    """The reference array in the executor's dtype; a constant captured as shape (1,) for a 0-d
    tensor (same single element) takes the declared shape."""
    import numpy as np

    from solar_compiler.executor.numeric import USER

    a = np.ascontiguousarray(a, dtype=USER[decl.dtype])
    if a.shape != decl.shape and a.size == 1 and math.prod(decl.shape) == 1:
        a = a.reshape(decl.shape)
    return a


def estimate(kernel) -> tuple[float, int]:
    """(expected seconds of the eager reference, bytes of all tensors) of a kernel."""
    from solar_compiler.analysis.polyhedral import iteration_count
    from solar_compiler.loopir.ast import Binary, Read, statements

    secs = 0.0
    for ctx in statements(kernel):
        v = ctx.stmt.value
        matrix = ctx.stmt.kind == "+=" and isinstance(v, Binary) and v.fn == "mul" and \
            isinstance(v.a, Read) and isinstance(v.b, Read)
        secs += iteration_count(ctx) / (MATRIX_RATE if matrix else VECTOR_RATE)
    return secs, sum(t.nbytes for t in kernel.tensors)


def shrink(value: int, factor: int) -> int:
    """`value / g` for the largest power of two g <= factor dividing it with a result >= MIN_REDUCED."""
    if value < REDUCIBLE:
        return value
    g = factor
    while g > 1 and (value % g or value // g < MIN_REDUCED):
        g //= 2
    return value // g


def reduce_instance(spec, prog, tt, options: FrontendOptions):
    """(overrides, spec, program, translation) of the mildest reduction that fits the budget and is
    the same program as the full-size one, or a string saying why there is none."""
    from solar_compiler.frontends.model_file import ModelFileError
    from solar_compiler.loopir.same_program import same_program

    from .capture import CaptureError, capture
    from .translate import translate_program

    sizes = dict(spec.size_constants)
    if not any(v >= REDUCIBLE for v in sizes.values()):
        return "the file has no module-level size constant to scale down"
    why = "no reduction of its size constants fits the budget"
    seen: list[dict[str, int]] = []
    factor = 2
    while factor <= 2**16:
        ov = {k: shrink(v, factor) for k, v in sizes.items()}
        ov = {k: v for k, v in ov.items() if v != sizes[k]}
        factor *= 2
        if not ov or ov in seen:
            continue
        seen.append(ov)
        try:
            spec_r = spec.with_sizes(ov)
            prog_r = capture(spec_r, mode=options.mode)
            tt_r = translate_program(prog_r, kernel_name=tt.kernel.name)
        except (ModelFileError, CaptureError, SolarError) as e:
            why = f"the reduced instance {ov} does not build ({' '.join(str(e).split())[:160]})"
            continue
        secs, nbytes = estimate(tt_r.kernel)
        if secs > options.time_budget or nbytes > options.memory_budget_gb * 2**30:
            continue
        diff = same_program(tt.kernel, tt_r.kernel)
        if diff is not None:
            why = f"the reduced instance {ov} is a different program ({diff})"
            continue
        return ov, spec_r, prog_r, tt_r
    return why


# ---- cache ---------------------------------------------------------------------------------------
def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "solar-opt" / "translations"


# shared modules whose code shapes a translation, relative to the solar_compiler package: the loop-IR
# rewrites (simplification, random-draw stripping, the reduced-size check), the captured program and
# the builder the templates emit with
_SHARED_SOURCES = ("loopir/simplify.py", "loopir/rewrite.py", "loopir/same_program.py",
                   "frontends/program.py", "frontends/builder/*.py")


def _frontend_fingerprint() -> str:
    """FRONTEND_VERSION plus the frontend's own source and the loop-IR rewrites it uses, so an edited
    template or simplification invalidates the cache."""
    h = hashlib.sha256(FRONTEND_VERSION.encode())
    root = Path(__file__).parent
    for p in sorted(root.rglob("*.py")):
        h.update(p.relative_to(root).as_posix().encode())
        h.update(p.read_bytes())
    package = root.parent.parent
    for pattern in _SHARED_SOURCES:
        for p in sorted(package.glob(pattern)):
            h.update(p.relative_to(package).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def cache_key(path: str, options: FrontendOptions) -> str:
    from importlib.metadata import version

    try:
        source = Path(path).read_bytes()
    except OSError as e:
        raise SolarError(f"{path}:1: cannot read file: {e.strerror}") from None
    h = hashlib.sha256()
    opts = (options.mode, options.validate, options.time_budget, options.memory_budget_gb)
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
