"""The state of one translation (`Translator`): the kernel's tensors and statements so far, the
environment of ATen values, and the node being translated. Templates emit through it."""

from __future__ import annotations

import keyword
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from solar_compiler.errors import SolarError
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import (
    DTYPES,
    STAND_IN,
    Assign,
    For,
    If,
    Index,
    Kernel,
    Node,
    SExpr,
    TensorDecl,
    statements,
)
from solar_compiler.loopir.simplify import simplify_affine, simplify_expr, simplify_index

from ..captured_program import AtenNode, CapturedProgram, Namer, TensorMeta, TensorRef
from .values import Loop, Val, ivars, loops, stored

# Names the loop text form reserves (keywords, roles, dtypes, loop kinds, literals).
RESERVED = frozenset({
    "kernel", "local", "for", "in", "if", "else", "and", "or", "not", "inf", "nan", "True", "False",
    "range", "scan", "input", "weight", "output", *DTYPES, *keyword.kwlist,
})


class TranslateError(SolarError):
    """An ATen program the translator cannot express: `<file>:<line>: what`, one line."""


class NoTemplate(TranslateError):
    """An op (or this use of it) has no template: an `OpFiller` (the LLM frontend's per-op fill-in)
    may translate it instead. Templates raise it through `tr.no_template(...)`, before emitting any
    statement."""

    error_class = "unsupported op"


class Translator:
    """State of one translation; templates call the emit helpers below."""

    framework = "torch"  # named in diagnostics that compare a template's result with the capture

    def __init__(self, program: CapturedProgram, kernel_name: str = "forward"):
        self.program = program
        self.tensors: list[TensorDecl] = []
        self.namer = Namer(RESERVED)
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
        # statements only the validation kernel runs, before all others: the copy of the elements an
        # in-place update of an input leaves as they were (eager never moves them)
        self.validation_prologue: list[Node] = []
        # locals that hold an input's final version, updated in place (their base copy is in the
        # validation prologue): the caller's buffer, so a returned view of one is a view of it
        self.in_place_locals: set[str] = set()
        # who wrote a nest that stands in for the op's algorithm (`Origin.by`): `mark_stand_in`, or the
        # LLM fill-in; reset before each node
        self.stand_in: str | None = None

    def mark_stand_in(self) -> None:
        """The current op's nest computes its values by another algorithm than production code runs
        (a DFT for an FFT, a rank count for a radix sort): its arithmetic is not priced, its traffic
        is (docs/llm-frontend.md section 7)."""
        self.stand_in = STAND_IN

    # ---- tensors ----------------------------------------------------------------------------
    def declare(self, hint: str, shape: Sequence[int], dtype: str, role: str = "local") -> TensorDecl:
        """A new kernel tensor named after `hint` (made a unique identifier the text form allows)."""
        if dtype not in DTYPES:
            raise self.error(f"dtype {dtype} of '{hint}' has no loop-IR equivalent")
        decl = TensorDecl(self.namer.fresh(hint), tuple(int(s) for s in shape), dtype, role)
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
        """Shape, dtype and name of result `i`, whether or not anything uses it (`used`)."""
        assert self.node is not None
        outs = self.node.outputs
        if i < len(outs) and outs[i] is not None:
            return outs[i]
        every = self.node.all_outputs
        if i < len(every) and every[i] is not None:
            return every[i]
        raise self.error(f"output {i} of {self.node.op} is not a tensor")

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

    def opt_val(self, arg: object) -> Val | None:
        """The value of an optional tensor argument (a bias, a weight): None when it is not a tensor."""
        return self.val(arg) if isinstance(arg, TensorRef) else None

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
        tidx = [simplify_index(e, ranges) for e in tidx]
        value = simplify_expr(value, ranges)
        guards = [AffCond(simplify_affine(g.expr, ranges), g.op) for g in guards]
        node: Node = Assign(target.name, tuple(tidx), kind, value, self.loc)
        self.n_statements += 1
        if guards:
            node = If(tuple(guards), [node])
        for lp in reversed(loops):
            node = For(lp.iv, AffExpr.of(lp.lb), AffExpr.of(lp.ub), lp.step, lp.sequential, [node])
        self._bodies[-1].append(node)

    @property
    def current_body(self) -> list[Node]:
        """The statement list being emitted into (the innermost `inside` loop's body)."""
        return self._bodies[-1]

    @property
    def ranges(self) -> dict[str, tuple[int, int]]:
        """The (lowest, highest) value of each loop variable enclosing what is emitted now."""
        return self._ranges[-1]

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

    def materialize(self, v: Val, hint: str, role: str = "local") -> TensorDecl:
        """A new tensor holding `v` (one copy statement)."""
        decl = self.declare(hint, v.shape, v.dtype, role)
        lps = loops("i", v.shape)
        idx = ivars(lps)
        self.emit(decl, idx, "=", v.read(idx), lps)
        return decl

    # ---- the program's parameters and results ---------------------------------------------------
    def bind_param(self, meta: TensorMeta, role: str) -> None:
        """An input or weight of the program: a kernel tensor of that role, named after it."""
        decl = self.declare(meta.name, meta.shape, meta.dtype, role)
        self.inputs[meta.name] = decl.name
        self.env[meta.name] = stored(decl)

    def bind_program_outputs(self, program: CapturedProgram) -> list[str]:
        """The `output` tensor of each program output, in order: the local that holds it, or a copy
        (of a view, a generator, an input or weight, a drawn tensor, or an output returned twice)."""
        roles = {t.name: t.role for t in self.tensors}
        taken: set[str] = set()
        out: list[str] = []
        for name in program.outputs:
            v = self.env.get(name)
            if v is None:
                raise TranslateError(f"{program.source}: graph output '{name}' is never computed")
            self.loc = _loc_of(program, name) or f"{program.source}:1"
            own = v.stored is not None and roles.get(v.stored) == "local" and v.stored not in taken
            if own and v.stored not in self.random.values():
                self.set_role(v.stored, "output")
                taken.add(v.stored)
                out.append(v.stored)
                continue
            decl = self.materialize(v, f"{name}_out" if v.stored else name, role="output")
            taken.add(decl.name)
            out.append(decl.name)
        return out

    def bind_results(self, node: AtenNode, result: Val | tuple[Val | None, ...] | None) -> None:
        """Bind the values a template returned to the node's outputs, each checked against the shape
        the framework recorded; an output left without a value is an error."""
        vals = result if isinstance(result, tuple) else (result,)
        for meta, v in zip(node.outputs, vals, strict=False):
            if meta is None or v is None:
                continue
            if tuple(v.shape) != tuple(meta.shape):
                raise self.error(f"template gave shape {list(v.shape)} for '{meta.name}', "
                                 f"{self.framework} says {list(meta.shape)}")
            self.env[meta.name] = v
        for meta in node.outputs:
            if meta is not None and meta.name not in self.env:
                raise self.error(f"template produced no value for output '{meta.name}'")

    # ---- errors -----------------------------------------------------------------------------
    def error(self, what: str) -> TranslateError:
        op = self.node.op if self.node is not None else "program"
        cls = NoTemplate if what.startswith("no loop-IR template") else TranslateError
        return cls(f"{self.loc or self.program.source}: {what} (in {op})")

    def append(self, nodes: Sequence[Node]) -> None:
        """Splice nodes built elsewhere (a per-op kernel body) at the current point."""
        self._bodies[-1].extend(nodes)
        self.n_statements += len(statements(Kernel("_", [], list(nodes))))


def _loc_of(program: CapturedProgram, name: str) -> str | None:
    for node in program.nodes:
        if any(m is not None and m.name == name for m in node.outputs):
            return node.loc
    return None
