"""The `einsum` dialect: a kernel as a dataflow graph of extended einsum nodes.

An `einsum.graph` holds `einsum.tensor` declarations, then one `einsum.node` per loop-IR statement
in program order (an identity init folded into the reduction after it shares that node). Edges are
by tensor name in program order: a node reads the value of a tensor left by the last node before it
that wrote it. A node is the einsum of its operands with affine (or, for gathers, loaded) index
expressions, over an exact iteration domain written as an islpy set:

    einsum.node "S1" "n c (2*p + r - 1) (2*q + s - 1), o c r s -> n o p q"
        ins(["X", "W"] : [f32, f32]) outs("Y" : f32) combine "mul" reduce "add" init "0.0"
        expr "X[n, c, 2*p + r - 1, 2*q + s - 1] * W[o, c, r, s]" domain "{ S1[n, o, p, q, c, r, s] : ... }"
        stmts array<i64: 0, 1> loc ["conv.py:3"]

Equation syntax: operands separated by `,`, indices by spaces; an index is a loop variable, an
affine expression in parentheses, or a loaded index in brackets (`[idx[i]]`: a gather on the left,
a scatter on the right, as in `v k d, token k -> [token[k]] d`). A node with a loaded index carries
the `indirect` flag (the verifier checks it).
`combine` names the elementwise op when the body is one op on tensor reads (`mul`, `add`, `exp`,
`gt`, `select`, `cast`), `copy` / `fill` / `iota` when there is no op, `expr` otherwise; `expr` is
the body in loop-IR text syntax either way. `stmts` lists the loop-IR statement indices the node
came from (see `passes/lift_einsum.py`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, StringAttr, UnitAttr, i64
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, TypeAttribute
from xdsl.irdl import IRDLOperation, irdl_op_definition, opt_prop_def, prop_def, region_def, traits_def
from xdsl.traits import HasParent, NoTerminator
from xdsl.utils.exceptions import VerifyException

from solar_compiler.dialects.loop import TensorDeclOp, dtype_type, type_dtype
from solar_compiler.loopir.ast import BINARY_FNS, CMP_PREDS, UNARY_FNS

REDUCE_OPS = ("none", "add", "mul", "max", "min")
COMBINE_OPS = frozenset(UNARY_FNS) | frozenset(BINARY_FNS) | frozenset(CMP_PREDS) | \
    {"copy", "fill", "iota", "cast", "select", "expr"}
_DOMAIN = re.compile(r"^\{ (S\d+)\[([^\]]*)\](?: : .*)? \}$", re.S)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# ---- equation text ---------------------------------------------------------------------------------
def _split_top(text: str, seps: str) -> list[str]:
    """Split at separator characters outside (), [] nesting."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if depth < 0:
            raise VerifyException(f"unbalanced brackets in '{text}'")
        if depth == 0 and ch in seps:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise VerifyException(f"unbalanced brackets in '{text}'")
    out.append("".join(cur))
    return out


def index_tokens(operand: str) -> list[str]:
    return [t for t in _split_top(operand.strip(), " ") if t]


def split_equation(equation: str, n_inputs: int) -> tuple[list[list[str]], list[str]]:
    """(index tokens per operand, output index tokens). With no inputs the left side is empty."""
    if equation.count("->") != 1:
        raise VerifyException(f"equation '{equation}' must contain exactly one '->'")
    lhs, rhs = equation.split("->")
    operands = [] if not lhs.strip() and n_inputs == 0 else _split_top(lhs, ",")
    return [index_tokens(o) for o in operands], index_tokens(rhs)


def _token_vars(token: str) -> set[str]:
    """Names in an affine index token (a loaded `[..]` index names tensors: not checked here)."""
    return set() if token.startswith("[") else set(_IDENT.findall(token))


@lru_cache(maxsize=65536)
def domain_vars(domain: str) -> tuple[str, tuple[str, ...]]:
    """(statement name, loop variables) of a domain set. Only the form is checked here: islpy takes
    ~0.3 ms to read a 7-deep conv domain, too slow for every verification of every node; the tests
    check that every domain `lift-einsum` writes reads in islpy to the exact iteration count."""
    m = _DOMAIN.match(domain)
    if m is None:
        raise VerifyException(f"domain '{domain}' is not of the form '{{ S<n>[vars] : constraints }}'")
    names = tuple(v.strip() for v in m.group(2).split(",") if v.strip())
    if any(not _NAME.match(v) for v in names) or len(set(names)) != len(names):
        raise VerifyException(f"domain '{domain}': the variables must be distinct names")
    return m.group(1), names


# ---- ops ---------------------------------------------------------------------------------------------
@irdl_op_definition
class GraphOp(IRDLOperation):
    """The einsum graph of one kernel; `kernel` names the `loop.kernel` it came from (not a symbol:
    the kernel and its graph share the name)."""

    name = "einsum.graph"
    kernel = prop_def(StringAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    assembly_format = "$kernel attr-dict-with-keyword $body"

    def __init__(self, kernel: str, ops: Sequence[Operation] = ()):
        super().__init__(properties={"kernel": StringAttr(kernel)}, regions=[Region(Block(ops))])

    def tensor_ops(self) -> dict[str, TensorOp]:
        return {o.sym_name.data: o for o in self.body.block.ops if isinstance(o, TensorOp)}

    def nodes(self) -> list[NodeOp]:
        return [o for o in self.body.block.ops if isinstance(o, NodeOp)]

    def verify_(self) -> None:
        tensors: set[str] = set()
        nodes: set[str] = set()
        for o in self.body.block.ops:
            if isinstance(o, TensorOp):
                if nodes:
                    raise VerifyException("tensor declarations must precede the nodes")
                if o.sym_name.data in tensors:
                    raise VerifyException(f"tensor '{o.sym_name.data}' declared twice")
                tensors.add(o.sym_name.data)
            elif isinstance(o, NodeOp):
                if o.sym_name.data in nodes:
                    raise VerifyException(f"node '{o.sym_name.data}' defined twice")
                nodes.add(o.sym_name.data)
            else:
                raise VerifyException(f"'{o.name}' cannot appear in an einsum.graph")


@irdl_op_definition
class TensorOp(TensorDeclOp):
    """A tensor of the graph (same fields and checks as `loop.tensor`)."""

    name = "einsum.tensor"
    traits = traits_def(HasParent(GraphOp))


@irdl_op_definition
class NodeOp(IRDLOperation):
    """One einsum node: `output[out idx] reduce= combine(inputs[idx]...)` over `domain`."""

    name = "einsum.node"
    sym_name = prop_def(StringAttr)
    equation = prop_def(StringAttr)
    inputs = prop_def(ArrayAttr[StringAttr])
    input_types = prop_def(ArrayAttr[TypeAttribute])
    output = prop_def(StringAttr)
    output_type = prop_def(TypeAttribute)
    combine = prop_def(StringAttr)
    reduce = prop_def(StringAttr)
    init = opt_prop_def(StringAttr)
    expr = prop_def(StringAttr)
    domain = prop_def(StringAttr)
    stmts = prop_def(DenseArrayBase)
    locs = opt_prop_def(ArrayAttr[StringAttr])
    indirect = opt_prop_def(UnitAttr)
    sequential = opt_prop_def(UnitAttr)
    traits = traits_def(HasParent(GraphOp))
    assembly_format = (
        "$sym_name $equation `ins` `(` $inputs `:` $input_types `)` `outs` `(` $output `:` $output_type `)` "
        "`combine` $combine `reduce` $reduce (`init` $init^)? `expr` $expr `domain` $domain "
        "`stmts` qualified($stmts) (`loc` $locs^)? (`indirect` $indirect^)? (`sequential` $sequential^)? "
        "attr-dict")

    def __init__(self, *, name: str, equation: str, inputs: Sequence[tuple[str, str]],
                 output: tuple[str, str], combine: str, reduce: str, expr: str, domain: str,
                 stmts: Sequence[int], init: str | None = None, locs: Sequence[str] = (),
                 indirect: bool = False, sequential: bool = False):
        props: dict[str, Attribute] = {
            "sym_name": StringAttr(name), "equation": StringAttr(equation),
            "inputs": ArrayAttr([StringAttr(t) for t, _ in inputs]),
            "input_types": ArrayAttr([dtype_type(d) for _, d in inputs]),
            "output": StringAttr(output[0]), "output_type": dtype_type(output[1]),
            "combine": StringAttr(combine), "reduce": StringAttr(reduce), "expr": StringAttr(expr),
            "domain": StringAttr(domain), "stmts": DenseArrayBase.from_list(i64, list(stmts))}
        if init is not None:
            props["init"] = StringAttr(init)
        if locs:
            props["locs"] = ArrayAttr([StringAttr(x) for x in locs])
        if indirect:
            props["indirect"] = UnitAttr()
        if sequential:
            props["sequential"] = UnitAttr()
        super().__init__(properties=props)

    @property
    def input_names(self) -> list[str]:
        return [s.data for s in self.inputs.data]

    @property
    def statement_indices(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self.stmts.get_values())

    def verify_(self) -> None:
        graph = self.parent_op()
        assert isinstance(graph, GraphOp)
        decls = graph.tensor_ops()
        name = self.sym_name.data
        ins = self.input_names
        if len(self.input_types.data) != len(ins):
            raise VerifyException(f"node {name}: {len(ins)} inputs but {len(self.input_types.data)} types")
        operands, out_idx = split_equation(self.equation.data, len(ins))
        if len(operands) != len(ins):
            raise VerifyException(f"node {name}: equation has {len(operands)} operands but the node has "
                                  f"{len(ins)} inputs")
        stmt, ivs = domain_vars(self.domain.data)
        if stmt != name:
            raise VerifyException(f"node {name}: domain names statement '{stmt}'")
        pairs = [*zip(ins, self.input_types.data, operands, strict=True),
                 (self.output.data, self.output_type, out_idx)]
        for t, ty, idx in pairs:
            d = decls.get(t)
            if d is None:
                raise VerifyException(f"node {name}: unknown tensor '{t}'")
            if ty != d.element_type:
                raise VerifyException(f"node {name}: '{t}' is {d.dtype}, not {type_dtype(ty)}")
            if len(idx) != len(d.dims):
                raise VerifyException(f"node {name}: '{t}' has rank {len(d.dims)} but the equation gives "
                                      f"{len(idx)} indices")
            for tok in idx:
                if tok.startswith("[") and self.indirect is None:
                    raise VerifyException(f"node {name}: loaded index '{tok}' of '{t}' needs the "
                                          "'indirect' flag")
                free = _token_vars(tok) - set(ivs)
                if free:
                    raise VerifyException(f"node {name}: index '{tok}' uses '{sorted(free)[0]}', which is "
                                          "not a variable of the domain")
        if decls[self.output.data].role.data in ("input", "weight"):
            raise VerifyException(f"node {name}: cannot write {decls[self.output.data].role.data} tensor "
                                  f"'{self.output.data}'")
        if self.reduce.data not in REDUCE_OPS:
            raise VerifyException(f"node {name}: reduce must be one of {', '.join(REDUCE_OPS)}")
        if self.combine.data not in COMBINE_OPS:
            raise VerifyException(f"node {name}: unknown combine op '{self.combine.data}'")
        if self.init is not None:
            if self.reduce.data == "none":
                raise VerifyException(f"node {name}: an init needs a reduction")
            try:
                float(self.init.data)
            except ValueError:
                raise VerifyException(f"node {name}: init '{self.init.data}' is not a literal") from None
        if not self.statement_indices:
            raise VerifyException(f"node {name}: stmts must list at least one statement")


Einsum = Dialect("einsum", [GraphOp, TensorOp, NodeOp], [])
