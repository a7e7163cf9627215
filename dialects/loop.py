"""The `loop` dialect: the Affine Loop IR as xDSL operations.

A `loop.kernel` holds `loop.tensor` declarations and a body of `loop.for` / `loop.if` /
`loop.stmt`. Bounds, guards and indices are builtin affine attributes over the enclosing loop
variables, outermost first (the dimension d0 is the outermost `loop.for`'s `iv`): `loop.for` bounds
and `loop.index` are one-result `AffineMapAttr`s, a statement's or read's indices one map with a
result per tensor dimension, a `loop.if` guard an `AffineSetAttr`. Verifiers check that a map has as
many dimensions as loops enclose its op, no symbols, and (bounds, tensor uses) the right number of
results; the AST's named expressions (`loopir/affine.py`) convert both ways exactly
(`loopir/affine_map.py`: floor division and modulo by constants exist on both sides), so islpy
builds iteration domains and access relations from either (`solar_compiler.analysis.polyhedral`).

What an affine map cannot hold keeps its own representation: an index loaded from a tensor (a gather
or scatter) is an SSA operand of the read (or the statement's yield), its position listed in
`dynamic` and the placeholder 0 in the map. The loop IR has no other non-affine index or bound (its
AST's bounds, guards and indices are `AffExpr`s).

A statement's region computes one scalar with the closed op set below and yields it; its `kind`
says how it is stored (`=`, `+=`, `*=`, `max=`, `min=`): the reduction kind is explicit, never a
load-add-store.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from functools import lru_cache

from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    BFloat16Type,
    DenseArrayBase,
    FileLineColLoc,
    Float4E2M1FNType,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    FusedLoc,
    IntAttr,
    IntegerAttr,
    IntegerType,
    LocationAttr,
    NameLoc,
    Signedness,
    StringAttr,
    UnitAttr,
    UnknownLoc,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, ParametrizedAttribute, Region, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, NoTerminator, OpTrait
from xdsl.utils.exceptions import VerifyException

from solar_compiler.loopir.affine import AffCond, AffExpr, AffineError
from solar_compiler.loopir.affine_map import from_map, from_set, to_map, to_set
from solar_compiler.loopir.ast import (
    DTYPES,
    FLOAT_DTYPES,
    LLM_NEST,
    REDUCTIONS,
    ROLES,
    STAND_IN,
    Origin,
    Traced,
)
from solar_compiler.loopir.rules import (
    RuleError,
    binary_result,
    bitcast_result,
    cast_result,
    cmp_result,
    index_dtype,
    select_result,
    unary_result,
)

# ---- dtypes ------------------------------------------------------------------------------------
_TYPE_OF = {
    "f64": Float64Type(), "f32": Float32Type(), "bf16": BFloat16Type(), "f16": Float16Type(),
    "f8e4m3": Float8E4M3FNType(), "f8e5m2": Float8E5M2Type(), "f4e2m1": Float4E2M1FNType(),
    "i64": IntegerType(64), "i32": IntegerType(32), "i16": IntegerType(16), "i8": IntegerType(8),
    "u8": IntegerType(8, Signedness.UNSIGNED), "u16": IntegerType(16, Signedness.UNSIGNED),
    "bool": IntegerType(1),
}
_NAME_OF = {v: k for k, v in _TYPE_OF.items()}


def dtype_type(name: str) -> TypeAttribute:
    if name not in _TYPE_OF:
        raise VerifyException(f"unknown dtype '{name}' (known: {', '.join(DTYPES)})")
    return _TYPE_OF[name]


def type_dtype(t: Attribute) -> str:
    if t not in _NAME_OF:
        raise VerifyException(f"type {t} is not a loop-IR dtype (known: {', '.join(DTYPES)})")
    return _NAME_OF[t]


# ---- attributes ----------------------------------------------------------------------------------
def _dims(dims: Sequence[str]) -> tuple[str, ...]:
    return dims if isinstance(dims, tuple) else tuple(dims)


# Interned conversions: attributes are immutable values, and a large network's IR repeats the same
# bounds and indices over the same loop variables thousands of times, so each map is built (and read
# back into named expressions) once, as the text attributes were interned before them.
@lru_cache(maxsize=1 << 16)
def _map_attr(exprs: tuple[AffExpr, ...], dims: tuple[str, ...]) -> AffineMapAttr:
    return AffineMapAttr(to_map(exprs, dims))


@lru_cache(maxsize=1 << 16)
def _map_exprs(attr: AffineMapAttr, dims: tuple[str, ...]) -> tuple[AffExpr, ...]:
    return from_map(attr.data, dims)


def _unbound(exprs: Sequence[AffExpr], dims: Sequence[str], what: str) -> VerifyException:
    free = sorted(set().union(*(e.vars() for e in exprs)) - set(dims))
    return VerifyException(f"{what} uses '{free[0]}', which is not an enclosing loop variable")


def map_attr(exprs: Sequence[AffExpr | int | str], dims: Sequence[str], what: str) -> AffineMapAttr:
    """The affine map `(d0, ..., dn-1) -> (exprs)` whose dimensions are the loop variables `dims`
    (outermost first); a variable that is not one of them is a verification error naming `what`."""
    es = tuple(AffExpr.of(e) for e in exprs)
    try:
        return _map_attr(es, _dims(dims))
    except AffineError:
        raise _unbound(es, dims, what) from None


def map_exprs(attr: AffineMapAttr, dims: Sequence[str]) -> tuple[AffExpr, ...]:
    """The named expressions of a map over the loop variables `dims` (outermost first)."""
    return _map_exprs(attr, _dims(dims))


def set_attr(conds: Sequence[AffCond], dims: Sequence[str]) -> AffineSetAttr:
    """The affine set of a guard's constraints over the loop variables `dims`."""
    try:
        return AffineSetAttr(to_set(conds, dims))
    except AffineError:
        raise _unbound([c.expr for c in conds], dims, "guard") from None


def set_conds(attr: AffineSetAttr, dims: Sequence[str]) -> tuple[AffCond, ...]:
    return from_set(attr.data, dims)


@lru_cache(maxsize=1 << 12)
def i64_attr(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


@lru_cache(maxsize=1 << 12)
def i64_array(values: tuple[int, ...]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


@irdl_attr_definition
class OriginAttr(ParametrizedAttribute):
    """`#loop.origin<7, "aten.softmax.int", "attn.c_attn">`: the source-level op a statement
    implements (its instance number, its name, its module path or "" at top level), and in a
    training step its phase: `#loop.origin<9, "aten.mm.default", "fc1", "backward">`, and after
    them `"llm"` when an LLM wrote the op's loop nest: `#loop.origin<3, "aten.sort.default", "", "",
    "llm">`, or `"stand-in"` when a template's nest stands for another algorithm (a DFT for an FFT):
    its arithmetic is not priced as written (docs/llm-frontend.md)."""

    name = "loop.origin"
    instance: IntAttr
    op: StringAttr
    module: StringAttr
    phase: StringAttr
    by: StringAttr  # "llm", "stand-in", or "" (a template of the frontend, priced as written)

    def __init__(self, origin: Origin):
        super().__init__(IntAttr(origin.id), StringAttr(origin.op), StringAttr(origin.module or ""),
                         StringAttr(origin.phase or ""), StringAttr(origin.by or ""))

    @property
    def stand_in(self) -> bool:
        """`Origin.stand_in`: the nest is one algorithm among many, not priced as written."""
        return self.by.data != ""

    @property
    def origin(self) -> Origin:
        return Origin(self.instance.data, self.op.data, self.module.data or None, self.phase.data or None,
                      self.by.data or None)

    def verify(self) -> None:
        if self.by.data not in ("", LLM_NEST, STAND_IN):
            raise VerifyException(f"#loop.origin: the author is \"llm\", \"stand-in\" or absent, "
                                  f"got {self.by.data!r}")

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(f"{self.instance.data}, ")
            printer.print_string_literal(self.op.data)
            printer.print_string(", ")
            printer.print_string_literal(self.module.data)
            if self.phase.data or self.by.data:
                printer.print_string(", ")
                printer.print_string_literal(self.phase.data)
            if self.by.data:
                printer.print_string(", ")
                printer.print_string_literal(self.by.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            n = parser.parse_integer()
            parser.parse_punctuation(",")
            op = parser.parse_str_literal()
            parser.parse_punctuation(",")
            module = parser.parse_str_literal()
            phase = parser.parse_str_literal() if parser.parse_optional_punctuation(",") else ""
            by = parser.parse_str_literal() if parser.parse_optional_punctuation(",") else ""
            return (IntAttr(n), StringAttr(op), StringAttr(module), StringAttr(phase), StringAttr(by))


@irdl_attr_definition
class TracedAttr(ParametrizedAttribute):
    """`#loop.traced<"emb_weight", read, 917504, 1048576, 1>`: what a statement's indirect accesses
    of a tensor touched on the frontend's traced sample (`ast.Traced`): the tensor, `read` or
    `write`, distinct elements, domain points and number of such accesses; then, for gathers of a
    tensor by several statements, `union "emb_weight" 1835008 member 0 of 2`: the group's tensor,
    what its statements touched together, which of them this one is, how many they are."""

    name = "loop.traced"
    tensor: StringAttr
    write: IntAttr
    elements: IntAttr
    points: IntAttr
    accesses: IntAttr
    union: IntAttr
    member: IntAttr
    among: IntAttr
    group: StringAttr

    def __init__(self, t: Traced):
        super().__init__(StringAttr(t.tensor), IntAttr(int(t.write)), IntAttr(t.elements), IntAttr(t.points),
                         IntAttr(t.accesses), IntAttr(t.union), IntAttr(t.member), IntAttr(t.among),
                         StringAttr(t.group))

    @property
    def traced(self) -> Traced:
        return Traced(self.tensor.data, bool(self.write.data), self.elements.data, self.points.data,
                      self.accesses.data, self.union.data, self.among.data, self.member.data, self.group.data)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string_literal(self.tensor.data)
            printer.print_string(f", {'write' if self.write.data else 'read'}, {self.elements.data}, "
                                 f"{self.points.data}, {self.accesses.data}")
            if self.among.data:
                printer.print_string(", union ")
                printer.print_string_literal(self.group.data)
                printer.print_string(f" {self.union.data} member {self.member.data} of {self.among.data}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            tensor = parser.parse_str_literal()
            parser.parse_punctuation(",")
            kind = parser.parse_identifier()
            if kind not in ("read", "write"):
                parser.raise_error(f"expected read or write, got {kind}")
            nums = []
            for _ in range(3):
                parser.parse_punctuation(",")
                nums.append(parser.parse_integer())
            group, union, member, among = "", 0, 0, 0
            if parser.parse_optional_punctuation(","):
                parser.parse_keyword("union")
                group = parser.parse_str_literal()
                union = parser.parse_integer()
                parser.parse_keyword("member")
                member = parser.parse_integer()
                parser.parse_keyword("of")
                among = parser.parse_integer()
            return (StringAttr(tensor), IntAttr(int(kind == "write")), *(IntAttr(n) for n in nums),
                    IntAttr(union), IntAttr(member), IntAttr(among), StringAttr(group))

    def verify_(self) -> None:
        if min(self.elements.data, self.points.data, self.accesses.data) < 0 or self.accesses.data == 0:
            raise VerifyException("loop.traced: counts must be non-negative and accesses positive")
        among, union = self.among.data, self.union.data
        if among and (among < 2 or not 0 <= self.member.data < among or union < self.elements.data or
                      not self.group.data):
            raise VerifyException("loop.traced: a union is over two statements or more, of a named tensor, "
                                  "one of them this one, and holds at least its own elements")


def traced_of(attr: ArrayAttr | None) -> tuple[Traced, ...]:
    return () if attr is None else tuple(a.traced for a in attr.data if isinstance(a, TracedAttr))


# ---- helpers for verifiers --------------------------------------------------------------------------
def _enclosing(op: Operation, cls: type) -> list:
    out = []
    p = op.parent_op()
    while p is not None:
        if isinstance(p, cls):
            out.append(p)
        p = p.parent_op()
    return out


def _ivs_in_scope(op: Operation) -> set[str]:
    return {f.iv.data for f in _enclosing(op, ForOp)}


@lru_cache(maxsize=256)
def _dim_names(depth: int) -> tuple[str, ...]:
    """Stand-in loop-variable names for reading a map whose variables' names do not matter."""
    return tuple(f"d{i}" for i in range(depth))


def _depth(op: Operation) -> int:
    """The number of `loop.for` ops enclosing `op`: the dimensions its maps and sets must have."""
    n = 0
    p = op.parent_op()
    while p is not None:
        n += isinstance(p, ForOp)
        p = p.parent_op()
    return n


def _check_map(m: AffineMapAttr | AffineSetAttr, depth: int, what: str, results: int | None = None) -> None:
    """A map (or set) is over the enclosing loop variables: as many dimensions as loops enclose the
    op, no symbols (the loop IR has none: a loaded index is a `dynamic` operand instead)."""
    d = m.data
    if d.num_dims != depth or d.num_symbols:
        raise VerifyException(f"{what} has {d.num_dims} dimensions and {d.num_symbols} symbols, but "
                              f"{depth} loops enclose it (and the loop IR has no symbols)")
    if results is not None and len(d.results) != results:
        raise VerifyException(f"{what} must have {results} result(s), got {len(d.results)}")


class ScalarBodyOwner(OpTrait):
    """An op whose region computes one scalar with the loop dialect's scalar ops (`loop.stmt`,
    `einsum.node`)."""


class InScalarBody(OpTrait):
    """A scalar op: its parent owns a scalar body (`ScalarBodyOwner`)."""

    def verify(self, op: Operation) -> None:
        p = op.parent_op()
        if p is None or not p.has_trait(ScalarBodyOwner):
            raise VerifyException(f"'{op.name}' must be inside a scalar body (loop.stmt or einsum.node)")


def check_tensor_uses(decls: dict[str, TensorDeclOp], ops: Sequence[Operation]) -> None:
    """Symbol checks of every tensor reference under `ops` against one table of declarations, built
    once by the enclosing kernel or graph (MLIR's SymbolTable): rebuilding the table per use made
    verification quadratic in the program size."""
    for root in ops:
        for o in root.walk():
            if isinstance(o, TensorUser):
                for name, rank, elem, written in o.tensor_uses():
                    d = decls.get(name)
                    if d is None:
                        _fail(o, f"unknown tensor '{name}'")
                    elif len(d.dims) != rank:
                        _fail(o, f"'{name}' has rank {len(d.dims)} but is indexed with {rank} indices")
                    elif elem is not None and elem != d.element_type:
                        _fail(o, f"read of '{name}' must have type {d.dtype}" if not written else
                              f"type mismatch: '{name}' is {d.dtype} but the value is {type_dtype(elem)}")
                    elif written and d.role.data in ("input", "weight"):
                        _fail(o, f"cannot write to {d.role.data} tensor '{name}'")


class OpVerifyError(VerifyException):
    """A verification error that knows the op it is about (the driver prints that op's location)."""

    def __init__(self, message: str, op: Operation):
        super().__init__(message)
        self.op = op


def _fail(op: Operation, message: str) -> None:
    """A verification error reported at the op that uses the tensor, not at its kernel."""
    raise OpVerifyError(message, op)


class LocatedOp(IRDLOperation):
    """Base of the dialect's ops: a verification error raised by `verify_` remembers its op."""

    def __init__(self, *, operands: Sequence[SSAValue | Operation | Sequence[SSAValue]] = (),
                 result_types: Sequence[Attribute] = (), properties: Mapping[str, Attribute] | None = None,
                 regions: Sequence[Region] = ()) -> None:
        """The ops of these dialects pass flat result types, ready regions and operands nested at most
        one level (a variadic group), and none sizes its segments (`tests/test_dialect.py` checks): so
        the op `IRDLOperation.__init__` would build generically (a third of the time to build a large
        network's IR) is built directly. The verifier checks its structure as for any op."""
        flat: list[SSAValue] = []
        for x in operands:
            if isinstance(x, SSAValue):
                flat.append(x)
            elif isinstance(x, Operation):
                flat.append(x.results[0])
            else:
                flat.extend(x)
        Operation.__init__(self, operands=flat, result_types=result_types, properties=properties or {},
                           regions=regions)

    def emit_error(self, message: str, underlying_error: Exception):  # type: ignore[override]
        if not hasattr(underlying_error, "op"):
            underlying_error.op = self  # type: ignore[attr-defined]
        return super().emit_error(message, underlying_error)


class TensorUser(ABC):
    """Ops that name tensors: `tensor_uses()` lists (name, rank, element type or None, written) for
    `check_tensor_uses`."""

    @abstractmethod
    def tensor_uses(self) -> list[tuple[str, int, Attribute | None, bool]]: ...


# ---- locations ---------------------------------------------------------------------------------------
def location_of(loc: str | None) -> LocationAttr:
    """The op location of a `file:line` (or `file:line:col`) source position; unknown for None."""
    if not loc:
        return UnknownLoc()
    parts = loc.rsplit(":", 2)
    nums = [p for p in parts[1:] if p.isdigit()]
    if len(parts) == 3 and len(nums) == 2:
        return FileLineColLoc(StringAttr(parts[0]), IntAttr(int(parts[1])), IntAttr(int(parts[2])))
    head, _, line = loc.rpartition(":")
    if head and line.isdigit():
        return FileLineColLoc(StringAttr(head), IntAttr(int(line)), IntAttr(0))
    return NameLoc(StringAttr(loc), UnknownLoc())


def location_text(loc: Attribute) -> str | None:
    """`file:line` of an op location (column 0 is omitted: statements carry lines); None if unknown.
    A fused location gives its first known part."""
    if isinstance(loc, FileLineColLoc):
        col = loc.column.data
        return f"{loc.filename.data}:{loc.line.data}" + (f":{col}" if col else "")
    if isinstance(loc, NameLoc):
        return loc.desc.data
    if isinstance(loc, FusedLoc):
        for part in loc.locations.data:
            t = location_text(part)
            if t:
                return t
    return None


# ---- structure ops ----------------------------------------------------------------------------------
@irdl_op_definition
class KernelOp(LocatedOp):
    """A loop-IR program: tensor declarations, then loops and statements. It is the symbol table of
    its tensors: every tensor reference below it is checked against one table (`check_tensor_uses`)."""

    name = "loop.kernel"
    sym_name = prop_def(StringAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    assembly_format = "$sym_name attr-dict-with-keyword $body"

    def __init__(self, name: str, ops: Sequence[Operation] = ()):
        from xdsl.ir import Block, Region

        super().__init__(properties={"sym_name": StringAttr(name)}, regions=[Region(Block(ops))])

    def tensor_ops(self) -> dict[str, TensorOp]:
        return {o.sym_name.data: o for o in self.body.block.ops if isinstance(o, TensorOp)}

    def verify_(self) -> None:
        decls: dict[str, TensorDeclOp] = {}
        body: list[Operation] = []
        for o in self.body.block.ops:
            if isinstance(o, TensorOp):
                if body:
                    raise VerifyException("tensor declarations must precede the kernel body")
                if o.sym_name.data in decls:
                    raise VerifyException(f"tensor '{o.sym_name.data}' declared twice")
                decls[o.sym_name.data] = o
            elif isinstance(o, ForOp | IfOp | StmtOp):
                body.append(o)
            else:
                raise VerifyException(f"'{o.name}' cannot appear directly in a loop.kernel")
        check_tensor_uses(decls, body)


class TensorDeclOp(LocatedOp):
    """Shared definition of a tensor declaration (`loop.tensor`, `einsum.tensor`): name, shape,
    dtype and role (input, weight, output, local). Subclasses add the op name and parent trait."""

    sym_name = prop_def(StringAttr)
    element_type = prop_def(TypeAttribute)
    shape = prop_def(DenseArrayBase)
    role = prop_def(StringAttr)
    assembly_format = "$sym_name `:` $element_type qualified($shape) $role attr-dict"

    def __init__(self, name: str, shape: Sequence[int], dtype: str, role: str):
        super().__init__(properties={
            "sym_name": StringAttr(name), "element_type": dtype_type(dtype),
            "shape": i64_array(tuple(shape)), "role": StringAttr(role)})

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self.shape.get_values())

    @property
    def dtype(self) -> str:
        return type_dtype(self.element_type)

    def verify_(self) -> None:
        type_dtype(self.element_type)
        if self.role.data not in ROLES:
            raise VerifyException(f"tensor '{self.sym_name.data}': role must be one of {', '.join(ROLES)}")
        if any(d < 0 for d in self.dims):
            raise VerifyException(f"tensor '{self.sym_name.data}': negative dimension")


@irdl_op_definition
class TensorOp(TensorDeclOp):
    """A tensor of the kernel."""

    name = "loop.tensor"
    traits = traits_def(HasParent(KernelOp))


@irdl_op_definition
class ForOp(LocatedOp):
    """`for iv in range(lb, ub, step)`; `sequential` marks a loop-carried dependence (a scan). The
    bounds are one-result affine maps of the enclosing loop variables (the loop IR has no min/max
    bounds); `iv` names the loop variable, the dimension it is in the maps of the ops it encloses."""

    name = "loop.for"
    iv = prop_def(StringAttr)
    lb = prop_def(AffineMapAttr)
    ub = prop_def(AffineMapAttr)
    step = prop_def(IntegerAttr)
    sequential = opt_prop_def(UnitAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    assembly_format = "$iv `=` $lb `to` $ub `step` $step (`sequential` $sequential^)? " \
                      "attr-dict-with-keyword $body"

    def __init__(self, iv: str, lb: AffExpr | int, ub: AffExpr | int, step: int = 1, sequential: bool = False,
                 ops: Sequence[Operation] = (), *, dims: Sequence[str] = ()):
        """`dims`: the enclosing loop variables, outermost first."""
        from xdsl.ir import Block, Region

        what = f"bound of loop '{iv}'"
        props: dict[str, Attribute] = {"iv": StringAttr(iv), "lb": map_attr([lb], dims, what),
                                       "ub": map_attr([ub], dims, what), "step": i64_attr(step)}
        if sequential:
            props["sequential"] = UnitAttr()
        super().__init__(properties=props, regions=[Region(Block(ops))])

    def verify_(self) -> None:
        if self.step.value.data <= 0:
            raise VerifyException(f"loop '{self.iv.data}': step must be positive")
        scope = _ivs_in_scope(self)
        if self.iv.data in scope:
            raise VerifyException(f"loop variable '{self.iv.data}' shadows an enclosing loop variable")
        for m in (self.lb, self.ub):
            _check_map(m, len(scope), f"bound of loop '{self.iv.data}'", 1)

    def bounds(self, dims: Sequence[str]) -> tuple[AffExpr, AffExpr]:
        """(lb, ub) over the enclosing loop variables `dims`."""
        (lb,) = map_exprs(self.lb, dims)
        (ub,) = map_exprs(self.ub, dims)
        return lb, ub


@irdl_op_definition
class IfOp(LocatedOp):
    """An affine guard: the body runs where every constraint holds (padding, masks, boundaries). The
    constraints are an affine set over the enclosing loop variables."""

    name = "loop.if"
    conds = prop_def(AffineSetAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    assembly_format = "$conds attr-dict-with-keyword $body"

    def __init__(self, conds: Sequence[AffCond], ops: Sequence[Operation] = (), *, dims: Sequence[str] = ()):
        """`dims`: the enclosing loop variables, outermost first."""
        from xdsl.ir import Block, Region

        super().__init__(properties={"conds": set_attr(conds, dims)}, regions=[Region(Block(ops))])

    def constraints(self, dims: Sequence[str]) -> tuple[AffCond, ...]:
        return set_conds(self.conds, dims)

    def verify_(self) -> None:
        if not self.conds.data.constraints:
            raise VerifyException("loop.if needs at least one constraint")
        _check_map(self.conds, _depth(self), "guard")


@irdl_op_definition
class StmtOp(LocatedOp, TensorUser):
    """`target[indices] kind value`: the region computes the value and ends in `loop.yield`.

    Positions listed in `dynamic` (an indirect write, a scatter) take their index from the values
    the yield passes after the stored value, in position order; `indices` holds the placeholder 0
    there. Analyses treat such a dimension as reaching any element of the target. The source
    position is the op's location; `origin` names the source-level op (one eager kernel) the
    statement implements; `traced` what its indirect accesses touched on the traced sample."""

    name = "loop.stmt"
    target = prop_def(StringAttr)
    indices = prop_def(AffineMapAttr)
    kind = prop_def(StringAttr)
    dynamic = opt_prop_def(DenseArrayBase)
    origin = opt_prop_def(OriginAttr)
    traced = opt_prop_def(ArrayAttr[TracedAttr])
    body = region_def("single_block")
    traits = traits_def(ScalarBodyOwner())
    assembly_format = "$target $indices $kind (`dynamic` qualified($dynamic)^)? (`origin` $origin^)? " \
                      "(`traced` $traced^)? attr-dict-with-keyword $body"

    def __init__(self, target: str, indices: Sequence[AffExpr], kind: str, ops: Sequence[Operation],
                 loc: str | None = None, dynamic: Sequence[int] = (), origin: Origin | None = None,
                 traced: Sequence[Traced] = (), *, dims: Sequence[str] = ()):
        """`dims`: the enclosing loop variables, outermost first."""
        from xdsl.ir import Block, Region

        props: dict[str, Attribute] = {"target": StringAttr(target),
                                       "indices": map_attr(indices, dims, f"index of '{target}'"),
                                       "kind": StringAttr(kind)}
        if dynamic:
            props["dynamic"] = DenseArrayBase.from_list(i64, sorted(dynamic))
        if origin is not None:
            props["origin"] = OriginAttr(origin)
        if traced:
            props["traced"] = ArrayAttr([TracedAttr(t) for t in traced])
        super().__init__(properties=props, regions=[Region(Block(ops))])
        self.location = location_of(loc)

    @property
    def dynamic_positions(self) -> tuple[int, ...]:
        return () if self.dynamic is None else tuple(int(x) for x in self.dynamic.get_values())

    def tensor_uses(self) -> list[tuple[str, int, Attribute | None, bool]]:
        last = self.body.block.last_op
        elem = last.value.type if isinstance(last, YieldOp) else None
        return [(self.target.data, len(self.indices.data.results), elem, True)]

    def verify_(self) -> None:
        name = self.target.data
        depth = _depth(self)
        _check_map(self.indices, depth, f"index of '{name}'")
        if self.kind.data not in REDUCTIONS:
            raise VerifyException(f"unknown statement kind '{self.kind.data}' "
                                  f"(known: {', '.join(REDUCTIONS)})")
        last = self.body.block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("loop.stmt body must end with loop.yield")
        if self.kind.data != "=" and type_dtype(last.value.type) == "bool":
            raise VerifyException(f"'{self.kind.data}' reduction into bool tensor '{name}'")
        check_dynamic_write(name, len(self.indices.data.results), self.dynamic, self.dynamic_positions,
                            map_exprs(self.indices, _dim_names(depth)), last.dyn_indices)


def check_dynamic_write(name: str, rank: int, dynamic: Attribute | None, pos: Sequence[int],
                        indices: Sequence[AffExpr], values: Sequence[SSAValue],
                        yield_name: str = "loop.yield") -> None:
    """An indirect write's dynamic positions against the values its yield passes (shared with
    `einsum.node`)."""
    if dynamic is not None and not pos:
        raise VerifyException(f"write of '{name}': an empty dynamic list is written by omitting it")
    if list(pos) != sorted(set(pos)) or any(not 0 <= p < rank for p in pos):
        raise VerifyException(f"write of '{name}': dynamic positions must be distinct dimensions "
                              f"in increasing order, got {list(pos)}")
    if len(pos) != len(values):
        raise VerifyException(f"write of '{name}': {len(pos)} dynamic positions but {yield_name} "
                              f"passes {len(values)} index values")
    for p in pos:
        if indices[p] != AffExpr.lit(0):
            raise VerifyException(f"write of '{name}': dynamic position {p} must hold the "
                                  "placeholder index 0")
    for v in values:
        checked_rule(index_dtype, name, type_dtype(v.type))


# ---- scalar ops -------------------------------------------------------------------------------------
class _ScalarOp(LocatedOp):
    def dtype(self) -> str:
        return type_dtype(self.results[0].type)


@irdl_op_definition
class ReadOp(_ScalarOp, TensorUser):
    """`tensor[indices]`; positions listed in `dynamic` take their index from an operand (a loaded
    integer: gather / embedding), which makes the read indirect (non-affine) for analyses."""

    name = "loop.read"
    tensor = prop_def(StringAttr)
    indices = prop_def(AffineMapAttr)
    dynamic = prop_def(DenseArrayBase)
    dyn_indices = var_operand_def()
    result = result_def()
    traits = traits_def(HasParent(StmtOp))
    assembly_format = "$tensor $indices `dynamic` qualified($dynamic) " \
                      "(`(` $dyn_indices^ `:` type($dyn_indices) `)`)? attr-dict `:` type($result)"

    def __init__(self, tensor: str, indices: Sequence[AffExpr], dynamic: dict[int, SSAValue], dtype: str, *,
                 dims: Sequence[str] = ()):
        """`dims`: the enclosing loop variables, outermost first."""
        pos = sorted(dynamic)
        super().__init__(operands=[[dynamic[p] for p in pos]], result_types=[dtype_type(dtype)],
                         properties={"tensor": StringAttr(tensor),
                                     "indices": map_attr(indices, dims, f"index of '{tensor}'"),
                                     "dynamic": i64_array(tuple(pos))})

    @property
    def dynamic_positions(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self.dynamic.get_values())

    def tensor_uses(self) -> list[tuple[str, int, Attribute | None, bool]]:
        return [(self.tensor.data, len(self.indices.data.results), self.result.type, False)]

    def verify_(self) -> None:
        pos = self.dynamic_positions
        rank = len(self.indices.data.results)
        if len(pos) != len(self.dyn_indices) or len(set(pos)) != len(pos) or \
                any(not 0 <= p < rank for p in pos):
            raise VerifyException("dynamic index positions do not match the dynamic operands")
        for v in self.dyn_indices:
            checked_rule(index_dtype, self.tensor.data, type_dtype(v.type))
        _check_map(self.indices, _depth(self), f"index of '{self.tensor.data}'")


@irdl_op_definition
class IndexOp(_ScalarOp):
    """The value of an affine expression of loop variables (i64): iota, positions, argmax."""

    name = "loop.index"
    expr = prop_def(AffineMapAttr)
    result = result_def(IntegerType(64))
    traits = traits_def(HasParent(StmtOp))
    assembly_format = "$expr attr-dict `:` type($result)"

    def __init__(self, expr: AffExpr, *, dims: Sequence[str] = ()):
        """`dims`: the enclosing loop variables, outermost first."""
        super().__init__(result_types=[IntegerType(64)],
                         properties={"expr": map_attr([expr], dims, "loop.index")})

    def verify_(self) -> None:
        _check_map(self.expr, _depth(self), "loop.index", 1)


@irdl_op_definition
class ConstOp(_ScalarOp):
    """A literal; floats include inf, -inf and nan. The value is stored as f64 / i64 whatever the
    result type, because xDSL prints f32 attributes with 6 digits, which would not round-trip."""

    name = "loop.const"
    value = prop_def(FloatAttr | IntegerAttr)
    result = result_def()
    traits = traits_def(InScalarBody())
    assembly_format = "$value attr-dict `:` type($result)"

    def __init__(self, value: float | int | bool, dtype: str):
        t = dtype_type(dtype)
        attr: Attribute = FloatAttr(float(value), Float64Type()) if dtype in FLOAT_DTYPES else \
            IntegerAttr(int(value), i64)
        super().__init__(result_types=[t], properties={"value": attr})

    def verify_(self) -> None:
        dt = type_dtype(self.result.type)
        want = Float64Type() if dt in FLOAT_DTYPES else i64
        if self.value.type != want:
            raise VerifyException(f"loop.const of type {dt} stores its value as {want}")


@irdl_op_definition
class UnaryOp(_ScalarOp):
    name = "loop.unary"
    fn = prop_def(StringAttr)
    x = operand_def()
    result = result_def()
    traits = traits_def(InScalarBody())
    assembly_format = "$fn $x attr-dict `:` type($x) `->` type($result)"

    def __init__(self, fn: str, x: SSAValue, dtype: str):
        super().__init__(operands=[x], result_types=[dtype_type(dtype)], properties={"fn": StringAttr(fn)})

    def verify_(self) -> None:
        xt = type_dtype(self.x.type)
        _result_is(self, checked_rule(unary_result, self.fn.data, xt), f"'{self.fn.data}' of {xt}")


@irdl_op_definition
class BinaryOp(_ScalarOp):
    name = "loop.binary"
    fn = prop_def(StringAttr)
    lhs = operand_def()
    rhs = operand_def()
    result = result_def()
    traits = traits_def(InScalarBody())
    assembly_format = "$fn $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, fn: str, a: SSAValue, b: SSAValue):
        super().__init__(operands=[a, b], result_types=[a.type], properties={"fn": StringAttr(fn)})

    def verify_(self) -> None:
        xt = type_dtype(self.lhs.type)
        _result_is(self, checked_rule(binary_result, self.fn.data, xt, type_dtype(self.rhs.type)),
                   f"'{self.fn.data}' of {xt}")


@irdl_op_definition
class CmpOp(_ScalarOp):
    name = "loop.cmp"
    pred = prop_def(StringAttr)
    lhs = operand_def()
    rhs = operand_def()
    result = result_def(IntegerType(1))
    traits = traits_def(InScalarBody())
    assembly_format = "$pred $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)"

    def __init__(self, pred: str, a: SSAValue, b: SSAValue):
        super().__init__(operands=[a, b], result_types=[IntegerType(1)],
                         properties={"pred": StringAttr(pred)})

    def verify_(self) -> None:
        checked_rule(cmp_result, self.pred.data, type_dtype(self.lhs.type), type_dtype(self.rhs.type))


@irdl_op_definition
class SelectOp(_ScalarOp):
    name = "loop.select"
    cond = operand_def(IntegerType(1))
    a = operand_def()
    b = operand_def()
    result = result_def()
    traits = traits_def(InScalarBody())
    assembly_format = "$cond `,` $a `,` $b attr-dict `:` type($a) `,` type($b) `->` type($result)"

    def __init__(self, cond: SSAValue, a: SSAValue, b: SSAValue):
        super().__init__(operands=[cond, a, b], result_types=[a.type])

    def verify_(self) -> None:
        xt = type_dtype(self.a.type)
        _result_is(self, checked_rule(select_result, type_dtype(self.cond.type), xt, type_dtype(self.b.type)),
                   f"select of {xt}")


@irdl_op_definition
class CastOp(_ScalarOp):
    name = "loop.cast"
    x = operand_def()
    result = result_def()
    traits = traits_def(InScalarBody())
    assembly_format = "$x attr-dict `:` type($x) `->` type($result)"

    def __init__(self, x: SSAValue, dtype: str):
        super().__init__(operands=[x], result_types=[dtype_type(dtype)])

    def verify_(self) -> None:
        checked_rule(cast_result, type_dtype(self.x.type), type_dtype(self.result.type))


@irdl_op_definition
class BitcastOp(_ScalarOp):
    """The bits of `x` read as a dtype of the same width (MLIR's `arith.bitcast`; torch's
    `x.view(torch.int32)` of floats, how torchao's MX quantisation extracts an exponent). A separate
    op, not a `loop.cast` kind: every analysis that looks through a cast as keeping values (the
    dtype a contraction is priced at, product factors, value sets) must not look through this one.
    A register reinterpretation, no instruction: it costs 0 FLOPs, as a cast does."""

    name = "loop.bitcast"
    x = operand_def()
    result = result_def()
    traits = traits_def(InScalarBody())
    assembly_format = "$x attr-dict `:` type($x) `->` type($result)"

    def __init__(self, x: SSAValue, dtype: str):
        super().__init__(operands=[x], result_types=[dtype_type(dtype)])

    def verify_(self) -> None:
        checked_rule(bitcast_result, type_dtype(self.x.type), type_dtype(self.result.type))


def checked_rule(rule: object, *args: str) -> str:
    """The result dtype a `rules.py` check gives, or a verification error with its message."""
    try:
        return rule(*args)  # type: ignore[operator]
    except RuleError as err:
        raise VerifyException(str(err)) from None


def _result_is(op: _ScalarOp, want: str, what: str) -> None:
    if type_dtype(op.results[0].type) != want:
        raise VerifyException(f"{what} must give {want}")


@irdl_op_definition
class YieldOp(LocatedOp):
    """Ends a statement: the stored value, then the dynamic target indices (an indirect write)."""

    name = "loop.yield"
    value = operand_def()
    dyn_indices = var_operand_def()
    traits = traits_def(IsTerminator(), HasParent(StmtOp))
    assembly_format = "$value attr-dict `:` type($value) " \
                      "(`index` `(` $dyn_indices^ `:` type($dyn_indices) `)`)?"

    def __init__(self, value: SSAValue, dyn_indices: Sequence[SSAValue] = ()):
        super().__init__(operands=[value, list(dyn_indices)])


Loop = Dialect("loop", [KernelOp, TensorOp, ForOp, IfOp, StmtOp, ReadOp, IndexOp, ConstOp, UnaryOp,
                        BinaryOp, CmpOp, SelectOp, CastOp, BitcastOp, YieldOp],
               [OriginAttr, TracedAttr])
