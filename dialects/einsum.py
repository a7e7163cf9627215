"""The `einsum` dialect: a kernel as a graph of structured einsum nodes, the IR the analyses read
after `lift-einsum`.

An `einsum.graph @k` is the symbol table of its tensors (`einsum.tensor`), then one
`einsum.node` per loop-IR statement (an identity init folded into the reduction after it shares the
node) in program order, then `einsum.return` of the final values of its output tensors. A node is
a structured op in the manner of MLIR's `linalg.generic` on tensors, in destination-passing style:

    %X = einsum.tensor @X : f32 array<i64: 2, 3, 9, 9> "input" -> tensor<2x3x9x9xf32>
    %W = einsum.tensor @W : f32 array<i64: 4, 3, 3, 3> "weight" -> tensor<4x3x3x3xf32>
    %Y = einsum.tensor @Y : f32 array<i64: 2, 4, 4, 4> "output" -> tensor<2x4x4x4xf32>
    %Y_1 = einsum.node @S1 ins([@X, @W], %X, %W : tensor<2x3x9x9xf32>, tensor<4x3x3x3xf32>)
           outs(@Y, %Y : tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32> reduce "add" init 0.0 <{
        ivs = ["n", "o", "p", "q", "c", "r", "s"],
        iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", ...],
        lower_bounds = affine_map<(d0, ..., d6) -> (0, 0, 0, 0, 0, 0, 0)>,
        upper_bounds = affine_map<(d0, ..., d6) -> (2, 4, 4, 4, 3, 3, 3)>, steps = array<i64: 1, ...>,
        guards = affine_set<(d0, ..., d6) : (d2 * 2 + d5 - 1 >= 0, ...)>,
        indexing_maps = [affine_map<(d0, ..., d6) -> (d0, d4, d2 * 2 + d5 - 1, d3 * 2 + d6 - 1)>,
                         affine_map<...-> (d1, d4, d5, d6)>, affine_map<...-> (d0, d1, d2, d3)>], ...}> {
      ^0(%x : f32, %w : f32):
        %m = loop.binary "mul" %x, %w : f32, f32 -> f32
        einsum.yield %m : f32
    } loc("conv.py":3:0)
    einsum.return %Y_1 : tensor<2x4x4x4xf32>

Semantics: for every point of the iteration domain (the loop bounds, steps and guards over `ivs`),
in lexicographic order, the body computes a value from one scalar per input (the input tensor
element at its indexing map) and the output element at the output map is combined with it by
`reduce` (`none` stores it). `init` is a folded identity store of the output before the reduction,
at the loop depth `init_depth` gives.

Edges are SSA values. Each `einsum.tensor` yields the tensor's initial value (a builtin
`tensor<...>` of its shape and element type): the caller's data for an input or weight, storage
not yet written for a local or output. A node's operands are the latest value of each input
(`ins`, one per `inputs` name), its *init* (`dest`: the latest value of its output before it runs)
and, inside the body, each `einsum.gather`'s source; its result is the output tensor's next value.
"Latest" is in program order: the result of the last earlier node that wrote that tensor, or its
initial value; the graph verifier checks every operand against that, and `link_edges` (re)computes
them from the names in one pass, so builders and rewrites build and edit by name and link once.
The names stay (`inputs`, `output`, a gather's `tensor`): they are the storage identity that
printing, labels and the conversion back to the loop AST use. Declarations are ops rather than
graph block arguments because a graph also owns its locals and outputs (role, shape, dtype, and a
symbol for the names to resolve to), and their initial values then come from the same op.
Meaning of the loop IR's in-place writes:
* a partial write (the halves of a concatenation) changes only the elements its domain reaches;
  the others come from its init, so the second half takes the first half's result as init and
  the reader of the whole takes the second's result;
* a scatter (an output map with symbols, bound by `einsum.yield`'s extra values) is the same: its
  init (the fill before it) carries every row the indices miss;
* a scan reads its own destination at an earlier step: its input operand for that tensor is the
  same value as its init, and the `sequential` loop says the reads see the writes of earlier
  steps, as in place. Nodes that share a sequential loop (one LSTM step, same `scopes`) run
  interleaved: their SSA edges are in program order, and a read of a tensor that a *later* node of
  the same loop writes (the previous step's `h`) is a loop-carried edge that the SSA operands do
  not show (its operand is the value from before the loop). Making those edges explicit is an
  `einsum.scan` region op that yields its carried tensors: the follow-up.

Loaded (indirect) indices: `einsum.gather @E(%E : tensor<...>) affine_map<(d0, d1)[s0] -> (s0, d1)>
(%idx)` reads an
element whose dimensions at the map's symbols come from body values (an embedding lookup); an
output map with symbols is an indirect write (a scatter), its symbols bound by the extra values of
`einsum.yield`. `einsum.index` is the value of an affine function of the loop variables (iota).
The graph verifier checks every direct (affine) index of every node inside its tensor's shape on
the node's domain (`NodeOp.verify_in_bounds`, what `check_bounds` asks of a loop-IR statement); a
loaded position is data, which the executor checks as it runs.

`scopes` and `guard_scopes` number the loops and `if` blocks of the original loop nest (with
`guard_depths`, how many loops enclose each guard constraint), so that nodes that shared a loop in
the loop IR (the statements of one LSTM time step) lower back to one loop (`graph_to_kernel`, which
reads the names and ignores the SSA operands). A
folded init runs in the node's outer `init_depth[0]` loops under its first `init_depth[1]` guard
constraints, placed by `init_guard_scopes` / `init_guard_depths`.
A node's source position is its op location; `origin` (and `init_origin`) name the source-level op.

Structured-op interface (as xDSL's `LinalgStructuredOperation`): `get_indexing_maps`,
`get_iterator_types`, `get_static_loop_ranges`, `derived_iterator_types` (the verifier checks the
stored `iterator_types` against them: `parallel` exactly where the written element depends on the
loop, `sequential` allowed anywhere, a scan's mark) and `value_dims`; the domain as an isl set,
accesses, body walker and counts built on them are `solar_compiler/analysis/structured.py`, with
the edges as use-def chains (`producer(node, i)` = `ins[i].owner`, `init_producer`, `consumers` =
the users of the result).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    DenseArrayBase,
    FlatSymbolRefAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    LocationAttr,
    NoneType,
    StringAttr,
    SymbolNameConstraint,
    TensorType,
    i32,
)
from xdsl.ir import Attribute, Block, BlockArgument, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    ParsePropInAttrDict,
    irdl_op_definition,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import HasParent, IsTerminator, NoTerminator, SymbolOpInterface, SymbolTable
from xdsl.utils.exceptions import VerifyException

from solar_compiler.dialects.loop import (
    LocatedOp,
    OpVerifyError,
    OriginAttr,
    ScalarBodyOwner,
    TensorDeclOp,
    TensorUser,
    TracedAttr,
    check_dynamic_write,
    check_tensor_uses,
    checked_rule,
    dtype_type,
    i64_array,
    type_dtype,
)
from solar_compiler.loopir.ast import Origin, Traced
from solar_compiler.loopir.rules import index_dtype

REDUCE_OPS = ("none", "add", "mul", "max", "min")
ITERATOR_TYPES = ("parallel", "reduction", "sequential")


@irdl_op_definition
class GraphOp(LocatedOp):
    """The einsum graph of one kernel: its tensors (symbols), then its nodes in program order."""

    name = "einsum.graph"
    sym_name = prop_def(SymbolNameConstraint())
    body = region_def("single_block")
    traits = traits_def(NoTerminator(), SymbolTable(), SymbolOpInterface())
    assembly_format = "$sym_name attr-dict-with-keyword $body"

    def __init__(self, kernel: str, ops: Sequence[Operation] = ()):
        super().__init__(properties={"sym_name": StringAttr(kernel)}, regions=[Region(Block(ops))])

    @property
    def kernel_name(self) -> str:
        return self.sym_name.data

    def tensor_ops(self) -> dict[str, TensorOp]:
        return {o.sym_name.data: o for o in self.body.block.ops if isinstance(o, TensorOp)}

    def nodes(self) -> list[NodeOp]:
        return [o for o in self.body.block.ops if isinstance(o, NodeOp)]

    def verify_(self) -> None:
        decls: dict[str, TensorDeclOp] = {}
        nodes: set[str] = set()
        for o in self.body.block.ops:
            if isinstance(o, TensorOp):
                if nodes:
                    raise VerifyException("tensor declarations must precede the nodes")
                if o.sym_name.data in decls:
                    raise VerifyException(f"tensor '{o.sym_name.data}' declared twice")
                decls[o.sym_name.data] = o
            elif isinstance(o, NodeOp):
                if o.sym_name.data in nodes or o.sym_name.data in decls:
                    raise VerifyException(f"symbol '{o.sym_name.data}' defined twice")
                nodes.add(o.sym_name.data)
            elif not (isinstance(o, ReturnOp) and o is self.body.block.last_op):
                raise VerifyException(f"'{o.name}' cannot appear in an einsum.graph" +
                                      (" except as its last op" if isinstance(o, ReturnOp) else ""))
        check_tensor_uses(decls, self.nodes())
        for n in self.nodes():
            if n.body.block.args and any(a.type != decls[t].element_type for t, a in
                                         zip(n.input_names, n.body.block.args, strict=True)):
                raise OpVerifyError(f"node {n.sym_name.data}: block argument types must be the element "
                                    "types of its inputs", n)
        self._verify_edges(decls)
        shapes = {t: d.dims for t, d in decls.items()}
        for n in self.nodes():
            n.verify_in_bounds(shapes)

    def _verify_edges(self, decls: dict[str, TensorDeclOp]) -> None:
        """Every operand is the latest value of the tensor it names (the value `link_edges` would
        give it), every node's result has its output tensor's type, and the graph returns the final
        value of each output tensor: the use-def chains and the names tell one story."""
        current: dict[str, SSAValue] = {}
        for t, d in decls.items():
            assert isinstance(d, TensorOp)
            current[t] = d.result
        for n in self.nodes():
            name = n.sym_name.data

            def stale(what: str, t: str, got: SSAValue | None, n: NodeOp = n, name: str = name) -> None:
                if got is None:
                    raise OpVerifyError(f"node {name}: {what} ('{t}') is missing: link the graph's edges "
                                        "(einsum.link_edges)", n)
                if got is not current[t]:
                    raise OpVerifyError(f"node {name}: {what} is a stale value of '{t}', not its latest "
                                        "value (the result of the last earlier node writing it, or the "
                                        "tensor's initial value)", n)

            ins, dest = _edges(n)
            if len(ins) != len(n.inputs.data):
                raise OpVerifyError(f"node {name}: {len(n.inputs.data)} inputs need {len(n.inputs.data)} "
                                    f"input operands, got {len(ins)}", n)
            for i, (t, v) in enumerate(zip(n.input_names, ins, strict=True)):
                stale(f"operand {i}", t, v)
            for g in n.gathers():
                stale(f"the gather of '{g.tensor_name}'", g.tensor_name, g.source)
            stale("the init (destination)", n.output_name, dest)
            want = current[n.output_name].type  # every value of a tensor has its declared type
            if n.result.type != want:
                raise OpVerifyError(f"node {name}: the result must have the type of '{n.output_name}', "
                                    f"{want}", n)
            current[n.output_name] = n.result
        ret = self.body.block.last_op
        want = [current[t] for t, d in decls.items() if d.role.data == "output"]
        if not isinstance(ret, ReturnOp):
            raise VerifyException("an einsum.graph ends with einsum.return (the final values of its outputs)")
        if len(ret.values) != len(want) or any(a is not b for a, b in zip(ret.values, want, strict=False)):
            raise VerifyException("einsum.return must give the final value of every output tensor, in "
                                  "declaration order")


@irdl_op_definition
class TensorOp(TensorDeclOp):
    """A tensor of the graph (same fields and checks as `loop.tensor`), a symbol."""

    name = "einsum.tensor"
    sym_name = prop_def(SymbolNameConstraint())
    result = result_def(TensorType)
    traits = traits_def(HasParent(GraphOp), SymbolOpInterface())
    assembly_format = "$sym_name `:` $element_type qualified($shape) $role attr-dict `->` type($result)"

    def __init__(self, name: str, shape: Sequence[int], dtype: str, role: str):
        elem = dtype_type(dtype)
        super(TensorDeclOp, self).__init__(
            properties={"sym_name": StringAttr(name), "element_type": elem, "shape": i64_array(tuple(shape)),
                        "role": StringAttr(role)},
            result_types=[TensorType(elem, tuple(shape))])
        _name_value(self.result, name)

    @property
    def tensor_type(self) -> TensorType:
        """The builtin tensor type of the declaration (shape and element type)."""
        return TensorType(self.element_type, self.dims)

    def verify_(self) -> None:
        super().verify_()
        if self.result.type != self.tensor_type:
            raise VerifyException(f"tensor '{self.sym_name.data}': its value must have type "
                                  f"{self.tensor_type}")


@irdl_op_definition
class NodeOp(LocatedOp, TensorUser):
    """One structured einsum node (see the module docstring)."""

    name = "einsum.node"
    sym_name = prop_def(SymbolNameConstraint())
    inputs = prop_def(ArrayAttr[FlatSymbolRefAttr])
    output = prop_def(FlatSymbolRefAttr)
    reduce = prop_def(StringAttr)
    init = opt_prop_def(FloatAttr | IntegerAttr)
    ivs = prop_def(ArrayAttr[StringAttr])
    iterator_types = prop_def(ArrayAttr[StringAttr])
    lower_bounds = prop_def(AffineMapAttr)
    upper_bounds = prop_def(AffineMapAttr)
    steps = prop_def(DenseArrayBase)
    guards = opt_prop_def(AffineSetAttr)
    indexing_maps = prop_def(ArrayAttr[AffineMapAttr])
    output_dynamic = opt_prop_def(DenseArrayBase)
    scopes = prop_def(DenseArrayBase)
    guard_scopes = opt_prop_def(DenseArrayBase)
    guard_depths = opt_prop_def(DenseArrayBase)
    init_depth = opt_prop_def(DenseArrayBase)
    init_guard_scopes = opt_prop_def(DenseArrayBase)
    init_guard_depths = opt_prop_def(DenseArrayBase)
    origin = opt_prop_def(OriginAttr)
    init_origin = opt_prop_def(OriginAttr)
    traced = opt_prop_def(ArrayAttr[TracedAttr])
    body = region_def("single_block")
    ins = var_operand_def(TensorType)
    dest = opt_operand_def(TensorType)
    result = result_def()
    traits = traits_def(HasParent(GraphOp), SymbolOpInterface(), ScalarBodyOwner())
    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())
    assembly_format = ("$sym_name `ins` `(` $inputs (`,` $ins^ `:` type($ins))? `)` "
                       "`outs` `(` $output (`,` $dest^ `:` type($dest))? `)` `->` type($result) "
                       "`reduce` $reduce (`init` $init^)? attr-dict-with-keyword $body")

    def __init__(self, *, name: str, inputs: Sequence[str], output: str, reduce: str,
                 ivs: Sequence[str], iterator_types: Sequence[str], lower_bounds: AffineMapAttr,
                 upper_bounds: AffineMapAttr, steps: Sequence[int], indexing_maps: Sequence[AffineMapAttr],
                 body: Region, scopes: Sequence[int], guards: AffineSetAttr | None = None,
                 guard_scopes: Sequence[int] = (), guard_depths: Sequence[int] = (),
                 output_dynamic: Sequence[int] = (), init: Attribute | None = None,
                 init_depth: tuple[int, int] | None = None, init_guard_scopes: Sequence[int] = (),
                 init_guard_depths: Sequence[int] = (), origin: Origin | None = None,
                 init_origin: Origin | None = None, location: LocationAttr | None = None,
                 traced: Sequence[Traced] = (), ins: Sequence[SSAValue] = (), dest: SSAValue | None = None,
                 result_type: Attribute | None = None):
        props: dict[str, Attribute] = {
            "sym_name": StringAttr(name), "inputs": ArrayAttr([FlatSymbolRefAttr(t) for t in inputs]),
            "output": FlatSymbolRefAttr(output), "reduce": StringAttr(reduce),
            "ivs": ArrayAttr([StringAttr(v) for v in ivs]),
            "iterator_types": ArrayAttr([StringAttr(k) for k in iterator_types]),
            "lower_bounds": lower_bounds, "upper_bounds": upper_bounds,
            "steps": i64_array(tuple(steps)), "indexing_maps": ArrayAttr(indexing_maps),
            "scopes": i64_array(tuple(scopes))}
        if guards is not None and guards.data.constraints:
            props["guards"] = guards
            props["guard_scopes"] = i64_array(tuple(guard_scopes))
            props["guard_depths"] = i64_array(tuple(guard_depths))
        if output_dynamic:
            props["output_dynamic"] = i64_array(tuple(output_dynamic))
        if init is not None:
            props["init"] = init
            assert init_depth is not None
            props["init_depth"] = i64_array(tuple(init_depth))
            if init_depth[1]:
                props["init_guard_scopes"] = i64_array(tuple(init_guard_scopes))
                props["init_guard_depths"] = i64_array(tuple(init_guard_depths))
        if origin is not None:
            props["origin"] = OriginAttr(origin)
        if init_origin is not None:
            props["init_origin"] = OriginAttr(init_origin)
        if traced:
            props["traced"] = ArrayAttr([TracedAttr(t) for t in traced])
        super().__init__(properties=props, regions=[body],
                         result_types=[NoneType() if result_type is None else result_type])
        _set_operands(self, [list(ins), [] if dest is None else [dest]])
        _name_value(self.result, output)
        if location is not None:
            self.location = location

    # ---- views ---------------------------------------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        return [r.root_reference.data for r in self.inputs.data]

    @property
    def output_name(self) -> str:
        return self.output.root_reference.data

    @property
    def iv_names(self) -> list[str]:
        return [s.data for s in self.ivs.data]

    def gathers(self) -> list[GatherOp]:
        """The indirect reads of the body, in body order."""
        return [o for o in self.body.block.ops if isinstance(o, GatherOp)]  # scalar ops: no regions

    @property
    def dynamic_positions(self) -> tuple[int, ...]:
        return () if self.output_dynamic is None else tuple(int(x) for x in self.output_dynamic.get_values())

    @staticmethod
    def ints(a: DenseArrayBase | None) -> tuple[int, ...]:
        return () if a is None else tuple(int(x) for x in a.get_values())

    # ---- structured-op interface (as linalg's LinalgStructuredOperation) ----------------------------
    # What a node is made of, read from its attributes and body alone; the figures built on it (the
    # domain as an isl set, points, accesses, operation counts) are `analysis/structured.py`.
    def get_num_loops(self) -> int:
        return len(self.ivs.data)

    def get_indexing_maps(self) -> ArrayAttr[AffineMapAttr]:
        """One map per input (block argument), the output's last; gathers carry their own maps."""
        return self.indexing_maps

    def get_iterator_types(self) -> ArrayAttr[StringAttr]:
        return self.iterator_types

    def get_static_loop_intervals(self) -> tuple[tuple[int, int], ...]:
        """[lo, hi] of every loop variable, by interval arithmetic on the bounds (outer intervals
        substituted; guards ignored): the loop box a bound of outer variables fits in."""
        out: list[tuple[int, int]] = []
        for lb, ub in zip(self.lower_bounds.data.results, self.upper_bounds.data.results, strict=True):
            out.append((interval(lb, out)[0], interval(ub, out)[1] - 1))
        return tuple(out)

    def get_static_loop_ranges(self) -> tuple[int, ...]:
        """Trip extent of every loop of that box (hi - lo + 1, 0 when empty), steps ignored."""
        return tuple(max(hi - lo + 1, 0) for lo, hi in self.get_static_loop_intervals())

    def value_dims(self, v: SSAValue, memo: dict[SSAValue, frozenset[int]] | None = None) -> frozenset[int]:
        """Loop dimensions a body value depends on: the dims its inputs' indexing maps, its gathers'
        affine positions (and their index values) and its `einsum.index` maps use."""
        memo = {} if memo is None else memo
        if v in memo:
            return memo[v]
        if isinstance(v, BlockArgument):
            got = frozenset(d for r in self.indexing_maps.data[v.index].data.results for d in _dims_used(r))
        else:
            o = v.owner
            assert isinstance(o, Operation)
            got = frozenset().union(*(self.value_dims(x, memo) for x in o.operands))
            if isinstance(o, GatherOp | IndexOp):
                got |= {d for r in o.map.data.results for d in _dims_used(r)}
        memo[v] = got
        return got

    def output_dims(self) -> frozenset[int]:
        """Dims the written element depends on: the output map's, and a scatter's index values'."""
        y = self.body.block.last_op
        dims = {d for r in self.indexing_maps.data[-1].data.results for d in _dims_used(r)}
        if isinstance(y, YieldOp):
            memo: dict[SSAValue, frozenset[int]] = {}
            for v in y.dyn_indices:
                dims |= self.value_dims(v, memo)
        return frozenset(dims)

    def derived_iterator_types(self) -> tuple[str, ...]:
        """`parallel` for a dim the written element depends on, else `reduction` (a loop marked
        `sequential`, a scan's, keeps its mark: the accesses cannot tell a scan from a reduction)."""
        out = self.output_dims()
        return tuple("parallel" if d in out else "reduction" for d in range(self.get_num_loops()))

    def tensor_uses(self) -> list[tuple[str, int, Attribute | None, bool]]:
        maps = self.indexing_maps.data
        y = self.body.block.last_op
        out: list[tuple[str, int, Attribute | None, bool]] = [
            (t, len(m.data.results), None, False) for t, m in zip(self.input_names, maps, strict=False)]
        out.append((self.output_name, len(maps[-1].data.results),
                    y.stored.type if isinstance(y, YieldOp) else None, True))
        return out

    def verify_(self) -> None:
        name = self.sym_name.data
        n = len(self.ivs.data)

        def bad(msg: str) -> VerifyException:
            return VerifyException(f"node {name}: {msg}")

        if len(set(self.iv_names)) != n:
            raise bad("loop variables must be distinct")
        if len(self.iterator_types.data) != n or any(k.data not in ITERATOR_TYPES
                                                     for k in self.iterator_types.data):
            raise bad(f"iterator_types must give one of {', '.join(ITERATOR_TYPES)} per loop variable")
        for what, m in (("lower_bounds", self.lower_bounds), ("upper_bounds", self.upper_bounds)):
            mp = m.data
            if mp.num_dims != n or mp.num_symbols or len(mp.results) != n:
                raise bad(f"{what} must map the {n} loop variables to {n} bounds")
            for i, r in enumerate(mp.results):
                if any(d >= i for d in _dims_used(r)):
                    raise bad(f"{what}: the bound of '{self.iv_names[i]}' may only use outer loop variables")
        steps = self.ints(self.steps)
        if len(steps) != n or any(s <= 0 for s in steps):
            raise bad("steps must give one positive step per loop variable")
        if len(self.ints(self.scopes)) != n:
            raise bad("scopes must number every loop")
        ng = 0
        if self.guards is not None:
            g = self.guards.data
            ng = len(g.constraints)
            if g.num_dims != n or g.num_symbols:
                raise bad(f"guards must be a set over the {n} loop variables")
            depths = self.ints(self.guard_depths)
            if len(self.ints(self.guard_scopes)) != ng or len(depths) != ng:
                raise bad("guard_scopes and guard_depths must give one entry per guard constraint")
            if list(depths) != sorted(depths) or any(not 0 <= d <= n for d in depths):
                raise bad("guard_depths must be loop depths in nest order")
            for c, d in zip(g.constraints, depths, strict=True):
                if any(x >= d for x in _dims_used(c.lhs) | _dims_used(c.rhs)):
                    raise bad("a guard may only use the loop variables that enclose it")
        maps = self.indexing_maps.data
        if len(maps) != len(self.inputs.data) + 1:
            raise bad(f"{len(self.inputs.data)} inputs need {len(self.inputs.data) + 1} indexing maps "
                      f"(the output's last), got {len(maps)}")
        for t, m in zip(self.input_names, maps, strict=False):
            if m.data.num_dims != n or m.data.num_symbols:
                raise bad(f"the map of input '{t}' must be over the {n} loop variables, without symbols")
        pos = self.dynamic_positions
        out_map = maps[-1].data
        if out_map.num_dims != n or out_map.num_symbols != len(pos):
            raise bad(f"the output map must be over the {n} loop variables with one symbol per dynamic "
                      "position")
        for k, p in enumerate(pos):
            if p >= len(out_map.results) or _sym_only(out_map.results[p]) != k:
                raise bad(f"output position {p} must be the map's symbol s{k}")
        block = self.body.block
        if len(block.args) != len(self.inputs.data):
            raise bad(f"the body takes one scalar per input ({len(self.inputs.data)}), got {len(block.args)}")
        y = block.last_op
        if not isinstance(y, YieldOp):
            raise bad("the body must end with einsum.yield")
        if self.reduce.data not in REDUCE_OPS:
            raise bad(f"reduce must be one of {', '.join(REDUCE_OPS)}")
        if self.reduce.data != "none" and type_dtype(y.stored.type) == "bool":
            raise bad(f"'{self.reduce.data}' reduction into a bool tensor")
        check_dynamic_write(self.output_name, len(out_map.results), self.output_dynamic, pos,
                            [_static(r) for r in out_map.results], y.dyn_indices, "einsum.yield")
        stored = [k.data for k in self.iterator_types.data]
        for i, (k, d) in enumerate(zip(stored, self.derived_iterator_types(), strict=True)):
            if k not in ("sequential", d):
                raise bad(f"iterator_types: '{self.iv_names[i]}' is {k}, but the accesses make it {d}")
        if self.init is not None:
            if self.reduce.data == "none":
                raise bad("an init needs a reduction")
            depth = self.ints(self.init_depth)
            if len(depth) != 2 or not 0 <= depth[0] <= n or not 0 <= depth[1] <= ng:
                raise bad("init_depth must give the loops and guards that enclose the init")
            idepths = self.ints(self.init_guard_depths)
            if len(self.ints(self.init_guard_scopes)) != depth[1] or len(idepths) != depth[1] or \
                    list(idepths) != sorted(idepths) or any(not 0 <= d <= depth[0] for d in idepths):
                raise bad("init_guard_scopes and init_guard_depths must place each guard of the init")
        elif self.init_depth is not None or self.init_origin is not None:
            raise bad("init_depth and init_origin need an init")

    def verify_in_bounds(self, shapes: Mapping[str, Sequence[int]]) -> None:
        """Every direct access stays inside its tensor (`shapes`: the graph's declarations) on the
        node's domain, and the folded init's write on the init's domain; a loaded (symbol) position
        is data, checked by the executor as it runs. The loop box decides most indices by interval
        arithmetic; an index that leaves it is decided exactly on the domain with its steps and
        guards (isl, `loopir/domain.py`, as `check_bounds` decides a statement), so a valid graph is
        never rejected."""
        maps = [m.data for m in self.indexing_maps.data]
        accesses = [*zip(self.input_names, maps[:-1], strict=True), (self.output_name, maps[-1])]
        accesses += [(g.tensor_name, g.map.data) for g in self.gathers()]
        box = self.get_static_loop_intervals()
        n_guards = 0 if self.guards is None else len(self.guards.data.constraints)
        init = self.ints(self.init_depth) if self.init is not None else None
        for k, (tensor, m) in enumerate(accesses):
            for d, (r, size) in enumerate(zip(m.results, shapes[tensor], strict=True)):
                if _has_symbol(r):
                    continue
                lo, hi = interval(r, box)
                if 0 <= lo and hi < size:
                    continue
                where = ((len(box), n_guards, "the node's domain"),)
                if k == len(maps) - 1 and init is not None and max(_dims_used(r), default=-1) < init[0]:
                    where += ((init[0], init[1], "the domain of its init"),)
                for depth, guards, what in where:
                    if not _exact_in_range(self, depth, guards, r, size):
                        raise OpVerifyError(f"node {self.sym_name.data}: index {d} of '{tensor}' "
                                            f"({_named(r, self.iv_names)}) leaves the range [0, {size}) "
                                            f"on {what}", self)


def _exact_in_range(node: NodeOp, depth: int, n_guards: int, r: object, size: int) -> bool:
    """Whether `r` stays in [0, size) on the node's outer `depth` loops (bounds, steps) under its
    first `n_guards` guard constraints, exactly (isl; an empty domain reads nothing)."""
    from solar_compiler.loopir.affine_map import from_affine_expr, from_set
    from solar_compiler.loopir.domain import index_in_range, loop_conds, unnamed_domain

    dims = [f"d{i}" for i in range(node.get_num_loops())]
    bounds = zip(node.lower_bounds.data.results, node.upper_bounds.data.results, node.ints(node.steps),
                 strict=True)
    conds = [c for i, (lb, ub, st) in zip(range(depth), bounds, strict=False)
             for c in loop_conds(dims[i], from_affine_expr(lb, dims), from_affine_expr(ub, dims), st)]
    if node.guards is not None:
        conds += from_set(node.guards.data, dims)[:n_guards]
    dom = unnamed_domain(tuple(dims[:depth]), tuple(conds))
    return index_in_range(dom, dims[:depth], from_affine_expr(r, dims), size)  # type: ignore[arg-type]


def _named(r: object, ivs: Sequence[str]) -> str:
    """An index in the loop variables' names, for a message."""
    from solar_compiler.loopir.affine_map import from_affine_expr

    return str(from_affine_expr(r, ivs))  # type: ignore[arg-type]


def _has_symbol(e: object) -> bool:
    """Whether an index uses a map symbol (a loaded position: data, not checked statically)."""
    from xdsl.ir.affine import AffineBinaryOpExpr, AffineSymExpr

    if isinstance(e, AffineSymExpr):
        return True
    return isinstance(e, AffineBinaryOpExpr) and (_has_symbol(e.lhs) or _has_symbol(e.rhs))


def _dims_used(e: object) -> set[int]:
    from xdsl.ir.affine import AffineBinaryOpExpr, AffineDimExpr

    if isinstance(e, AffineDimExpr):
        return {e.position}
    if isinstance(e, AffineBinaryOpExpr):
        return _dims_used(e.lhs) | _dims_used(e.rhs)
    return set()


def interval(e: object, outer: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """[lo, hi] of an affine expression whose dim `i` ranges over `outer[i]` (floor division and
    modulo by positive constants, as the loop IR writes them)."""
    from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineDimExpr

    if isinstance(e, AffineConstantExpr):
        return e.value, e.value
    if isinstance(e, AffineDimExpr):
        return outer[e.position]
    if not isinstance(e, AffineBinaryOpExpr):
        raise VerifyException(f"'{e}': a loop bound may not use symbols")
    a, b = interval(e.lhs, outer), interval(e.rhs, outer)
    k = e.kind
    if k == AffineBinaryOpKind.Add:
        return a[0] + b[0], a[1] + b[1]
    if k == AffineBinaryOpKind.Mul:
        ps = [x * y for x in a for y in b]
        return min(ps), max(ps)
    if b[0] != b[1] or b[0] <= 0:
        raise VerifyException(f"'{e}': division by a non-constant")
    c = b[0]
    if k == AffineBinaryOpKind.FloorDiv:
        return a[0] // c, a[1] // c
    if k == AffineBinaryOpKind.CeilDiv:
        return -(-a[0] // c), -(-a[1] // c)
    return 0, c - 1  # Mod


def _sym_only(e: object) -> int | None:
    from xdsl.ir.affine import AffineSymExpr

    return e.position if isinstance(e, AffineSymExpr) else None


def _static(e: object):  # noqa: ANN202 - the placeholder check of check_dynamic_write
    """A symbol result reads as the placeholder index 0 (its value comes from the body)."""
    from solar_compiler.loopir.affine import AffExpr

    return AffExpr.lit(0) if _sym_only(e) is not None else AffExpr.lit(-1)


@irdl_op_definition
class GatherOp(LocatedOp, TensorUser):
    """An indirect read in a node body: the element of `tensor` at `map`, whose symbols are the
    loaded index values (an embedding lookup, a gather)."""

    name = "einsum.gather"
    tensor = prop_def(FlatSymbolRefAttr)
    map = prop_def(AffineMapAttr)
    source = opt_operand_def(TensorType)
    indices = var_operand_def()
    result = result_def()
    traits = traits_def(HasParent(NodeOp))
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = ("$tensor (`(` $source^ `:` type($source) `)`)? $map `(` $indices `)` attr-dict `:` "
                       "functional-type($indices, $result)")

    def __init__(self, tensor: str, amap: AffineMapAttr, indices: Sequence[SSAValue], dtype: str,
                 source: SSAValue | None = None):
        super().__init__(result_types=[dtype_type(dtype)],
                         properties={"tensor": FlatSymbolRefAttr(tensor), "map": amap})
        _set_operands(self, [[] if source is None else [source], list(indices)])

    @property
    def tensor_name(self) -> str:
        return self.tensor.root_reference.data

    def tensor_uses(self) -> list[tuple[str, int, Attribute | None, bool]]:
        return [(self.tensor_name, len(self.map.data.results), self.result.type, False)]

    def verify_(self) -> None:
        node = self.parent_op()
        assert isinstance(node, NodeOp)
        m = self.map.data
        if m.num_dims != len(node.ivs.data) or m.num_symbols != len(self.indices) or not self.indices:
            raise VerifyException(f"gather of '{self.tensor_name}': the map must be over the node's loop "
                                  "variables with one symbol per index operand")
        for v in self.indices:
            checked_rule(index_dtype, self.tensor_name, type_dtype(v.type))


@irdl_op_definition
class IndexOp(LocatedOp):
    """The value (i64) of an affine function of the node's loop variables."""

    name = "einsum.index"
    map = prop_def(AffineMapAttr)
    result = result_def(IntegerType(64))
    traits = traits_def(HasParent(NodeOp))
    assembly_format = "$map attr-dict `:` type($result)"

    def __init__(self, amap: AffineMapAttr):
        super().__init__(result_types=[IntegerType(64)], properties={"map": amap})

    def verify_(self) -> None:
        node = self.parent_op()
        assert isinstance(node, NodeOp)
        m = self.map.data
        if m.num_dims != len(node.ivs.data) or m.num_symbols or len(m.results) != 1:
            raise VerifyException("einsum.index: the map must give one value of the node's loop variables")


@irdl_op_definition
class YieldOp(LocatedOp):
    """Ends a node body: the value combined into the output, then the dynamic output indices."""

    name = "einsum.yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator(), HasParent(NodeOp))
    assembly_format = "$values attr-dict `:` type($values)"

    def __init__(self, value: SSAValue, dyn_indices: Sequence[SSAValue] = ()):
        super().__init__(operands=[[value, *dyn_indices]])

    @property
    def stored(self) -> SSAValue:
        return self.operands[0]

    @property
    def dyn_indices(self) -> tuple[SSAValue, ...]:
        return tuple(self.operands[1:])

    def verify_(self) -> None:
        if not self.operands:
            raise VerifyException("einsum.yield needs the value to store")


@irdl_op_definition
class ReturnOp(LocatedOp):
    """Ends a graph: the final value of every output tensor, in declaration order (the graph's
    results, as `func.return`)."""

    name = "einsum.return"
    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator(), HasParent(GraphOp))
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[list(values)])


def _name_value(v: SSAValue, name: str) -> None:
    """Print a tensor's values after it (`%Y`, `%Y_1`, ...) where the name is a valid SSA name."""
    if SSAValue.is_valid_name(name):
        v.name_hint = name


def set_edges(node: NodeOp, ins: Sequence[SSAValue], dest: SSAValue | None) -> None:
    """Set a node's input operands and init directly: a rewrite that knows the values it connects
    (the latest ones of the tensors it names, at the node's position) edits a large graph without
    relinking it all (`link_edges`)."""
    _set_operands(node, [ins, [dest] if dest is not None else []])


def _set_operands(op: Operation, groups: Sequence[Sequence[SSAValue]]) -> None:
    """Set an op's operand groups and their sizes (`LocatedOp` builds flat operand lists)."""
    op.operands = [v for g in groups for v in g]
    op.properties[AttrSizedOperandSegments.attribute_name] = _segment_sizes(tuple(len(g) for g in groups))


@lru_cache(maxsize=256)
def _segment_sizes(sizes: tuple[int, ...]) -> DenseArrayBase:
    """One (immutable) sizes attribute per shape of groups: building one per op was a fifth of the
    time to link a large graph."""
    return DenseArrayBase.from_list(i32, sizes)


def _edges(n: NodeOp) -> tuple[Sequence[SSAValue], SSAValue | None]:
    """A node's input operands and init, read with one look at its segment sizes (the generated
    accessors decode them at every call)."""
    sizes = n.properties.get(AttrSizedOperandSegments.attribute_name)
    ops = n.operands
    if not isinstance(sizes, DenseArrayBase):
        return ops, None
    k, d = (int(x) for x in sizes.get_values())
    return ops[:k], ops[k] if d else None


def link_edges(graph: GraphOp) -> GraphOp:
    """(Re)compute every SSA edge of `graph` from the tensor names, in program order, in one pass
    (linear in the nodes and their gathers): operand i of a node becomes the latest value of
    `inputs[i]`, a gather's source the latest value of its tensor, the init (`dest`) the latest value
    of the output, the node's result takes the output tensor's type and becomes the output's latest
    value, and the graph's `einsum.return` (replaced or added) gives the final values of its output
    tensors. Builders and rewrites build and edit nodes by name and call this once; a name that is
    not declared is left unlinked for the verifier to report. Returns the graph."""
    block = graph.body.block
    current: dict[str, SSAValue] = {}
    decls: dict[str, TensorOp] = {}
    for o in list(block.ops):
        if isinstance(o, TensorOp):
            current[o.sym_name.data] = o.result
            decls[o.sym_name.data] = o
        elif isinstance(o, NodeOp):
            ins = [current.get(t) for t in o.input_names]
            out = o.output_name
            if all(v is not None for v in ins):
                _set_operands(o, [ins, [current[out]] if out in current else []])  # type: ignore[list-item]
            for g in o.gathers():
                if g.tensor_name in current:
                    _set_operands(g, [[current[g.tensor_name]], list(g.indices)])
            if out in decls:
                if o.result.type is not decls[out].result.type:  # the result's type is its tensor's
                    o.result._type = decls[out].result.type  # noqa: SLF001
                current[out] = o.result
        elif isinstance(o, ReturnOp):
            o.detach()
            o.erase(safe_erase=False)
    block.add_op(ReturnOp([current[t] for t, d in decls.items() if d.role.data == "output"]))
    return graph


Einsum = Dialect("einsum", [GraphOp, TensorOp, NodeOp, GatherOp, IndexOp, YieldOp, ReturnOp], [])
