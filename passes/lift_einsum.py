"""`lift-einsum`: each `loop.kernel` gets an `einsum.graph` with one node per statement.

Design choice: the `loop.kernel` op stays in the module, directly before its graph (both carry the
kernel's name), and each node lists the statement indices it came from (`stmts`). Costs are then
always computed from the loop-IR statements themselves (`solar_compiler.costs.graph_costs`), with
the same factored islpy counting as everywhere else, instead of re-deriving loop nests from the
graph's display text; later passes keep `module_kernels(module)` working. The graph's domain,
equation and expression text are exact descriptions of those statements, for people and tools.

Folding (the only one): `T[idx] = c` immediately followed, in the same loop nest (its loops are the
outer loops of the next statement and its guards enclose it), by a reduction into `T[idx]` with
identical affine indices (never an indirect write, a scatter), where `c` is the identity of that
reduction (0 for +=, 1 for *=, -inf / the integer minimum for max=, inf / the integer maximum for
min=), becomes that node's `init`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from solar_compiler.dialects.einsum import GraphOp, NodeOp, TensorOp
from solar_compiler.dialects.loop import KernelOp
from solar_compiler.errors import SolarError
from solar_compiler.loopir.affine import AffCond, AffExpr, FloorDiv
from solar_compiler.loopir.ast import (
    DTYPES,
    FLOAT_DTYPES,
    REDUCTION_IDENTITY,
    Binary,
    Cast,
    Cmp,
    Const,
    IndexValue,
    Kernel,
    LoopIRError,
    Read,
    Select,
    SExpr,
    StmtContext,
    Unary,
    reads,
    statements,
)
from solar_compiler.loopir.convert import op_to_kernel
from solar_compiler.text.printer import expr_str, print_assign

REDUCE_OF_KIND = {"=": "none", "+=": "add", "*=": "mul", "max=": "max", "min=": "min"}


@dataclass(frozen=True)
class NodeGroup:
    """The statements of one node: `(stmt,)`, or `(init, reduction)` when the init is folded."""

    stmts: tuple[StmtContext, ...]

    @property
    def main(self) -> StmtContext:
        return self.stmts[-1]

    @property
    def init(self) -> StmtContext | None:
        return self.stmts[0] if len(self.stmts) == 2 else None

    @property
    def name(self) -> str:
        return f"S{self.main.index}"


def identity(kind: str, dtype: str) -> float | int | None:
    """The identity of a reduction kind in a dtype (None for `=`)."""
    if kind == "=":
        return None
    if dtype in FLOAT_DTYPES:
        return REDUCTION_IDENTITY[kind]
    bits = DTYPES[dtype] * 8
    return {"+=": 0, "*=": 1, "max=": -(2 ** (bits - 1)), "min=": 2 ** (bits - 1) - 1}[kind]


def _folds(kernel: Kernel, init: StmtContext, red: StmtContext) -> bool:
    a, b = init.stmt, red.stmt
    if a.kind != "=" or not isinstance(a.value, Const) or b.kind == "=" or a.target != b.target:
        return False
    if b.indirect:  # a scatter's element is not known to be the init's (repeated indices)
        return False
    if a.indices != b.indices or red.index != init.index + 1:
        return False
    n, g = len(init.loops), len(init.guards)
    if len(red.loops) < n or any(x is not y for x, y in zip(init.loops, red.loops[:n], strict=True)):
        return False
    if red.guards[:g] != init.guards:
        return False
    return a.value.value == identity(b.kind, kernel.tensor(b.target).dtype)


def group_statements(kernel: Kernel) -> list[NodeGroup]:
    """Statements of `kernel` (typed) grouped into nodes, in program order."""
    stmts = statements(kernel)
    out: list[NodeGroup] = []
    i = 0
    while i < len(stmts):
        if i + 1 < len(stmts) and _folds(kernel, stmts[i], stmts[i + 1]):
            out.append(NodeGroup((stmts[i], stmts[i + 1])))
            i += 2
        else:
            out.append(NodeGroup((stmts[i],)))
            i += 1
    return out


# ---- text pieces ---------------------------------------------------------------------------------------
def _isl_aff(e: AffExpr) -> str:
    """`str(e)` in islpy syntax: `floor(x/d)` and `x mod d` for `//` and `%`."""
    out = ""
    for a, c in e.terms:
        if isinstance(a, str):
            atom = a
        else:
            num = _isl_aff(a.num)
            num = num if a.num.is_var() else f"({num})"
            atom = f"floor({num}/{a.den})" if isinstance(a, FloorDiv) else f"({num} mod {a.den})"
        term = atom if abs(c) == 1 else f"{abs(c)}*{atom}"
        out = (term if c > 0 else f"-{term}") if not out else f"{out} {'+' if c > 0 else '-'} {term}"
    if not out or e.const:
        k = abs(e.const)
        out = str(e.const) if not out else f"{out} {'+' if e.const > 0 else '-'} {k}"
    return out


def _isl_cond(c: AffCond) -> str:
    """`lhs >= rhs` / `lhs = rhs` with the negative terms moved right, as `AffCond.__str__` does."""
    e = c.expr
    pos = AffExpr(tuple((a, k) for a, k in e.terms if k > 0), max(e.const, 0))
    neg = AffExpr(tuple((a, -k) for a, k in e.terms if k < 0), max(-e.const, 0))
    return f"{_isl_aff(pos)} {'>=' if c.op == '>=' else '='} {_isl_aff(neg)}"


def domain_text(ctx: StmtContext) -> str:
    """The statement's iteration domain as an islpy set: loop bounds, steps and guards."""
    cons: list[str] = []
    for f in ctx.loops:
        cons.append(f"{_isl_aff(f.lb)} <= {f.iv} < {_isl_aff(f.ub)}")
        if f.step != 1:
            off = AffExpr.var(f.iv) - f.lb
            cons.append(f"{_isl_aff(off) if off.is_var() else f'({_isl_aff(off)})'} mod {f.step} = 0")
    cons += [_isl_cond(g) for g in ctx.guards]
    head = f"S{ctx.index}[{', '.join(ctx.ivs)}]"
    return f"{{ {head} : {' and '.join(cons)} }}" if cons else f"{{ {head} }}"


def _token(kernel: Kernel, i: AffExpr | SExpr) -> str:
    if isinstance(i, AffExpr):
        return str(i) if i.is_var() else f"({i})"
    return f"[{expr_str(kernel, i, 'i64')}]"


def operand_reads(value: SExpr, *indices: SExpr) -> list[Read]:
    """Distinct reads of a value, then of the dynamic target indices of an indirect write, in
    first-occurrence order: the node's operands."""
    seen: dict[tuple, Read] = {}
    for r in reads(value) + [r for i in indices for r in reads(i)]:
        seen.setdefault((r.tensor, r.indices), r)
    return list(seen.values())


def equation(kernel: Kernel, ctx: StmtContext) -> str:
    ops = operand_reads(ctx.stmt.value, *ctx.stmt.dynamic_indices)
    lhs = ", ".join(" ".join(_token(kernel, i) for i in r.indices) for r in ops)
    rhs = " ".join(_token(kernel, i) for i in ctx.stmt.indices)
    return f"{lhs} -> {rhs}".strip()


def _strip_casts(e: SExpr) -> SExpr:
    while isinstance(e, Cast):
        e = e.x
    return e


def combine_of(value: SExpr) -> str:
    """The elementwise op of a body that is one op on leaves (reads, literals, indices; casts
    allowed around them); `copy` / `fill` / `iota` for no op; `expr` for anything bigger."""

    def leaf(e: SExpr) -> bool:
        return isinstance(_strip_casts(e), Read | Const | IndexValue)

    if isinstance(value, Read):
        return "copy"
    if isinstance(value, Const):
        return "fill"
    if isinstance(value, IndexValue):
        return "iota"
    if isinstance(value, Cast):
        return "cast" if leaf(value.x) else "expr"
    if isinstance(value, Unary) and leaf(value.x):
        return value.fn
    if isinstance(value, Binary) and leaf(value.a) and leaf(value.b):
        return value.fn
    if isinstance(value, Cmp) and leaf(value.a) and leaf(value.b):
        return value.pred
    if isinstance(value, Select) and leaf(value.cond) and leaf(value.a) and leaf(value.b):
        return "select"
    return "expr"


def literal_text(v: float | int) -> str:
    if isinstance(v, float):
        return "inf" if v == float("inf") else "-inf" if v == float("-inf") else repr(v)
    return str(v)


def where(kernel: Kernel, ctx: StmtContext) -> str:
    """`loc: statement` for diagnostics."""
    try:
        text = print_assign(kernel, ctx.stmt)
    except LoopIRError:  # a statement too broken to print: name its target
        text = f"{ctx.stmt.target}[...] {ctx.stmt.kind} ..."
    return f"{ctx.stmt.loc}: statement '{text}'" if ctx.stmt.loc else \
        f"kernel '{kernel.name}', statement S{ctx.index} '{text}'"


# ---- building the graph ---------------------------------------------------------------------------------
def _node(kernel: Kernel, g: NodeGroup) -> NodeOp:
    ctx = g.main
    s = ctx.stmt
    ops = operand_reads(s.value, *s.dynamic_indices)
    init = None
    if g.init is not None:
        c = g.init.stmt.value
        assert isinstance(c, Const)
        init = literal_text(c.value)
    return NodeOp(
        name=g.name, equation=equation(kernel, ctx),
        inputs=[(r.tensor, kernel.tensor(r.tensor).dtype) for r in ops],
        output=(s.target, kernel.tensor(s.target).dtype),
        combine=combine_of(s.value), reduce=REDUCE_OF_KIND[s.kind], init=init,
        expr=expr_str(kernel, s.value, kernel.tensor(s.target).dtype), domain=domain_text(ctx),
        stmts=[c.index for c in g.stmts], locs=list(dict.fromkeys(c.stmt.loc for c in g.stmts if c.stmt.loc)),
        indirect=s.indirect or any(r.indirect for r in reads(s.value)),
        sequential=any(f.sequential for f in ctx.loops))


def lift_kernel(kernel: Kernel) -> GraphOp:
    """The einsum graph of a typed kernel; a statement that cannot be lifted is a SolarError."""
    graph = GraphOp(kernel.name, [TensorOp(t.name, t.shape, t.dtype, t.role) for t in kernel.tensors])
    for g in group_statements(kernel):
        try:
            node = _node(kernel, g)
            graph.body.block.add_op(node)
            node.verify()
        except (LoopIRError, VerifyException) as e:
            msg = e.message if isinstance(e, LoopIRError) else str(e)
            raise SolarError(f"{where(kernel, g.main)}: cannot lift to an einsum node: {msg}") from None
    return graph


@dataclass(frozen=True)
class LiftEinsumPass(ModulePass):
    """Insert an `einsum.graph` after every `loop.kernel` (which stays, see the module docstring)."""

    name = "lift-einsum"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from solar_compiler.costs import paused_gc  # costs imports this module

        lifted = {g.kernel.data for g in op.walk() if isinstance(g, GraphOp)}
        for k in [o for o in op.walk() if isinstance(o, KernelOp)]:
            if k.sym_name.data in lifted:
                raise SolarError(f"kernel '{k.sym_name.data}' already has an einsum.graph "
                                 "(lift-einsum ran twice?)")
            block = k.parent_block()
            assert block is not None
            with paused_gc():
                block.insert_op_after(lift_kernel(op_to_kernel(k)), k)
