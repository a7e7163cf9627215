"""The hardware target model: sourced figures, memory levels, and the rates a bound divides by.

A bound is only as good as its peaks. A peak that is too HIGH merely loosens a bound; one that is too
LOW (a sparse/dense or MAC/FLOP mix-up, a dtype priced at a slower unit than an implementation may
legally use) makes "bounds" that real kernels beat. So every number is a ``Figure`` with its unit,
source and an ``estimate`` flag, and a contraction is priced at the FASTEST unit whose input format
holds every value of the operand dtype exactly (``HwTarget.matrix_peak``), plus, for f32, the
reduced-precision format of the chosen precision policy (TF32 by default, as cuDNN/PyTorch run fp32
convolutions in TF32). Loading and validation live in ``schema``, the bundled targets in ``registry``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from solar_compiler.errors import SolarError


class HwTargetError(SolarError):
    """A target cannot be found, is malformed, or lacks the rate a query needs (one-line message)."""


#: Units a figure may carry. MAC/s is deliberately absent: 1 MAC = 2 FLOP, and storing MAC/s is the
#: classic 2x error. Sparse-vs-dense cannot be detected from a number; the files' headers say "dense".
UNITS = ("FLOP/s", "OP/s", "bytes", "bytes/s", "Hz", "count")
#: Matrix (tensor-core / matrix-core / BLAS) formats a target may list.
MATRIX_KEYS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")
#: Vector (CUDA-core / SIMD) formats a target may list.
VECTOR_KEYS = ("fp64", "fp32", "bf16", "fp16", "int32")
#: Precision policies for f32 contractions (see ``HwTarget.matrix_peak``).
PRECISIONS = ("auto", "fp32", "tf32", "bf16", "fp16", "fp8")
#: Loop-IR dtypes (solar_compiler/text/loop.lark).
DTYPES = ("f64", "f32", "bf16", "f16", "f8e4m3", "f8e5m2", "i64", "i32", "i8", "bool")
#: Name of the measured host target.
HOST = "host"
HOST_SOURCE = "measured by solar-opt --calibrate-host"

_F8_EXACT = ("fp8", "fp16", "bf16", "tf32", "fp32", "fp64")
# Formats that represent EVERY value of a dtype exactly, own format first. Running a contraction in
# any of them is a legal implementation (inputs converted losslessly, products accumulated at >= the
# dtype's precision), so the fastest of them is the rate a lower bound must assume. Examples: f16 fits
# TF32 (8-bit exponent, 10-bit mantissa); i8 fits fp16/bf16 (integers up to 2048/256 are exact); f32
# fits fp64. i64 fits nothing narrower.
_EXACT: dict[str, tuple[str, ...]] = {
    "f64": ("fp64",),
    "f32": ("fp32", "fp64"),
    "f16": ("fp16", "tf32", "fp32", "fp64"),
    "bf16": ("bf16", "tf32", "fp32", "fp64"),
    "f8e4m3": _F8_EXACT,
    "f8e5m2": _F8_EXACT,
    "i8": ("int8", "int32", "fp16", "bf16", "tf32", "fp32", "fp64"),
    "i32": ("int32", "fp64"),
    "i64": (),
    "bool": ("int8", "fp8", "int32", "fp16", "bf16", "tf32", "fp32", "fp64"),
}
# Integer ALU throughput is taken to be at most the fp32 lane rate (true of every target here: H100
# runs INT32 at half its FP32 rate), so integer/bool work is also priced at the fp32 vector rate.
_INT_DTYPES = ("i64", "i32", "i8", "bool")
# The reduced-precision format each policy lets an f32 contraction use ("fp32": none).
_POLICY_FORMAT = {"auto": "tf32", "fp32": None, "tf32": "tf32", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8"}
_LABEL = {
    "fp64": "FP64",
    "fp32": "FP32",
    "tf32": "TF32",
    "bf16": "BF16",
    "fp16": "FP16",
    "fp8": "FP8",
    "int8": "INT8",
    "int32": "INT32",
}
_SECTION_LABEL = {"matrix": "tensor", "vector": "vector"}


@dataclass(frozen=True)
class Figure:
    """One sourced number. ``estimate`` is true when no vendor datasheet prints it (derived,
    whitepaper-only or secondary source), so reports can say which bounds rest on estimates."""

    value: float
    unit: str
    source: str
    estimate: bool
    note: str | None = None


@dataclass(frozen=True)
class MemoryLevel:
    """A boundary for cache-aware bounds, named for the storage on its fast side: data crossing it
    moves at ``bandwidth`` (all units together), and the fast side is ``units`` independent memories
    of at most ``capacity`` bytes each (so reuse beyond that must be re-fetched). ``per`` says what one
    unit is, as the YAML's ``units`` field wrote it: ``chip`` (``units: 1``, the whole chip), ``sm``
    (one per SM/CU), ``core`` (one per CPU core) or ``cluster`` (one per thread-block cluster); the
    count was resolved from the target's own figures when it was loaded."""

    name: str
    capacity: Figure
    bandwidth: Figure
    units: int = 1
    per: str = "chip"

    @classmethod
    def given(cls, name: str, capacity: float, bandwidth: float, units: int = 1, per: str | None = None,
              source: str = "given") -> MemoryLevel:
        """A level from plain numbers (tests, what-if studies): figures sourced as ``source``."""
        def fig(value: float, unit: str) -> Figure:
            return Figure(value=value, unit=unit, source=source, estimate=True)

        return cls(name, fig(capacity, "bytes"), fig(bandwidth, "bytes/s"), units,
                   per or ("chip" if units == 1 else "unit"))

    def with_capacity(self, nbytes: float, source: str) -> MemoryLevel:
        """The same boundary with another capacity per unit (``--cache-size`` what-ifs)."""
        fig = Figure(value=nbytes, unit="bytes", source=source, estimate=True)
        return MemoryLevel(self.name, fig, self.bandwidth, self.units, self.per)

    def describe(self) -> str:
        """'on-chip capacity 121.6 MB' or 'per-SM storage 512 KiB x 132' (report headers)."""
        return describe_storage(self.per, self.capacity.value, self.units)


#: Words for what one unit of a memory level is (``MemoryLevel.per``).
UNIT_KINDS = ("chip", "sm", "core", "cluster")


def describe_storage(per: str, capacity: float, units: int) -> str:
    """How a report names a level's fast side: 'on-chip capacity 121.6 MB' for the whole chip,
    'per-SM storage 512 KiB x 132' for per-SM (per-core, per-cluster) copies."""
    size = fmt_size(capacity)
    if per == "chip":
        return f"on-chip capacity {size}"
    who = {"sm": "SM", "core": "core", "cluster": "cluster"}.get(per, per)
    return f"per-{who} storage {size} x {units}"


def fmt_size(nbytes: float) -> str:
    """Bytes for humans: binary units below 1 MiB when exact (512 KiB), else decimal (121.6 MB)."""
    if nbytes < 1 << 20 and nbytes == int(nbytes) and int(nbytes) % 1024 == 0:
        return f"{int(nbytes) // 1024} KiB"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.4g} {unit}"
    return f"{nbytes:g} B"


@dataclass(frozen=True)
class HwTarget:
    """A hardware target: dense peak rates per unit and dtype, memory figures and memory levels.

    ``levels`` run outermost first, each named for the storage on its fast side (bundled GPUs:
    ``chip``, all on-chip storage behind the DRAM boundary; ``sm``, one SM's own storage behind the L2
    boundary, one unit per SM). ``path`` is the file it was loaded from; ``measured_on`` is set for
    measured (host) targets.
    """

    name: str
    vendor: str
    description: str
    matrix: dict[str, Figure]
    vector: dict[str, Figure]
    dram_bw: Figure
    dram_capacity: Figure | None
    l2_size: Figure | None
    l2_bw: Figure | None
    sm_count: Figure | None
    smem_per_sm: Figure | None
    regfile_per_sm: Figure | None
    clock_hz: Figure | None
    levels: tuple[MemoryLevel, ...]
    path: str
    measured_on: str | None = None
    cluster_size: Figure | None = None

    def __hash__(self) -> int:  # dict fields are unhashable; identity is name + file
        return hash((self.name, self.path))

    # -- rates ---------------------------------------------------------------------------------

    def matrix_peak(self, dtype: str, precision: str = "auto") -> float:
        """Peak FLOP/s for a contraction (matmul/conv/einsum) whose operands have loop-IR ``dtype``.

        The rate is the fastest of every matrix or vector unit whose format holds all values of
        ``dtype`` exactly (own format first, e.g. f16 -> FP16, else TF32, FP32, FP64), because any of
        them is a legal implementation and a lower bound must assume the fastest. Integer and bool
        contractions may also use the fp32 vector rate. ``precision`` only affects f32:

        * ``auto`` (default): f32 may also use TF32 (cuDNN/PyTorch default for fp32 convolutions);
        * ``fp32``: exact units only (FP32 vector/matrix, FP64);
        * ``tf32`` / ``bf16`` / ``fp16`` / ``fp8``: f32 may also use that format.

        A target without the policy's format falls back to the exact units (``describe_precision``
        says so). Raises ``HwTargetError`` naming target and dtype when no unit applies.
        """
        return self._matrix_choice(dtype, precision)[0]

    def vector_peak(self, dtype: str) -> float:
        """Peak FLOP/s of non-tensor (elementwise/reduction) work on ``dtype``: the fastest vector unit
        whose format holds ``dtype`` exactly (so f16 uses max(FP16, FP32) vector), integer and bool
        work at max(INT32 if listed, FP32 vector)."""
        return self._vector_choice(dtype)[0]

    def describe_precision(self, precision: str = "auto") -> str:
        """One line for reports saying how f32 contractions are priced under ``precision``."""
        rate, section, fmt = self._matrix_choice("f32", precision)
        unit = f"{_LABEL[fmt]} {_SECTION_LABEL[section]}"
        text = f"{precision}: f32 contractions at {unit} rate ({_fmt_rate(rate)})"
        wanted = _POLICY_FORMAT[precision]
        if wanted is not None and fmt != wanted:
            text += f"; {self.name} lists no {_LABEL[wanted]} rate"
        return text

    def estimated_fields(self) -> tuple[str, ...]:
        """Dotted names of the figures marked ``estimate: true`` (for report footnotes)."""
        out: list[str] = []
        for key, fig in self._named_figures():
            if fig.estimate:
                out.append(key)
        return tuple(out)

    # -- internals -------------------------------------------------------------------------------

    def _named_figures(self) -> Iterable[tuple[str, Figure]]:
        for k, f in self.matrix.items():
            yield f"matrix.{k}", f
        for k, f in self.vector.items():
            yield f"vector.{k}", f
        simple = {
            "dram.bandwidth": self.dram_bw,
            "dram.capacity": self.dram_capacity,
            "l2.size": self.l2_size,
            "l2.bandwidth": self.l2_bw,
            "sm.count": self.sm_count,
            "sm.smem_per_sm": self.smem_per_sm,
            "sm.regfile_per_sm": self.regfile_per_sm,
            "sm.cluster_size": self.cluster_size,
            "clock_hz": self.clock_hz,
        }
        for k, f in simple.items():
            if f is not None:
                yield k, f
        for i, lvl in enumerate(self.levels):
            yield f"levels[{i}].capacity", lvl.capacity
            yield f"levels[{i}].bandwidth", lvl.bandwidth

    def _check_dtype(self, dtype: str) -> None:
        if dtype not in _EXACT:
            raise HwTargetError(f"{self.name}: unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")

    def _pick(self, dtype: str, kind: str, candidates: list[tuple[str, str]]) -> tuple[float, str, str]:
        best: tuple[float, str, str] | None = None
        for section, fmt in candidates:
            fig = (self.matrix if section == "matrix" else self.vector).get(fmt)
            if fig is not None and (best is None or fig.value > best[0]):
                best = (float(fig.value), section, fmt)
        if best is None:
            tried = ", ".join(dict.fromkeys(f"{s}.{f}" for s, f in candidates)) or "none"
            raise HwTargetError(
                f"{self.name}: no rate for {dtype} {kind} (would use one of: {tried}); add one to {self.path}"
            )
        return best

    def _matrix_choice(self, dtype: str, precision: str) -> tuple[float, str, str]:
        self._check_dtype(dtype)
        if precision not in _POLICY_FORMAT:
            raise HwTargetError(
                f"{self.name}: unknown precision policy {precision!r}; known: {', '.join(PRECISIONS)}"
            )
        formats = list(_EXACT[dtype])
        extra = _POLICY_FORMAT[precision]
        if dtype == "f32" and extra is not None:
            formats.insert(0, extra)
        candidates = [(section, fmt) for fmt in formats for section in ("matrix", "vector")]
        if dtype in _INT_DTYPES:
            candidates.append(("vector", "fp32"))
        return self._pick(dtype, "contractions", candidates)

    def _vector_choice(self, dtype: str) -> tuple[float, str, str]:
        self._check_dtype(dtype)
        candidates = [("vector", fmt) for fmt in _EXACT[dtype]]
        if dtype in _INT_DTYPES:
            candidates.append(("vector", "fp32"))
        return self._pick(dtype, "vector work", candidates)


def _fmt_rate(rate: float) -> str:
    if rate >= 1e12:
        return f"{rate / 1e12:.1f} TFLOP/s"
    return f"{rate / 1e9:.1f} GFLOP/s"


