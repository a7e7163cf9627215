"""Constant buffers recognised as affine regions of their indices.

A causal mask registered as a buffer (`register_buffer("bias", torch.tril(torch.ones(T, T)))`) is a
weight of the captured program, so its reads are data and needed-work narrowing cannot see the
triangle. When the buffer is not a parameter (learned values change; a buffer's are fixed when the
model is built) nor a normalisation layer's running statistics (state a checkpoint overwrites), its
values are the same for every construction seed, and over its two non-unit dimensions (i, j) they
are

* one value everywhere (a zeros or ones buffer): every read is that literal;
* two values, one of them exactly on a *block band* `lo <= j // bc - i // br <= hi` and the other
  elsewhere: with blocks of 1 x 1 a band (a triangle: one side; an identity `eye(n)`: `lo = hi =
  0`; a banded attention mask `tril(ones) - tril(ones, -128)`: both), with larger blocks a block
  mask (block-diagonal: `lo = hi = 0`; block-causal: one side; a row or column stripe). The values
  need not be 0/1: an additive mask of 0 and -inf, a scaled identity. Every read is the comparison
  of the read's index expressions, selecting between the two values. A read of a diagonal at a
  loaded position (`eye(n)[labels]`, the one-hot idiom) is the equality of the loaded index and
  the other one, which the catalogue's one-hot entry then prices as a gather;
* any values on a block band and 0 elsewhere (a diagonal, a block-diagonal or a triangular matrix
  of random values): the zeros are fixed when the model is built even where the values change with
  the seed, so every read is the buffer's own value inside the band and 0 outside, and the buffer is
  read only there.

The buffer is then not read (the last kind: only inside its band): a real implementation computes
such a buffer from indices (FlashAttention's causal, local and block-sparse masks). Validation
still feeds and checks it (the translation is compared against the model, whose buffer is the
buffer itself).

A 0/1 buffer that is none of these but has exactly one 1 in each column (or in each row): a
*selection* matrix, a permutation among them (a channel shuffle or a feature reordering written as a
product with a constant matrix), is the indicator of a key per column: `P[i, j] = [i == key[j]]`.
Every read is that comparison against a table of keys (`OneHotBuffer`; an integer per column, not
a row of the matrix), which the catalogue's one-hot entry then prices as a gather (`x @ P` reads
`x[:, key]`). The table is a weight of the priced kernel; the validation kernel computes it from the
buffer it is fed (`key[j] = sum_i i [P[i, j] != 0]`), so a buffer that is not one-hot for the fed
values fails validation instead of being priced wrong.

A Sylvester Hadamard matrix (any scale) is computed from its indices' bits, and its products are
fast Walsh-Hadamard transforms (`hadamard.py`). A buffer that is none of these may still be computed
from its indices or be a table of fewer dimensions (any number of dimensions: `buffer_tables.py`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from solar_compiler.errors import SolarError
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop
from solar_compiler.frontends.captured_program import CapturedProgram, TensorMeta
from solar_compiler.frontends.model_file import ModelFileError, ModelSpec, load_model_file
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Cast, Cmp, Index, IndexValue, Read, Select, SExpr
from solar_compiler.loopir.simplify import literal

from .buffer_tables import AffineValues, TableBuffer, constant_ends, recognise_affine, recognise_table
from .capture.util import (
    REAL_RUN_LIMIT_BYTES,
    build_model,
    nbytes,
    parameters_on_meta,
    quiet,
    resolve_attr,
    to_numpy,
)
from .constant_buffers import ConstantBuffer
from .hadamard import HadamardBuffer, recognise_hadamard

SEEDS = (0, 1)  # construction seeds whose buffer values must agree (0: the one validation uses)


@dataclass(frozen=True)
class AffineMask(ConstantBuffer):
    """`inside` exactly where `lo <= idx[col] // block[1] - idx[row] // block[0] <= hi` (None: that
    side unbounded), `outside` elsewhere; `uniform`: `inside` everywhere (row, col unused)."""

    hi: int | None
    lo: int | None
    block: tuple[int, int] = (1, 1)
    inside: bool | int | float = 1
    outside: bool | int | float = 0
    uniform: bool = False
    #: the buffer's own values inside (read there), `outside` (0) elsewhere: a diagonal or a
    #: block-diagonal buffer of any values, whose zeros are fixed when the model is built
    data: bool = False

    def region(self) -> str:
        if self.uniform:
            return "everywhere"
        br, bc = self.block
        i, j = ("i" if br == 1 else f"i // {br}"), ("j" if bc == 1 else f"j // {bc}")

        def side(op: str, offset: int) -> str:
            off = f" + {offset}" if offset > 0 else f" - {-offset}" if offset < 0 else ""
            return f"{i} {op} {j}{off}"
        sides = ([side(">=", -self.hi)] if self.hi is not None else []) + \
            ([side("<=", -self.lo)] if self.lo is not None else [])
        return " and ".join(sides)

    def note(self) -> str:
        if self.uniform:
            return (f"constant buffer '{self.source}' {list(self.shape)} is {_value(self.inside)} "
                    "everywhere; a literal, not read")
        if self.data:
            return (f"buffer '{self.source}' {list(self.shape)} is {_value(self.outside)} outside affine "
                    f"region {self.region()} (i, j: dims {self.row}, {self.col}); read there only")
        values = "" if (self.inside, self.outside) in ((1, 0), (True, False)) else \
            f" ({_value(self.inside)} there, {_value(self.outside)} elsewhere)"
        kind = "mask buffer" if not values else "constant buffer"
        return (f"{kind} '{self.source}' {list(self.shape)} recognised as affine region "
                f"{self.region()}{values} (i, j: dims {self.row}, {self.col}); computed from indices, "
                "not read")

    def read(self, idx: Sequence[Index]) -> SExpr:
        if self.uniform:
            return literal(self.inside, self.dtype)
        i, j = idx[self.row], idx[self.col]
        if not (isinstance(i, AffExpr) and isinstance(j, AffExpr)):  # a gather from the mask
            return Read(self.weight, tuple(idx), self.dtype) if self.data else self._gathered(i, j, idx)
        br, bc = self.block
        if (br > 1 and i.is_quasi()) or (bc > 1 and j.is_quasi()):
            return Read(self.weight, tuple(idx), self.dtype)  # a division of a division: read as data
        i, j = (i // br if br > 1 else i), (j // bc if bc > 1 else j)
        conds = []
        if self.hi is not None:
            conds.append(Cmp("ge", IndexValue(i), IndexValue(j - self.hi), "bool"))
        if self.lo is not None:
            conds.append(Cmp("le", IndexValue(i), IndexValue(j - self.lo), "bool"))
        one: SExpr = Read(self.weight, tuple(idx), self.dtype) if self.data else \
            literal(self.inside, self.dtype)
        zero = literal(self.outside, self.dtype)
        value: SExpr = one
        for cond in reversed(conds):  # nested selects: both sides must hold
            value = Select(cond, value, zero, self.dtype)
        if self.dtype == "bool" and len(conds) == 1 and self.inside is True and not self.data:
            return conds[0]
        return value


    def _gathered(self, i: Index, j: Index, idx: Sequence[Index]) -> SExpr:
        """A read at a loaded position of a diagonal (`eye(n)[labels]`, the one-hot idiom): the
        equality of the two positions, the loaded one as read. Any other band read at a loaded
        position stays a read of the buffer."""
        if self.block != (1, 1) or self.hi != 0 or self.lo != 0:
            return Read(self.weight, tuple(idx), self.dtype)
        a, b = (_position(x) for x in (i, j))
        cond = Cmp("eq", a, b, "bool")
        if self.dtype == "bool" and self.inside is True:
            return cond
        return Select(cond, literal(self.inside, self.dtype), literal(self.outside, self.dtype), self.dtype)


@dataclass(frozen=True)
class OneHotBuffer(ConstantBuffer):
    """A 0/1 buffer with exactly one 1 per column (`axis` "col": `keys[j]` is the row of column j's 1)
    or per row (`axis` "row": `keys[i]` is the column of row i's 1), over dims `row` and `col`."""

    axis: str
    keys: np.ndarray

    def read_with(self, table: str) -> Callable[[Sequence[Index]], SExpr]:
        """A reader of the buffer as the comparison of an index with `table`, the keys' tensor."""
        def read(idx: Sequence[Index]) -> SExpr:
            i, j = idx[self.row], idx[self.col]
            pos, at = (i, j) if self.axis == "col" else (j, i)
            cond = Cmp("eq", _position(pos), Read(table, (at,), "i64"), "bool")
            if self.dtype == "bool":
                return cond
            return Select(cond, literal(1, self.dtype), literal(0, self.dtype), self.dtype)
        return read

    def note(self, table: str) -> str:
        per = "column" if self.axis == "col" else "row"
        return (f"selection buffer '{self.source}' {list(self.shape)} has one 1 per {per}: read as the "
                f"comparison with its keys '{table}' ({len(self.keys)} i64), not as a matrix")


def bind_selection(tr: Translator, hot: OneHotBuffer, buffer: str) -> str:
    """Declare the keys' table of `hot` (kernel tensor `buffer`) as a weight of the priced kernel, and
    emit into the validation prologue the statements that compute it from the buffer, `key[j] =
    sum_i i [P[i, j] != 0]`; returns the table's name (`TorchTranslation.computed_weights`)."""
    n = hot.shape[hot.col if hot.axis == "col" else hot.row]
    table = tr.declare(f"{hot.weight}_keys", (n,), "i64", role="weight")
    first, count, loc = len(tr.body), tr.n_statements, tr.loc
    tr.loc = hot.source
    at, over = Loop("k0", 0, n), Loop("k1", 0, hot.shape[hot.row if hot.axis == "col" else hot.col])
    idx: list[Index] = [AffExpr.lit(0)] * len(hot.shape)
    idx[hot.row if hot.axis == "col" else hot.col] = AffExpr.var("k1")
    idx[hot.col if hot.axis == "col" else hot.row] = AffExpr.var("k0")
    k0 = (AffExpr.var("k0"),)
    tr.emit(table, k0, "=", literal(0, "i64"), [at])
    one = Cmp("ne", Read(buffer, tuple(idx), hot.dtype), literal(0, hot.dtype), "bool")
    tr.emit(table, k0, "+=", Select(one, IndexValue(AffExpr.var("k1")), literal(0, "i64"), "i64"), [at, over])
    tr.validation_prologue.extend(tr.body[first:])
    del tr.body[first:]
    tr.n_statements, tr.loc = count, loc
    return table.name


def recognise_one_hot(values: np.ndarray, prefer: str = "col") -> tuple[str, np.ndarray] | None:
    """(axis, keys) when the 2-D 0/1 (or bool) array `values` has exactly one 1 in each column
    ("col") or in each row ("row"); a permutation has both, and gets `prefer`."""
    if values.ndim != 2 or min(values.shape) < 2 or not np.isin(values, (0, 1)).all():
        return None
    ones = values != 0
    by_col, by_row = bool((ones.sum(axis=0) == 1).all()), bool((ones.sum(axis=1) == 1).all())
    if not (by_col or by_row):
        return None
    axis = prefer if by_col and by_row else "col" if by_col else "row"
    return axis, (ones.argmax(axis=0) if axis == "col" else ones.argmax(axis=1)).astype(np.int64)


def _position(x: Index) -> SExpr:
    """An index position as an i64 value: an affine one as its value, a loaded one widened."""
    if isinstance(x, AffExpr):
        return IndexValue(x)
    return x if x.typed() == "i64" else Cast(x, "i64")


def _value(v: bool | int | float) -> str:
    return str(v) if not isinstance(v, float) or not v.is_integer() else str(int(v))


def recognise(values: np.ndarray) -> tuple[int | None, int | None] | None:
    """(hi, lo) when the 2-D 0/1 array `values` is ones exactly on the band `lo <= j - i <= hi`
    (None: that side is the array's edge), with both values present; None otherwise."""
    if values.ndim != 2 or not np.isin(values, (0, 1)).all():
        return None
    ones = values != 0
    if ones.all() or not ones.any():
        return None
    return _band(ones)


def _band(ones: np.ndarray) -> tuple[int | None, int | None] | None:
    d = np.arange(ones.shape[1])[None, :] - np.arange(ones.shape[0])[:, None]  # j - i
    hi, lo = int(d[ones].max()), int(d[ones].min())
    if not np.array_equal(ones, (d <= hi) & (d >= lo)):
        return None
    return (None if hi >= int(d.max()) else hi), (None if lo <= int(d.min()) else lo)


def _blocks(axis_changes: np.ndarray, n: int) -> int:
    """The coarsest block size whose boundaries include every position where the values change."""
    where = np.flatnonzero(axis_changes) + 1
    return int(np.gcd.reduce(where)) if where.size else n


def recognise_block_band(region: np.ndarray) -> tuple[tuple[int, int], int | None, int | None] | None:
    """((br, bc), hi, lo) when the 2-D bool array `region` (some true, some false) is true exactly on
    `lo <= j // bc - i // br <= hi`; None otherwise. The blocks are the coarsest ones the values are
    constant on (every change of a row or column falls on a block boundary)."""
    band = _band(region)
    if band is not None:
        return ((1, 1), *band)
    n, m = region.shape
    br = _blocks((region[1:] != region[:-1]).any(axis=1), n)
    bc = _blocks((region[:, 1:] != region[:, :-1]).any(axis=0), m)
    coarse = region[::br, ::bc]
    if (br, bc) == (1, 1) or not np.array_equal(region, np.repeat(np.repeat(coarse, br, 0), bc, 1)[:n, :m]):
        return None
    got = _band(coarse)
    return None if got is None else ((br, bc), *got)


Region = tuple[tuple[int, int], int | None, int | None, object, object]


def recognise_constant(values: np.ndarray) -> Region | None:
    """((br, bc), hi, lo, inside, outside) for a 2-D array of two values, one of them (`inside`) exactly
    on a block band; for a 0/1 or bool array `inside` is the 1 (True) where both orders fit."""
    if values.ndim != 2 or values.dtype.kind == "f" and np.isnan(values).any():
        return None
    distinct = np.unique(values)
    if len(distinct) != 2:
        return None
    a, b = distinct
    counts = {a: int((values == a).sum()), b: int((values == b).sum())}
    order = [b, a] if values.dtype == bool or (a, b) == (0, 1) else sorted((a, b), key=counts.get)
    for inside in order:
        outside = a if inside == b else b
        got = recognise_block_band(values == inside)
        if got is not None:
            return (*got, inside.item(), outside.item())
    return None


_RUNNING_STATS = (".running_mean", ".running_var")
_MASK_DTYPES = ("bool", "f64", "f32", "bf16", "f16", "i64", "i32", "i8")


def _candidate(meta: TensorMeta) -> tuple[int, int] | None:
    """The two non-unit dimensions of a weight that could be a 2-D mask."""
    dims = [d for d, n in enumerate(meta.shape) if n != 1]
    if len(dims) != 2 or meta.dtype not in _MASK_DTYPES:
        return None
    return dims[0], dims[1]


Recognised = AffineMask | OneHotBuffer | HadamardBuffer | AffineValues | TableBuffer


def affine_masks(program: CapturedProgram) -> list[Recognised]:
    """The program's constant buffers that are one value, affine regions or selection matrices (see
    the module doc), or else affine values of their indices or tables of fewer dimensions
    (`buffer_tables.py`)."""
    cands = {w.name: (w, _candidate(w)) for w in program.weights
             if _candidate(w) is not None or _values_candidate(w)}
    if not cands:
        return []
    src = {n: program.weight_sources.get(n, n) for n in cands}
    values = {n: program.constants[n] for n in cands if src[n].startswith("const:")}
    buffers = {n: src[n] for n in cands if n not in values and not src[n].startswith("global:")
               and not src[n].endswith(_RUNNING_STATS)}  # `_state`'s, named: no build for them alone
    nonzero: dict[str, np.ndarray] = {}
    if buffers:
        fixed, nonzero = _buffer_values(program, buffers)
        values.update(fixed)
    out: list[Recognised] = []
    for name, nz in nonzero.items():
        meta, rc = cands[name]
        if rc is None:
            continue
        r, c = rc
        zeros = _zeros_outside(np.asarray(nz).reshape(meta.shape[r], meta.shape[c]))
        if zeros is not None:
            out.append(AffineMask(name, program.weight_sources.get(name, name), tuple(meta.shape), meta.dtype,
                                  r, c, zeros[1], zeros[2], zeros[0], outside=0, data=True))
    for name, v in values.items():
        meta, rc = cands[name]
        where = program.weight_sources.get(name, name)
        got_mask = _mask(program, name, where, meta, rc, np.asarray(v)) if rc else None
        if got_mask is not None:
            out.append(got_mask)
            continue
        if not _values_candidate(meta):
            continue
        values_nd = np.asarray(v).reshape(meta.shape)
        lin = recognise_affine(values_nd)
        if lin is not None:
            out.append(AffineValues(name, where, tuple(meta.shape), meta.dtype, *lin))
            continue
        table = recognise_table(values_nd)
        if table is not None:
            ends = constant_ends(values_nd, table[1]) if table[1] is not None else (None, None)
            out.append(TableBuffer(name, where, tuple(meta.shape), meta.dtype, *table, *ends))
    return out


def _mask(program: CapturedProgram, name: str, where: str, meta: TensorMeta, rc: tuple[int, int],
          v: np.ndarray) \
        -> AffineMask | OneHotBuffer | HadamardBuffer | None:
    """The mask, selection or zeros-outside-a-band reading of a 2-D buffer's values `v`, if any."""
    r, c = rc
    v2 = v.reshape(meta.shape[r], meta.shape[c])
    shape = tuple(meta.shape)
    if v2.size > 1 and (v2 == v2.flat[0]).all() and not (v2.dtype.kind == "f" and np.isnan(v2).any()):
        return AffineMask(name, where, shape, meta.dtype, r, c, None, None,
                          inside=v2.flat[0].item(), outside=v2.flat[0].item(), uniform=True)
    got = recognise_constant(v2)
    if got is not None:
        block, hi, lo, inside, outside = got
        return AffineMask(name, where, shape, meta.dtype, r, c, hi, lo, block, inside, outside)
    hot = recognise_one_hot(v2, _keys_axis(program, name))
    if hot is not None:
        return OneHotBuffer(name, where, shape, meta.dtype, r, c, *hot)
    zeros = _zeros_outside(v2 != 0)
    if zeros is not None:
        return AffineMask(name, where, shape, meta.dtype, r, c, zeros[1], zeros[2], zeros[0], outside=0,
                          data=True)
    scale = recognise_hadamard(v2)
    if scale is not None:
        return HadamardBuffer(name, where, shape, meta.dtype, r, c, scale)
    return None


def _values_candidate(meta: TensorMeta) -> bool:
    """A weight that could be affine values of its indices or a table of fewer dimensions
    (`buffer_tables.py`): a non-unit dimension or more, of a dtype the masks take."""
    return any(n != 1 for n in meta.shape) and meta.dtype in _MASK_DTYPES


def _zeros_outside(nonzero: np.ndarray) -> tuple[tuple[int, int], int | None, int | None] | None:
    """((br, bc), hi, lo) when the 2-D bool array `nonzero` (where a buffer is not 0) is true exactly
    on a block band (a diagonal, a block diagonal, a triangle) outside of which lies a quarter of the
    array at least, else None. Fewer zeros save less than the selects every read of the buffer then
    costs (Swin V2's relative position index is 0 at one corner only)."""
    if not nonzero.any() or 4 * (nonzero.size - int(nonzero.sum())) < nonzero.size:
        return None
    return recognise_block_band(nonzero)


_PRODUCTS = ("aten.mm.", "aten.bmm.", "aten.matmul.")
_VIEWS = ("aten.view.", "aten.reshape.", "aten.unsqueeze.", "aten.expand.", "aten._unsafe_view.",
          "aten.alias.")
_TRANSPOSES = ("aten.t.", "aten.transpose.", "aten.permute.", "aten.numpy_T.")


def _keys_axis(program: CapturedProgram, name: str) -> str:
    """Which keys a permutation buffer gets: per row ("row") when the first matrix product that reads
    it (or a view or transpose of it) sums over its columns (`P @ x`, `linear(x, P)`), else per
    column (`x @ P` sums over its rows). Any other use keeps "col"; a wrong guess only leaves the
    product priced as written."""
    flipped = {name: False}
    for node in program.nodes:
        for pos, a in enumerate(node.args[:2]):
            f = flipped.get(getattr(a, "name", None))
            if f is None:
                continue
            if node.op.startswith(_PRODUCTS) or node.op.startswith("aten.linear.") and pos == 1:
                over_columns = pos == 0 or node.op.startswith("aten.linear.")
                return "row" if over_columns != f else "col"
            if pos == 0 and node.op.startswith(_TRANSPOSES + _VIEWS):
                turn = node.op.startswith(_TRANSPOSES)
                flipped.update({o.name: f != turn for o in node.outputs if o is not None})
    return "col"


def _buffer_values(program: CapturedProgram, buffers: dict[str, str]) \
        -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Values of the weights `buffers` (name -> attribute path) that are buffers, not parameters,
    and come out the same for every construction seed, and where the others are not zero when that
    comes out the same (a block-diagonal buffer of random blocks); the model is built for real, its
    parameters on the meta device (`parameters_on_meta`), only when it has such a buffer and its
    buffers and sample inputs fit the capture's real-run limit."""
    spec = _spec(program)
    with quiet():
        model, sample = build_model(spec, program.mode, FakeTensorMode())
    params = {n for n, _ in model.named_parameters()}
    kept = {n: fqn for n, fqn in buffers.items()
            if fqn not in params and fqn in {b for b, _ in model.named_buffers()} and not _state(model, fqn)}
    size = nbytes(sample) + nbytes(model.buffers())
    weights = nbytes(model.parameters())
    del model, sample
    if not kept or size > REAL_RUN_LIMIT_BYTES:
        return {}, {}
    runs: list[dict[str, np.ndarray | None]] = []
    for seed in SEEDS:
        model = _built(spec, program.mode, seed, size + weights <= REAL_RUN_LIMIT_BYTES)
        if model is None:
            return {}, {}
        # a buffer computed from a parameter is on the meta device too: no value
        runs.append({n: None if (t := resolve_attr(model, fqn)) is None or t.is_meta else to_numpy(t)
                     for n, fqn in kept.items()})
        del model
    out: dict[str, np.ndarray] = {}
    nonzero: dict[str, np.ndarray] = {}
    for n in kept:
        vs = [r[n] for r in runs]
        if any(v is None for v in vs) or any(v.dtype.kind == "f" and np.isnan(v).any() for v in vs):
            continue
        if all(np.array_equal(vs[0], v) for v in vs[1:]):
            out[n] = vs[0]  # type: ignore[assignment]
        elif all(np.array_equal(vs[0] != 0, v != 0) for v in vs[1:]):
            nonzero[n] = vs[0] != 0  # type: ignore[operator]
    return out, nonzero


def _state(model: torch.nn.Module, fqn: str) -> bool:
    """A normalisation layer's running statistics: zeros and ones when built, a checkpoint's values
    when used, so not constants of the program."""
    owner, _, _ = fqn.rpartition(".")
    try:
        mod = model.get_submodule(owner) if owner else model
    except AttributeError:
        return False
    return isinstance(mod, torch.nn.modules.batchnorm._NormBase)


def _built(spec: ModelSpec, mode: str, seed: int, weights_fit: bool) -> torch.nn.Module | None:
    """The model built for real from `seed`, its parameters on the meta device; where its
    constructor cannot run so (it computes with a parameter's values), with real parameters when
    they fit the real-run limit (`weights_fit`), else None."""
    for meta in (True, False) if weights_fit else (True,):
        with torch.random.fork_rng(), quiet(), parameters_on_meta() if meta else contextlib.nullcontext():
            torch.manual_seed(seed)
            try:
                return build_model(spec, mode, None)[0]
            except Exception:  # noqa: BLE001 - a constructor that needs its parameters' values
                if not meta:
                    raise
    return None


def _spec(program: CapturedProgram) -> ModelSpec:
    """The model file of `program` at the sizes it was captured with."""
    try:
        spec = load_model_file(program.source)
        full = {**spec.size_constants, **spec.repeat_counts}
        over = {k: v for k, v in program.size_constants.items() if full.get(k) != v}
        return spec.with_sizes(over) if over else spec
    except ModelFileError as e:
        raise SolarError(str(e), error_class=e.error_class) from None
