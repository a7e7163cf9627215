"""Deduplicated work: the catalogue entries of the default model of computation that price repeated
products once (docs/bounds.md, section 0). `costs.py` applies them when asked for `distinct` costs
(`--algorithms default`); the classical costs count every product as written.

* **Broadcast and repeated operands.** A contraction multiplies, at each point of its domain, one
  element of each operand. Two points that read the same elements compute the same product, and an
  output element whose products are all products of another output element's... is the same sum:
  an implementation computes each distinct product once and broadcasts the results (a batched
  matmul of an `expand`ed operand is one matmul; `x.repeat(8, 1) @ w` is `x @ w` written 8 times).
  So a contraction needs 2 FLOPs per distinct tuple of operand elements: the image of its domain
  under the joint access map (counted exactly, `polyhedral.footprint`), never more than 2 per point.
* **Symmetric products** (SYRK, cuBLAS `syrk`, `x @ x.t()`, `x.t() @ x`): two reads of one tensor
  whose indices swap under exchanging two output variables of equal range, over a box domain: the
  output is symmetric, and the pairs a <= b suffice: n (n + 1) / 2 of the n^2.
* **Common subexpressions** (CSE, what every compiler does): a node identical to an earlier one
  (same statements, loops and guards, only its target differs) whose operands and whose earlier
  twin's result no statement between them writes holds the same values: it needs no arithmetic.
* **Value-dependent selects** (`torch.where(m, x @ w1, x @ w2)`): an element-wise select whose
  condition reads tensor values, between two locals that only it reads, each the sum of one
  contraction (zero fills aside) of the same shape and cost: every output element is one of the two
  sums, so whatever the condition's values, one sum per element suffices (gather the rows of each
  branch, one product each): the work of one of the two contractions.
"""

from __future__ import annotations

from collections.abc import Sequence

from solar_compiler.analysis.polyhedral import footprint, loop_ranges
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Const, Kernel, Read, Select, SExpr, StmtContext, reads, stmt_reads
from solar_compiler.loopir.grouping import NodeGroup

#: `OpCost.algorithm` of a node priced by an entry here
BROADCAST, SYMMETRIC, CSE = "distinct products", "symmetric product", "common subexpression"
SELECT = "value-dependent select computes one branch"


def distinct_matrix_flops(ctx: StmtContext, dep: Sequence[SExpr], flops: int) -> tuple[int, str | None]:
    """The contraction's matrix FLOPs (`flops` as written) with repeated and symmetric products
    counted once, and the entry that lowered them (None: none did)."""
    reads = [f for f in dep if isinstance(f, Read)]
    if len(reads) != len(dep) or len(reads) < 2 or any(r.indirect for r in reads):
        return flops, None
    indices: list[AffExpr] = [i for r in reads for i in r.indices]  # type: ignore[misc]
    bare = {i.terms[0][0] for i in indices if i.is_var()}
    how = None
    if not set(ctx.ivs) <= bare:  # some variable is not an index of its own: maybe repeated
        products = footprint(ctx, indices)
        if 2 * products < flops:
            flops, how = 2 * products, BROADCAST
    half = _symmetric_share(ctx, reads)
    if half is not None:
        num, den = half
        flops, how = -(-flops * num // den), SYMMETRIC
    return flops, how


def _symmetric_share(ctx: StmtContext, reads: Sequence[Read]) -> tuple[int, int] | None:
    """(n + 1, 2 n) when the two reads are one tensor with indices that swap under exchanging two
    output variables of equal extent n, over a box domain; else None."""
    if len(reads) != 2 or reads[0].tensor != reads[1].tensor:
        return None
    ranges = loop_ranges(ctx)
    if ranges is None or ctx.guards:
        return None
    out = [v for v in ctx.ivs if v in ctx.stmt.target_vars]
    for i, a in enumerate(out):
        for b in out[i + 1:]:
            if ranges[a] != ranges[b]:
                continue
            swap = {a: AffExpr.var(b), b: AffExpr.var(a)}
            swapped = tuple(x.substitute(swap) for x in reads[0].indices)  # type: ignore[union-attr]
            if swapped == reads[1].indices and swapped != reads[0].indices:
                n = ranges[a][1] - ranges[a][0] + 1
                return n + 1, 2 * n
    return None


def duplicates(groups: Sequence[NodeGroup]) -> dict[int, int]:
    """Node position -> the earlier node it duplicates (same statements, loops and guards, only the
    target differs), where no statement between them writes an operand or the earlier result."""
    seen: dict[str, int] = {}
    out: dict[int, int] = {}
    for pos, g in enumerate(groups):
        if any(s.stmt.indirect for s in g.stmts):
            continue
        key = repr([(tuple((f.iv, f.lb, f.ub, f.step) for f in c.loops), c.guards,
                     c.stmt.indices, c.stmt.kind, c.stmt.value) for c in g.stmts])
        first = seen.get(key)
        if first is None:
            seen[key] = pos
            continue
        read = {r.tensor for c in g.stmts for r in stmt_reads(c.stmt)} | {groups[first].main.stmt.target}
        if g.main.stmt.target in read:
            continue
        between = {c.stmt.target for h in groups[first + 1:pos] for c in h.stmts}
        if not between & read:
            out[pos] = first
    return out


def select_branches(kernel: Kernel, groups: Sequence[NodeGroup]) -> list[tuple[int, int]]:
    """(contraction node, the other branch's contraction node) for each element-wise select whose
    condition reads tensor values and whose branches are locals only it reads, each written by one
    contraction and zero fills (module rules); the caller keeps one when the two cost the same."""
    writers: dict[str, list[int]] = {}
    readers: dict[str, set[int]] = {}
    for pos, g in enumerate(groups):
        for c in g.stmts:
            writers.setdefault(c.stmt.target, []).append(pos)
            for r in stmt_reads(c.stmt):
                readers.setdefault(r.tensor, set()).add(pos)
    out = []
    for pos, g in enumerate(groups):
        s = g.main.stmt
        v = s.value
        if s.kind != "=" or not isinstance(v, Select) or not isinstance(v.a, Read) or \
                not isinstance(v.b, Read) or g.main.guards or not reads(v.cond):
            continue
        if v.a.tensor == v.b.tensor or v.a.indices != s.indices or v.b.indices != s.indices or \
                not all(isinstance(i, AffExpr) and i.is_var() for i in s.indices):
            continue
        branches = [_sum_of_one_contraction(kernel, groups, writers, t) for t in (v.a.tensor, v.b.tensor)]
        if None in branches or any(readers.get(t) != {pos} for t in (v.a.tensor, v.b.tensor)) or \
                {r.tensor for r in reads(v.cond)} & {v.a.tensor, v.b.tensor}:
            continue
        a, b = branches
        assert a is not None and b is not None
        out.append((b, a))
    return out


def _sum_of_one_contraction(kernel: Kernel, groups: Sequence[NodeGroup], writers: dict[str, list[int]],
                            tensor: str) -> int | None:
    """The node of the one contraction that writes local `tensor` (all else zero fills), else None."""
    if kernel.tensor(tensor).role != "local":
        return None
    sums = []
    for pos in dict.fromkeys(writers.get(tensor, [])):
        for c in groups[pos].stmts:
            s = c.stmt
            if s.target != tensor:
                continue
            if s.kind == "=" and isinstance(s.value, Const) and s.value.value == 0:
                continue
            if s.kind != "+=" or c.guards:
                return None
            sums.append(pos)
    return sums[0] if len(sums) == 1 else None
