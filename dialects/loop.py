"""The `loop` dialect: the Affine Loop IR as xDSL operations.

A `loop.kernel` holds `loop.tensor` declarations and a body of `loop.for` / `loop.if` /
`loop.stmt`. Loop variables, bounds, guards and indices are affine expressions over named
induction variables (`#loop.aff<"2*p + r - 1">`), stored in canonical form so that islpy can build
iteration domains and access relations directly (`solar_compiler.polyhedral`). A statement's
region computes one scalar with the closed op set below and yields it; its `kind` says how it is
stored (`=`, `+=`, `*=`, `max=`, `min=`): the reduction kind is explicit, never a load-add-store.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    DenseArrayBase,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, ParametrizedAttribute, SSAValue, TypeAttribute
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
from xdsl.traits import HasParent, IsTerminator, NoTerminator
from xdsl.utils.exceptions import VerifyException

from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import (
    BINARY_FNS,
    CMP_PREDS,
    DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    REDUCTIONS,
    ROLES,
    TRANSCENDENTAL,
    UNARY_FNS,
    LoopIRError,
)

# ---- dtypes ------------------------------------------------------------------------------------
_TYPE_OF = {
    "f64": Float64Type(), "f32": Float32Type(), "bf16": BFloat16Type(), "f16": Float16Type(),
    "f8e4m3": Float8E4M3FNType(), "f8e5m2": Float8E5M2Type(),
    "i64": IntegerType(64), "i32": IntegerType(32), "i8": IntegerType(8), "bool": IntegerType(1),
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


@lru_cache(maxsize=65536)
def _parse_aff(text: str) -> AffExpr:
    from solar_compiler.text.parser import parse_affine

    return parse_affine(text)


@lru_cache(maxsize=65536)
def _parse_conds(text: str) -> tuple[AffCond, ...]:
    from solar_compiler.text.parser import parse_conds

    return tuple(parse_conds(text))


# ---- attributes ----------------------------------------------------------------------------------
class _TextAttr(ParametrizedAttribute):
    """An attribute holding one string in canonical text form, printed `#loop.x<"text">`."""

    text: StringAttr

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string_literal(self.text.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return (StringAttr(parser.parse_str_literal()),)


@irdl_attr_definition
class AffAttr(_TextAttr):
    """`#loop.aff<"2*p + r - 1">`: an affine expression over induction-variable names."""

    name = "loop.aff"

    def __init__(self, expr: AffExpr | int | str):
        super().__init__(StringAttr(str(AffExpr.of(expr)) if not isinstance(expr, str) else expr))

    @property
    def expr(self) -> AffExpr:
        return _parse_aff(self.text.data)

    def verify(self) -> None:
        try:
            e = self.expr
        except LoopIRError as err:
            raise VerifyException(f"bad affine expression '{self.text.data}': {err.message}") from None
        if str(e) != self.text.data:
            raise VerifyException(f"affine expression '{self.text.data}' is not canonical (write '{e}')")


@irdl_attr_definition
class CondAttr(_TextAttr):
    """`#loop.cond<"i >= j">`: one affine constraint (`>=` or `==`)."""

    name = "loop.cond"

    def __init__(self, cond: AffCond | str):
        super().__init__(StringAttr(str(cond)))

    @property
    def cond(self) -> AffCond:
        (c,) = _parse_conds(self.text.data)
        return c

    def verify(self) -> None:
        try:
            cs = _parse_conds(self.text.data)
        except LoopIRError as err:
            raise VerifyException(f"bad affine constraint '{self.text.data}': {err.message}") from None
        if len(cs) != 1:
            raise VerifyException(f"'{self.text.data}' must be exactly one constraint")


# ---- helpers for verifiers --------------------------------------------------------------------------
def _enclosing(op: Operation, cls: type) -> list:
    out = []
    p = op.parent_op()
    while p is not None:
        if isinstance(p, cls):
            out.append(p)
        p = p.parent_op()
    return out


def _kernel_of(op: Operation) -> KernelOp:
    ks = _enclosing(op, KernelOp)
    if not ks:
        raise VerifyException(f"'{op.name}' must be inside a loop.kernel")
    return ks[0]


def _ivs_in_scope(op: Operation) -> set[str]:
    return {f.iv.data for f in _enclosing(op, ForOp)}


def _check_vars(exprs: Sequence[AffExpr], scope: set[str], what: str) -> None:
    for e in exprs:
        free = e.vars() - scope
        if free:
            raise VerifyException(f"{what} uses '{sorted(free)[0]}', which is not an enclosing loop variable")


def _decl(op: Operation, name: str) -> TensorOp:
    t = _kernel_of(op).tensor_ops().get(name)
    if t is None:
        raise VerifyException(f"unknown tensor '{name}'")
    return t


# ---- structure ops ----------------------------------------------------------------------------------
@irdl_op_definition
class KernelOp(IRDLOperation):
    """A loop-IR program: tensor declarations, then loops and statements."""

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
        seen: set[str] = set()
        body_started = False
        for o in self.body.block.ops:
            if isinstance(o, TensorOp):
                if body_started:
                    raise VerifyException("tensor declarations must precede the kernel body")
                if o.sym_name.data in seen:
                    raise VerifyException(f"tensor '{o.sym_name.data}' declared twice")
                seen.add(o.sym_name.data)
            elif isinstance(o, ForOp | IfOp | StmtOp):
                body_started = True
            else:
                raise VerifyException(f"'{o.name}' cannot appear directly in a loop.kernel")


class TensorDeclOp(IRDLOperation):
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
            "shape": DenseArrayBase.from_list(i64, list(shape)), "role": StringAttr(role)})

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
class ForOp(IRDLOperation):
    """`for iv in range(lb, ub, step)`; `sequential` marks a loop-carried dependence (a scan)."""

    name = "loop.for"
    iv = prop_def(StringAttr)
    lb = prop_def(AffAttr)
    ub = prop_def(AffAttr)
    step = prop_def(IntegerAttr)
    sequential = opt_prop_def(UnitAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    assembly_format = "$iv `=` $lb `to` $ub `step` $step (`sequential` $sequential^)? " \
                      "attr-dict-with-keyword $body"

    def __init__(self, iv: str, lb: AffExpr, ub: AffExpr, step: int = 1, sequential: bool = False,
                 ops: Sequence[Operation] = ()):
        from xdsl.ir import Block, Region

        props: dict[str, Attribute] = {"iv": StringAttr(iv), "lb": AffAttr(lb), "ub": AffAttr(ub),
                                       "step": IntegerAttr(step, i64)}
        if sequential:
            props["sequential"] = UnitAttr()
        super().__init__(properties=props, regions=[Region(Block(ops))])

    def verify_(self) -> None:
        if self.step.value.data <= 0:
            raise VerifyException(f"loop '{self.iv.data}': step must be positive")
        scope = _ivs_in_scope(self)
        if self.iv.data in scope:
            raise VerifyException(f"loop variable '{self.iv.data}' shadows an enclosing loop variable")
        _check_vars([self.lb.expr, self.ub.expr], scope, f"bound of loop '{self.iv.data}'")


@irdl_op_definition
class IfOp(IRDLOperation):
    """An affine guard: the body runs where every constraint holds (padding, masks, boundaries)."""

    name = "loop.if"
    conds = prop_def(ArrayAttr[CondAttr])
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    assembly_format = "$conds attr-dict-with-keyword $body"

    def __init__(self, conds: Sequence[AffCond], ops: Sequence[Operation] = ()):
        from xdsl.ir import Block, Region

        super().__init__(properties={"conds": ArrayAttr([CondAttr(c) for c in conds])},
                         regions=[Region(Block(ops))])

    def verify_(self) -> None:
        if not self.conds.data:
            raise VerifyException("loop.if needs at least one constraint")
        _check_vars([c.cond.expr for c in self.conds.data], _ivs_in_scope(self), "guard")


@irdl_op_definition
class StmtOp(IRDLOperation):
    """`target[indices] kind value`: the region computes the value and ends in `loop.yield`.

    Positions listed in `dynamic` (an indirect write, a scatter) take their index from the values
    the yield passes after the stored value, in position order; `indices` holds the placeholder 0
    there. Analyses treat such a dimension as reaching any element of the target."""

    name = "loop.stmt"
    target = prop_def(StringAttr)
    indices = prop_def(ArrayAttr[AffAttr])
    kind = prop_def(StringAttr)
    dynamic = opt_prop_def(DenseArrayBase)
    loc = opt_prop_def(StringAttr)
    body = region_def("single_block")
    assembly_format = "$target $indices $kind (`dynamic` qualified($dynamic)^)? (`loc` $loc^)? " \
                      "attr-dict-with-keyword $body"

    def __init__(self, target: str, indices: Sequence[AffExpr], kind: str, ops: Sequence[Operation],
                 loc: str | None = None, dynamic: Sequence[int] = ()):
        from xdsl.ir import Block, Region

        props: dict[str, Attribute] = {"target": StringAttr(target),
                                       "indices": ArrayAttr([AffAttr(i) for i in indices]),
                                       "kind": StringAttr(kind)}
        if dynamic:
            props["dynamic"] = DenseArrayBase.from_list(i64, sorted(dynamic))
        if loc:
            props["loc"] = StringAttr(loc)
        super().__init__(properties=props, regions=[Region(Block(ops))])

    @property
    def dynamic_positions(self) -> tuple[int, ...]:
        return () if self.dynamic is None else tuple(int(x) for x in self.dynamic.get_values())

    def verify_(self) -> None:
        name = self.target.data
        decl = _decl(self, name)
        if decl.role.data in ("input", "weight"):
            raise VerifyException(f"cannot write to {decl.role.data} tensor '{name}'")
        if len(self.indices.data) != len(decl.dims):
            raise VerifyException(f"'{name}' has rank {len(decl.dims)} but is indexed with "
                                  f"{len(self.indices.data)} indices")
        _check_vars([a.expr for a in self.indices.data], _ivs_in_scope(self), f"index of '{name}'")
        if self.kind.data not in REDUCTIONS:
            raise VerifyException(f"unknown statement kind '{self.kind.data}' "
                                  f"(known: {', '.join(REDUCTIONS)})")
        last = self.body.block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("loop.stmt body must end with loop.yield")
        if last.value.type != decl.element_type:
            raise VerifyException(f"type mismatch: '{name}' is {decl.dtype} but the value is "
                                  f"{type_dtype(last.value.type)}")
        if self.kind.data != "=" and decl.dtype == "bool":
            raise VerifyException(f"'{self.kind.data}' reduction into bool tensor '{name}'")
        pos = self.dynamic_positions
        if self.dynamic is not None and not pos:
            raise VerifyException(f"write of '{name}': an empty dynamic list is written by omitting it")
        if list(pos) != sorted(set(pos)) or any(not 0 <= p < len(decl.dims) for p in pos):
            raise VerifyException(f"write of '{name}': dynamic positions must be distinct dimensions "
                                  f"in increasing order, got {list(pos)}")
        if len(pos) != len(last.dyn_indices):
            raise VerifyException(f"write of '{name}': {len(pos)} dynamic positions but loop.yield "
                                  f"passes {len(last.dyn_indices)} index values")
        for p in pos:
            if self.indices.data[p].expr != AffExpr.lit(0):
                raise VerifyException(f"write of '{name}': dynamic position {p} must hold the "
                                      "placeholder index 0")
        for v in last.dyn_indices:
            if type_dtype(v.type) not in INT_DTYPES:
                raise VerifyException(f"indirect index into '{name}' must be an integer")


# ---- scalar ops -------------------------------------------------------------------------------------
class _ScalarOp(IRDLOperation):
    def dtype(self) -> str:
        return type_dtype(self.results[0].type)


@irdl_op_definition
class ReadOp(_ScalarOp):
    """`tensor[indices]`; positions listed in `dynamic` take their index from an operand (a loaded
    integer: gather / embedding), which makes the read indirect (non-affine) for analyses."""

    name = "loop.read"
    tensor = prop_def(StringAttr)
    indices = prop_def(ArrayAttr[AffAttr])
    dynamic = prop_def(DenseArrayBase)
    dyn_indices = var_operand_def()
    result = result_def()
    traits = traits_def(HasParent(StmtOp))
    assembly_format = "$tensor $indices `dynamic` qualified($dynamic) " \
                      "(`(` $dyn_indices^ `:` type($dyn_indices) `)`)? attr-dict `:` type($result)"

    def __init__(self, tensor: str, indices: Sequence[AffExpr], dynamic: dict[int, SSAValue], dtype: str):
        pos = sorted(dynamic)
        super().__init__(operands=[[dynamic[p] for p in pos]], result_types=[dtype_type(dtype)],
                         properties={"tensor": StringAttr(tensor),
                                     "indices": ArrayAttr([AffAttr(i) for i in indices]),
                                     "dynamic": DenseArrayBase.from_list(i64, pos)})

    @property
    def dynamic_positions(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self.dynamic.get_values())

    def verify_(self) -> None:
        decl = _decl(self, self.tensor.data)
        if len(self.indices.data) != len(decl.dims):
            raise VerifyException(f"'{self.tensor.data}' has rank {len(decl.dims)} but is indexed with "
                                  f"{len(self.indices.data)} indices")
        if self.result.type != decl.element_type:
            raise VerifyException(f"read of '{self.tensor.data}' must have type {decl.dtype}")
        pos = self.dynamic_positions
        if len(pos) != len(self.dyn_indices) or len(set(pos)) != len(pos) or \
                any(not 0 <= p < len(decl.dims) for p in pos):
            raise VerifyException("dynamic index positions do not match the dynamic operands")
        for v in self.dyn_indices:
            if type_dtype(v.type) not in INT_DTYPES:
                raise VerifyException(f"indirect index into '{self.tensor.data}' must be an integer")
        _check_vars([a.expr for a in self.indices.data], _ivs_in_scope(self),
                    f"index of '{self.tensor.data}'")


@irdl_op_definition
class IndexOp(_ScalarOp):
    """The value of an affine expression of loop variables (i64): iota, positions, argmax."""

    name = "loop.index"
    expr = prop_def(AffAttr)
    result = result_def(IntegerType(64))
    traits = traits_def(HasParent(StmtOp))
    assembly_format = "$expr attr-dict `:` type($result)"

    def __init__(self, expr: AffExpr):
        super().__init__(result_types=[IntegerType(64)], properties={"expr": AffAttr(expr)})

    def verify_(self) -> None:
        _check_vars([self.expr.expr], _ivs_in_scope(self), "loop.index")


@irdl_op_definition
class ConstOp(_ScalarOp):
    """A literal; floats include inf, -inf and nan. The value is stored as f64 / i64 whatever the
    result type, because xDSL prints f32 attributes with 6 digits, which would not round-trip."""

    name = "loop.const"
    value = prop_def(FloatAttr | IntegerAttr)
    result = result_def()
    traits = traits_def(HasParent(StmtOp))
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
    traits = traits_def(HasParent(StmtOp))
    assembly_format = "$fn $x attr-dict `:` type($x) `->` type($result)"

    def __init__(self, fn: str, x: SSAValue, dtype: str):
        super().__init__(operands=[x], result_types=[dtype_type(dtype)], properties={"fn": StringAttr(fn)})

    def verify_(self) -> None:
        fn = self.fn.data
        if fn not in UNARY_FNS:
            raise VerifyException(f"unknown scalar operation '{fn}' (known: {', '.join(UNARY_FNS)})")
        xt = type_dtype(self.x.type)
        want = "bool" if fn in ("not", "isnan") else xt
        if type_dtype(self.result.type) != want:
            raise VerifyException(f"'{fn}' of {xt} must give {want}")
        if fn == "not" and xt != "bool":
            raise VerifyException(f"'not' needs a bool operand, got {xt}")
        if fn in TRANSCENDENTAL and xt not in FLOAT_DTYPES:
            raise VerifyException(f"'{fn}' needs a floating-point operand, got {xt}")


@irdl_op_definition
class BinaryOp(_ScalarOp):
    name = "loop.binary"
    fn = prop_def(StringAttr)
    lhs = operand_def()
    rhs = operand_def()
    result = result_def()
    traits = traits_def(HasParent(StmtOp))
    assembly_format = "$fn $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, fn: str, a: SSAValue, b: SSAValue):
        super().__init__(operands=[a, b], result_types=[a.type], properties={"fn": StringAttr(fn)})

    def verify_(self) -> None:
        fn = self.fn.data
        if fn not in BINARY_FNS:
            raise VerifyException(f"unknown scalar operation '{fn}' (known: {', '.join(BINARY_FNS)})")
        if self.lhs.type != self.rhs.type or self.result.type != self.lhs.type:
            raise VerifyException(f"type mismatch in '{fn}': {type_dtype(self.lhs.type)} vs "
                                  f"{type_dtype(self.rhs.type)} -> {type_dtype(self.result.type)}")


@irdl_op_definition
class CmpOp(_ScalarOp):
    name = "loop.cmp"
    pred = prop_def(StringAttr)
    lhs = operand_def()
    rhs = operand_def()
    result = result_def(IntegerType(1))
    traits = traits_def(HasParent(StmtOp))
    assembly_format = "$pred $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)"

    def __init__(self, pred: str, a: SSAValue, b: SSAValue):
        super().__init__(operands=[a, b], result_types=[IntegerType(1)],
                         properties={"pred": StringAttr(pred)})

    def verify_(self) -> None:
        if self.pred.data not in CMP_PREDS:
            raise VerifyException(f"unknown comparison '{self.pred.data}' (known: {', '.join(CMP_PREDS)})")
        if self.lhs.type != self.rhs.type:
            raise VerifyException(f"type mismatch in comparison: {type_dtype(self.lhs.type)} vs "
                                  f"{type_dtype(self.rhs.type)}")


@irdl_op_definition
class SelectOp(_ScalarOp):
    name = "loop.select"
    cond = operand_def(IntegerType(1))
    a = operand_def()
    b = operand_def()
    result = result_def()
    traits = traits_def(HasParent(StmtOp))
    assembly_format = "$cond `,` $a `,` $b attr-dict `:` type($a) `,` type($b) `->` type($result)"

    def __init__(self, cond: SSAValue, a: SSAValue, b: SSAValue):
        super().__init__(operands=[cond, a, b], result_types=[a.type])

    def verify_(self) -> None:
        if self.a.type != self.b.type or self.result.type != self.a.type:
            raise VerifyException(f"type mismatch in select: {type_dtype(self.a.type)} vs "
                                  f"{type_dtype(self.b.type)}")


@irdl_op_definition
class CastOp(_ScalarOp):
    name = "loop.cast"
    x = operand_def()
    result = result_def()
    traits = traits_def(HasParent(StmtOp))
    assembly_format = "$x attr-dict `:` type($x) `->` type($result)"

    def __init__(self, x: SSAValue, dtype: str):
        super().__init__(operands=[x], result_types=[dtype_type(dtype)])

    def verify_(self) -> None:
        type_dtype(self.x.type)
        type_dtype(self.result.type)


@irdl_op_definition
class YieldOp(IRDLOperation):
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
                        BinaryOp, CmpOp, SelectOp, CastOp, YieldOp], [AffAttr, CondAttr])
