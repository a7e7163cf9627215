"""The hardware target model: sourced figures, memory levels, and the rates a bound divides by.

A bound is only as good as its peaks. A peak that is too HIGH merely loosens a bound; one that is too
LOW (a sparse/dense or MAC/FLOP mix-up, a dtype priced at a slower unit than an implementation may
legally use) makes "bounds" that real kernels beat. So every number is a ``Figure`` with its unit,
source and an ``estimate`` flag, and a dtype is priced at the FASTEST method that meets its accuracy
contract (``pricing``): a unit whose format holds every value exactly, a sourced ``Emulation`` on a
faster unit, and for f32 the reduced-precision format of the precision policy (TF32 by default, as
cuDNN/PyTorch run fp32 convolutions in TF32). Loading and validation live in ``schema``, the bundled
targets in ``registry``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from solar_compiler.hw import pricing
from solar_compiler.hw.pricing import Priced

#: Units a figure may carry. MAC/s is deliberately absent: 1 MAC = 2 FLOP, and storing MAC/s is the
#: classic 2x error. Sparse-vs-dense cannot be detected from a number; the files' headers say "dense".
UNITS = ("FLOP/s", "OP/s", "bytes", "bytes/s", "Hz", "count", "s")
#: Matrix (tensor-core / matrix-core / BLAS) formats a target may list. `fp4` (e2m1, Blackwell's
#: block-scaled NVFP4 / MXFP4 tensor rate) prices contractions on `f4e2m1` operands.
MATRIX_KEYS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8", "int4", "binary")
#: Vector (CUDA-core / SIMD) formats a target may list.
VECTOR_KEYS = ("fp64", "fp32", "bf16", "fp16", "int32")
#: Name of the measured host target.
HOST = "host"
HOST_SOURCE = "measured by solar-opt --calibrate-host"

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


@dataclass(frozen=True)
class Emulation:
    """A method that computes contractions to the accuracy of format ``computes`` (``fp32``, ``fp64``)
    on another unit ``via`` (a figure key, ``matrix.bf16``), with ``products`` products on that unit
    per emulated product: its rate is rate(via) / products, an upper estimate (splitting and
    accumulation cost extra). Sourced like a figure."""

    name: str
    computes: str
    via: str
    products: float
    source: str
    estimate: bool
    note: str | None = None


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
    #: Shortest round trip of a read that leaves an SM (an L2 hit): the latency floor of any program
    #: that reads memory (solar_compiler.analysis.bounds.latency_floor_s, docs/bounds.md section 9).
    l2_latency: Figure | None = None

    emulation: dict[str, Emulation] = field(default_factory=dict)
    measured: dict[str, Figure] = field(default_factory=dict)

    def __hash__(self) -> int:  # dict fields are unhashable; identity is name + file
        return hash((self.name, self.path))

    # -- rates (solar_compiler.hw.pricing) -----------------------------------------------------------

    def matrix_peak(self, dtype: str, precision: str = "auto") -> float:
        """Peak FLOP/s for a contraction (matmul/conv/einsum) whose operands have loop-IR ``dtype``:
        the fastest method that meets the dtype's accuracy contract, because any of them is a legal
        implementation and a lower bound must assume the fastest. That is the fastest matrix or
        vector unit whose format holds all values of ``dtype`` exactly (f16 -> FP16, TF32, FP32,
        FP64), or an emulation the target lists that reaches such a format's accuracy on another
        unit (fp32 as 9 BF16 or 3 FP16 products, fp64 as Ozaki-II on INT8). Integer and bool
        contractions may also use the fp32 vector rate. ``precision`` only affects f32:

        * ``fp32``: fp32 accuracy: FP32/FP64 units and the fp32 (or fp64) emulations;
        * ``auto`` (default): as ``fp32``, and TF32 (cuDNN/PyTorch default for fp32 convolutions);
        * ``tf32`` / ``bf16`` / ``fp16`` / ``fp8``: as ``fp32``, and that format.

        A target without the policy's format falls back to the fp32 contract (``describe_precision``
        says so). Raises ``HwTargetError`` naming target and dtype when no unit applies.
        """
        return self.price_matrix(dtype, precision).rate

    def vector_peak(self, dtype: str) -> float:
        """Peak FLOP/s of non-tensor (elementwise/reduction) work on ``dtype``: the fastest vector unit
        whose format holds ``dtype`` exactly (so f16 uses max(FP16, FP32) vector), integer and bool
        work at max(INT32 if listed, FP32 vector)."""
        return self.price_vector(dtype).rate

    def price_matrix(self, dtype: str, precision: str = "auto") -> Priced:
        """``matrix_peak`` with the figure it came from (key, words, source, estimate flag)."""
        return pricing.price_matrix(self, dtype, precision)

    def price_vector(self, dtype: str) -> Priced:
        """``vector_peak`` with the figure it came from."""
        return pricing.price_vector(self, dtype)

    def price_sum(self, dtype: str, precision: str = "auto") -> Priced | None:
        """The fastest matrix unit a sum over ``dtype`` values may run on, as a contraction with a
        ones operand (``pricing.price_sum``); None when none applies."""
        return pricing.price_sum(self, dtype, precision)

    def matrix_figure(self, dtype: str, precision: str = "auto") -> str:
        """The key of the figure a contraction on ``dtype`` is priced with: ``matrix.tf32``,
        ``vector.fp32`` or ``emulation.<name>`` (report labels name the figure actually used)."""
        return self.price_matrix(dtype, precision).key

    def vector_figure(self, dtype: str) -> str:
        """The key of the figure vector work on ``dtype`` is priced with (``vector.bf16``)."""
        return self.price_vector(dtype).key

    def describe_precision(self, precision: str = "auto") -> str:
        """One line for reports saying how f32 contractions are priced under ``precision``."""
        return pricing.describe_precision(self, precision)

    def estimated_fields(self) -> tuple[str, ...]:
        """Dotted names of the figures marked ``estimate: true`` (for report footnotes)."""
        out: list[str] = [key for key, fig in self._named_figures() if fig.estimate]
        out += [f"emulation.{name}" for name, e in self.emulation.items() if e.estimate]
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
            "l2.latency": self.l2_latency,
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
