"""The fewest distinct keys a gather loads when its keys are top-k indices: the rows of a
mixture-of-experts' expert weights that any routing reads.

With no traced footprint (a full-size model that cannot run here, `--indirect min`) a gather counts
the fewest elements any index values touch: one row per loaded position, as if every key were
equal. Top-k indices are not arbitrary: `torch.topk` returns k *distinct* positions per row, so the
keys of one row of the index tensor are pairwise distinct. A gather `W[idx[r, s], i, j]` whose
reads of `idx` cover s' positions of some row r touches at least s' distinct rows of W, each over
the box its affine positions span (when those use loop variables of their own): Mixtral's decode
reads two experts' weights per token and layer, not one.

The index tensor is recognised by its writers: every node that writes it implements
`aten.topk.default` (its `origin`), the positions are loop variables, and the one position a
sequential (`scan`) loop indexes is the selected dim (the template's k-step selection, so k > 1).
A local read through a pure copy of such a tensor is not followed (the rule errs low).
"""

from __future__ import annotations

from collections.abc import Sequence

import islpy as isl
from xdsl.ir import BlockArgument, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap, AffineSymExpr

from solar_compiler.analysis import structured as st
from solar_compiler.analysis.manager import op_analysis
from solar_compiler.dialects.einsum import GatherOp, GraphOp, NodeOp
from solar_compiler.dialects.loop import CastOp

TOPK_OPS = frozenset({"aten.topk.default"})


def distinct_positions(graph: GraphOp) -> dict[str, int]:
    """The locals whose values are pairwise distinct along one position for every fixed value of
    the others (top-k indices), and that position."""
    return op_analysis(graph, "distinct_positions", lambda: _distinct_positions(graph.nodes()))


def _distinct_positions(nodes: Sequence[NodeOp]) -> dict[str, int]:
    writers: dict[str, list[NodeOp]] = {}
    for n in nodes:
        writers.setdefault(n.output_name, []).append(n)
    out = {}
    for t, ws in writers.items():
        if any(w.origin is None or w.origin.op.data not in TOPK_OPS or w.dynamic_positions for w in ws):
            continue
        pos: set[int] = set()
        ok = True
        for w in ws:
            kinds = w.get_iterator_types().data
            for r, e in enumerate(w.get_indexing_maps().data[-1].data.results):
                if isinstance(e, AffineDimExpr):
                    if kinds[e.position].data == "sequential":
                        pos.add(r)
                elif not isinstance(e, AffineConstantExpr):
                    ok = False
        if ok and len(pos) == 1:
            out[t] = pos.pop()
    return out


def key_floor(node: NodeOp, m: AffineMap, tensor: str) -> int:
    """The fewest elements of `tensor` a gather of it at map `m` (one loaded position) in `node`
    touches when its key is a top-k index (module rule); 0 when the rule does not apply."""
    graph = node.parent_op()
    if not isinstance(graph, GraphOp) or m.num_symbols != 1:
        return 0
    distinct = distinct_positions(graph)
    if not distinct:
        return 0
    g = next((o for o in st.body_ops(node) if isinstance(o, GatherOp) and o.tensor_name == tensor
              and o.map.data == m and len(o.indices) == 1), None)
    if g is None:
        return 0
    arg = _read_of(g.indices[0])
    if arg is None or node.input_names[arg.index] not in distinct:
        return 0
    key_map = node.get_indexing_maps().data[arg.index].data
    d = distinct[node.input_names[arg.index]]
    key_vars = {x for e in key_map.results for x in st.dims_of(e)}
    affine = [e for e in m.results if not isinstance(e, AffineSymExpr)]
    if any(st.dims_of(e) & key_vars for e in affine) or node.guards is not None:
        return 0   # the affine part must span its box for every key
    keys = _keys_in_a_row(node, key_map.results, d)
    return keys * st.image_count(node, affine) if keys > 1 else 0


def _read_of(v: SSAValue) -> BlockArgument | None:
    """The input read a key is, through casts."""
    while not isinstance(v, BlockArgument):
        o = v.owner
        if not isinstance(o, CastOp):
            return None
        v = o.operands[0]
    return v


def _keys_in_a_row(node: NodeOp, results: Sequence[AffineExpr], d: int) -> int:
    """How many positions `d` the reads cover in one row of the index tensor (its other positions
    fixed at the lexicographically first read): that many distinct keys."""
    dom = st.domain(node)
    n = node.get_num_loops()
    idx = ", ".join(st.isl_expr(e) for e in results)
    dims = ", ".join(f"d{i}" for i in range(n))
    image = isl.Map(f"{{ S[{dims}] -> K[{idx}] }}").intersect_domain(dom).range()
    if image.is_empty():
        return 0
    first = image.lexmin().sample_point()
    row = image
    for r in range(len(results)):
        if r != d:
            v = first.get_coordinate_val(isl.dim_type.set, r).to_python()
            row = row.fix_val(isl.dim_type.set, r, isl.Val(v))
    return row.count_val().to_python()
