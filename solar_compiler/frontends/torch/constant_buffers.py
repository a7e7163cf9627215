"""What every recognised constant buffer records: the kernel weight it is, the attribute it came
from, its shape and dtype (`Buffer`), and, for the kinds read over two non-unit dims, those dims
(`ConstantBuffer`). masks.py, buffer_tables.py and hadamard.py each add what their kind needs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Buffer:
    """A constant buffer: the weight it is, the attribute it came from, its shape and dtype."""

    weight: str
    source: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class ConstantBuffer(Buffer):
    """A constant buffer recognised over its two non-unit dims `row` and `col`."""

    row: int
    col: int
