"""Speed-of-light bounds of a costed graph on one hardware target, and the inverse roofline.

Per op: t_matrix = FLOPs_matrix / matrix_peak(matrix dtype, precision), t_vector = FLOPs_vector /
vector_peak(vector dtype), t_memory = bytes / DRAM bandwidth; the op's bound is the largest of the
three (the units and the memory system overlap, so the max and not the sum is a lower bound).

* unfused = sum over kernels of the kernel bound: every kernel reads its operands from DRAM and
  writes its results back. A kernel is what one eager kernel would run (`solar_compiler.analysis.unfused`):
  the statements one source op became (a softmax's five statements, a convolution's init and its
  reduction) when the frontend recorded them in `solar.source_ops`, else one einsum node. Its
  compute time is max over units of the sum of its ops' times on that unit (per-op dtypes priced
  separately); its memory time is its external traffic / DRAM bandwidth: tensors it reads that it
  did not produce, and results that are outputs or that a later kernel reads (its intermediates
  stay on chip). Per-op bounds are still reported, but the unfused bound is priced per kernel:
  pricing a softmax per statement would exceed what the one eager kernel achieves.
  The grouping survives `narrow-needed`, which may split a statement into guarded pieces and
  constant stores or remove it: `narrowing.narrow` reports for every statement of the narrowed
  kernel the statement it came from (`NarrowResult.origin`), and the pass rewrites
  `solar.source_ops` with it (`unfused.remap_source_ops`); the roofline pass rejects a record
  that does not cover the kernel's statements. Keying the groups by location or tensor would not
  do: several ATen ops share one source line, and one op may write another's tensor.
* fused = max over resources of the whole graph's time on it: matrix and vector time summed over
  ops (per-op dtypes priced separately), memory time = compulsory bytes / bandwidth.
* cache-aware = max(fused terms, max over memory levels l of Q_l / bandwidth_l), Q_l the bytes that
  must cross level l's boundary under every schedule (`io_bounds.cache_aware`: compulsory traffic or
  a proven reuse bound, docs/bounds.md). The fused terms are kept as they are, so fused <= cache-aware
  holds exactly (not only up to rounding); a smaller capacity can only raise Q_l.

A module with several kernels is priced as ONE program: ops are concatenated and compulsory bytes
summed (kernels declare disjoint tensors). max-of-sums never exceeds the sum of per-kernel bounds,
so this stays a lower bound even if the kernels run concurrently. Cache-aware traffic is summed over
kernels too: restricted to one kernel's tensors, any schedule of the program (interleaved or not)
is a schedule of that kernel in the same fast memory, and every transfer moves one kernel's element.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from solar_compiler.analysis.costs import GraphCosts, OpCost
from solar_compiler.analysis.unfused import UnfusedKernel, node_kernels
from solar_compiler.errors import SolarError
from solar_compiler.hw import HwTarget, MemoryLevel

if TYPE_CHECKING:
    from solar_compiler.dialects.einsum import GraphOp

RESOURCES = ("matrix", "vector", "memory")
FIDELITIES = ("unfused", "fused", "cache-aware")
#: The timing contract a bound assumes (docs/bounds.md, "What a bound assumes"): `cold` caches (each
#: timed call starts with nothing on chip: KernelBench flushes L2 before every trial), or `warm` ones
#: (a loop timed without flushing: a working set that fits on-chip storage may start there).
CACHE_STATES = ("cold", "warm")


def persists(level: MemoryLevel) -> bool:
    """Whether the storage behind `level` can keep data from one timed call to the next: chip-wide
    storage (a GPU's L2, a CPU's caches) and a CPU core's private caches can; a GPU SM's or
    cluster's shared memory, registers and L1 hold data for one kernel launch only."""
    return level.per in ("chip", "core")


def warm_traffic(reads: float, writes: float, level: MemoryLevel) -> float:
    """Bytes that must cross `level`'s boundary under warm caches when a cold run must move `reads`
    bytes in and `writes` bytes out: storage that persists holds at most A = capacity x units bytes,
    so at most A of the reads start behind the boundary and at most A of the writes stay there at
    the end (docs/bounds.md)."""
    if not persists(level):
        return reads + writes
    a = level.capacity.value * level.units
    return max(0.0, reads - a) + max(0.0, writes - a)


def memory_time(reads: float, writes: float, hw: HwTarget, cache_state: str,
                levels: Sequence[MemoryLevel]) -> float:
    """Seconds to move `reads` bytes in and `writes` bytes out of a program (or kernel, or op) that
    touches each once: cold, all of it at DRAM bandwidth; warm, the slowest level once the bytes
    that can be resident behind each level are taken off (`warm_traffic`)."""
    if cache_state == "cold":
        return (reads + writes) / hw.dram_bw.value
    return max(warm_traffic(reads, writes, lv) / lv.bandwidth.value for lv in levels)


class _UnitTimes:
    """Seconds on each resource; the bound is their max (units overlap in time)."""

    t_matrix: float
    t_vector: float
    t_memory: float

    @property
    def bound_s(self) -> float:
        return max(self.t_matrix, self.t_vector, self.t_memory)

    @property
    def bottleneck(self) -> str:
        return _binding(self.t_matrix, self.t_vector, self.t_memory)


@dataclass(frozen=True)
class Split:
    """Unit times after the flexible work (sums' additions) is split between the units (`balance`);
    `adds_on_matrix` is how many additions the split runs on the matrix unit."""

    t_matrix: float
    t_vector: float
    adds_on_matrix: float = 0.0
    flops_to_matrix: float = 0.0    # matrix FLOPs the moves added (2 per addition; an op's way back)
    flops_off_vector: float = 0.0   # vector FLOPs they took off


@dataclass(frozen=True)
class SumMove:
    """Work of one op that may run on either unit: `vector_s` seconds of its vector time (already in
    it), or `matrix_s` seconds on the matrix unit instead, for `adds` additions (`OpCost.flops_sum`);
    or a share of an op computed as written, which takes `vector_s` off and adds `matrix_s` (`adds`
    0: `OpCost.revert_matrix`)."""

    vector_s: float
    matrix_s: float
    adds: int
    vector_flops: int = 0  # the FLOPs behind the two times (a sum's: `adds` and 2 `adds`)
    matrix_flops: int = 0


def balance(t_matrix: float, t_vector: float, moves: Sequence[SumMove]) -> Split:
    """The least max(matrix, vector) time over every split of the flexible work between the units,
    any fraction of each move on either. Moving the work with the least matrix time per vector second
    first, until the units balance, is optimal: the least matrix time that takes a given amount off
    the vector unit is a fractional knapsack, which that order solves, and the optimum is where the
    two times meet (or every move has moved)."""
    adds = to_matrix = off_vector = 0.0
    if t_vector <= t_matrix:
        return Split(t_matrix, t_vector)
    for mv in sorted((m for m in moves if m.vector_s > 0), key=lambda m: m.matrix_s / m.vector_s):
        f = 1.0 if t_matrix + mv.matrix_s <= t_vector - mv.vector_s else \
            (t_vector - t_matrix) / (mv.vector_s + mv.matrix_s)
        t_matrix, t_vector = t_matrix + f * mv.matrix_s, t_vector - f * mv.vector_s
        adds, to_matrix, off_vector = adds + f * mv.adds, to_matrix + f * mv.matrix_flops, \
            off_vector + f * mv.vector_flops
        if f < 1.0:
            break
    return Split(t_matrix, t_vector, adds, to_matrix, off_vector)


@dataclass(frozen=True)
class OpBound(_UnitTimes):
    """Times (seconds) one op needs on each resource of one target: `t_matrix` and `t_vector` as
    the op's counts put its work (every addition on the vector unit), `sums` the part of its vector
    work a matrix unit may do instead; its bound splits that between the units (`split`)."""

    name: str
    t_matrix: float
    t_vector: float
    t_memory: float
    sums: SumMove | None = None
    revert: SumMove | None = None  # a share of the op computed as written instead (`OpCost.revert_matrix`)

    @property
    def moves(self) -> list[SumMove]:
        """The work the op may move from its vector unit to its matrix unit."""
        return [m for m in (self.sums, self.revert) if m is not None]

    def split(self) -> Split:
        return balance(self.t_matrix, self.t_vector, self.moves)

    @property
    def bound_s(self) -> float:
        s = self.split()
        return max(s.t_matrix, s.t_vector, self.t_memory)

    @property
    def bottleneck(self) -> str:
        s = self.split()
        return _binding(s.t_matrix, s.t_vector, self.t_memory)

    @property
    def t_compute(self) -> float:
        s = self.split()
        return max(s.t_matrix, s.t_vector)


@dataclass(frozen=True)
class KernelBound(_UnitTimes):
    """Times (seconds) of one kernel of the unfused bound: its ops' unit times summed, its bytes, and
    the latency floor when it reads memory: eager kernels run one after another on one stream, so
    each that reads takes at least one read's round trip of the total (docs/bounds.md section 9)."""

    name: str
    ops: tuple[int, ...]   # indices into GraphBounds.ops
    bytes: int             # external traffic (solar_compiler.analysis.unfused)
    t_matrix: float
    t_vector: float
    t_memory: float
    t_latency: float = 0.0

    @property
    def bound_s(self) -> float:
        return max(self.t_matrix, self.t_vector, self.t_memory, self.t_latency)

    @property
    def bottleneck(self) -> str:
        if self.t_latency > max(self.t_matrix, self.t_vector, self.t_memory):
            return "latency"
        return _binding(self.t_matrix, self.t_vector, self.t_memory)


@dataclass(frozen=True)
class LevelBound:
    """One memory level of a target (after a --cache-size override): `bytes` must cross its boundary
    (whole program, all units)."""

    level: MemoryLevel
    bytes: int

    @property
    def name(self) -> str:
        return self.level.name

    @property
    def capacity(self) -> float:
        """Bytes per unit on the fast side."""
        return self.level.capacity.value

    @property
    def bandwidth(self) -> float:
        """Bytes/s across the boundary."""
        return self.level.bandwidth.value

    @property
    def units(self) -> int:
        return self.level.units

    @property
    def time_s(self) -> float:
        return self.bytes / self.bandwidth


@dataclass(frozen=True)
class OpCacheAware:
    """One op run on its own (operands read, results written): its traffic per level and bound."""

    name: str
    bytes: dict[str, int]     # level -> bytes (a real-valued bound rounded up)
    bound_s: float
    bottleneck: str           # "matrix", "vector" or the binding level's name
    tiled_bytes: dict[str, int] | None = None  # contractions: traffic of the best tiling found


@dataclass(frozen=True)
class CacheAwareBounds:
    levels: tuple[LevelBound, ...]
    ops: tuple[OpCacheAware, ...]
    terms_s: dict[str, float]   # matrix, vector, then one per level (outermost first)
    cache_size: int | None      # the DRAM-level capacity override, if any

    @property
    def time_s(self) -> float:
        return max(self.terms_s.values())

    @property
    def bottleneck(self) -> str:
        return _argmax_memory_first(self.terms_s, [lv.name for lv in self.levels])

    @property
    def bytes_dram(self) -> int:
        return self.levels[0].bytes


@dataclass(frozen=True)
class GraphBounds:
    """Bounds (seconds) of a whole program on one target under one precision policy."""

    hw: str
    precision: str
    ops: tuple[OpBound, ...]
    fused_matrix_s: float   # sum over kernels of t_matrix, sums split between the units (`balance`)
    fused_vector_s: float   # sum over kernels of t_vector, likewise
    fused_memory_s: float   # compulsory bytes / DRAM bandwidth
    unfused_memory_s: float  # sum over kernels of t_memory
    kernels: tuple[KernelBound, ...] = ()  # the kernels of the unfused bound
    cache_aware: CacheAwareBounds | None = None  # None when not asked for
    cache_state: str = "cold"
    latency_floor_s: float = 0.0  # one read's round trip (`latency_floor_s`); 0 when none applies
    sum_adds_on_matrix: float = 0.0  # sums' additions the fused terms run on the matrix unit (`balance`)
    moved_to_matrix: float = 0.0     # matrix FLOPs the fused split added (the sums', the ways back)
    moved_off_vector: float = 0.0    # vector FLOPs it took off

    @property
    def cache_aware_s(self) -> float | None:
        return None if self.cache_aware is None else self.cache_aware.time_s

    @property
    def unfused_s(self) -> float:
        """The kernels' bounds summed; never below the fused bound (a kernel-by-kernel run is one
        implementation of the program). Cold, the sum is never below it; warm, each kernel may
        assume its own working set resident while the whole program's does not fit."""
        return max(sum(k.bound_s for k in self.kernels), self.fused_s)

    @property
    def bytes_unfused(self) -> int:
        return sum(k.bytes for k in self.kernels)

    @property
    def fused_s(self) -> float:
        return max(self.fused_matrix_s, self.fused_vector_s, self.fused_memory_s, self.latency_floor_s)

    @property
    def fused_bottleneck(self) -> str:
        resources = max(self.fused_matrix_s, self.fused_vector_s, self.fused_memory_s)
        if self.latency_floor_s > resources:
            return "latency"
        return _binding(self.fused_matrix_s, self.fused_vector_s, self.fused_memory_s)


def _binding(t_matrix: float, t_vector: float, t_memory: float) -> str:
    """The resource whose time equals the bound; on a tie memory wins, then matrix (deterministic)."""
    best = max(t_matrix, t_vector, t_memory)
    return "memory" if t_memory == best else "matrix" if t_matrix == best else "vector"


def _argmax_memory_first(terms: dict[str, float], levels: Sequence[str]) -> str:
    """The term equal to the maximum: memory levels first (outermost first), then matrix, vector,
    then the latency floor."""
    best = max(terms.values())
    return next(n for n in (*levels, "matrix", "vector", "latency") if n in terms and terms[n] == best)


def latency_floor_s(hw: HwTarget, bytes_read: float) -> float:
    """The shortest time a program that reads `bytes_read` > 0 bytes can take on `hw`: one round trip
    of a read from outside an SM (the target's `l2.latency`, an L2 hit, which no DRAM read beats).

    Why it is a lower bound under the timing contract (docs/bounds.md section 9): a timed call starts
    with its inputs off the SMs (a kernel launch leaves no data in an SM's registers, shared memory or
    L1), some output depends on a value read, and that output cannot be written before the read's
    data has come back; so the span from the first kernel's start to the last kernel's end holds at
    least one round trip, cold L2 or warm. The same holds for each kernel of the unfused bound that
    reads (eager kernels run one after another). 0 when the target has no such figure or nothing is
    read."""
    if hw.l2_latency is None or bytes_read <= 0:
        return 0.0
    return hw.l2_latency.value


def op_bound(op: OpCost, hw: HwTarget, precision: str = "auto", cache_state: str = "cold",
             levels: Sequence[MemoryLevel] = ()) -> OpBound:
    """Resource times of one op. Work on a unit needs that unit's dtype: a missing one is an error."""
    t_matrix = t_vector = 0.0
    if op.flops_matrix:
        if op.matrix_dtype is None:
            raise SolarError(f"{op.loc or op.name}: op {op.name} has matrix FLOPs but no matrix dtype")
        t_matrix = op.flops_matrix / hw.matrix_peak(op.matrix_dtype, precision)
    sums = None
    if op.flops_vector:
        vector_rate = hw.vector_peak(op.vector_dtype)
        t_vector = op.flops_vector / vector_rate
        on_matrix = hw.price_sum(op.sum_dtype, precision) if op.flops_sum and op.sum_dtype else None
        if on_matrix is not None:  # one MAC (2 FLOPs) per addition, against 1 vector FLOP
            sums = SumMove(op.flops_sum / vector_rate, 2 * op.flops_sum / on_matrix.rate, op.flops_sum,
                           op.flops_sum, 2 * op.flops_sum)
    revert = None
    if op.revert_matrix and op.matrix_dtype is not None:  # any share of the op back as written
        revert = SumMove(op.revert_vector / hw.vector_peak(op.vector_dtype),
                         op.revert_matrix / hw.matrix_peak(op.matrix_dtype, precision), 0,
                         op.revert_vector, op.revert_matrix)
    reads = sum(a.bytes for a in op.reads)
    return OpBound(op.name, t_matrix, t_vector, memory_time(reads, op.bytes - reads, hw, cache_state, levels),
                   sums, revert)


def graph_bounds(graphs: GraphCosts | Sequence[GraphCosts], hw: HwTarget, precision: str = "auto",
                 kernels: Sequence[GraphOp] | None = None, cache_size: int | None = None,
                 unfused: Sequence[Sequence[UnfusedKernel]] | None = None, *,
                 empty_ok: bool = False, cache_state: str = "cold") -> GraphBounds:
    """Unfused and fused bounds of one or more kernels (priced as one program, see module doc), and
    the cache-aware bound when the programs the costs were computed from are given (same order: their
    einsum nodes give the contractions the traffic bounds reason about).
    `cache_size` overrides the capacity of the target's outermost (DRAM) level, in bytes.
    `unfused` gives, per graph, the kernels of the unfused bound (`solar_compiler.analysis.unfused`);
    None: every op is a kernel with its own traffic. `empty_ok`: a program without ops (all its
    outputs alias other tensors) is bounded by 0 instead of being an error. `cache_state` is the
    timing contract (`CACHE_STATES`): warm needs the target's memory levels."""
    graphs = [graphs] if isinstance(graphs, GraphCosts) else list(graphs)
    if cache_state not in CACHE_STATES:
        raise SolarError(f"unknown cache state {cache_state!r}; expected cold or warm")
    if cache_size is not None and kernels is None:
        raise SolarError("a cache size override needs the kernels (it only affects cache-aware bounds)")
    levels: list[MemoryLevel] = []
    if cache_state == "warm":
        if not hw.levels:
            raise SolarError(f"{hw.name}: --cache-state warm needs the target's memory levels ({hw.path}: "
                             "levels: what on-chip storage can hold between calls), and it defines none")
        levels = target_levels(hw, cache_size)
    groups = [node_kernels(g) for g in graphs] if unfused is None else [list(u) for u in unfused]
    if len(groups) != len(graphs):
        raise SolarError(f"unfused kernels given for {len(groups)} graphs, costs for {len(graphs)}")
    for g, u in zip(graphs, groups, strict=True):
        check_costs(g, u, empty_ok)
    ops = tuple(op_bound(o, hw, precision, cache_state, levels) for g in graphs for o in g.ops)
    kbs: list[KernelBound] = []
    base = 0
    as_counted = [0.0, 0.0]  # matrix and vector seconds before any split, summed per kernel
    for g, u in zip(graphs, groups, strict=True):
        for k in u:
            idx = tuple(base + i for i in k.ops)
            reads = sum(a.bytes for a in k.reads)
            t_matrix, t_vector = sum(ops[i].t_matrix for i in idx), sum(ops[i].t_vector for i in idx)
            as_counted = [as_counted[0] + t_matrix, as_counted[1] + t_vector]
            s = balance(t_matrix, t_vector, [m for i in idx for m in ops[i].moves])
            kbs.append(KernelBound(k.name, idx, k.bytes, s.t_matrix, s.t_vector,
                                   memory_time(reads, k.bytes - reads, hw, cache_state, levels),
                                   latency_floor_s(hw, reads)))
        base += len(g.ops)
    # the whole program's split of its sums between the units: at most the kernels' splits summed
    # (theirs is one split of the whole); without sums, the kernels' times summed in the unfused
    # bound's order, so unfused >= fused holds exactly
    fused = balance(*as_counted, [m for o in ops for m in o.moves])
    unfused_memory_s = sum(k.t_memory for k in kbs)
    written = sum(g.compulsory_written for g in graphs)
    fused_memory_s = memory_time(sum(g.compulsory_bytes for g in graphs) - written, written, hw, cache_state,
                                 levels)
    if cache_state == "cold":
        # compulsory <= kernel bytes holds exactly in integers (check_costs), but compulsory / bw can
        # round one ulp above the float sum of per-kernel quotients; the min keeps fused <= unfused exact.
        fused_memory_s = min(fused_memory_s, unfused_memory_s)
    b = GraphBounds(
        hw=hw.name, precision=precision, ops=ops,
        fused_matrix_s=fused.t_matrix,
        fused_vector_s=fused.t_vector,
        sum_adds_on_matrix=fused.adds_on_matrix,
        moved_to_matrix=fused.flops_to_matrix,
        moved_off_vector=fused.flops_off_vector,
        fused_memory_s=fused_memory_s,
        unfused_memory_s=unfused_memory_s,
        kernels=tuple(kbs),
        cache_state=cache_state,
        latency_floor_s=latency_floor_s(hw, sum(g.compulsory_bytes for g in graphs) - written),
    )
    if kernels is None:
        return b
    return replace(b, cache_aware=cache_aware_bounds(b, graphs, kernels, hw, cache_size))


def target_levels(hw: HwTarget, cache_size: int | None = None) -> list[MemoryLevel]:
    """The target's memory levels, outermost first, with the outermost (DRAM-boundary) capacity
    replaced by `cache_size` when given."""
    levels = list(hw.levels)
    if not levels:
        raise SolarError(f"{hw.name}: the target defines no memory levels ({hw.path}: levels), "
                         "so it has no cache-aware bound; use fidelity unfused or fused")
    if cache_size is not None:
        if cache_size <= 0:
            raise SolarError(f"cache size {cache_size} bytes: must be positive")
        levels[0] = levels[0].with_capacity(float(cache_size), "--cache-size (what-if)")
    return levels


def cache_aware_bounds(b: GraphBounds, graphs: Sequence[GraphCosts], kernels: Sequence[GraphOp], hw: HwTarget,
                       cache_size: int | None = None) -> CacheAwareBounds:
    """Per level, the program's traffic is summed over kernels (see the module doc); the time is the
    max of the FUSED terms and every level's traffic / bandwidth, the DRAM level's term never below
    the fused memory term (so cache-aware >= fused exactly, whatever the rounding)."""
    from solar_compiler.analysis.io_bounds import cache_aware, view
    from solar_compiler.analysis.tiling import REPORT_COMBOS, tiled_traffic_levels

    given = [k.kernel_name for k in kernels]
    if given != [g.kernel for g in graphs]:
        raise SolarError(f"cache-aware bounds: kernels {given} do not match the costed "
                         f"kernels {[g.kernel for g in graphs]}")
    levels = target_levels(hw, cache_size)
    names = [lv.name for lv in levels]
    per_level = dict.fromkeys(names, 0.0)
    per_op: list[dict[str, float]] = []
    tiled: list[dict[str, float] | None] = []  # per op: the attainable side of the bracket
    for k, g in zip(kernels, graphs, strict=True):
        r = cache_aware(k, g, levels, 0.0, precision=b.precision)
        contractions = view(k, precision=b.precision).contractions
        for o in g.ops:
            c = contractions.get(o.name)
            caps = [x.capacity.value for x in levels]
            found = dict(zip(names, tiled_traffic_levels(c, caps, REPORT_COMBOS), strict=True)) if c else {}
            ok = bool(found) and all(t is not None for t in found.values())
            tiled.append({lv: t.bytes for lv, t in found.items() if t is not None} if ok else None)
        for n in names:
            per_level[n] += r.per_level[n]
        if [name for name, _, _ in r.per_op] != [o.name for o in g.ops]:
            raise SolarError(f"kernel {g.kernel}: cache-aware ops do not match the costed ops")
        per_op += [q for _, q, _ in r.per_op]
    warm = b.cache_state == "warm"
    written = sum(g.compulsory_written for g in graphs)
    read = sum(g.compulsory_bytes for g in graphs) - written
    lv = tuple(LevelBound(x, _traffic(per_level[x.name], read, written, x, warm)) for x in levels)
    terms = {"matrix": b.fused_matrix_s, "vector": b.fused_vector_s}
    terms.update({x.name: x.time_s for x in lv})
    if not warm:  # warm: every level's traffic already holds its part of the fused memory term
        terms[names[0]] = max(terms[names[0]], b.fused_memory_s)
    if b.latency_floor_s:
        terms["latency"] = b.latency_floor_s
    ops = []
    all_ops = [o for g in graphs for o in g.ops]
    for o, oc, q, tb in zip(b.ops, all_ops, per_op, tiled, strict=True):
        op_read = sum(a.bytes for a in oc.reads)
        q = {x.name: _traffic(q[x.name], op_read, oc.bytes - op_read, x, warm) for x in levels}
        split = o.split()
        t = {"matrix": split.t_matrix, "vector": split.t_vector}
        t.update({x.name: q[x.name] / x.bandwidth for x in lv})
        if not warm:
            t[names[0]] = max(t[names[0]], o.t_memory)
        tb = {n: math.ceil(v) for n, v in tb.items()} if tb is not None else None
        ops.append(OpCacheAware(o.name, q, max(t.values()), _argmax_memory_first(t, names), tb))
    return CacheAwareBounds(lv, tuple(ops), terms, cache_size)


def _traffic(cold: float, reads: int, writes: int, level: MemoryLevel, warm: bool) -> int:
    """Bytes that must cross `level`, as a whole number (the true traffic is an integer at least the
    bound, so rounding a real-valued bound up keeps it one). `cold` is the cold-cache bound; warm,
    storage that persists between calls can save at most its aggregate capacity A of reads (held at
    the start) and A of writes (left dirty at the end): a warm schedule plus those transfers is a
    cold one, so Q_warm >= Q_cold - 2A; the compulsory part is `warm_traffic`."""
    if warm and persists(level):
        a = level.capacity.value * level.units
        cold = max(warm_traffic(reads, writes, level), cold - 2 * a)
    return math.ceil(cold)


def check_costs(g: GraphCosts, unfused: Sequence[UnfusedKernel] | None = None,
                empty_ok: bool = False) -> None:
    """Reject costs that would break unfused >= fused: compulsory traffic is a subset of the traffic
    the ops (and the unfused kernels) do, so more compulsory bytes is a cost-model bug. The unfused
    kernels must cover every op exactly once."""
    if not g.ops:
        if empty_ok and not g.compulsory_bytes:
            return
        raise SolarError(f"kernel {g.kernel}: no ops to bound (empty program)")
    if g.compulsory_bytes > g.bytes_unfused:
        raise SolarError(f"kernel {g.kernel}: compulsory bytes {g.compulsory_bytes} exceed the ops' "
                         f"bytes {g.bytes_unfused} (cost model bug: an unread input or unwritten output?)")
    if unfused is None:
        return
    if sorted(i for k in unfused for i in k.ops) != list(range(len(g.ops))):
        raise SolarError(f"kernel {g.kernel}: the unfused kernels do not cover its {len(g.ops)} ops "
                         "once each")
    nbytes = sum(k.bytes for k in unfused)
    if g.compulsory_bytes > nbytes:
        raise SolarError(f"kernel {g.kernel}: compulsory bytes {g.compulsory_bytes} exceed the unfused "
                         f"kernels' bytes {nbytes} (cost model bug in the kernels' external traffic)")
    for o in g.ops:
        if min(o.flops_matrix, o.flops_vector, o.bytes) < 0:
            raise SolarError(f"{o.loc or o.name}: op {o.name} has negative costs")
        if not 0 <= o.flops_sum <= o.flops_vector:
            raise SolarError(f"{o.loc or o.name}: op {o.name} has {o.flops_sum} additions a matrix unit may "
                             f"take, outside its {o.flops_vector} vector FLOPs (cost model bug)")


# ---- inverse roofline ---------------------------------------------------------------------------

def inverse_roofline(b: GraphBounds, graphs: Sequence[GraphCosts], latency_s: float) -> dict[str, dict]:
    """What each resource of ``b``'s target must deliver for the program to run in ``latency_s``.

    ``*_flops`` / ``dram_bw_Bps`` are the work on that resource divided by the latency; ``*_x`` is the
    multiple of the target's current figure(s) needed (its time on the resource / latency: with
    several dtypes on one unit this is the uniform scale of all that unit's rates). Fused: the
    program meets the latency iff every multiple is <= 1. Unfused: the sum of per-kernel maxima has no
    per-resource inverse, so ``scale_x`` is the uniform scale of ALL the target's figures that meets
    the latency (the kernels' resource times summed / latency), and the per-resource figures say what
    each resource would need if it alone carried its total work. No scaling of figures beats the
    target's latency floor (``latency_floor_s``): a latency below it is never met, whatever
    ``scale_x`` says.
    """
    # the work the fused split moves counts where it runs: a sum's additions one MAC each, an op's
    # share computed as written its products
    flops_m = sum(g.flops_matrix for g in graphs) + b.moved_to_matrix
    flops_v = sum(g.flops_vector for g in graphs) - b.moved_off_vector

    def figures(nbytes: int, t_mem: float) -> dict[str, float]:
        return {"dram_bw_Bps": nbytes / latency_s, "dram_bw_x": t_mem / latency_s,
                "matrix_flops": flops_m / latency_s, "matrix_x": b.fused_matrix_s / latency_s,
                "vector_flops": flops_v / latency_s, "vector_x": b.fused_vector_s / latency_s}

    fused = figures(sum(g.compulsory_bytes for g in graphs), b.fused_memory_s)
    fused["scale_x"] = max(b.fused_matrix_s, b.fused_vector_s, b.fused_memory_s) / latency_s
    fused["latency_floor_s"] = b.latency_floor_s
    fused["met"] = b.fused_s <= latency_s
    unfused = figures(b.bytes_unfused, b.unfused_memory_s)
    kernels = sum(max(k.t_matrix, k.t_vector, k.t_memory) for k in b.kernels)
    unfused["scale_x"] = max(kernels, fused["scale_x"] * latency_s) / latency_s
    unfused["latency_floor_s"] = max(b.latency_floor_s, sum(k.t_latency for k in b.kernels))
    unfused["met"] = b.unfused_s <= latency_s
    return {"fused": fused, "unfused": unfused}
