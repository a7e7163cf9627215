"""Captured ATen graph (`CapturedProgram`) -> one loop-IR `Kernel`, built with the AST classes.

Every ATen node is translated by a template looked up in `templates.TEMPLATES` (op -> function).
Values live in an environment of `Val`s: a `Val` reads its element at given indices. A stored
value reads its own kernel tensor; a view (reshape, permute, slice, expand, ...) is an index map
composed into the consumer's reads, so a tensor reached through `.T` or through two views is still
one kernel tensor, counted once. Constant fills and `arange` are generators with no tensor at all.
A value that is a graph output is materialised into an `output` tensor (a copy when it is a view).
"""

from __future__ import annotations

import keyword
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from solar_compiler.errors import SolarError
from solar_compiler.loopir.affine import AffCond, AffExpr, FloorDiv
from solar_compiler.loopir.ast import (
    DTYPES,
    Assign,
    Const,
    For,
    If,
    Index,
    Kernel,
    Node,
    Read,
    SExpr,
    TensorDecl,
)

from .capture import AtenNode, CapturedProgram, TensorMeta, TensorRef, sanitize

# Names the loop text form reserves (keywords, roles, dtypes, loop kinds, literals).
RESERVED = frozenset({
    "kernel", "local", "for", "in", "if", "else", "and", "or", "not", "inf", "nan", "True", "False",
    "range", "scan", "input", "weight", "output", *DTYPES, *keyword.kwlist,
})


class TranslateError(SolarError):
    """An ATen program the translator cannot express: `<file>:<line>: what`, one line."""


class NoTemplate(TranslateError):
    """An op (or this use of it) has no template: an `OpFiller` may translate it instead. Templates
    raise it through `tr.error("no loop-IR template for ...")`, before emitting any statement."""


class OpFiller(Protocol):
    """Translates an op that has no template (the LLM frontend's per-op fill-in): emits its
    statements through the translator (`declare`, `append`, ...) and returns one value per output."""

    def fill(self, tr: Translator, node: AtenNode, why: NoTemplate) -> Val | tuple[Val | None, ...]: ...


@dataclass(frozen=True)
class Val:
    """A tensor value: `read(indices)` is the scalar expression of one element.

    `stored` names the kernel tensor that holds exactly this value (same shape, identity map);
    views and generators have none and are only ever inlined into their consumers' reads."""

    shape: tuple[int, ...]
    dtype: str
    reader: Callable[[tuple[Index, ...]], SExpr]
    stored: str | None = None

    def read(self, idx: Sequence[Index]) -> SExpr:
        if len(idx) != len(self.shape):
            raise ValueError(f"{len(idx)} indices for a rank-{len(self.shape)} value")
        return self.reader(tuple(idx))

    @property
    def ndim(self) -> int:
        return len(self.shape)


def stored(decl: TensorDecl) -> Val:
    name, dtype = decl.name, decl.dtype
    return Val(decl.shape, dtype, lambda idx: Read(name, idx, dtype), name)


def view(v: Val, shape: Sequence[int], index_map: Callable[[tuple[Index, ...]], Sequence[Index]]) -> Val:
    """A view of `v` with `shape`: element `idx` of the view is element `index_map(idx)` of `v`."""
    return Val(tuple(int(s) for s in shape), v.dtype, lambda idx: v.reader(tuple(index_map(idx))))


def generator(shape: Sequence[int], dtype: str, fn: Callable[[tuple[Index, ...]], SExpr]) -> Val:
    return Val(tuple(int(s) for s in shape), dtype, fn)


def fill(shape: Sequence[int], dtype: str, value: float | int | bool) -> Val:
    return generator(shape, dtype, lambda idx: const(value, dtype))


def const(value: float | int | bool, dtype: str) -> Const:
    if dtype == "bool":
        return Const(bool(value), "bool")
    if dtype in ("i64", "i32", "i8"):
        return Const(int(value), dtype)
    return Const(float(value), dtype)


@dataclass
class TorchTranslation:
    """The kernel and how its tensors relate to the captured program (for validation)."""

    kernel: Kernel
    inputs: dict[str, str]        # capture input/weight name -> kernel tensor name
    outputs: list[str]            # kernel output tensor per program output position
    random: dict[str, str]        # capture random-tensor name -> kernel tensor written by the draw
    notes: list[str] = field(default_factory=list)
    # the ATen op each run of statements comes from, in program order:
    # {"op": "aten.softmax.int", "loc": "m.py:12", "first": 3, "count": 5}
    source_ops: list[dict] = field(default_factory=list)

    def validation_kernel(self) -> Kernel:
        """The kernel with every random draw replaced by an input tensor of the same name, to be
        fed with the values torch drew (the drawing statements compute different values)."""
        drawn = set(self.random.values())
        if not drawn:
            return self.kernel

        def strip(nodes: list[Node]) -> list[Node]:
            out: list[Node] = []
            for n in nodes:
                if isinstance(n, Assign):
                    if n.target not in drawn:
                        out.append(n)
                    continue
                body = strip(n.body)
                if body:
                    out.append(For(n.iv, n.lb, n.ub, n.step, n.sequential, body) if isinstance(n, For)
                               else If(n.conds, body))
            return out

        tensors = [TensorDecl(t.name, t.shape, t.dtype, "input") if t.name in drawn else t
                   for t in self.kernel.tensors]
        return Kernel(self.kernel.name, tensors, strip(self.kernel.body))


class Translator:
    """State of one translation; templates call the emit helpers below."""

    def __init__(self, program: CapturedProgram, kernel_name: str = "forward"):
        self.program = program
        self.tensors: list[TensorDecl] = []
        self.names: set[str] = set()
        self.env: dict[str, Val] = {}
        self.body: list[Node] = []
        self._bodies: list[list[Node]] = [self.body]
        self._ranges: list[dict[str, tuple[int, int]]] = [{}]
        self.n_statements = 0
        self.source_ops: list[dict] = []
        self.node: AtenNode | None = None
        self.loc: str | None = None
        self.inputs: dict[str, str] = {}
        self.random: dict[str, str] = {}
        self.notes: list[str] = []
        self.kernel_name = kernel_name

    # ---- tensors ----------------------------------------------------------------------------
    def fresh_name(self, hint: str) -> str:
        base = sanitize(hint)
        if base in RESERVED:
            base += "_t"
        name, k = base, 1
        while name in self.names:
            name = f"{base}_{k}"
            k += 1
        self.names.add(name)
        return name

    def declare(self, hint: str, shape: Sequence[int], dtype: str, role: str = "local") -> TensorDecl:
        if dtype not in DTYPES:
            raise self.error(f"dtype {dtype} of '{hint}' has no loop-IR equivalent")
        decl = TensorDecl(self.fresh_name(hint), tuple(int(s) for s in shape), dtype, role)
        self.tensors.append(decl)
        return decl

    def set_role(self, name: str, role: str) -> None:
        self.tensors = [TensorDecl(t.name, t.shape, t.dtype, role) if t.name == name else t
                        for t in self.tensors]

    def result(self, i: int = 0, dtype: str | None = None) -> TensorDecl:
        """A fresh local named after output `i` of the current node."""
        meta = self.out_meta(i)
        return self.declare(meta.name, meta.shape, dtype or meta.dtype)

    def out_meta(self, i: int = 0) -> TensorMeta:
        assert self.node is not None
        outs = self.node.outputs
        if i >= len(outs) or outs[i] is None:
            raise self.error(f"output {i} of {self.node.op} is not available")
        return outs[i]

    def used(self, i: int) -> bool:
        assert self.node is not None
        return i < len(self.node.outputs) and self.node.outputs[i] is not None

    # ---- values -----------------------------------------------------------------------------
    def val(self, arg: object) -> Val:
        if not isinstance(arg, TensorRef):
            raise self.error(f"expected a tensor argument, got {arg!r}")
        try:
            return self.env[arg.name]
        except KeyError:
            raise self.error(f"tensor '{arg.name}' is used before it is defined") from None

    def arg(self, i: int, name: str, default: object = None) -> object:
        """Positional argument `i` or keyword `name` of the current node."""
        assert self.node is not None
        if i < len(self.node.args):
            return self.node.args[i]
        return self.node.kwargs.get(name, default)

    # ---- statements -------------------------------------------------------------------------
    def emit(self, target: TensorDecl, tidx: Sequence[Index], kind: str, value: SExpr,
             loops: Sequence[Loop], guards: Sequence[AffCond] = ()) -> None:
        """Append `target[tidx] kind value` inside `loops` (outermost first) and `guards`; an
        SExpr position of `tidx` is a loaded index (an indirect write, a scatter).
        Every `//` and `%` the loop ranges make exact is simplified away first."""
        ranges = dict(self._ranges[-1])
        for lp in loops:
            lo = AffExpr.of(lp.lb).bounds(ranges)[0]
            ranges[lp.iv] = (lo, AffExpr.of(lp.ub).bounds(ranges)[1] - 1)
        tidx = [simplify(e, ranges) if isinstance(e, AffExpr) else simplify_expr(e, ranges) for e in tidx]
        value = simplify_expr(value, ranges)
        guards = [AffCond(simplify(g.expr, ranges), g.op) for g in guards]
        node: Node = Assign(target.name, tuple(tidx), kind, value, self.loc)
        self.n_statements += 1
        if guards:
            node = If(tuple(guards), [node])
        for lp in reversed(loops):
            node = For(lp.iv, AffExpr.of(lp.lb), AffExpr.of(lp.ub), lp.step, lp.sequential, [node])
        self._bodies[-1].append(node)

    @contextmanager
    def inside(self, lp: Loop) -> Iterator[AffExpr]:
        """Emit into the body of a new loop (a `scan` time loop of a recurrent template)."""
        f = For(lp.iv, AffExpr.of(lp.lb), AffExpr.of(lp.ub), lp.step, lp.sequential, [])
        self._bodies[-1].append(f)
        self._bodies.append(f.body)
        ranges = dict(self._ranges[-1])
        ranges[lp.iv] = (f.lb.bounds(ranges)[0], f.ub.bounds(ranges)[1] - 1)
        self._ranges.append(ranges)
        try:
            yield AffExpr.var(lp.iv)
        finally:
            self._bodies.pop()
            self._ranges.pop()

    def append(self, nodes: Sequence[Node]) -> None:
        """Splice nodes built elsewhere (a per-op kernel body) at the current point."""
        from solar_compiler.loopir.ast import statements

        self._bodies[-1].extend(nodes)
        self.n_statements += len(statements(Kernel("_", [], list(nodes))))

    def materialize(self, v: Val, hint: str, role: str = "local") -> TensorDecl:
        decl = self.declare(hint, v.shape, v.dtype, role)
        lps = loops("i", v.shape)
        idx = ivars(lps)
        self.emit(decl, idx, "=", v.read(idx), lps)
        return decl

    # ---- errors -----------------------------------------------------------------------------
    def error(self, what: str) -> TranslateError:
        op = self.node.op if self.node is not None else "program"
        cls = NoTemplate if what.startswith("no loop-IR template") else TranslateError
        return cls(f"{self.loc or self.program.source}: {what} (in {op})")


@dataclass(frozen=True)
class Loop:
    iv: str
    ub: AffExpr | int
    lb: AffExpr | int = 0
    step: int = 1
    sequential: bool = False


def loops(prefix: str, shape: Sequence[int], start: int = 0) -> list[Loop]:
    """One parallel loop per dimension: `prefix0 < shape[0]`, `prefix1 < shape[1]`, ..."""
    return [Loop(f"{prefix}{d + start}", int(n)) for d, n in enumerate(shape)]


def ivars(lps: Sequence[Loop]) -> list[AffExpr]:
    return [AffExpr.var(lp.iv) for lp in lps]


# ---- exact simplification of // and % under loop ranges ------------------------------------------
def simplify(e: AffExpr, ranges: dict[str, tuple[int, int]]) -> AffExpr:
    """`e` with every floor division / modulo rewritten affinely where the variable ranges make
    that exact: (a*x + b) // d with 0 <= b < g, g | a and g | d becomes (a/g * x) // (d/g), ..."""
    if not e.is_quasi():
        return e
    out = AffExpr.lit(e.const)
    for a, k in e.terms:
        if isinstance(a, str):
            out = out + AffExpr.var(a) * k
        else:
            out = out + _divmod(simplify(a.num, ranges), a.den, isinstance(a, FloorDiv), ranges) * k
    return out


def _divmod(num: AffExpr, d: int, floor: bool, ranges: dict[str, tuple[int, int]]) -> AffExpr:
    try:
        lo, hi = num.bounds(ranges)
    except KeyError:
        return num // d if floor else num % d
    if 0 <= lo and hi < d:
        return AffExpr.lit(0) if floor else num
    for g in sorted((g for g in range(2, d + 1) if d % g == 0), reverse=True):
        whole = AffExpr._make({a: k for a, k in num.terms if k % g == 0}, (num.const // g) * g)
        rest = num - whole
        rlo, rhi = rest.bounds(ranges)
        if 0 <= rlo and rhi < g:
            q = AffExpr._make({a: k // g for a, k in whole.terms}, whole.const // g)
            if floor:
                return q if d == g else _divmod(q, d // g, True, ranges)
            return rest if d == g else _divmod(q, d // g, False, ranges) * g + rest
    return num // d if floor else num % d


def simplify_expr(e: SExpr, ranges: dict[str, tuple[int, int]]) -> SExpr:
    from dataclasses import replace

    from solar_compiler.loopir.ast import IndexValue

    if isinstance(e, Read):
        idx = tuple(simplify(i, ranges) if isinstance(i, AffExpr) else simplify_expr(i, ranges)
                    for i in e.indices)
        return replace(e, indices=idx)
    if isinstance(e, IndexValue):
        return replace(e, expr=simplify(e.expr, ranges))
    kids = e.children
    if not kids:
        return e
    new = [simplify_expr(k, ranges) for k in kids]
    folded = _fold_index_arith(e, new)
    if folded is not None:
        return folded
    fields = {"Unary": ("x",), "Binary": ("a", "b"), "Cmp": ("a", "b"), "Select": ("cond", "a", "b"),
              "Cast": ("x",)}[type(e).__name__]
    return replace(e, **dict(zip(fields, new, strict=True)))


def _fold_index_arith(e: SExpr, kids: list[SExpr]) -> SExpr | None:
    """i64 arithmetic on index values is itself an index value (as the text form reads it back)."""
    from solar_compiler.loopir.ast import Binary, IndexValue, Unary

    def aff(x: SExpr) -> AffExpr | None:
        if isinstance(x, IndexValue):
            return x.expr
        if isinstance(x, Const) and x.dtype == "i64" and not isinstance(x.value, bool):
            return AffExpr.lit(int(x.value))
        return None

    if getattr(e, "dtype", None) != "i64":
        return None
    if isinstance(e, Unary) and e.fn == "neg" and isinstance(kids[0], IndexValue):
        return IndexValue(-kids[0].expr)
    if isinstance(e, Binary) and e.fn in ("add", "sub", "mul"):
        a, b = aff(kids[0]), aff(kids[1])
        if a is None or b is None or not (isinstance(kids[0], IndexValue) or isinstance(kids[1], IndexValue)):
            return None
        if e.fn == "mul" and not (a.is_const() or b.is_const()):
            return None
        return IndexValue(a + b if e.fn == "add" else a - b if e.fn == "sub" else a * b)
    return None


# ---- the translation driver ---------------------------------------------------------------------
def translate_program(program: CapturedProgram, kernel_name: str = "forward",
                      filler: OpFiller | None = None) -> TorchTranslation:
    """The kernel of `program`; an op without a template goes to `filler` when one is given."""
    from .templates import TEMPLATES

    tr = Translator(program, kernel_name)
    for meta in program.inputs:
        _bind_param(tr, meta, "input")
    for meta in program.weights:
        _bind_param(tr, meta, "weight")
    _bind_masks(tr, program)
    last_loc: str | None = None
    for node in program.nodes:
        tr.node = node
        tr.loc = node.loc or last_loc or f"{program.source}:1"
        last_loc = tr.loc
        fn = TEMPLATES.get(node.op)
        first, declared = tr.n_statements, len(tr.tensors)
        try:
            if fn is None:
                raise NoTemplate(f"{tr.loc}: no loop-IR template for {node.op} ({_describe(node)})")
            result = fn(tr, node)
        except NoTemplate as e:
            if filler is None or tr.n_statements != first:
                raise
            del tr.tensors[declared:]  # what the template declared before giving up
            result = filler.fill(tr, node, e)
        _record_group(tr, node.op, first)
        vals = result if isinstance(result, tuple) else (result,)
        for meta, v in zip(node.outputs, vals, strict=False):
            if meta is None or v is None:
                continue
            if tuple(v.shape) != tuple(meta.shape):
                raise tr.error(f"template gave shape {list(v.shape)} for '{meta.name}', "
                               f"torch says {list(meta.shape)}")
            tr.env[meta.name] = v
        for meta in node.outputs:
            if meta is not None and meta.name not in tr.env:
                raise tr.error(f"template produced no value for output '{meta.name}'")
    tr.node = None
    first = tr.n_statements
    outputs = _bind_outputs(tr, program)
    _record_group(tr, "output copy", first)
    kernel = Kernel(sanitize(kernel_name), tr.tensors, tr.body)
    return TorchTranslation(kernel, tr.inputs, outputs, tr.random, tr.notes, tr.source_ops)


def _record_group(tr: Translator, op: str, first: int) -> None:
    if tr.n_statements > first:
        tr.source_ops.append({"op": op, "loc": tr.loc, "first": first, "count": tr.n_statements - first})


def _bind_param(tr: Translator, meta: TensorMeta, role: str) -> None:
    decl = tr.declare(meta.name, meta.shape, meta.dtype, role)
    tr.inputs[meta.name] = decl.name
    tr.env[meta.name] = stored(decl)


def _bind_masks(tr: Translator, program: CapturedProgram) -> None:
    """Constant mask buffers that are affine regions are read as comparisons of their indices
    (masks.py); the weight stays declared (validation feeds it) but is no longer read."""
    from dataclasses import replace

    from .masks import affine_masks

    for m in affine_masks(program):
        mask = replace(m, weight=tr.inputs[m.weight])
        tr.env[m.weight] = Val(mask.shape, mask.dtype, mask.read)
        tr.notes.append(mask.note())


def _bind_outputs(tr: Translator, program: CapturedProgram) -> list[str]:
    roles = {t.name: t.role for t in tr.tensors}
    taken: set[str] = set()
    out: list[str] = []
    for name in program.outputs:
        v = tr.env.get(name)
        if v is None:
            raise TranslateError(f"{program.source}: graph output '{name}' is never computed")
        tr.loc = _loc_of(program, name) or f"{program.source}:1"
        drawn = v.stored in tr.random.values()
        if v.stored is not None and roles.get(v.stored) == "local" and v.stored not in taken and not drawn:
            tr.set_role(v.stored, "output")
            taken.add(v.stored)
            out.append(v.stored)
            continue
        # a view, a generator, an input or weight, or an output returned twice: copy it
        decl = tr.materialize(v, f"{name}_out" if v.stored else name, role="output")
        taken.add(decl.name)
        out.append(decl.name)
    return out


def _loc_of(program: CapturedProgram, name: str) -> str | None:
    for node in program.nodes:
        if any(m is not None and m.name == name for m in node.outputs):
            return node.loc
    return None


def _describe(node: AtenNode) -> str:
    parts = []
    for a in node.args:
        if isinstance(a, TensorRef):
            parts.append(f"%{a.name}")
        elif isinstance(a, (list, tuple)):
            items = (f"%{x.name}" if isinstance(x, TensorRef) else repr(x) for x in a)
            parts.append("[" + ", ".join(items) + "]")
        else:
            parts.append(repr(a))
    text = ", ".join(parts)
    return text if len(text) < 120 else text[:117] + "..."


# ---- "same program, other sizes" ---------------------------------------------------------------
def same_program(a: Kernel, b: Kernel) -> str | None:
    """None when `b` is `a` with only sizes changed: the same tensors (name, dtype, role, rank),
    the same statements in the same order with the same loops, guards, index expressions and
    ops, where only integer coefficients, constants and literal values (all size-derived) may
    differ. Otherwise the first difference, in words."""
    ta = [(t.name, t.dtype, t.role, len(t.shape)) for t in a.tensors]
    tb = [(t.name, t.dtype, t.role, len(t.shape)) for t in b.tensors]
    if ta != tb:
        diff = next((x, y) for x, y in zip(ta + [None], tb + [None], strict=False) if x != y)
        return f"tensors differ: {diff[0]} vs {diff[1]}"
    sa, sb = _shape(a.body), _shape(b.body)
    if sa == sb:
        return None
    for k, (x, y) in enumerate(zip(sa, sb, strict=False)):
        if x != y:
            return f"statement structure differs at node {k}"
    return f"{len(sa)} vs {len(sb)} nodes"


def _shape(nodes: list[Node]) -> list[object]:
    out: list[object] = []
    for n in nodes:
        if isinstance(n, For):
            out.append(("for", n.iv, n.sequential, _aff_shape(n.lb), _aff_shape(n.ub), tuple(_shape(n.body))))
        elif isinstance(n, If):
            out.append(("if", tuple((c.op, _aff_shape(c.expr)) for c in n.conds), tuple(_shape(n.body))))
        else:
            idx = tuple(_aff_shape(i) if isinstance(i, AffExpr) else _expr_shape(i) for i in n.indices)
            out.append(("stmt", n.target, n.kind, idx, _expr_shape(n.value), n.loc))
    return out


def _aff_shape(e: AffExpr) -> object:
    from solar_compiler.loopir.affine import FloorDiv

    atoms = []
    for a, _ in e.terms:
        if isinstance(a, str):
            atoms.append(a)
        else:
            atoms.append(("//" if isinstance(a, FloorDiv) else "%", _aff_shape(a.num)))
    return tuple(sorted(atoms, key=repr))


def _expr_shape(e: SExpr) -> object:
    from solar_compiler.loopir.ast import Binary, Cast, Cmp, IndexValue, Select, Unary

    if isinstance(e, Read):
        return ("read", e.tensor, tuple(_aff_shape(i) if isinstance(i, AffExpr) else _expr_shape(i)
                                        for i in e.indices))
    if isinstance(e, Const):
        return ("const", e.dtype)
    if isinstance(e, IndexValue):
        return ("index", _aff_shape(e.expr))
    if isinstance(e, Unary):
        return ("unary", e.fn, e.dtype, _expr_shape(e.x))
    if isinstance(e, Binary):
        return ("binary", e.fn, e.dtype, _expr_shape(e.a), _expr_shape(e.b))
    if isinstance(e, Cmp):
        return ("cmp", e.pred, _expr_shape(e.a), _expr_shape(e.b))
    if isinstance(e, Select):
        return ("select", e.dtype, _expr_shape(e.cond), _expr_shape(e.a), _expr_shape(e.b))
    if isinstance(e, Cast):
        return ("cast", e.dtype, _expr_shape(e.x))
    raise TypeError(f"unknown expression {e!r}")
