"""Does an executed kernel reproduce a reference? Dtype-aware tolerances on the relative norm error.

A float output passes when ||got - ref||_2 / ||ref||_2 <= tolerance over the positions where
the reference is finite, and got is finite there too (a NaN from a never-written element is a
failure however small the norm error); where the reference is NaN or infinite, got must match it.
Integer and bool outputs must be equal, except an index output of an op whose order among tied
values is unspecified (`topk`, an unstable `sort`, ...), which must be a valid choice among ties
(`executor/ties.py`, `ties=`). f8 tolerances follow from 2-3 mantissa bits.

The tolerance of an output is the dtype's (`TOLERANCE`: rounding of the result) plus the summation
error of the accumulations that feed it (`summation_tolerances`): 2 u E, with u the unit roundoff
of the accumulation type and E the largest sum of sqrt(terms) over a chain of accumulations; the
derivation (the probabilistic forward-error bound of floating-point summation) is in
docs/torch-frontend.md, "Tolerances".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from solar_compiler.executor.ties import Tie, check
from solar_compiler.loopir.ast import DTYPES, FLOAT_DTYPES, Kernel, LoopIRError, statements, stmt_reads

TOLERANCE = {"f64": 1e-10, "f32": 1e-4, "f16": 1e-2, "bf16": 1e-2, "f8e4m3": 1e-1, "f8e5m2": 1e-1,
             "f4e2m1": 2.5e-1}
UNIT_ROUNDOFF = {"f64": 2.0**-53, "f32": 2.0**-24}  # f16/bf16/f8 accumulate in f32 (torch CPU, executor)


@dataclass(frozen=True)
class Comparison:
    max_rel_err: float
    ok: bool
    first_mismatch: str | None  # `name[i, j]: got x, expected y (...)` of the first failing output
    # index output -> positions where it differs from the reference's at tied values (`ties`)
    tie_choices: dict[str, int] = field(default_factory=dict)


def output_dtypes(kernel: Kernel) -> dict[str, str]:
    return {t.name: t.dtype for t in kernel.by_role("output")}


def compare(reference: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray],
            dtypes: Mapping[str, str], *, tolerances: Mapping[str, float] | None = None,
            positions: Mapping[str, np.ndarray] | None = None,
            ties: Mapping[str, Tie] | None = None) -> Comparison:
    """Compare every output of `reference` with `got`; `dtypes` maps names to loop-IR dtypes.
    `tolerances` overrides the dtype's relative norm tolerance per output (one grown with the
    reduction length, frontends/torch/validation.py); `positions[name]` (rows of indices) says where
    each element of a 1-d sample of an output lies, for the message. `ties[name]` makes an integer
    output an index output whose tie order is unspecified (`executor/ties.py`): the op's input
    (`ties[name].input`, compared here as an output of its own) shows which differing indices tie."""
    worst, first = 0.0, None
    chosen: dict[str, int] = {}
    for name, ref in reference.items():
        if name not in dtypes or dtypes[name] not in DTYPES:
            raise LoopIRError(f"no loop-IR dtype given for output '{name}'")
        tol = (tolerances or {}).get(name)
        pos = None if positions is None else positions.get(name)
        tie = (ties or {}).get(name)
        if tie is not None and dtypes[name] not in FLOAT_DTYPES and tie.input in reference \
                and tie.input in got:
            err, msg, chosen[name] = _tie_one(name, np.asarray(ref), got.get(name), tie, reference, got,
                                              positions)
        else:
            err, msg = _one(name, np.asarray(ref), got.get(name), dtypes[name], tol, pos)
        worst = max(worst, err)
        if msg is not None and first is None:
            first = msg
    chosen = {k: v for k, v in chosen.items() if v}
    if first is not None and chosen and ties is not None:
        choices = "; ".join(f"{ties[k].what} chose other indices than the reference among tied values at "
                            f"{v} position(s) of {k}" for k, v in chosen.items())
        first += f" (after {choices}: an output computed from that choice need not equal the reference's)"
    return Comparison(worst, first is None, first, chosen)


def _tie_one(name: str, ref: np.ndarray, got: np.ndarray | None, tie: Tie,
             reference: Mapping[str, np.ndarray], every: Mapping[str, np.ndarray],
             positions: Mapping[str, np.ndarray] | None) -> tuple[float, str | None, int]:
    """`_one` for an index output with a tie rule: (error, message, positions excused as ties: none
    when it fails)."""
    if got is None or np.shape(got) != ref.shape:
        return (*_one(name, ref, got, "i64"), 0)
    got = np.asarray(got)
    if np.array_equal(ref, got):
        return 0.0, None, 0
    pos = None if positions is None else positions.get(name)
    xpos = None if positions is None else positions.get(tie.input)
    v = check(tie, ref, got, np.asarray(reference[tie.input]), np.asarray(every[tie.input]), pos, xpos)
    if v.first is None:
        return 0.0, None, v.differ
    r, x = ref.astype(np.float64).reshape(-1), got.astype(np.float64).reshape(-1)
    err = float(np.linalg.norm(x - r) / max(np.linalg.norm(r), 1.0))
    i = v.first
    return err, (f"{_at(name, ref.shape, i, pos)}: got {got.reshape(-1)[i]}, expected {ref.reshape(-1)[i]} "
                 f"({tie.what}: {v.why})"), 0


def _at(name: str, shape: tuple[int, ...], flat: int, pos: np.ndarray | None = None) -> str:
    if pos is not None:
        return f"{name}[{', '.join(str(int(i)) for i in pos[flat])}]" if pos.shape[1] else name
    return f"{name}[{', '.join(str(int(i)) for i in np.unravel_index(flat, shape))}]" if shape else name


def _one(name: str, ref: np.ndarray, got: np.ndarray | None, dtype: str, tol: float | None = None,
         pos: np.ndarray | None = None) -> tuple[float, str | None]:
    if got is None:
        return math.inf, f"{name}: missing from the result"
    got = np.asarray(got)
    if got.shape != ref.shape:
        return math.inf, f"{name}: shape {got.shape}, expected {ref.shape}"
    if ref.size == 0:
        return 0.0, None
    if dtype in FLOAT_DTYPES and _all_finite(ref) and _all_finite(got):
        return _finite(name, ref, got, dtype, tol, pos)
    r, x = ref.astype(np.float64).reshape(-1), got.astype(np.float64).reshape(-1)
    if dtype not in FLOAT_DTYPES:
        diff = np.flatnonzero(r != x)
        if not diff.size:
            return 0.0, None
        err = float(np.linalg.norm(x - r) / max(np.linalg.norm(r), 1.0))
        i = int(diff[0])
        return err, f"{_at(name, ref.shape, i, pos)}: got {got.reshape(-1)[i]}, expected {ref.reshape(-1)[i]}"
    fin = np.isfinite(r)
    same_special = (np.isnan(r) & np.isnan(x)) | (r == x)
    bad = np.flatnonzero((~fin & ~same_special) | (fin & ~np.isfinite(x)))
    if bad.size:
        i = int(bad[0])
        return math.inf, f"{_at(name, ref.shape, i, pos)}: got {x[i]}, expected {r[i]}"
    return _norm_error(name, ref.shape, r[fin], x[fin] - r[fin], np.flatnonzero(fin), x, r, dtype, tol, pos)


def _all_finite(a: np.ndarray) -> bool:
    """No NaN or infinity in real `a`, without a mask of its size: its sum in float64 is finite only
    then (a NaN or an infinity propagates; a sum that overflows says no, and the caller checks
    element by element)."""
    if a.dtype.kind in "iub":
        return True
    if a.dtype.kind != "f":
        return False
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN: a no, said quietly
        return bool(np.isfinite(np.add.reduce(a.reshape(-1), dtype=np.float64)))


def _finite(name: str, ref: np.ndarray, got: np.ndarray, dtype: str, tol: float | None,
            pos: np.ndarray | None) -> tuple[float, str | None]:
    """`_one` where both arrays are finite everywhere: the same norms from two float64 copies, with
    none of the masks (a value widens to float64 exactly, so the difference is the same)."""
    r = ref.astype(np.float64).reshape(-1)
    d = got.astype(np.float64).reshape(-1)
    d -= r
    return _norm_error(name, ref.shape, r, d, None, got.reshape(-1), ref.reshape(-1), dtype, tol, pos)


def _norm_error(name: str, shape: tuple[int, ...], rf: np.ndarray, d: np.ndarray, finite: np.ndarray | None,
                x: np.ndarray, r: np.ndarray, dtype: str, tol: float | None,
                pos: np.ndarray | None) -> tuple[float, str | None]:
    """||d|| / ||rf|| over the finite reference elements (at flat positions `finite` of `x` and `r`,
    None for all) and, above the tolerance, the message naming the first element whose error is
    above its share of it."""
    ref_norm = float(np.linalg.norm(rf))
    err = float(np.linalg.norm(d)) / max(ref_norm, np.finfo(np.float64).tiny)
    tol = TOLERANCE[dtype] if tol is None else tol
    if err <= tol:
        return err, None
    big = np.flatnonzero(np.abs(d) > tol * ref_norm / math.sqrt(rf.size))
    j = int(big[0] if big.size else np.argmax(np.abs(d)))
    i = j if finite is None else int(finite[j])
    return err, (f"{_at(name, shape, i, pos)}: got {float(x[i]):.9g}, expected {float(r[i]):.9g} "
                 f"(relative norm error {err:.3g} > {tol:.3g} for {dtype})")


# ---- tolerances grown by summation length -----------------------------------------------------------
def loop_extents(loops) -> dict[str, int]:
    """Iterations of each loop over the hull of its bounds (outer loops at their extremes)."""
    ranges: dict[str, tuple[int, int]] = {}
    out: dict[str, int] = {}
    for f in loops:
        lo, hi = f.lb.bounds(ranges)[0], f.ub.bounds(ranges)[1]
        out[f.iv] = max(0, -(-(hi - lo) // f.step))
        ranges[f.iv] = (lo, max(lo, hi - 1))
    return out


def summation_lengths(kernel: Kernel) -> dict[str, float]:
    """Per output, E = the largest sum of sqrt(n) over a chain of statements that feeds it, where a
    statement contributes sqrt(n) for the n terms it accumulates into one element (`+=`, `*=`: the
    extents of the loops its target does not index) and sqrt(T) for every scan loop of length T
    around it (a recurrence accumulates one rounding per step)."""
    err: dict[str, float] = {}
    for ctx in statements(kernel):
        s = ctx.stmt
        ext = loop_extents(ctx.loops)
        own = 0.0
        if s.kind in ("+=", "*="):
            used = {v for i in s.indices for v in (i.vars() if hasattr(i, "vars") else ())}
            own += math.sqrt(math.prod(max(1, ext[f.iv]) for f in ctx.loops
                                       if f.iv not in used and not f.sequential))
        own += sum(math.sqrt(max(1, ext[f.iv])) for f in ctx.loops if f.sequential)
        upstream = max((err.get(r.tensor, 0.0) for r in stmt_reads(s)), default=0.0)
        err[s.target] = max(err.get(s.target, 0.0), upstream + own)
    return {t.name: err.get(t.name, 0.0) for t in kernel.by_role("output")}


def summation_tolerances(kernel: Kernel) -> dict[str, float]:
    """Per float output: TOLERANCE[dtype] + 2 u E (module doc)."""
    lengths = summation_lengths(kernel)
    out = {}
    for t in kernel.by_role("output"):
        if t.dtype in TOLERANCE:
            u = UNIT_ROUNDOFF["f64" if t.dtype == "f64" else "f32"]
            out[t.name] = TOLERANCE[t.dtype] + 2 * u * lengths[t.name]
    return out
