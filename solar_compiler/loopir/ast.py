"""Kernel AST: the plain-Python view of a loop-IR kernel.

Frontends build it (directly or through the text form), `convert.py` turns it into the xDSL
`loop` dialect and back, and analyses (polyhedral, executor, lifting) read it. Scalar expression
nodes carry a dtype once `infer_types` has run (literals may be untyped before that).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from solar_compiler.errors import LoopIRError, SolarError  # noqa: F401  (LoopIRError: re-exported)
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.rules import (  # noqa: F401  (re-exported: the IR's vocabulary)
    BINARY_FNS,
    CMP_PREDS,
    DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    REDUCTION_IDENTITY,
    TRANSCENDENTAL,
    UNARY_FNS,
    UNSIGNED_DTYPES,
    RuleError,
    binary_result,
    bitcast_result,
    cast_result,
    cmp_result,
    coerce_literal,
    index_dtype,
    nbytes,
    select_result,
    unary_result,
)

ROLES = ("input", "weight", "output", "local")
REDUCTIONS = ("=", "+=", "*=", "max=", "min=")


# ---- scalar expressions ---------------------------------------------------------------------
@dataclass(frozen=True)
class SExpr:
    @property
    def children(self) -> tuple[SExpr, ...]:
        return ()

    def walk(self) -> Iterator[SExpr]:
        yield self
        for c in self.children:
            yield from c.walk()

    def typed(self) -> str:
        dt = getattr(self, "dtype", None)
        if dt is None:
            raise LoopIRError(f"untyped expression {self}")
        return dt


Index = AffExpr | SExpr  # an index position: affine, or a loaded value (indirect)


@dataclass(frozen=True)
class Read(SExpr):
    tensor: str
    indices: tuple[Index, ...]
    dtype: str | None = None

    @property
    def children(self) -> tuple[SExpr, ...]:
        return tuple(i for i in self.indices if isinstance(i, SExpr))

    @property
    def indirect(self) -> bool:
        return any(isinstance(i, SExpr) for i in self.indices)


@dataclass(frozen=True)
class Const(SExpr):
    value: float | int | bool
    dtype: str | None = None


@dataclass(frozen=True)
class IndexValue(SExpr):
    """The value of an affine expression of induction variables, as an i64 scalar."""

    expr: AffExpr
    dtype: str | None = "i64"


@dataclass(frozen=True)
class Unary(SExpr):
    fn: str
    x: SExpr
    dtype: str | None = None

    @property
    def children(self) -> tuple[SExpr, ...]:
        return (self.x,)


@dataclass(frozen=True)
class Binary(SExpr):
    fn: str
    a: SExpr
    b: SExpr
    dtype: str | None = None

    @property
    def children(self) -> tuple[SExpr, ...]:
        return (self.a, self.b)


@dataclass(frozen=True)
class Cmp(SExpr):
    pred: str
    a: SExpr
    b: SExpr
    dtype: str | None = "bool"

    @property
    def children(self) -> tuple[SExpr, ...]:
        return (self.a, self.b)


@dataclass(frozen=True)
class Select(SExpr):
    cond: SExpr
    a: SExpr
    b: SExpr
    dtype: str | None = None

    @property
    def children(self) -> tuple[SExpr, ...]:
        return (self.cond, self.a, self.b)


@dataclass(frozen=True)
class Cast(SExpr):
    x: SExpr
    dtype: str | None = None

    @property
    def children(self) -> tuple[SExpr, ...]:
        return (self.x,)


@dataclass(frozen=True)
class Bitcast(SExpr):
    """The bits of `x` read as `dtype`, a dtype of the same width (`rules.bitcast_result`): torch's
    `x.view(torch.int32)` of floats, how torchao extracts an exponent. Not a conversion (`Cast`):
    the values are not kept, so no analysis looks through it as through a cast. A register
    reinterpretation, no instruction: 0 FLOPs, its operand's bytes counted as any read."""

    x: SExpr
    dtype: str | None = None

    @property
    def children(self) -> tuple[SExpr, ...]:
        return (self.x,)


def widened_bitcast(e: Bitcast, x: SExpr, dtype: str) -> SExpr:
    """`e` over a new operand `x`, giving `dtype`, in a program whose floats were widened (float64
    second opinions). A bit cast has a width, so it stays at its own dtypes: `x` is cast back to the
    operand's dtype first and the result converted to `dtype` after (both exact for the values
    these programs hold)."""
    src = e.x.typed()
    inner = Bitcast(x if x.typed() == src else Cast(x, src), e.dtype)
    return inner if dtype == e.dtype else Cast(inner, dtype)


# ---- statements -----------------------------------------------------------------------------
@dataclass(frozen=True)
class TensorDecl:
    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str

    @property
    def nbytes(self) -> int:
        return nbytes(self.dtype, math.prod(self.shape))


#: who wrote a nest that stands in for an op's algorithm (`Origin.by`): an LLM, or a template whose
#: nest computes the op's values by another algorithm than production code runs
LLM_NEST = "llm"
STAND_IN = "stand-in"


@dataclass(frozen=True)
class Origin:
    """The source-level op a statement implements: one eager kernel (`id` numbers the op's
    instances in program order), the op's name (`aten.softmax.int`) and the module path it ran
    in (`attn.c_attn`, or None at top level). Consecutive statements with the same `id` form one
    kernel of the unfused bound. `phase` is the part of a training step the op belongs to
    ("forward", "backward", "optimizer"; None outside a training step, docs/training.md). `by`: who
    wrote a loop nest that stands in for the op's algorithm, when it is not the op's arithmetic as
    written: "llm" (an LLM's nest, a per-op fill-in or the whole program) or "stand-in" (a template's
    nest for an op whose production algorithm is another, a DFT for an FFT). Such arithmetic is one
    algorithm among many, so the costs do not price it as written (docs/llm-frontend.md, "Pricing")."""

    id: int
    op: str
    module: str | None = None
    phase: str | None = None
    by: str | None = None

    @property
    def stand_in(self) -> bool:
        """The nest is one algorithm among many (an LLM's or a template's stand-in), not priced as written."""
        return self.by is not None


@dataclass(frozen=True)
class Traced:
    """What a statement's indirect accesses of `tensor` (its gathers, or its scatter when `write`; a
    conditional store's changed elements, `Assign.kept_when`) touched when the frontend ran the
    program on its traced sample: `elements` distinct elements,
    over a domain of `points` iterations with `accesses` such accesses. A value-dependent count
    that holds for that sample only; analyses use it while the statement keeps that domain and
    those accesses (a transform that narrows the domain makes it stale, and it is then ignored).

    Gathers of one tensor by several statements (`group`: that tensor) touched `union` distinct
    elements together, over the group's `among` statements, this one its `member`-th (0 and 0: a
    tensor only this statement gathers): per-statement counts give only the largest, a lower bound
    on what all of them read. A rewrite that moves the gather to another tensor, element for
    element, keeps the group."""

    tensor: str
    write: bool
    elements: int
    points: int
    accesses: int
    union: int = 0
    among: int = 0
    member: int = 0
    group: str = ""


@dataclass
class Assign:
    """`target[indices] kind value`. An index that is an SExpr (a loaded or computed integer) makes
    the write indirect (a scatter): analyses treat such a dimension as reaching any element."""

    target: str
    indices: tuple[Index, ...]
    kind: str
    value: SExpr
    loc: str | None = None
    pos: str | None = field(default=None, compare=False)  # where the text form wrote it
    origin: Origin | None = None
    traced: tuple[Traced, ...] = field(default=(), compare=False)  # traced indirect footprints

    @property
    def indirect(self) -> bool:
        return any(isinstance(i, SExpr) for i in self.indices)

    @property
    def dynamic_indices(self) -> tuple[SExpr, ...]:
        """The SExpr positions of the target, in dimension order (empty for an affine write)."""
        return tuple(i for i in self.indices if isinstance(i, SExpr))

    @property
    def kept_when(self) -> tuple[SExpr, bool] | None:
        """(condition, its value that keeps the element) when the statement is a conditional store:
        `T[i] = v if c else T[i]` (or `T[i] if c else v`) writes only where it stores v and leaves
        the element as it was elsewhere (an in-place `masked_fill_`), so the elements it changes
        depend on values; None for any other statement."""
        v = self.value
        if self.kind != "=" or self.indirect or not isinstance(v, Select):
            return None
        for branch, keep in ((v.b, False), (v.a, True)):
            if self.reads_own_element(branch):
                return v.cond, keep
        return None

    def reads_own_element(self, e: SExpr) -> bool:
        """Whether `e` is a read of the element the statement writes (`T[i]` in `T[i] = ...`)."""
        return isinstance(e, Read) and (e.tensor, e.indices) == (self.target, self.indices)

    @property
    def target_vars(self) -> set[str]:
        """Loop variables the written element depends on (through a dynamic index too)."""
        out: set[str] = set()
        for i in self.indices:
            out |= i.vars() if isinstance(i, AffExpr) else expr_vars(i)
        return out


@dataclass
class For:
    iv: str
    lb: AffExpr
    ub: AffExpr
    step: int = 1
    sequential: bool = False
    body: list[Node] = field(default_factory=list)


@dataclass
class If:
    conds: tuple[AffCond, ...]
    body: list[Node] = field(default_factory=list)


Node = Assign | For | If


@dataclass
class Kernel:
    name: str
    tensors: list[TensorDecl]
    body: list[Node] = field(default_factory=list)

    def tensor(self, name: str) -> TensorDecl:
        """The declaration of `name`: O(1) through an index of positions, rebuilt when the list no
        longer matches it (tensors are appended and replaced while a frontend builds a kernel)."""
        index = self.__dict__.get("_index")
        i = index.get(name) if index is not None else None
        if i is None or i >= len(self.tensors) or self.tensors[i].name != name:
            index = {t.name: j for j, t in enumerate(self.tensors)}
            self.__dict__["_index"] = index
            i = index.get(name)
            if i is None:
                raise LoopIRError(f"unknown tensor '{name}'")
        return self.tensors[i]

    def by_role(self, *roles: str) -> list[TensorDecl]:
        return [t for t in self.tensors if t.role in roles]


@dataclass(frozen=True)
class StmtContext:
    """A statement with its enclosing loops and guards, outermost first."""

    stmt: Assign
    loops: tuple[For, ...]
    guards: tuple[AffCond, ...]
    index: int  # position in program order

    @property
    def ivs(self) -> tuple[str, ...]:
        return tuple(f.iv for f in self.loops)


def statements(kernel: Kernel) -> list[StmtContext]:
    """Every statement in program order with its loop nest and guards."""
    out: list[StmtContext] = []

    def go(nodes: list[Node], loops: tuple[For, ...], guards: tuple[AffCond, ...]) -> None:
        for n in nodes:
            if isinstance(n, Assign):
                out.append(StmtContext(n, loops, guards, len(out)))
            elif isinstance(n, For):
                go(n.body, loops + (n,), guards)
            else:
                go(n.body, loops, guards + n.conds)

    go(kernel.body, (), ())
    return out


def reads(e: SExpr) -> list[Read]:
    return [n for n in e.walk() if isinstance(n, Read)]


def stmt_reads(a: Assign) -> list[Read]:
    """Every read of a statement: those of its value, then those of its dynamic target indices."""
    return reads(a.value) + [r for i in a.dynamic_indices for r in reads(i)]


def product_factors(e: SExpr) -> list[SExpr]:
    """Multiplicative factors of an expression, through casts, negation and the numerator of a
    division (what a contraction multiplies)."""
    if isinstance(e, Cast) or (isinstance(e, Unary) and e.fn == "neg"):
        return product_factors(e.x)
    if isinstance(e, Binary) and e.fn == "mul":
        return product_factors(e.a) + product_factors(e.b)
    if isinstance(e, Binary) and e.fn == "div":
        return product_factors(e.a)
    return [e]


def expr_vars(e: SExpr) -> set[str]:
    """Loop variables an expression depends on (affine read indices and index values)."""
    out: set[str] = set()
    for n in e.walk():
        if isinstance(n, IndexValue):
            out |= n.expr.vars()
        elif isinstance(n, Read):
            for i in n.indices:
                if isinstance(i, AffExpr):
                    out |= i.vars()
    return out


# ---- type inference ---------------------------------------------------------------------------
def default_literal_dtype(value: float | int | bool) -> str:
    if isinstance(value, bool):
        return "bool"
    return "i64" if isinstance(value, int) else "f32"


def _is_literal(e: SExpr) -> bool:
    return isinstance(e, Const) and e.dtype is None


def infer(e: SExpr, kernel: Kernel, expected: str | None) -> SExpr:
    """Give every node a dtype. A literal takes the type of its partner operand, else `expected`,
    else a default (f32 for floats, i64 for ints); everything else is typed bottom-up. The printer
    mirrors these rules to decide where a literal needs an explicit type."""
    if isinstance(e, Const):
        if e.dtype is not None:
            return e
        dt = expected or default_literal_dtype(e.value)
        if isinstance(e.value, float) and dt not in FLOAT_DTYPES:
            # `i - 1.0` would otherwise become `i - 1`, which reads back as a different program.
            raise LoopIRError(f"float literal {e.value} where {dt} is expected (write an integer, or cast)")
        return replace(e, value=coerce_literal(e.value, dt), dtype=dt)
    if isinstance(e, IndexValue):
        return e
    if isinstance(e, Read):
        idx = tuple(i if isinstance(i, AffExpr) else infer(i, kernel, "i64") for i in e.indices)
        return replace(e, indices=idx, dtype=kernel.tensor(e.tensor).dtype)
    if isinstance(e, Unary):
        x = infer(e.x, kernel, "bool" if e.fn == "not" else expected)
        return replace(e, x=x, dtype="bool" if e.fn in ("not", "isnan") else x.dtype)
    if isinstance(e, Binary | Cmp):
        a, b = _infer_pair(e.a, e.b, kernel, expected if isinstance(e, Binary) else None)
        return replace(e, a=a, b=b, dtype=a.dtype if isinstance(e, Binary) else "bool")
    if isinstance(e, Select):
        a, b = _infer_pair(e.a, e.b, kernel, expected)
        return replace(e, cond=infer(e.cond, kernel, "bool"), a=a, b=b, dtype=a.dtype)
    if isinstance(e, Cast | Bitcast):
        return replace(e, x=infer(e.x, kernel, None))
    raise LoopIRError(f"unknown expression node {e!r}")


def pair_expected(a: SExpr, b: SExpr, kernel: Kernel, expected: str | None) -> tuple[str | None, str | None]:
    """The expected types given to the two operands of a binary node (shared with the printer)."""
    if _is_literal(a) and not _is_literal(b):
        tb = infer(b, kernel, expected).dtype
        return tb, expected
    if _is_literal(b) and not _is_literal(a):
        ta = infer(a, kernel, expected).dtype
        return expected, ta
    return expected, expected


def _infer_pair(a: SExpr, b: SExpr, kernel: Kernel, expected: str | None) -> tuple[SExpr, SExpr]:
    ea, eb = pair_expected(a, b, kernel, expected)
    return infer(a, kernel, ea), infer(b, kernel, eb)


# ---- type checking ------------------------------------------------------------------------------
def check_expr(e: SExpr) -> None:
    """Type rules of the closed scalar-op set (`rules.py`, shared with the dialect verifiers), on a
    typed expression: each op's operands are legal and its own dtype is the one the rule gives."""
    try:
        for n in e.walk():
            if isinstance(n, Binary):
                got = binary_result(n.fn, n.a.typed(), n.b.typed())
            elif isinstance(n, Cmp):
                got = cmp_result(n.pred, n.a.typed(), n.b.typed())
            elif isinstance(n, Select):
                got = select_result(n.cond.typed(), n.a.typed(), n.b.typed())
            elif isinstance(n, Unary):
                got = unary_result(n.fn, n.x.typed())
            elif isinstance(n, Bitcast):
                got = bitcast_result(n.x.typed(), n.typed())
            else:
                if isinstance(n, Read):
                    for i in n.indices:
                        if isinstance(i, SExpr):
                            index_dtype(n.tensor, i.typed())
                elif isinstance(n, Const | Cast):
                    cast_result(n.typed(), n.typed())
                continue
            if got != n.typed():
                raise RuleError(f"'{getattr(n, 'fn', getattr(n, 'pred', 'select'))}' gives {got} but is "
                                f"typed {n.typed()}")
    except RuleError as err:
        raise LoopIRError(str(err)) from None


def _typed_tree(e: SExpr, kernel: Kernel) -> bool:
    """Every node already has its dtype (an expression read from MLIR, or typed before), a read the
    dtype of its tensor. Such a tree is checked as it is, not rebuilt: a subexpression shared by two
    uses (an SSA value used twice) stays one object, which the analyses count once."""
    for n in e.walk():
        if getattr(n, "dtype", None) is None:
            return False
        if isinstance(n, Read) and n.dtype != kernel.tensor(n.tensor).dtype:
            return False
    return True


def typecheck_assign(kernel: Kernel, a: Assign) -> Assign:
    target = kernel.tensor(a.target)
    if a.kind not in REDUCTIONS:
        raise LoopIRError(f"unknown assignment kind '{a.kind}'")
    value = a.value if _typed_tree(a.value, kernel) else infer(a.value, kernel, target.dtype)
    check_expr(value)
    if value.dtype != target.dtype:
        raise LoopIRError(f"type mismatch: '{a.target}' is {target.dtype} but the value is {value.dtype}")
    if a.kind in ("max=", "min=", "*=", "+=") and target.dtype == "bool":
        raise LoopIRError(f"'{a.kind}' reduction into bool tensor '{a.target}'")
    indices = tuple(i if isinstance(i, AffExpr) else infer(i, kernel, "i64") for i in a.indices)
    for i in indices:
        if isinstance(i, SExpr):
            check_expr(i)
            try:
                index_dtype(a.target, i.typed())
            except RuleError as err:
                raise LoopIRError(str(err)) from None
    return Assign(a.target, indices, a.kind, value, a.loc, a.pos, a.origin, a.traced)


def typecheck(kernel: Kernel) -> Kernel:
    """A copy of `kernel` with every expression typed; raises LoopIRError on a type error."""

    def go(nodes: list[Node]) -> list[Node]:
        out: list[Node] = []
        for n in nodes:
            if isinstance(n, Assign):
                out.append(typecheck_assign(kernel, n))
            elif isinstance(n, For):
                out.append(For(n.iv, n.lb, n.ub, n.step, n.sequential, go(n.body)))
            else:
                out.append(If(n.conds, go(n.body)))
        return out

    return Kernel(kernel.name, list(kernel.tensors), go(kernel.body))
