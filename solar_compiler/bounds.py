"""Speed-of-light bounds of a costed graph on one hardware target, and the inverse roofline.

Per op: t_matrix = FLOPs_matrix / matrix_peak(matrix dtype, precision), t_vector = FLOPs_vector /
vector_peak(vector dtype), t_memory = bytes / DRAM bandwidth; the op's bound is the largest of the
three (the units and the memory system overlap, so the max and not the sum is a lower bound).

* unfused = sum over ops of the op bound: every op reads its operands from DRAM and writes its
  results back.
* fused = max over resources of the whole graph's time on it: matrix and vector time summed over
  ops (per-op dtypes priced separately), memory time = compulsory bytes / bandwidth.
* cache-aware: not computed yet (``None``); the slot exists so reports and JSON keep their shape.

A module with several kernels is priced as ONE program: ops are concatenated and compulsory bytes
summed (kernels declare disjoint tensors). max-of-sums never exceeds the sum of per-kernel bounds,
so this stays a lower bound even if the kernels run concurrently.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from solar_compiler.costs import GraphCosts, OpCost
from solar_compiler.errors import SolarError
from solar_compiler.hw import HwTarget

RESOURCES = ("matrix", "vector", "memory")
FIDELITIES = ("unfused", "fused", "cache-aware")


@dataclass(frozen=True)
class OpBound:
    """Times (seconds) one op needs on each resource of one target."""

    name: str
    t_matrix: float
    t_vector: float
    t_memory: float

    @property
    def t_compute(self) -> float:
        return max(self.t_matrix, self.t_vector)

    @property
    def bound_s(self) -> float:
        return max(self.t_matrix, self.t_vector, self.t_memory)

    @property
    def bottleneck(self) -> str:
        return _binding(self.t_matrix, self.t_vector, self.t_memory)


@dataclass(frozen=True)
class GraphBounds:
    """Bounds (seconds) of a whole program on one target under one precision policy."""

    hw: str
    precision: str
    ops: tuple[OpBound, ...]
    fused_matrix_s: float   # sum over ops of t_matrix
    fused_vector_s: float   # sum over ops of t_vector
    fused_memory_s: float   # compulsory bytes / DRAM bandwidth
    unfused_memory_s: float  # sum over ops of t_memory
    cache_aware_s: float | None = None

    @property
    def unfused_s(self) -> float:
        return sum(o.bound_s for o in self.ops)

    @property
    def fused_s(self) -> float:
        return max(self.fused_matrix_s, self.fused_vector_s, self.fused_memory_s)

    @property
    def fused_bottleneck(self) -> str:
        return _binding(self.fused_matrix_s, self.fused_vector_s, self.fused_memory_s)


def _binding(t_matrix: float, t_vector: float, t_memory: float) -> str:
    """The resource whose time equals the bound; on a tie memory wins, then matrix (deterministic)."""
    best = max(t_matrix, t_vector, t_memory)
    return "memory" if t_memory == best else "matrix" if t_matrix == best else "vector"


def op_bound(op: OpCost, hw: HwTarget, precision: str = "auto") -> OpBound:
    """Resource times of one op. Work on a unit needs that unit's dtype: a missing one is an error."""
    t_matrix = t_vector = 0.0
    if op.flops_matrix:
        if op.matrix_dtype is None:
            raise SolarError(f"{op.loc or op.name}: op {op.name} has matrix FLOPs but no matrix dtype")
        t_matrix = op.flops_matrix / hw.matrix_peak(op.matrix_dtype, precision)
    if op.flops_vector:
        t_vector = op.flops_vector / hw.vector_peak(op.vector_dtype)
    return OpBound(op.name, t_matrix, t_vector, op.bytes / hw.dram_bw.value)


def graph_bounds(graphs: GraphCosts | Sequence[GraphCosts], hw: HwTarget,
                 precision: str = "auto") -> GraphBounds:
    """Unfused and fused bounds of one or more kernels (priced as one program, see module doc)."""
    graphs = [graphs] if isinstance(graphs, GraphCosts) else list(graphs)
    for g in graphs:
        check_costs(g)
    ops = tuple(op_bound(o, hw, precision) for g in graphs for o in g.ops)
    unfused_memory_s = sum(o.t_memory for o in ops)
    # compulsory <= op bytes holds exactly in integers (check_costs), but compulsory / bw can round one
    # ulp above the float sum of per-op quotients; the min keeps fused <= unfused exact.
    fused_memory_s = min(sum(g.compulsory_bytes for g in graphs) / hw.dram_bw.value, unfused_memory_s)
    return GraphBounds(
        hw=hw.name, precision=precision, ops=ops,
        fused_matrix_s=sum(o.t_matrix for o in ops),
        fused_vector_s=sum(o.t_vector for o in ops),
        fused_memory_s=fused_memory_s,
        unfused_memory_s=unfused_memory_s,
    )


def check_costs(g: GraphCosts) -> None:
    """Reject costs that would break unfused >= fused: compulsory traffic is a subset of the traffic
    the ops themselves do, so more compulsory bytes than op bytes is a cost-model bug."""
    if not g.ops:
        raise SolarError(f"kernel {g.kernel}: no ops to bound (empty program)")
    if g.compulsory_bytes > g.bytes_unfused:
        raise SolarError(f"kernel {g.kernel}: compulsory bytes {g.compulsory_bytes} exceed the ops' "
                         f"bytes {g.bytes_unfused} (cost model bug: an unread input or unwritten output?)")
    for o in g.ops:
        if min(o.flops_matrix, o.flops_vector, o.bytes) < 0:
            raise SolarError(f"{o.loc or o.name}: op {o.name} has negative costs")


# ---- inverse roofline ---------------------------------------------------------------------------

_LATENCY_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
_RATE_UNITS = {"hz": 1.0, "khz": 1e3}
_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]+)\s*$")


def parse_latency(text: str) -> float:
    """'2ms' -> 0.002 s, '500Hz' -> 0.002 s (one frame). Units: ns us ms s Hz kHz."""
    m = _NUMBER.match(text)
    unit = m.group(2) if m else ""
    if m is None or (unit not in _LATENCY_UNITS and unit.lower() not in _RATE_UNITS):
        raise SolarError(f"bad target latency {text!r}: expected a number with one of "
                         f"ns, us, ms, s, Hz, kHz (e.g. 2ms or 500Hz)")
    value = float(m.group(1))
    if value <= 0:
        raise SolarError(f"bad target latency {text!r}: must be positive")
    if unit in _LATENCY_UNITS:
        return value * _LATENCY_UNITS[unit]
    return 1.0 / (value * _RATE_UNITS[unit.lower()])


def inverse_roofline(b: GraphBounds, graphs: Sequence[GraphCosts], latency_s: float) -> dict[str, dict]:
    """What each resource of ``b``'s target must deliver for the program to run in ``latency_s``.

    ``*_flops`` / ``dram_bw_Bps`` are the work on that resource divided by the latency; ``*_x`` is the
    multiple of the target's current figure(s) needed (its time on the resource / latency: with
    several dtypes on one unit this is the uniform scale of all that unit's rates). Fused: the
    program meets the latency iff every multiple is <= 1. Unfused: the sum of per-op maxima has no
    per-resource inverse, so ``scale_x`` is the uniform scale of ALL the target's figures that meets
    the latency (unfused_s / latency), and the per-resource figures say what each resource would need
    if it alone carried its total work.
    """
    flops_m = sum(g.flops_matrix for g in graphs)
    flops_v = sum(g.flops_vector for g in graphs)

    def figures(nbytes: int, t_mem: float) -> dict[str, float]:
        return {"dram_bw_Bps": nbytes / latency_s, "dram_bw_x": t_mem / latency_s,
                "matrix_flops": flops_m / latency_s, "matrix_x": b.fused_matrix_s / latency_s,
                "vector_flops": flops_v / latency_s, "vector_x": b.fused_vector_s / latency_s}

    fused = figures(sum(g.compulsory_bytes for g in graphs), b.fused_memory_s)
    fused["scale_x"] = b.fused_s / latency_s
    fused["met"] = b.fused_s <= latency_s
    unfused = figures(sum(g.bytes_unfused for g in graphs), b.unfused_memory_s)
    unfused["scale_x"] = b.unfused_s / latency_s
    unfused["met"] = b.unfused_s <= latency_s
    return {"fused": fused, "unfused": unfused}
