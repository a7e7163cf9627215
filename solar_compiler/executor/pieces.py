"""A piece of a statement's domain that the executor runs instead of the whole domain
(`execute(..., pieces=...)`); the backward slice of sampled validation computes them
(`executor/slicing.py`). Defined in its own module, so that the runner (`executor/run.py`) reads
pieces without importing the slice's islpy code."""

from __future__ import annotations

import math
from dataclasses import dataclass

from solar_compiler.loopir.affine import AffCond


@dataclass(frozen=True)
class Piece:
    """A box of loop values (variable -> inclusive (lo, hi)) and the conditions that cut the piece
    out of it (empty when the piece is the box, within the statement's own domain)."""

    box: tuple[tuple[str, int, int], ...]
    conds: tuple[AffCond, ...] = ()

    def volume(self) -> int:
        return math.prod(hi - lo + 1 for _, lo, hi in self.box)
