"""Cache-aware traffic: bytes that must cross a memory boundary under EVERY schedule (lower bound),
next to the traffic of the best tiling found (an attainable upper curve).

Model: the red-blue pebble game of Hong & Kung (STOC 1981) with a fast memory of S bytes per unit
(`units` independent copies, e.g. one per SM), recomputation allowed. The theorem used for a
contraction and its proof are in docs/bounds.md (section 2); in short, with W products, split any
schedule into segments of h bytes of I/O; the points V of a segment satisfy the Bollobas-Thomason /
Loomis-Whitney inequality |V| <= sqrt(rho * a * b * c) over the operand elements a, b and output
elements c they touch, and those elements must be in fast memory at the segment's start or read
(operands), and in fast memory at its end or written (outputs). For every h > 0:

    Q >= h * (2 W / (F(h + 2d) + F(2S + h + 2d)) - units)   when every output must survive (sunk),
    Q >= h * (W / F'(2S + h + 2d) - units)                  otherwise,
    F(T) = 2 sqrt(lam * m_c) * (T / 3)^1.5,  F' = F plus the outputs finished inside a segment,

d = the largest element size. The best h gives 1.927 W / sqrt(S_words) for one op: a proven constant
below the tight 2 W / sqrt(S) of Smith et al. (arXiv 1702.02017), whose lower-order terms we could
not verify. Only `+=` products of two operands that are projections once some slice variables are
fixed get a reuse term; everything else (elementwise, row reductions, gathers, scans, and by default
sliding windows, which Winograd/FFT can compute otherwise; indirect writes, scatters) is compulsory
traffic only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import islpy as isl
import numpy as np
from xdsl.ir import BlockArgument, SSAValue
from xdsl.ir.affine import AffineMap

from solar_compiler.analysis import structured
from solar_compiler.analysis.costs import GraphCosts, contraction_dtype
from solar_compiler.analysis.graphs import node_ops
from solar_compiler.analysis.manager import op_analysis
from solar_compiler.analysis.structured import (
    Constraint,
    body_ops,
    domain_groups,
    footprint,
    isl_set_of,
    linear_form,
    points,
    product_factors,
    set_points,
)
from solar_compiler.analysis.value_dtypes import ValueDtypes
from solar_compiler.dialects.einsum import GatherOp, GraphOp, NodeOp, TensorOp, YieldOp
from solar_compiler.errors import SolarError
from solar_compiler.hw import MemoryLevel, operand_bits
from solar_compiler.loopir.rules import DTYPES

H_GRID = 2.0 ** (np.arange(0, 8 * 64) / 8)  # segment sizes (bytes) every bound is evaluated at
_SPLITS = np.linspace(0.0, 1.0, 4097)  # splits of a segment's budget between operands and outputs
_ROWS = 2  # budgets per block of `Family.per_segment`: each temporary (~64 KiB) under malloc's mmap threshold


# ---- recognising contractions ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Operand:
    """One access of a contraction: its tensor and indexing map (over the node's loop dims)."""

    tensor: str
    map: AffineMap
    nbytes: float  # bytes per element an implementation must move (see `operand_bytes`)
    stored: int = 0  # bytes per element as the tensor stores them (the tiled schedules move these)

    def __post_init__(self) -> None:
        if not self.stored:
            object.__setattr__(self, "stored", math.ceil(self.nbytes))

    @cached_property  # read per slice choice and dim by the bounds: computed once per operand
    def forms(self) -> tuple[tuple[dict[int, int], int], ...]:
        """Each index's linear form (coefficient per dim, constant); a contraction's accesses are
        linear (`recognise` refuses quasi-affine ones)."""
        out = tuple(linear_form(r) for r in self.map.results)
        assert all(f is not None for f in out), f"{self.tensor}: a contraction access is linear"
        return out  # type: ignore[return-value]

    def dims(self) -> set[int]:
        """The loop dims its indices use."""
        return {d for f, _ in self.forms for d in f}


@dataclass(frozen=True)
class Contraction:
    """A reduction whose value combines operands `a` and `b` into `c` (the target). Fixing the
    `slice_vars` makes every access an injective projection and leaves each other loop variable in
    at least two of the three accesses; `rho` is the product of the two smaller operand
    multiplicities (how many slices one element can appear in). Loop dim `i` is named `ivs[i]`."""

    name: str
    index: int                     # the node's position in its program
    kind: str
    a: Operand
    b: Operand
    c: Operand
    work: int                      # points of the (guarded) domain = products
    slice_vars: tuple[str, ...]
    rho: int
    k_min: int                     # fewest products of one output element that has any (>= 1)
    ivs: tuple[str, ...]
    extents: dict[str, int]        # values per variable over the bounding box (tiling)
    unit_steps: bool
    init_folded: bool

    @property
    def window(self) -> bool:
        """A sliding window (convolution): some index mixes a kept variable with a slice variable.
        Fast convolution algorithms (Winograd, FFT) compute such an op without forming these
        products, so its reuse bound holds for direct convolution only."""
        z = {self.ivs.index(v) for v in self.slice_vars}
        return any(f.keys() & z and f.keys() - z for op in (self.a, self.b, self.c) for f, _ in op.forms)

    @property
    def weight(self) -> float:
        """sqrt(weight * a' * b' * c') bounds a segment's products, a', b', c' in BYTES."""
        return self.rho / (self.a.nbytes * self.b.nbytes * self.c.nbytes)


def operand_bytes(values: ValueDtypes, node: NodeOp, v: SSAValue, matrix_dtype: str | None,
                  precision: str) -> float:
    """Bytes per element of operand `v` (a body value of `node`) that any implementation must move:
    the narrowest of the dtype its values need (`value_dtypes.py`: an upcast local holds bf16
    values) and the narrowest format the precision policy lets the contraction use (an fp8
    implementation of an f32 matmul under `--precision fp8` streams 1-byte operands; TF32 under
    `auto` carries 19 bits)."""
    own = DTYPES[values.of(node, v)]
    if matrix_dtype is None:
        return float(own)
    return min(float(own), operand_bits(matrix_dtype, precision) / 8)


def recognise(node: NodeOp, index: int, precision: str = "auto", values: ValueDtypes | None = None,
              tensors: Mapping[str, TensorOp] | None = None) -> Contraction | None:
    """The contraction view of an einsum node (the `index`-th of its program), or None when no reuse
    theorem applies to it. `values`: the value-dtype analysis of its graph (built for this node's
    graph when not given).

    Operand bytes follow the precision policy and the operands' value dtypes (`operand_bytes`); the
    output keeps its own dtype (partial sums stay at the contraction's precision).

    Only an `add` reduction (`+=`) of a product with two direct inputs of DIFFERENT tensors among its
    factors qualifies, and only when those two elements determine the point (no two points multiply
    the same pair, so no product can be shared: `x[i] * x[j]` or a dot product repeated for every `i`
    would allow it). Each point then needs both operand elements at once under any evaluation order,
    short of fast (Strassen-like) matrix multiplication, which the bound excludes as every published
    one does. A sum or a max of the operands does not qualify: distributing the reduction removes the
    need."""
    if node.origin is not None and node.origin.stand_in and index not in _llm_priced(_graph(node)):
        return None  # an LLM's nest, not the op's products: no theorem on its points (llm-frontend.md)
    out = node.output_name
    gathered = [o.tensor_name for o in body_ops(node) if isinstance(o, GatherOp)]
    if node.reduce.data != "add" or node.dynamic_positions or out in node.input_names or out in gathered:
        return None  # an indirect write (a scatter) gets compulsory traffic only
    y = node.body.block.last_op
    assert isinstance(y, YieldOp)
    cands = [f for f in product_factors(y.stored) if isinstance(f, BlockArgument)]
    if len(cands) < 2:
        return None
    maps = [m.data for m in node.get_indexing_maps().data]
    if tensors is None:  # the graph's tensors, when the caller has not looked them up once for all nodes
        tensors = _graph(node).tensor_ops()
    ivs = tuple(node.iv_names)

    def stored(t: str) -> int:
        return DTYPES[tensors[t].dtype]

    c = Operand(out, maps[-1], stored(out), stored(out))
    best: tuple[int, int, tuple[int, ...], Operand, Operand] | None = None
    ranges = node.get_static_loop_ranges()
    values = values or ValueDtypes(_graph(node))
    mdt = contraction_dtype(node, values)
    for fa, fb in itertools.combinations(cands, 2):
        a, b = (_operand(node, f, maps, tensors, values, mdt, precision) for f in (fa, fb))
        if a.tensor == b.tensor or not _determines(len(ivs), (a, b)):
            continue
        for z in _slice_choices(len(ivs), (a, b, c)):
            rho = _rho(node, (a, b, c), z, ranges)
            if best is None or (rho, len(z)) < (best[0], best[1]):
                best = (rho, len(z), z, a, b)
    if best is None:
        return None
    rho, _, z, a, b = best
    return Contraction(node.sym_name.data, index, "+=", a, b, c, points(node), tuple(ivs[d] for d in z), rho,
                       _k_min(node, c, z), ivs, dict(zip(ivs, ranges, strict=True)),
                       all(s == 1 for s in NodeOp.ints(node.steps)), node.init is not None)


def _llm_priced(graph: GraphOp) -> set[int]:
    """`structured.llm_priced_products` of the graph's nodes, once per graph."""
    return op_analysis(graph, "llm_priced_products",
                       lambda: structured.llm_priced_products(node_ops(graph)))


def _graph(node: NodeOp) -> GraphOp:
    g = node.parent_op()
    assert isinstance(g, GraphOp)
    return g


def _operand(node: NodeOp, arg: BlockArgument, maps: Sequence[AffineMap], tensors: Mapping[str, TensorOp],
             values: ValueDtypes, mdt: str | None, precision: str) -> Operand:
    """Input `arg` (a block argument) of the node as an operand; its bytes from the dtype analysis."""
    t = node.input_names[arg.index]
    dtype = tensors[t].dtype
    return Operand(t, maps[arg.index], operand_bytes(values, node, arg, mdt, precision), DTYPES[dtype])


def _determines(n: int, accs: Sequence[Operand]) -> bool:
    """Every loop dim follows from the accessed elements (peeling dimensions that leave one unknown
    dim): then the point -> element-pair map is injective."""
    known: set[int] = set()
    dims = [set(f) for acc in accs for r in acc.map.results if (lf := linear_form(r)) is not None
            for f in (lf[0],)]
    grew = True
    while grew:
        grew = False
        for e in dims:
            left = e - known
            if len(left) == 1:
                known |= left
                grew = True
    return known >= set(range(n))


def _slice_choices(n: int, accs: Sequence[Operand]) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = []
    if any(linear_form(r) is None for acc in accs for r in acc.map.results):
        return out
    index_vars = [[set(f) for f, _ in acc.forms] for acc in accs]  # once, not per subset of dims
    for k in range(n + 1):
        for z in itertools.combinations(range(n), k):
            free = set(range(n)) - set(z)
            ok = True
            uses = dict.fromkeys(free, 0)
            for dims in index_vars:
                seen: set[int] = set()
                for vs in dims:
                    here = vs & free
                    if len(here) > 1:
                        ok = False
                    seen |= here
                for v in seen:
                    uses[v] += 1
            if ok and all(u >= 2 for u in uses.values()):
                out.append(z)
    return out


def _rho(node: NodeOp, accs: Sequence[Operand], z: tuple[int, ...], extent: Sequence[int]) -> int:
    if not z:
        return 1
    free = set(range(node.get_num_loops())) - set(z)
    slices = footprint(node, z)
    mults = []
    for acc in accs:
        m = 1
        for v in z:
            m *= _mult(acc.forms, v, free, extent[v])
        mults.append(min(m, slices))
    mults.sort()
    return mults[0] * mults[1]


def _mult(forms: Sequence[tuple[dict[int, int], int]], z: int, free: set[int], extent: int) -> int:
    """How many values of slice dim `z` can share one element of an access (upper bound). `extent`
    is the length of an interval holding every value of z; a dimension `s*v + d*z + k` fixes z
    modulo s/gcd(s, d), which at most ceil(extent / that) integers of the interval meet."""
    best = extent
    for coeffs, _ in forms:
        vs = set(coeffs)
        if z not in vs or len(vs - free) != 1:
            continue
        fv = vs & free
        if not fv:
            return 1  # this dimension alone determines z
        if len(fv) == 1:
            (v,) = fv
            s, d = abs(coeffs[v]), abs(coeffs[z])
            if s and d:
                best = min(best, -(-extent // (s // math.gcd(s, d))))
    return best


def _k_min(node: NodeOp, c: Operand, z: tuple[int, ...]) -> int:
    """A lower bound on the products of every output element that has at least one (exact when the
    reduction dims are not coupled to the output ones, else by enumeration of small groups)."""
    out_vars: set[int] = set()
    for coeffs, _ in c.forms:
        if coeffs and not (len(coeffs) == 1 and abs(next(iter(coeffs.values()))) == 1):
            return 1
        out_vars |= set(coeffs)
    if out_vars & set(z):
        return 1
    red = [d for d in range(node.get_num_loops()) if d not in out_vars]
    if not red:
        return 1
    total = 1
    for g, gcons in domain_groups(node):
        inner = [d for d in g if d in red]
        if not inner:
            continue
        outer = [d for d in g if d not in red]
        if not outer:
            total *= max(set_points(g, gcons), 1)
            continue
        total *= _min_fiber(g, outer, gcons)
    return max(total, 1)


def _min_fiber(g: Sequence[int], outer: Sequence[int], cons: Sequence[Constraint], limit: int = 1024) -> int:
    """Fewest points of the class `g` (dims, with its constraints) sharing one value of its `outer`
    dims, over the values that have any (1 when more than `limit` values would be enumerated)."""
    s = isl_set_of(g, cons)
    names = [f"d{d}" for d in g]
    outer_names = [f"d{d}" for d in outer]
    outer_set = isl.Map(f"{{ S[{', '.join(names)}] -> O[{', '.join(outer_names)}] }}") \
        .intersect_domain(s).range()
    if outer_set.count_val().to_python() > limit:
        return 1
    counts: list[int] = []

    def visit(p: isl.Point) -> None:
        vals = [p.get_coordinate_val(isl.dim_type.set, i).to_python() for i in range(len(outer))]
        fix = " and ".join(f"{v} = {x}" for v, x in zip(outer_names, vals, strict=True))
        counts.append(s.intersect(isl.Set(f"{{ S[{', '.join(names)}] : {fix} }}")).count_val().to_python())

    outer_set.foreach_point(visit)
    positive = [n for n in counts if n > 0]
    return min(positive) if positive else 1


# ---- the reuse lower bound -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Family:
    """Contractions bounded jointly. Per segment with budget T bytes (start-side + end-side values):
    sum of products <= max_x sqrt(lam) x sqrt(m_c (T - x)) + lam_ff x^2 (see docs/bounds.md)."""

    work: int
    lam: float
    lam_ff: float
    m_c: int
    sunk: bool
    delta: float
    members: tuple[str, ...] = field(default=())

    def per_segment(self, t: np.ndarray) -> np.ndarray:
        """Most products one segment with budget `t` bytes (array) can hold, for every split x of
        the budget between operands (start side) and outputs (end side)."""
        t = np.asarray(t, dtype=np.float64)
        if self.lam_ff == 0:
            return 2 * np.sqrt(self.lam * self.m_c) * (t / 3) ** 1.5
        # Upper bound of the max over x in [0, t]: on each grid cell the increasing term is taken at
        # the cell's right end and the decreasing one at its left end. A few budgets at a time: the same
        # figures, ~3x faster than one 512 x 4096 pass, whose 16 MB temporaries are fresh pages each call.
        flat = t.reshape(-1)
        out = np.empty(flat.shape)
        a = math.sqrt(self.lam)
        for s in range(0, len(flat), _ROWS):
            rows = flat[s:s + _ROWS, None]
            x = rows * _SPLITS
            g = a * x[:, 1:] * np.sqrt(self.m_c * (rows - x[:, :-1])) + self.lam_ff * x[:, 1:] ** 2
            out[s:s + _ROWS] = g.max(axis=-1)
        return out.reshape(t.shape)

    def at(self, h: np.ndarray | float, capacity: float, units: int = 1) -> np.ndarray:
        """The bound for segments of `h` bytes of I/O (valid for every h > 0; may be negative)."""
        h = np.asarray(h, dtype=np.float64)
        slack = 2 * self.delta  # an element cut by each end of a segment is counted whole
        if self.sunk:
            return h * (2 * self.work / (self.per_segment(h + slack) +
                                         self.per_segment(2 * capacity + h + slack)) - units)
        return h * (self.work / self.per_segment(2 * capacity + h + slack) - units)

    def lower_bound(self, capacity: float, units: int = 1) -> float:
        """Bytes that must cross a boundary with `capacity` bytes per unit, over `units` units: the
        best of `at` over one fixed grid of h (2^(k/8) bytes), so it never grows with the capacity."""
        if self.work <= 0 or capacity <= 0:
            return 0.0
        return _lower_bound(self.work, self.lam, self.lam_ff, self.m_c, self.sunk, self.delta, capacity,
                            units)


@lru_cache(maxsize=4096)
def _lower_bound(work: int, lam: float, lam_ff: float, m_c: int, sunk: bool, delta: float, capacity: float,
                 units: int) -> float:
    """`Family.lower_bound` by its figures alone (not its members' names): the grid costs ~4 ms a
    family and level, and the repeated layers of a network are families with the same figures."""
    f = Family(work, lam, lam_ff, m_c, sunk, delta)
    return max(0.0, float(f.at(H_GRID, capacity, units).max()))


def family(ops: Sequence[Contraction], sunk: dict[str, bool]) -> Family:
    """Bound a set of contractions jointly. `sunk[name]`: that op's outputs must all survive
    (written or kept), i.e. they are never consumed on chip by another op."""
    pairs: dict[tuple[str, str], float] = {}
    pairs_ff: dict[tuple[str, str], float] = {}
    for o in ops:
        key = tuple(sorted((o.a.tensor, o.b.tensor)))
        pairs[key] = pairs.get(key, 0.0) + o.weight
        if not sunk[o.name]:
            pairs_ff[key] = pairs_ff.get(key, 0.0) + o.rho / (o.k_min * o.a.nbytes * o.b.nbytes)
    targets = [o.c.tensor for o in ops]
    return Family(
        work=sum(o.work for o in ops),
        lam=_simplex_max(pairs),
        lam_ff=_simplex_max(pairs_ff) if pairs_ff else 0.0,
        m_c=max(targets.count(t) for t in targets),
        sunk=all(sunk[o.name] for o in ops),
        delta=max(max(o.a.nbytes, o.b.nbytes, o.c.nbytes) for o in ops),
        members=tuple(o.name for o in ops),
    )


def _simplex_max(pairs: dict[tuple[str, str], float]) -> float:
    """Upper bound of sum_{(u,v)} w_uv x_u x_v over x >= 0, sum x = 1: by Motzkin-Straus,
    w_max (1 - 1/omega) / 2 without self-pairs (omega = clique number), w_max with them."""
    w = max(pairs.values())
    if any(u == v for u, v in pairs):
        return w
    nodes = sorted({u for p in pairs for u in p})
    adj = {u: set() for u in nodes}
    for u, v in pairs:
        adj[u].add(v)
        adj[v].add(u)
    omega = _clique_number(adj)
    return w * (1 - 1 / omega) / 2


def _clique_number(adj: dict[str, set[str]]) -> int:
    best = 1

    def grow(r: set[str], p: set[str], x: set[str]) -> None:
        nonlocal best
        if not p and not x:
            best = max(best, len(r))
            return
        for v in list(p):
            grow(r | {v}, p & adj[v], x & adj[v])
            p = p - {v}
            x = x | {v}

    grow(set(), set(adj), set())
    return best


def single(op: Contraction) -> Family:
    """One op whose operands start in slow memory and whose outputs are all written (unfused)."""
    return family([op], {op.name: True})


# ---- kernels ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KernelView:
    """The contractions of a program, keyed by op name, and which of them the fused bound uses."""

    kernel: str                        # the program's name
    contractions: dict[str, Contraction]
    eligible: tuple[str, ...]          # operands are kernel inputs/weights never written
    sunk: dict[str, bool]
    direct_conv: bool = False          # also bound sliding windows (assumes no Winograd/FFT)
    precision: str = "auto"            # the policy operand bytes follow

    def bounded(self, name: str) -> Contraction | None:
        """The op's contraction if a reuse bound applies to it under this view's assumptions."""
        c = self.contractions.get(name)
        return c if c is not None and (self.direct_conv or not c.window) else None


def view(graph: GraphOp, direct_conv: bool = False, precision: str = "auto") -> KernelView:
    """The contraction view of a program (computed once per program, `direct_conv` and precision
    policy: operand bytes follow the policy)."""
    return op_analysis(graph, ("io_bounds.view", direct_conv, precision),
                       lambda: _view(graph, direct_conv, precision))


def _view(graph: GraphOp, direct_conv: bool, precision: str) -> KernelView:
    nodes = node_ops(graph)
    tensors = graph.tensor_ops()
    written = {n.output_name for n in nodes}
    out: dict[str, Contraction] = {}
    values = ValueDtypes(graph)
    for i, n in enumerate(nodes):
        c = recognise(n, i, precision, values, tensors)
        if c is not None:
            out[c.name] = c
    slow = {t for t, d in tensors.items() if d.role.data in ("input", "weight") and t not in written}
    eligible = tuple(n for n, c in out.items() if c.a.tensor in slow and c.b.tensor in slow)
    sunk = {n: tensors[c.c.tensor].role.data == "output" and _is_sunk(nodes[c.index]) for n, c in out.items()}
    return KernelView(graph.kernel_name, out, eligible, sunk, direct_conv, precision)


def _is_sunk(node: NodeOp) -> bool:
    """The op's results must reach slow memory (its target is an output tensor): no later node
    reads what it wrote, except in-place `=` updates at the same indices (e.g. `O[i] = O[i] / L[i]`),
    whose own results obey the same rule. Read on the use-def chain of the node's result: every
    node using a value either reads it or writes the next version of the tensor (its init)."""
    v = node.result
    while True:
        nxt = None
        for n in structured.value_consumers(v):
            maps = n.indexing_maps.data
            reads = [i for i, x in enumerate(n.ins) if x is v]
            in_place = n.dest is v and n.reduce.data == "none" and n.init is None and bool(reads) and \
                all(maps[i] == maps[-1] for i in reads) and not any(g.source is v for g in n.gathers())
            if not in_place:
                return False
            nxt = n.result
        if nxt is None:
            return True
        v = nxt


def op_lower_bound(v: KernelView, name: str, capacity: float, units: int = 1) -> float:
    """Reuse lower bound (bytes) of one op run on its own (operands read, results written)."""
    c = v.bounded(name)
    return single(c).lower_bound(capacity, units) if c is not None else 0.0


def graph_lower_bound(v: KernelView, capacity: float, units: int = 1) -> tuple[float, tuple[str, ...]]:
    """Best proven reuse bound of the whole program (any schedule, fusion included) and the ops it
    rests on: each eligible op alone and all eligible ops jointly. Ops with an operand computed in
    the kernel are left out: that operand can be produced on chip (no theorem here covers it)."""
    best, who = 0.0, ()
    names = [n for n in v.eligible if v.bounded(n) is not None]
    fams = [[n] for n in names] + ([names] if len(names) > 1 else [])
    for names in fams:
        f = family([v.contractions[n] for n in names], v.sunk)
        q = f.lower_bound(capacity, units)
        if q > best:
            best, who = q, tuple(names)
    return best, who


@dataclass(frozen=True)
class CacheAwareResult:
    time_s: float
    bytes_dram: float
    per_op: list[tuple[str, dict[str, float], str]]   # (op, {level: bytes}, binding level)
    per_level: dict[str, float]                       # whole program, bytes per level
    binding_level: str                                # level (or "compute") that sets time_s


def cache_aware(kernel: GraphOp, costs: GraphCosts, levels: Sequence[MemoryLevel], compute_s: float,
                direct_conv: bool = False, precision: str = "auto") -> CacheAwareResult:
    """Cache-aware bound: time = max(compute_s, max over levels of Q_level / bandwidth), where
    Q_level = max(compulsory bytes, best proven reuse bound at that level's capacity per unit, over
    its units). Sliding windows get a reuse term only with `direct_conv` (no Winograd/FFT
    implementation)."""
    if not levels:
        raise SolarError(f"kernel {costs.kernel}: no memory levels for a cache-aware bound")
    v = view(kernel, direct_conv, precision)
    for lv in levels:
        if lv.capacity.value <= 0 or lv.bandwidth.value <= 0 or lv.units < 1:
            raise SolarError(f"memory level {lv.name}: capacity, bandwidth and units must be positive")
    comp = float(costs.compulsory_bytes)
    per_level = {lv.name: max(comp, graph_lower_bound(v, lv.capacity.value, lv.units)[0]) for lv in levels}
    per_op = []
    for op in costs.ops:
        q = {lv.name: max(float(op.bytes), op_lower_bound(v, op.name, lv.capacity.value, lv.units))
             for lv in levels}
        per_op.append((op.name, q, max(levels, key=lambda lv: q[lv.name] / lv.bandwidth.value).name))
    t_mem = {lv.name: per_level[lv.name] / lv.bandwidth.value for lv in levels}
    worst = max(t_mem, key=lambda n: t_mem[n])
    time_s = max(compute_s, t_mem[worst])
    return CacheAwareResult(time_s, per_level[levels[0].name], per_op, per_level,
                            worst if t_mem[worst] >= compute_s else "compute")
