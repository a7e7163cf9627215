"""Bit patterns of the loop IR's dtypes: what a bit cast (`Bitcast`, `loop.bitcast`) computes.

The executor holds narrow floats in float32 arrays (`numeric.py`), so a value's bits are not its
array element's: each dtype's pattern is rebuilt from its value. bf16 is the top half of the
float32 pattern and f8e5m2 the top half of the float16 one (both are truncated formats); f8e4m3
(the `fn` variant: no infinity, NaN at S.1111.111) is decoded from a table of its 256 codes and
encoded by a search in it. Every pattern goes through the unsigned integer of its width. A NaN's
payload is not kept (a float32 array holds the NaN, and a conversion quiets a signalling one): a NaN
gives a NaN pattern, not always its own.
"""

from __future__ import annotations

import numpy as np

from solar_compiler.executor.numeric import STORAGE
from solar_compiler.loopir.rules import DTYPES

_UNSIGNED = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}
_NATIVE = {"f64": np.dtype(np.float64), "f32": np.dtype(np.float32), "f16": np.dtype(np.float16)}


def _e4m3_table() -> np.ndarray:
    """The value of every e4m3fn code: sign bit 7, exponent bits 6-3 (bias 7), mantissa bits 2-0;
    exponent 0 is subnormal (m/8 * 2^-6), code 0x7F (and 0xFF) is NaN."""
    c = np.arange(256)
    e, m = (c >> 3) & 15, (c & 7).astype(np.float64)
    mag = np.where(e == 0, m / 8 * 2.0 ** -6, (1 + m / 8) * 2.0 ** (e - 7))
    mag = np.where((c & 0x7F) == 0x7F, np.nan, mag)
    return np.where(c >= 128, -mag, mag).astype(np.float32)


E4M3 = _e4m3_table()


def bitcast(x: np.ndarray, src: str, dst: str) -> np.ndarray:
    """`x` (values of `src`, in its storage dtype) read bit for bit as `dst`, in `dst`'s storage dtype.
    The rules (`rules.bitcast_result`) admit only equal widths."""
    if src == dst:
        return np.asarray(x)
    return np.asarray(_from_bits(_to_bits(np.asarray(x), src), dst))


def _to_bits(x: np.ndarray, dtype: str) -> np.ndarray:
    width = _UNSIGNED[int(DTYPES[dtype])]
    if dtype in _NATIVE:
        return x.astype(_NATIVE[dtype], copy=False).view(width)
    if dtype == "bf16":
        return (x.astype(np.float32, copy=False).view(np.uint32) >> 16).astype(width)
    if dtype == "f8e5m2":
        return (x.astype(np.float16).view(np.uint16) >> 8).astype(width)
    if dtype == "f8e4m3":
        a = np.abs(x.astype(np.float32, copy=False))
        code = np.searchsorted(E4M3[:127], a).astype(np.uint8)  # codes 0..126 are increasing
        code = np.where(np.isnan(a), np.uint8(0x7F), code)
        return code | (np.signbit(x).astype(np.uint8) << 7)
    return x.astype(STORAGE[dtype], copy=False).view(width)


def _from_bits(b: np.ndarray, dtype: str) -> np.ndarray:
    if dtype in _NATIVE:
        return b.view(_NATIVE[dtype]).astype(STORAGE[dtype])
    if dtype == "bf16":
        return (b.astype(np.uint32) << 16).view(np.float32)
    if dtype == "f8e5m2":
        return (b.astype(np.uint16) << 8).view(np.float16).astype(np.float32)
    if dtype == "f8e4m3":
        return E4M3[b]
    return b.view(STORAGE[dtype])
