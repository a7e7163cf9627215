"""Exact costs of a loop-IR kernel, per statement (= per einsum node) and for the whole graph.

Interface shared by the cost-annotation pass, the roofline bounds and the reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Access:
    """One tensor touched by an op: distinct elements (islpy image of the domain) at its dtype."""

    tensor: str
    dtype: str
    elements: int
    bytes: int
    indirect: bool = False


@dataclass(frozen=True)
class OpCost:
    name: str                  # node name, "S<index>" in program order
    label: str                 # the statement in text form
    equation: str              # extended einsum equation
    loc: str | None            # user's file:line
    unit: str                  # "matrix" | "vector" | "memory": the unit that does the work
    flops_matrix: int          # contraction FLOPs (a MAC = 2 FLOPs), tensor-core eligible
    flops_vector: int          # every other scalar op (1 op = 1 FLOP), transcendentals included
    flops_transcendental: int  # the part of flops_vector that is exp/log/tanh/...
    matrix_dtype: str | None   # operand dtype of the contraction (prices the matrix unit)
    vector_dtype: str          # dtype the vector work runs in
    iterations: int            # points of the (guarded) iteration domain
    reads: tuple[Access, ...]
    writes: tuple[Access, ...]
    sequential: bool = False
    indirect: bool = False

    @property
    def flops(self) -> int:
        return self.flops_matrix + self.flops_vector

    @property
    def bytes(self) -> int:
        return sum(a.bytes for a in self.reads) + sum(a.bytes for a in self.writes)


@dataclass(frozen=True)
class GraphCosts:
    kernel: str
    ops: list[OpCost]
    compulsory_bytes: int      # graph inputs + weights read once + outputs written once (distinct elements)
    compulsory: dict[str, int] = field(default_factory=dict)  # per tensor, bytes

    @property
    def flops_matrix(self) -> int:
        return sum(o.flops_matrix for o in self.ops)

    @property
    def flops_vector(self) -> int:
        return sum(o.flops_vector for o in self.ops)

    @property
    def bytes_unfused(self) -> int:
        return sum(o.bytes for o in self.ops)
