"""Which rate a bound divides a dtype's work by: the fastest method that meets the dtype's accuracy
contract on the target (a lower bound must assume the fastest legal implementation).

A contraction on operands of dtype ``d`` may run

* natively on any matrix or vector unit whose input format holds every value of ``d`` exactly
  (``EXACT``: f16 fits TF32, f32 fits FP64, i8 fits FP16, ...), products accumulated at >= the
  dtype's precision;
* under an emulation the target lists (``HwTarget.emulation``): a method that reaches the accuracy
  of a format in ``EXACT[d]`` on another unit, at that unit's rate divided by its products per
  emulated product (BF16x9 and FP16x3 for fp32, Ozaki-II on INT8 for fp32 and fp64);
* for f32 only, in the reduced-precision format of the precision policy (``POLICY_FORMAT``): TF32
  under ``auto``, as PyTorch and cuDNN run fp32 convolutions in TF32 by default.

Integer and bool work may also run on the fp32 vector lanes. Vector (elementwise) work uses vector
units only. The result names the figure it used (``Priced.key``), so reports label it exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from solar_compiler.hw.errors import HwTargetError

if TYPE_CHECKING:
    from solar_compiler.hw.model import HwTarget

_F8_EXACT = ("fp8", "fp16", "bf16", "tf32", "fp32", "fp64")
#: Formats that represent EVERY value of a dtype exactly, own format first. Running a contraction in
#: any of them is a legal implementation (inputs converted losslessly, products accumulated at >= the
#: dtype's precision), so the fastest of them is the rate a lower bound must assume. Examples: f16
#: fits TF32 (8-bit exponent, 10-bit mantissa); i8 fits fp16/bf16 (integers up to 2048/256 are
#: exact); f32 fits fp64. i64 fits nothing narrower. Bool (values 0 and 1) fits INT4, and the 1-bit
#: (binary) tensor unit computes its dot products exactly: AND of the bits and a population count,
#: accumulated in int32 (CUDA's bmma with bmmaBitOpAND), which is sum_k a_k * b_k for a, b in {0, 1}.
#: f4e2m1 fits every fp8 format and the FP4 unit (Blackwell's block-scaled MMA with unit scales is an
#: unscaled fp4 product); u8 fits the 8-bit integer MMA, which takes unsigned operands (PTX `mma` .u8).
EXACT: dict[str, tuple[str, ...]] = {
    "f64": ("fp64",),
    "f32": ("fp32", "fp64"),
    "f16": ("fp16", "tf32", "fp32", "fp64"),
    "bf16": ("bf16", "tf32", "fp32", "fp64"),
    "f8e4m3": _F8_EXACT,
    "f8e5m2": _F8_EXACT,
    "f4e2m1": ("fp4", *_F8_EXACT),
    "i8": ("int8", "int32", "fp16", "bf16", "tf32", "fp32", "fp64"),
    "u8": ("int8", "int32", "fp16", "bf16", "tf32", "fp32", "fp64"),
    "i16": ("int32", "fp32", "fp64"),
    "u16": ("int32", "fp32", "fp64"),
    "i32": ("int32", "fp64"),
    "i64": (),
    "bool": ("binary", "int4", "int8", "fp8", "int32", "fp16", "bf16", "tf32", "fp32", "fp64"),
}
# Integer ALU throughput is taken to be at most the fp32 lane rate (true of every target here: H100
# runs INT32 at half its FP32 rate), so integer/bool work is also priced at the fp32 vector rate.
_INT_DTYPES = ("i64", "i32", "i16", "u16", "i8", "u8", "bool")
#: The reduced-precision format each policy lets an f32 contraction use besides the fp32 contract
#: ("fp32": none).
POLICY_FORMAT = {"auto": "tf32", "fp32": None, "tf32": "tf32", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8"}
LABEL = {
    "fp64": "FP64",
    "fp32": "FP32",
    "tf32": "TF32",
    "bf16": "BF16",
    "fp16": "FP16",
    "fp8": "FP8",
    "fp4": "FP4",
    "int8": "INT8",
    "int4": "INT4",
    "binary": "binary (1-bit AND + popcount)",
    "int32": "INT32",
}
_SECTION_LABEL = {"matrix": "tensor", "vector": "vector"}
#: Bits of information in one element of each format: what an implementation that keeps operands in
#: that format must move at least (TF32: sign, 8-bit exponent, 10-bit mantissa; its other 13 bits of
#: a 32-bit word are zero once rounded, so a packed layout could move 19).
FORMAT_BITS = {"fp64": 64, "fp32": 32, "tf32": 19, "bf16": 16, "fp16": 16, "fp8": 8, "fp4": 4, "int8": 8,
               "int4": 4,
               "binary": 1, "int32": 32}
#: Loop-IR dtypes (solar_compiler/text/loop.lark).
DTYPES = tuple(EXACT)
#: Precision policies for f32 contractions.
PRECISIONS = tuple(POLICY_FORMAT)


def exact_formats(dtype: str) -> tuple[str, ...]:
    """``EXACT[dtype]``; for a mixed operand pair ``'a*b'`` (``analysis/costs.py``: neither dtype holds
    the other) the formats that hold both exactly, in ``a``'s order: a unit whose input format holds
    every value of each operand computes each product exactly (f16 x bf16 on TF32; e4m3 x e5m2 on the
    fp8 tensor unit, which takes either fp8 variant per operand on Hopper and later)."""
    parts = dtype.split("*")
    if any(p not in EXACT for p in parts):
        raise HwTargetError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)} (or a pair 'a*b')")
    return tuple(f for f in EXACT[parts[0]] if all(f in EXACT[p] for p in parts[1:]))


@dataclass(frozen=True)
class Priced:
    """The rate a dtype's work is priced at and where it comes from: ``key`` is the figure used
    (``matrix.tf32``, ``vector.fp32``, ``emulation.fp16x3``), ``label`` says it in words."""

    rate: float
    key: str
    label: str
    source: str
    estimate: bool


def price_matrix(t: HwTarget, dtype: str, precision: str = "auto") -> Priced:
    """The fastest legal method for a contraction on ``dtype`` under ``precision`` (module doc)."""
    _check_dtype(t, dtype)
    if precision not in POLICY_FORMAT:
        known = ", ".join(PRECISIONS)
        raise HwTargetError(f"{t.name}: unknown precision policy {precision!r}; known: {known}")
    formats = list(exact_formats(dtype))
    extra = POLICY_FORMAT[precision]
    if dtype == "f32" and extra is not None:
        formats.insert(0, extra)
    keys = [f"{section}.{fmt}" for fmt in formats for section in ("matrix", "vector")]
    if all(p in _INT_DTYPES for p in dtype.split("*")):
        keys.append("vector.fp32")
    keys += [f"emulation.{name}" for name, e in t.emulation.items() if e.computes in formats]
    return _pick(t, dtype, "contractions", keys)


def price_sum(t: HwTarget, dtype: str, precision: str = "auto") -> Priced | None:
    """The fastest matrix unit that may do a sum's additions over values of ``dtype``, or None when
    no matrix format the target lists holds them: a sum is a contraction with a ones operand (one
    MAC, 2 FLOPs at the unit's rate, per addition; MMA computes ``D = A B + C``, so an accumulation
    ``c + x`` is ``c + x * 1``), which FlashAttention uses for its row sums.

    The formats are those a contraction on ``dtype`` may use (``price_matrix``), matrix units only
    (on a vector unit the addition is cheaper as an addition). A ones operand is exact in every
    format, so an emulation needs a product per part of ``x`` only: a scheme that splits each operand
    into p parts computes at most p^2 products, so one listing P products has p >= ceil(sqrt(P))
    parts, and the sum costs ceil(sqrt(P)) products per addition at the ``via`` unit's rate (BF16x9:
    3; FP16x3: 2; Ozaki-II with 6 moduli: 3); never more than the scheme itself needs."""
    _check_dtype(t, dtype)
    if precision not in POLICY_FORMAT:
        raise HwTargetError(f"{t.name}: unknown precision policy {precision!r}")
    formats = list(exact_formats(dtype))
    extra = POLICY_FORMAT[precision]
    if dtype == "f32" and extra is not None:
        formats.insert(0, extra)
    found = [p for p in (priced(t, f"matrix.{f}") for f in formats) if p is not None]
    for name, e in t.emulation.items():
        base = priced(t, e.via) if e.computes in formats and e.via.startswith("matrix.") else None
        if base is not None:
            parts = math.ceil(math.sqrt(e.products))
            found.append(Priced(base.rate / parts, f"emulation.{name}",
                                f"{name} emulation ({parts} {base.label} products per addition)",
                                e.source, e.estimate or base.estimate))
    return max(found, key=lambda p: p.rate, default=None)


def operand_bits(dtype: str, precision: str = "auto") -> int:
    """The fewest bits per operand element a contraction on ``dtype`` may move under ``precision``:
    the narrowest format that meets its accuracy contract (the dtype's exact formats, and the policy's
    reduced format for f32), whatever the target lists (an implementation may store operands in a
    format and convert on chip). Emulations split an element into more bits, never fewer."""
    if precision not in POLICY_FORMAT:
        raise HwTargetError(f"unknown precision policy {precision!r}")
    formats = list(exact_formats(dtype))
    if dtype == "f32" and POLICY_FORMAT[precision] is not None:
        formats.append(POLICY_FORMAT[precision])
    return min((FORMAT_BITS[f] for f in formats), default=64)


def price_vector(t: HwTarget, dtype: str) -> Priced:
    """The fastest vector unit whose format holds ``dtype`` exactly (so f16 uses max(FP16, FP32)
    vector); integer and bool work at max(INT32 if listed, FP32 vector)."""
    _check_dtype(t, dtype)
    keys = [f"vector.{fmt}" for fmt in EXACT[dtype]]
    if dtype in _INT_DTYPES:
        keys.append("vector.fp32")
    return _pick(t, dtype, "vector work", keys)


def describe_precision(t: HwTarget, precision: str = "auto") -> str:
    """One line for reports saying how f32 contractions are priced under ``precision``."""
    p = price_matrix(t, "f32", precision)
    text = f"{precision}: f32 contractions at {p.label} rate ({fmt_rate(p.rate)})"
    wanted = POLICY_FORMAT[precision]
    if wanted is not None and wanted not in t.matrix and wanted not in t.vector:
        text += f"; {t.name} lists no {LABEL[wanted]} rate"
    return text


def priced(t: HwTarget, key: str) -> Priced | None:
    """The rate behind a figure key, or None when the target does not list it."""
    section, _, name = key.partition(".")
    if section == "emulation":
        e = t.emulation.get(name)
        if e is None:
            return None
        base = priced(t, e.via)
        if base is None:  # the loader checks ``via``; a hand-built target may not
            raise HwTargetError(f"{t.name}: emulation {name} runs on {e.via}, which the target does not list")
        label = f"{name} emulation ({e.products:g} {base.label} products each)"
        return Priced(base.rate / e.products, key, label, e.source, e.estimate or base.estimate)
    fig = {"matrix": t.matrix, "vector": t.vector}[section].get(name)
    if fig is None:
        return None
    return Priced(float(fig.value), key, f"{LABEL[name]} {_SECTION_LABEL[section]}", fig.source, fig.estimate)


def fmt_rate(rate: float) -> str:
    if rate >= 1e12:
        return f"{rate / 1e12:.1f} TFLOP/s"
    return f"{rate / 1e9:.1f} GFLOP/s"


def _check_dtype(t: HwTarget, dtype: str) -> None:
    if any(p not in EXACT for p in dtype.split("*")):
        raise HwTargetError(f"{t.name}: unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")


def _pick(t: HwTarget, dtype: str, kind: str, keys: list[str]) -> Priced:
    """The fastest of the listed figures; on a tie the first (native units before emulations)."""
    best: Priced | None = None
    for key in dict.fromkeys(keys):
        p = priced(t, key)
        if p is not None and (best is None or p.rate > best.rate):
            best = p
    if best is None:
        tried = ", ".join(dict.fromkeys(keys)) or "none"
        raise HwTargetError(
            f"{t.name}: no rate for {dtype} {kind} (would use one of: {tried}); add one to {t.path}"
        )
    return best
