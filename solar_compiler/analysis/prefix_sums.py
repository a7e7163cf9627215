"""Sums over nested ranges share their partial sums: a prefix sum is a scan.

A reduction `Y[.., p, ..] += f(k, ..)` whose summand does not depend on the output variable `p`, and
whose range of reduced variables grows (or shrinks) with `p`, one range inside the next, computes
the same partial sums for every `p`: `tril(ones(N, N)) @ x` (after narrowing: `Y[i, d] += x[k, d]`
for `k <= i`) is `cumsum(x, 0)`. Written as a sum per output it needs one addition per point of its
domain, N^2 D / 2; a scan (each output its predecessor plus the summands its range adds) needs one
per summand, N D. This is an association of the sums (entry "association" of the catalogue,
docs/bounds.md section 0.0), which the default model allows.

Lower bound: with the ranges nested, the output at the far end of `p` sums every summand of its
group (the other output variables' values), so that group needs at least (its distinct summands - 1)
additions, and groups that read the same summands (an output variable the summand does not depend
on) share them. The count is `footprint(summand dims) - footprint(summand dims that are output
dims)`. It holds when no constraint couples a reduced variable to an output variable other than `p`
(so every group has the same ranges), when the summand depends on every reduced variable (a
summand constant along one is a product, not a chain of additions), and for a step-1 `p`.
"""

from __future__ import annotations

import islpy as isl

from solar_compiler.analysis import structured as st
from solar_compiler.dialects.einsum import NodeOp

SCAN = "prefix sums as a scan"


def prefix_sum_adds(node: NodeOp) -> int | None:
    """The additions a scan needs for the node's accumulation (see the module docstring), or None
    when its ranges are not nested along an output variable its summand ignores."""
    if node.reduce.data != "add" or node.dynamic_positions or \
            any(k.data == "sequential" for k in node.get_iterator_types().data):
        return None
    red = st.reduced_dims(node)
    if not red or st.contraction_factors(node) is not None:
        return None
    summand = node.value_dims(st.stored_value(node))
    if not red <= summand:
        return None
    out = node.output_dims()
    cons = st._constraints(st.domain_key(node))  # noqa: SLF001 - the domain's own constraints
    for p in sorted(out - summand):
        others = out - {p}
        if NodeOp.ints(node.steps)[p] != 1 or \
                any(c.dims & red and c.dims & others for c in cons) or not _nested(node, p):
            continue
        return max(0, st.footprint(node, summand) - st.footprint(node, summand & others))
    return None


def _nested(node: NodeOp, p: int) -> bool:
    """Whether each point of the domain stays in it when `p` moves one step up (every range inside
    the next), or one step down (every range inside the previous), wherever `p` has that step."""
    dom = st.domain(node)
    n = node.get_num_loops()
    lo, hi = node.get_static_loop_intervals()[p]
    names = [f"d{i}" for i in range(n)]
    for step, edge in ((1, f"d{p} < {hi}"), (-1, f"d{p} > {lo}")):
        moved = ", ".join(f"d{i} - {step}" if i == p else x for i, x in enumerate(names))
        shift = isl.Map(f"{{ S[{', '.join(names)}] -> S[{moved}] }}")
        inner = dom.intersect(isl.Set(f"{{ S[{', '.join(names)}] : {edge} }}"))
        if inner.is_subset(dom.apply(shift)):
            return True
    return False
