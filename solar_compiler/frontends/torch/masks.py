"""Constant mask buffers recognised as affine regions of their indices.

A causal mask registered as a buffer (`register_buffer("bias", torch.tril(torch.ones(T, T)))`) is a
weight of the captured program, so its reads are data and needed-work narrowing cannot see the
triangle. When the buffer is not a parameter (learned values change; a buffer's are fixed when the
model is built), its values are the same for every construction seed, and they are 0/1 (or bool)
with the ones exactly a band `i >= j - hi` and/or `i <= j - lo` over its two non-unit dimensions
(a triangle: one side; an identity: `lo = hi = 0`; a banded attention mask `tril(ones) -
tril(ones, -128)`: both), every read of it is replaced by that comparison of the read's index
expressions. The buffer is then not read: a
real implementation computes such a mask from indices. Validation still feeds and checks it (the
translation is compared against the model, whose mask is the buffer itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from solar_compiler.errors import SolarError
from solar_compiler.frontends.captured_program import CapturedProgram, TensorMeta
from solar_compiler.frontends.model_file import ModelFileError, ModelSpec, load_model_file
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Cmp, Index, IndexValue, Read, Select, SExpr
from solar_compiler.loopir.simplify import literal

from .capture.util import REAL_RUN_LIMIT_BYTES, build_model, nbytes, quiet, resolve_attr, to_numpy

SEEDS = (0, 1)  # construction seeds whose buffer values must agree (0: the one validation uses)


@dataclass(frozen=True)
class AffineMask:
    """Ones exactly where `lo <= idx[col] - idx[row] <= hi` (None: that side unbounded)."""

    weight: str
    source: str
    shape: tuple[int, ...]
    dtype: str
    row: int
    col: int
    hi: int | None
    lo: int | None

    def region(self) -> str:
        def side(op: str, offset: int) -> str:
            off = f" + {offset}" if offset > 0 else f" - {-offset}" if offset < 0 else ""
            return f"i {op} j{off}"
        sides = ([side(">=", -self.hi)] if self.hi is not None else []) + \
            ([side("<=", -self.lo)] if self.lo is not None else [])
        return " and ".join(sides)

    def note(self) -> str:
        return (f"mask buffer '{self.source}' {list(self.shape)} recognised as affine region "
                f"{self.region()} (i, j: dims {self.row}, {self.col}); computed from indices, not read")

    def read(self, idx: Sequence[Index]) -> SExpr:
        i, j = idx[self.row], idx[self.col]
        if not (isinstance(i, AffExpr) and isinstance(j, AffExpr)):  # a gather from the mask
            return Read(self.weight, tuple(idx), self.dtype)
        conds = []
        if self.hi is not None:
            conds.append(Cmp("ge", IndexValue(i), IndexValue(j - self.hi), "bool"))
        if self.lo is not None:
            conds.append(Cmp("le", IndexValue(i), IndexValue(j - self.lo), "bool"))
        one, zero = (literal(True, "bool"), literal(False, "bool")) if self.dtype == "bool" else \
            (literal(1, self.dtype), literal(0, self.dtype))
        value: SExpr = one
        for cond in reversed(conds):  # nested selects: both sides must hold
            value = Select(cond, value, zero, self.dtype)
        return conds[0] if self.dtype == "bool" and len(conds) == 1 else value


def recognise(values: np.ndarray) -> tuple[int | None, int | None] | None:
    """(hi, lo) when the 2-D 0/1 array `values` is ones exactly on the band `lo <= j - i <= hi`
    (None: that side is the array's edge), with both values present; None otherwise."""
    if values.ndim != 2 or not np.isin(values, (0, 1)).all():
        return None
    ones = values != 0
    if ones.all() or not ones.any():
        return None
    d = np.arange(values.shape[1])[None, :] - np.arange(values.shape[0])[:, None]  # j - i
    hi, lo = int(d[ones].max()), int(d[ones].min())
    if not np.array_equal(ones, (d <= hi) & (d >= lo)):
        return None
    return (None if hi >= int(d.max()) else hi), (None if lo <= int(d.min()) else lo)


def _candidate(meta: TensorMeta) -> tuple[int, int] | None:
    """The two non-unit dimensions of a weight that could be a 2-D mask."""
    dims = [d for d, n in enumerate(meta.shape) if n != 1]
    if len(dims) != 2 or meta.dtype not in ("bool", "f64", "f32", "bf16", "f16", "i64", "i32", "i8"):
        return None
    return dims[0], dims[1]


def affine_masks(program: CapturedProgram) -> list[AffineMask]:
    """The program's constant mask buffers that are affine regions (see the module doc)."""
    cands = {w.name: (w, rc) for w in program.weights if (rc := _candidate(w)) is not None}
    if not cands:
        return []
    src = {n: program.weight_sources.get(n, n) for n in cands}
    values = {n: program.constants[n] for n in cands if src[n].startswith("const:")}
    buffers = {n: src[n] for n in cands if n not in values and not src[n].startswith("global:")}
    if buffers:
        values.update(_buffer_values(program, buffers))
    out: list[AffineMask] = []
    for name, v in values.items():
        meta, (r, c) = cands[name]
        got = recognise(np.asarray(v).reshape(meta.shape[r], meta.shape[c]))
        if got is not None:
            out.append(AffineMask(name, program.weight_sources.get(name, name), tuple(meta.shape), meta.dtype,
                                  r, c, *got))
    return out


def _buffer_values(program: CapturedProgram, buffers: dict[str, str]) -> dict[str, np.ndarray]:
    """Values of the weights `buffers` (name -> attribute path) that are buffers, not parameters,
    and come out the same for every construction seed; the model is built for real only when it
    has such a buffer and its tensors fit the capture's real-run limit."""
    spec = _spec(program)
    with quiet():
        model, sample = build_model(spec, program.mode, FakeTensorMode())
    params = {n for n, _ in model.named_parameters()}
    kept = {n: fqn for n, fqn in buffers.items()
            if fqn not in params and fqn in {b for b, _ in model.named_buffers()}}
    size = nbytes(sample) + nbytes(model.parameters()) + nbytes(model.buffers())
    del model, sample
    if not kept or size > REAL_RUN_LIMIT_BYTES:
        return {}
    runs: list[dict[str, np.ndarray | None]] = []
    for seed in SEEDS:
        with torch.random.fork_rng(), quiet():
            torch.manual_seed(seed)
            model, _ = build_model(spec, program.mode, None)
            runs.append({n: None if (t := resolve_attr(model, fqn)) is None else to_numpy(t)
                         for n, fqn in kept.items()})
            del model
    out: dict[str, np.ndarray] = {}
    for n in kept:
        vs = [r[n] for r in runs]
        if all(v is not None for v in vs) and all(np.array_equal(vs[0], v) for v in vs[1:]):
            out[n] = vs[0]  # type: ignore[assignment]
    return out


def _spec(program: CapturedProgram) -> ModelSpec:
    """The model file of `program` at the sizes it was captured with."""
    try:
        spec = load_model_file(program.source)
        over = {k: v for k, v in program.size_constants.items() if spec.size_constants.get(k) != v}
        return spec.with_sizes(over) if over else spec
    except ModelFileError as e:
        raise SolarError(str(e), error_class=e.error_class) from None
