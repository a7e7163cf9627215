"""`nn.EmbeddingBag` (`aten._embedding_bag`): bags of rows of a table, each reduced by sum, mean or
max, optionally weighted per sample (sum), the bags given by `offsets` (the start of each bag in the
flat `indices`; with `include_last_offset` offsets has one more element, equal to the length of
`indices` as torch documents it), entries equal to `padding_idx` left out.

The bag of each position is computed in the loop IR, as torch computes `offset2bag`: a mark at each
bag start (an indirect `+=` at `offsets[b]`, b >= 1, into a buffer one longer than `indices` so that
an empty trailing bag's start fits), then a running sum (a `scan`). Then one scatter over the
positions accumulates each looked-up row into its bag's output row: `out[bag[j], d] += W[idx[j], d]`
(`max=` for max), so the work is one accumulation per looked-up element, as the eager kernel does.
Mean divides by the bag's entry count (at least 1: an empty bag is 0, as torch gives); max sets an
empty bag to 0. A padded entry is sent to a spare row of a local (`slot[j]`, one comparison per
position) rather than masked per element, so that no element costs more than the eager kernel's one
accumulation; the result is then the local's other rows, copied (or finalised) within the same
source op, whose kernel keeps the local on chip. With `include_last_offset` the last offset is not
read: the last bag runs to the end of `indices` (what torch's max and mean do; its sum stops at the
last offset, and the documented contract makes the two equal, an undocumented use fails validation).
Only the first result (the bags) has a template; the bookkeeping results (`offset2bag`, `bag_size`,
`max_indices`) used by a program are an explicit error.
"""

from __future__ import annotations

from solar_compiler.executor.numeric import identity
from solar_compiler.frontends.builder.exprs import add, c, cast, cmp, div, index_read, maximum, mul, select
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, stored
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Read, TensorDecl

from ..registry import template

MODES = {0: "sum", 1: "mean", 2: "max"}


@template("aten._embedding_bag.default", "aten._embedding_bag_forward_only.default")
def _embedding_bag(tr: Translator, node: AtenNode) -> Val:
    w, ind, offs = tr.val(node.args[0]), tr.val(node.args[1]), tr.val(node.args[2])
    mode = MODES.get(int(tr.arg(4, "mode", 0)))
    psw = tr.opt_val(tr.arg(6, "per_sample_weights", None))
    last = bool(tr.arg(7, "include_last_offset", False))
    pad = tr.arg(8, "padding_idx", -1)
    pad = -1 if pad is None else int(pad)
    if mode is None:
        raise tr.error(f"no loop-IR template for embedding_bag mode {tr.arg(4, 'mode', 0)!r}")
    for i, what in ((1, "offset2bag"), (2, "bag_size"), (3, "max_indices")):
        if tr.used(i):
            raise tr.error(f"no loop-IR template for embedding_bag's {what} result (only the bags)")
    if w.ndim != 2 or ind.ndim != 1 or offs.ndim != 1:
        raise tr.error(f"embedding_bag expects a 2-d table and 1-d indices and offsets, got "
                       f"{list(w.shape)}, {list(ind.shape)}, {list(offs.shape)}")
    meta = tr.out_meta()
    nbags, dim = meta.shape
    if offs.shape[0] != nbags + (1 if last else 0):
        raise tr.error(f"embedding_bag: {offs.shape[0]} offsets for {nbags} bags")
    n = ind.shape[0]
    out = tr.result()
    kind = "max=" if mode == "max" else "+="
    # with padding, padded positions go to a spare last row of a local (`slot`), read by nothing
    acc = tr.declare(f"{meta.name}_bags", [nbags + 1, dim], out.dtype) if pad >= 0 and n else out
    rows = acc.shape[0]
    j, d, b = AffExpr.var("j"), AffExpr.var("d"), AffExpr.var("b")
    empty = c(identity(kind, out.dtype), out.dtype)
    tr.emit(acc, [b, d], "=", empty, [Loop("b", 0, rows), Loop("d", 0, dim)])
    if n == 0:
        return stored(out)
    slot = _slot_of_each_position(tr, meta.name, ind, offs, n, nbags, pad)
    at = Read(slot.name, (j,), "i64")
    value = cast(w.read([index_read(ind, [j]), d]), out.dtype)
    if psw is not None:
        value = mul(value, cast(psw.read([j]), out.dtype))
    tr.emit(acc, [at, d], kind, value, [Loop("j", 0, n), Loop("d", 0, dim)])
    mine = Read(acc.name, (b, d), out.dtype)
    if mode == "sum":
        if acc is not out:
            tr.emit(out, [b, d], "=", mine, [Loop("b", 0, nbags), Loop("d", 0, dim)])
        return stored(out)
    count = tr.declare(f"{meta.name}_count", [rows], "i64")
    tr.emit(count, [b], "=", c(0, "i64"), [Loop("b", 0, rows)])
    tr.emit(count, [at], "+=", c(1, "i64"), [Loop("j", 0, n)])
    size = Read(count.name, (b,), "i64")
    if mode == "mean":  # an empty bag holds 0: 0 / 1
        final = div(mine, cast(maximum(size, c(1, "i64")), out.dtype))
    else:  # max: an empty bag is 0, not the identity
        final = select(cmp("eq", size, c(0, "i64")), c(0, out.dtype), mine)
    tr.emit(out, [b, d], "=", final, [Loop("b", 0, nbags), Loop("d", 0, dim)])
    return stored(out)


def _slot_of_each_position(tr: Translator, name: str, ind: Val, offs: Val, n: int, nbags: int,
                           pad: int) -> TensorDecl:
    """slot[j]: the bag of position j (how many bag starts offsets[1..nbags) are at or before j), or
    the spare row `nbags` for a padded entry."""
    start = tr.declare(f"{name}_starts", [n + 1], "i64")
    bag = tr.declare(f"{name}_bag", [n], "i64")
    j, b = AffExpr.var("j"), AffExpr.var("b")
    tr.emit(start, [j], "=", c(0, "i64"), [Loop("j", 0, n + 1)])
    if nbags > 1:
        tr.emit(start, [index_read(offs, [b])], "+=", c(1, "i64"), [Loop("b", 1, nbags)])
    zero = AffExpr.lit(0)
    tr.emit(bag, [zero], "=", Read(start.name, (zero,), "i64"), [])
    if n > 1:
        tr.emit(bag, [j], "=", add(Read(bag.name, (j - 1,), "i64"), Read(start.name, (j,), "i64")),
                [Loop("j", 1, n, sequential=True)])
    if pad < 0:
        return bag
    slot = tr.declare(f"{name}_slot", [n], "i64")
    padded = cmp("eq", index_read(ind, [j]), c(pad, "i64"))
    tr.emit(slot, [j], "=", select(padded, c(nbags, "i64"), Read(bag.name, (j,), "i64")), [Loop("j", 0, n)])
    return slot
