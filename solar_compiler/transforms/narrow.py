"""Needed-work narrowing, the rewrite: every statement of a kernel restricted to its needed points
(the analysis, which points are needed and where a value is a known constant, is
`transforms/needed_points.py`; see its module doc), and the `NarrowNeeded` pattern that replaces a
program op (`loop.kernel` or `einsum.graph`) of the module by its narrowed form.

The rewrite works on the loop AST of the program (a kernel, or an einsum graph lowered to its
kernel and lifted again): one copy of a statement per disjoint convex piece of its kept points,
guarded by the piece's conditions (the node's guards intersected with the needed set), its value
simplified there; a constant store (`T[..] = c`, no reads) where the value is a known constant; no
statement at all where no point is needed, nor where the piece stores each element's own value (a
conditional store's kept branch, `T[i] = T[i]`); an empty loop or `if` is removed. The analysis is run
again on the result while it changes (a select simplified under its guard may drop the last read
of a mask), at most `rounds` times.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import islpy as isl
from xdsl.dialects.builtin import ModuleOp
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from solar_compiler.dialects.convert import kernel_to_op
from solar_compiler.dialects.einsum import GraphOp
from solar_compiler.dialects.graph_convert import lift_kernel
from solar_compiler.dialects.loop import KernelOp
from solar_compiler.dialects.solar import AsWrittenOp
from solar_compiler.executor.legality import check_distributable
from solar_compiler.executor.needed import (
    _DEADLINE,
    NarrowingTooCostly,
    _check_deadline,
    _conds,
    _nonempty,
    _Stmt,
    _union,
)
from solar_compiler.lifetime import CpuLimitExceeded, call_with_cpu_limit
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import (
    Assign,
    Binary,
    Bitcast,
    Cast,
    Cmp,
    Const,
    For,
    If,
    IndexValue,
    Kernel,
    Node,
    Read,
    Select,
    SExpr,
    StmtContext,
    Unary,
    statements,
    typecheck,
)
from solar_compiler.loopir.domain import loop_ranges
from solar_compiler.loopir.rules import coerce_literal
from solar_compiler.transforms.needed_points import needed_points


@dataclass
class NarrowNeeded(RewritePattern):
    """Replace each program op of the module (a `loop.kernel` or an `einsum.graph` directly in the
    module, not the kernels kept in `solar.as_written`) by its narrowed form, built from
    `kernels[name]` (the program's kernel as the analyses see it). An op narrowing does not change
    stays. With `snapshot`, the kernel as written moves there (a copy of the op for a kernel, its
    loop form for a graph). `results` collects every program's `NarrowResult` by name."""

    kernels: dict[str, Kernel]
    seconds: float | None = None
    per_statement: float = 0.0  # budget seconds per statement, when more than `seconds` (`budget`)
    snapshot: AsWrittenOp | None = None
    results: dict[str, NarrowResult] = field(default_factory=dict)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: KernelOp | GraphOp, rewriter: PatternRewriter) -> None:
        name = op.sym_name.data
        if not isinstance(op.parent_op(), ModuleOp) or name in self.results:
            return
        k = self.kernels[name]
        res = narrow(k, seconds=budget(self.seconds, self.per_statement, k))
        self.results[name] = res
        if not res.changed:  # nothing to narrow: the program stays as it is (and is its own as-written)
            return
        if isinstance(op, KernelOp):
            new = kernel_to_op(res.kernel)
            new.verify()
        else:
            new = lift_kernel(res.kernel)  # verified there
        if self.snapshot is not None:
            kept = op.clone() if isinstance(op, KernelOp) else kernel_to_op(k)
            rewriter.insert(kept, InsertPoint.at_end(self.snapshot.body.block))
        rewriter.replace(op, new)


def budget(seconds: float | None, per_statement: float, k: Kernel) -> float | None:
    """The CPU budget of narrowing `k`: `seconds`, or `per_statement` seconds per statement when that
    is more. The budget is there to stop isl operations that blow up (quasi-affine sets); narrowing
    costs about 2-3 ms per statement of plain affine code, so a fixed budget gave up on a large
    program (pi0's 15,157 statements: 40-60 s) for its size alone, and its floor counts only the
    output writes."""
    return None if seconds is None else max(seconds, per_statement * len(statements(k)))


def narrow_module(module: ModuleOp, kernels: dict[str, Kernel], seconds: float | None = None,
                  snapshot: AsWrittenOp | None = None,
                  per_statement: float = 0.0) -> dict[str, NarrowResult]:
    """Apply `NarrowNeeded` to every program op of `module` once; the results by program name."""
    pattern = NarrowNeeded(kernels, seconds, per_statement, snapshot)
    PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(module)
    return pattern.results


@dataclass(frozen=True)
class NarrowResult:
    kernel: Kernel
    changed: tuple[str, ...]   # one line per narrowed statement, e.g. "S3 S[h, i, j] += ...: guarded"
    origin: tuple[int, ...] = ()  # per statement of `kernel`: the input statement it came from
    gave_up: str | None = None  # why the kernel was left as written (the CPU budget ran out)


def narrow(kernel: Kernel, rounds: int = 4, seconds: float | None = None) -> NarrowResult:
    """The kernel with every statement restricted to its needed points (see the module doc).
    Repeated while it changes (a select simplified under its guard may drop the last read of a
    mask), at most `rounds` times. With `seconds`, a CPU budget: when it runs out (isl sets with
    many existential variables, such as a channel shuffle's, can take minutes) the kernel becomes
    its floor (`output_floor`: only the output writes that are certainly needed, as constant
    stores), with `gave_up` saying so: a bound must err low when an analysis gives up, and the
    kernel as written may count work that no output needs. The budget is checked between isl
    operations, and enforced by the kernel in a forked child (`call_with_cpu_limit`) for a single
    operation that runs far past it (a window partition's div/mod sets: minutes in one call) where
    one can (`_may_stall_isl`); other kernels narrow in this process, without the fork's cost (a
    large network's process is hundreds of MB, copied on write)."""
    if seconds is None or not _may_stall_isl(kernel):
        return _narrow(kernel, rounds, seconds)

    def in_child() -> NarrowResult | None:
        res = _narrow(kernel, rounds, seconds)
        # unchanged: the parent has the kernel already (a large one takes a second to send back)
        return res if res.changed or res.gave_up else None

    try:
        res = call_with_cpu_limit(in_child, seconds + CPU_SLACK)
    except CpuLimitExceeded:
        return _gave_up(kernel, seconds)
    if res is None:
        k = typecheck(kernel)
        return NarrowResult(k, (), tuple(range(len(statements(k)))))
    return res


def _may_stall_isl(k: Kernel) -> bool:
    """Whether one isl operation on `k`'s sets may run far past the budget: quasi-affine index
    arithmetic (`//`, `%`) or a strided loop, whose sets carry existential variables. Plain affine
    sets (convolutions, padding, slices, masks) have none, and their operations stay short."""
    for ctx in statements(k):
        if any(f.step != 1 or f.lb.is_quasi() or f.ub.is_quasi() for f in ctx.loops):
            return True
        s = ctx.stmt
        exprs = [g.expr for g in ctx.guards] + [i for i in s.indices if isinstance(i, AffExpr)]
        for e in (s.value, *s.dynamic_indices):
            for n in e.walk():
                if isinstance(n, IndexValue):
                    exprs.append(n.expr)
                elif isinstance(n, Read):
                    exprs += [i for i in n.indices if isinstance(i, AffExpr)]
        if any(e.is_quasi() for e in exprs):
            return True
    return False


CPU_SLACK = 2.0  # CPU seconds past the budget before the child is stopped (it usually stops itself)


def _gave_up(kernel: Kernel, seconds: float) -> NarrowResult:
    k0 = typecheck(kernel)
    floor, origin, notes = output_floor(k0)
    return NarrowResult(floor, notes, origin,
                        gave_up=f"narrowing {kernel.name} took over {seconds:g} s of CPU: only its output "
                                "writes are counted (a sound floor); its work as written is in the "
                                "as-written figures")


def output_floor(k: Kernel) -> tuple[Kernel, tuple[int, ...], tuple[str, ...]]:
    """The work of `k` that is certainly needed without the analysis: the elements of its outputs,
    each written once, as a constant store (no reads, no arithmetic), with the new statements'
    origins and one note per statement changed. Kept: every affine `=` write of an output that no
    later affine `=` write of the same output may overwrite (their write boxes, from the loop
    ranges, are disjoint: the halves of a concatenation), so each kept write is also kept whole by
    narrowing (it writes needed elements and nothing kills it) and the floor stays at or below
    the narrowed kernel in every fidelity. Dropped (which only lowers it): reductions, scatters,
    writes that a later one may overwrite, and everything that is not an output."""
    from solar_compiler.text.printer import print_assign

    outputs = {t.name for t in k.by_role("output")}
    ctxs = statements(k)
    writes = [c for c in ctxs if c.stmt.target in outputs and c.stmt.kind == "=" and not c.stmt.indirect]
    boxes = {c.index: _write_box(c) for c in writes}
    kept = {c.index for i, c in enumerate(writes)
            if all(c2.stmt.target != c.stmt.target or _apart(boxes[c.index], boxes[c2.index])
                   for c2 in writes[i + 1:])}
    repl: dict[int, list[Node]] = {}
    notes: list[str] = []
    for c in ctxs:
        s = c.stmt
        if c.index in kept:
            zero = Const(coerce_literal(0, k.tensor(s.target).dtype), k.tensor(s.target).dtype)
            repl[id(s)] = [replace(s, value=zero)]
            if s.value != zero:
                notes.append(f"S{c.index} {print_assign(k, s)}: output floor, a constant store")
        else:
            repl[id(s)] = []
            notes.append(f"S{c.index} {print_assign(k, s)}: removed (output floor)")
    floor, origin = _replace_statements(k, repl, len(ctxs))
    return floor, origin, tuple(notes)


def _write_box(ctx: StmtContext) -> list[tuple[int, int]] | None:
    """Per target dimension, an interval holding every element the statement writes (guards
    ignored); None when a bound is not constant."""
    rng = loop_ranges(ctx)
    return None if rng is None else [e.bounds(rng) for e in ctx.stmt.indices]  # type: ignore[union-attr]


def _apart(a: list[tuple[int, int]] | None, b: list[tuple[int, int]] | None) -> bool:
    return a is not None and b is not None and any(
        hi1 < lo2 or hi2 < lo1 for (lo1, hi1), (lo2, hi2) in zip(a, b, strict=True))


def _narrow(kernel: Kernel, rounds: int, seconds: float | None) -> NarrowResult:
    from solar_compiler.text.printer import print_kernel

    k = typecheck(kernel)
    check_distributable(k)
    notes: list[str] = []
    origin = tuple(range(len(statements(k))))
    token = _DEADLINE.set(None if seconds is None else time.process_time() + seconds)
    try:
        for _ in range(rounds):
            res = _once(k)
            # no note means every statement was kept whole and unchanged (`_rebuild`)
            if not res.changed or print_kernel(res.kernel) == print_kernel(k):
                break
            notes += res.changed
            origin = tuple(origin[i] for i in res.origin)
            k = typecheck(res.kernel)
    except NarrowingTooCostly:
        return _gave_up(kernel, seconds or 0.0)
    finally:
        _DEADLINE.reset(token)
    return NarrowResult(k, tuple(notes), origin)


def _once(k: Kernel) -> NarrowResult:
    return _rebuild(k, needed_points(k))


def _rebuild(k: Kernel, stmts: list[_Stmt]) -> NarrowResult:
    from solar_compiler.text.printer import print_assign

    repl: dict[int, list[Node]] = {}
    notes: list[str] = []
    for st in stmts:
        _check_deadline()
        s, kept = st.ctx.stmt, st.kept
        assert kept is not None
        consts = {v: kept.intersect(r) for v, r in st.root.items()}
        consts = _nonempty(consts)
        main = kept.subtract(_union(consts.values(), kept))
        nodes: list[Node] = [*_guarded(st, main, s)]
        if main.is_equal(st.dom) and not consts:
            repl[id(s)] = nodes
            if nodes != [s]:
                notes.append(f"S{st.ctx.index} {print_assign(k, s)}: simplified")
            continue
        dt = k.tensor(s.target).dtype
        for v, r in consts.items():
            nodes += _guarded(st, r, replace(s, value=Const(v, dt)))
        repl[id(s)] = nodes
        what = "removed" if not nodes else \
            "guarded" + (f", {len(consts)} constant store(s)" if consts else "")
        notes.append(f"S{st.ctx.index} {print_assign(k, s)}: {what}")

    kernel, origin = _replace_statements(k, repl, len(stmts))
    return NarrowResult(kernel, tuple(notes), origin)


def _replace_statements(k: Kernel, repl: dict[int, list[Node]], count: int) -> tuple[Kernel, tuple[int, ...]]:
    """`k` with every statement `s` replaced by the nodes `repl[id(s)]` (none: removed), empty loops
    and `if`s dropped; per new statement, the index of the statement it came from."""
    origin: list[int] = []  # per new statement, the old one (go meets them in program order)
    old = iter(range(count))

    def go(nodes: list[Node]) -> list[Node]:
        out: list[Node] = []
        for n in nodes:
            if isinstance(n, Assign):
                origin.extend([next(old)] * len(statements(Kernel(k.name, [], repl[id(n)]))))
                out += repl[id(n)]
            elif isinstance(n, For):
                body = go(n.body)
                if body:
                    out.append(For(n.iv, n.lb, n.ub, n.step, n.sequential, body))
            else:
                body = go(n.body)
                if body:
                    out.append(If(n.conds, body))
        return out

    body = go(k.body)
    return Kernel(k.name, list(k.tensors), body), tuple(origin)


def _guarded(st: _Stmt, region: isl.Set, a: Assign) -> list[Node]:
    """`a` on `region` only: one copy per disjoint convex piece, its value simplified there."""
    if region.is_empty():
        return []
    # explicit divisions (`compute_divs`): an existential variable with no floor expression of its own
    # (a modulo of a shifted window read through a division) cannot be written as a guard
    pieces = [region] if region.is_equal(st.dom) else \
        region.compute_divs().coalesce().make_disjoint().get_basic_sets()
    out: list[Node] = []
    for piece in pieces:
        _check_deadline()
        p = piece if isinstance(piece, isl.Set) else isl.Set.from_basic_set(piece)
        value = _simplify(st, a.value, p) if not isinstance(a.value, Const) else a.value
        if a.kind == "=" and a.reads_own_element(value):
            continue  # the element's own value there (a conditional store's kept branch): no store
        b = a if value is a.value else replace(a, value=value)
        if p.is_equal(st.dom):
            out.append(b)
            continue
        parts = p.gist(st.dom).compute_divs().get_basic_sets()
        conds = _conds(parts[0] if len(parts) == 1 else piece, st.ctx)
        out.append(If(conds, [b]) if conds else b)
    return out


def _simplify(st: _Stmt, e: SExpr, region: isl.Set) -> SExpr:
    """`e` with every subexpression that is one known constant on all of `region` folded, and every
    select whose condition is known there replaced by the branch it takes."""
    vals = st.values
    assert vals is not None
    known = vals.of(e, st.ctx, region)
    for v, r in known.items():
        if r.is_equal(region) and not isinstance(e, Const):
            return Const(v, e.dtype)
    if isinstance(e, Select):
        c = vals.of(e.cond, st.ctx, region)
        for flag, branch in ((True, e.a), (False, e.b)):
            if flag in c and c[flag].is_equal(region):
                return _simplify(st, branch, region)
    if isinstance(e, Read | Const | IndexValue):
        return e
    kids = [_simplify(st, x, region) for x in e.children]
    if all(x is y for x, y in zip(kids, e.children, strict=True)):
        return e
    if isinstance(e, Unary):
        return Unary(e.fn, kids[0], e.dtype)
    if isinstance(e, Cast | Bitcast):
        return type(e)(kids[0], e.dtype)
    if isinstance(e, Binary):
        return Binary(e.fn, kids[0], kids[1], e.dtype)
    if isinstance(e, Cmp):
        return Cmp(e.pred, kids[0], kids[1], e.dtype)
    assert isinstance(e, Select)
    return Select(kids[0], kids[1], kids[2], e.dtype)
