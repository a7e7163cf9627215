"""Hardware targets: sourced peak rates and memory levels that speed-of-light bounds divide by.

A bound is only as good as its peaks. A peak that is too HIGH merely loosens a bound; one that is too
LOW (a sparse/dense or MAC/FLOP mix-up, a dtype priced at a slower unit than an implementation may
legally use) makes "bounds" that real kernels beat. So this module:

* stores every figure with its unit, source URL and an ``estimate`` flag (``Figure``), and rejects
  malformed target files on load with a one-line error naming file and field;
* accepts only the units FLOP/s, OP/s, bytes, bytes/s, Hz and count (no MAC/s);
* prices a contraction at the FASTEST unit whose input format can hold every value of the operand
  dtype exactly (``matrix_peak``), plus, for f32, the reduced-precision format of the chosen precision
  policy (TF32 by default, as cuDNN/PyTorch run fp32 convolutions in TF32).

Bundled targets live in ``hw_targets/*.yaml`` (package ``solar_compiler.hw_targets``); ``host`` is
this machine, measured by ``calibrate_host`` and cached in the user cache dir. See docs/hw-targets.md.
Importing this module is cheap: numpy and torch are imported only inside ``calibrate_host``.
"""

from __future__ import annotations

import datetime
import importlib.resources
import logging
import math
import os
import platform
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from solar_compiler.errors import SolarError

__all__ = [
    "DTYPES",
    "HOST",
    "PRECISIONS",
    "UNITS",
    "Figure",
    "HwTarget",
    "HwTargetError",
    "MemoryLevel",
    "available_targets",
    "calibrate_host",
    "host_cache_path",
    "load_target",
    "parse_hw_list",
]

log = logging.getLogger(__name__)


class HwTargetError(SolarError, ValueError):
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

_INT_FORMATS = ("int8", "int32")
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


# --------------------------------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------------------------------


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
    """A boundary for cache-aware bounds: data crossing it moves at ``bandwidth``, and at most
    ``capacity`` bytes can live on the fast side (so reuse beyond that must be re-fetched)."""

    name: str
    capacity: Figure
    bandwidth: Figure


@dataclass(frozen=True)
class HwTarget:
    """A hardware target: dense peak rates per unit and dtype, memory figures and memory levels.

    ``levels`` run outermost first (``dram`` boundary: capacity = all on-chip storage; ``l2``
    boundary: capacity = one SM's storage). ``path`` is the file it was loaded from;
    ``measured_on`` is set for measured (host) targets.
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


# --------------------------------------------------------------------------------------------------
# YAML loading and validation
# --------------------------------------------------------------------------------------------------

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc,valid-type]
    """Safe loader that also reads YAML 1.2 floats such as ``3.35e12`` (PyYAML's YAML 1.1 resolver
    needs a dot and a signed exponent and would otherwise return the string '3.35e12')."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)

_FIGURE_KEYS = ("value", "unit", "source", "estimate", "note")
_TOP_KEYS = (
    "name",
    "vendor",
    "description",
    "references",
    "matrix",
    "vector",
    "dram",
    "l2",
    "sm",
    "clock_hz",
    "levels",
    "measured_on",
)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


class _Validator:
    """Turns a parsed YAML document into an ``HwTarget``, failing with '<file>: field '<f>': <why>'."""

    def __init__(self, label: str) -> None:
        self.label = label

    def fail(self, field: str, msg: str) -> HwTargetError:
        return HwTargetError(f"{self.label}: field {field!r}: {msg}")

    def mapping(self, data: Any, field: str) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise self.fail(field, f"expected a mapping, got {_show(data)}")
        return data

    def keys(
        self, data: Mapping[str, Any], field: str, allowed: Iterable[str], required: Iterable[str] = ()
    ) -> None:
        allowed = tuple(allowed)
        for key in data:
            if key not in allowed:
                where = f"{field}.{key}" if field else str(key)
                raise self.fail(where, f"unknown key; allowed: {', '.join(allowed)}")
        for key in required:
            if key not in data:
                raise self.fail(f"{field}.{key}" if field else key, "missing (required)")

    def text(self, data: Any, field: str) -> str:
        if not isinstance(data, str) or not data.strip():
            raise self.fail(field, f"expected a non-empty string, got {_show(data)}")
        return data

    def figure(self, data: Any, field: str, units: tuple[str, ...]) -> Figure:
        if not isinstance(data, dict):
            raise self.fail(
                field, f"expected a figure {{value, unit, source, estimate[, note]}}, got {_show(data)}"
            )
        self.keys(data, field, _FIGURE_KEYS, required=("value", "unit", "source", "estimate"))
        value = data["value"]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value <= 0
        ):
            raise self.fail(f"{field}.value", f"expected a positive number, got {_show(value)}")
        unit = data["unit"]
        if unit not in UNITS:
            hint = (
                " (1 MAC = 2 FLOP: convert to FLOP/s, dense not sparse)" if "MAC" in str(unit).upper() else ""
            )
            raise self.fail(f"{field}.unit", f"expected one of {', '.join(UNITS)}, got {_show(unit)}{hint}")
        if unit not in units:
            raise self.fail(f"{field}.unit", f"expected {' or '.join(units)} here, got {_show(unit)}")
        if unit == "count" and float(value) != int(value):
            raise self.fail(f"{field}.value", f"expected a whole number, got {_show(value)}")
        source = self.text(data["source"], f"{field}.source")
        estimate = data["estimate"]
        if not isinstance(estimate, bool):
            raise self.fail(f"{field}.estimate", f"expected true or false, got {_show(estimate)}")
        note = data.get("note")
        if note is not None and not isinstance(note, str):
            raise self.fail(f"{field}.note", f"expected a string, got {_show(note)}")
        num: float = int(value) if unit == "count" else float(value)
        return Figure(value=num, unit=unit, source=source, estimate=estimate, note=note)

    def opt_figure(
        self, data: Mapping[str, Any], key: str, field: str, units: tuple[str, ...]
    ) -> Figure | None:
        return self.figure(data[key], field, units) if key in data else None

    def rates(self, data: Any, field: str, allowed: tuple[str, ...]) -> dict[str, Figure]:
        data = {} if data is None else self.mapping(data, field)
        self.keys(data, field, allowed)
        out = {}
        for key, fig in data.items():
            units = ("OP/s",) if key in _INT_FORMATS else ("FLOP/s",)
            out[key] = self.figure(fig, f"{field}.{key}", units)
        return out

    def target(self, doc: Any, path: str) -> HwTarget:
        doc = self.mapping(doc, "<top level>")
        self.keys(
            doc,
            "",
            _TOP_KEYS,
            required=("name", "vendor", "description", "matrix", "vector", "dram", "levels"),
        )
        name = self.text(doc["name"], "name")
        if not _NAME_RE.match(name):
            raise self.fail("name", f"expected letters, digits and _.+- only, got {_show(name)}")
        vendor = self.text(doc["vendor"], "vendor")
        description = self.text(doc["description"], "description")
        if "references" in doc:
            refs = self.mapping(doc["references"], "references")
            for key, url in refs.items():
                self.text(url, f"references.{key}")
        matrix = self.rates(doc["matrix"], "matrix", MATRIX_KEYS)
        vector = self.rates(doc["vector"], "vector", VECTOR_KEYS)
        if "fp32" not in vector:
            raise self.fail("vector.fp32", "missing (required: integer and fallback work is priced at it)")
        dram = self.mapping(doc["dram"], "dram")
        self.keys(dram, "dram", ("bandwidth", "capacity"), required=("bandwidth",))
        l2 = self.mapping(doc.get("l2", {}), "l2")
        self.keys(l2, "l2", ("size", "bandwidth"))
        sm = self.mapping(doc.get("sm", {}), "sm")
        self.keys(sm, "sm", ("count", "smem_per_sm", "regfile_per_sm"))
        measured_on = doc.get("measured_on")
        if isinstance(measured_on, datetime.date):
            measured_on = measured_on.isoformat()
        if measured_on is not None:
            measured_on = self.text(measured_on, "measured_on")
        return HwTarget(
            name=name,
            vendor=vendor,
            description=description,
            matrix=matrix,
            vector=vector,
            dram_bw=self.figure(dram["bandwidth"], "dram.bandwidth", ("bytes/s",)),
            dram_capacity=self.opt_figure(dram, "capacity", "dram.capacity", ("bytes",)),
            l2_size=self.opt_figure(l2, "size", "l2.size", ("bytes",)),
            l2_bw=self.opt_figure(l2, "bandwidth", "l2.bandwidth", ("bytes/s",)),
            sm_count=self.opt_figure(sm, "count", "sm.count", ("count",)),
            smem_per_sm=self.opt_figure(sm, "smem_per_sm", "sm.smem_per_sm", ("bytes",)),
            regfile_per_sm=self.opt_figure(sm, "regfile_per_sm", "sm.regfile_per_sm", ("bytes",)),
            clock_hz=self.figure(doc["clock_hz"], "clock_hz", ("Hz",)) if "clock_hz" in doc else None,
            levels=self.levels(doc["levels"]),
            path=path,
            measured_on=measured_on,
        )

    def levels(self, data: Any) -> tuple[MemoryLevel, ...]:
        if not isinstance(data, list):
            raise self.fail(
                "levels", f"expected a list (outermost level first, may be empty), got {_show(data)}"
            )
        out: list[MemoryLevel] = []
        for i, item in enumerate(data):
            field = f"levels[{i}]"
            item = self.mapping(item, field)
            self.keys(
                item, field, ("name", "capacity", "bandwidth"), required=("name", "capacity", "bandwidth")
            )
            lvl = MemoryLevel(
                name=self.text(item["name"], f"{field}.name"),
                capacity=self.figure(item["capacity"], f"{field}.capacity", ("bytes",)),
                bandwidth=self.figure(item["bandwidth"], f"{field}.bandwidth", ("bytes/s",)),
            )
            if any(prev.name == lvl.name for prev in out):
                raise self.fail(f"{field}.name", f"duplicate level name {lvl.name!r}")
            if out and lvl.capacity.value >= out[-1].capacity.value:
                raise self.fail(
                    f"{field}.capacity.value",
                    f"must be smaller than levels[{i - 1}]'s {out[-1].capacity.value:g} (outermost first)",
                )
            out.append(lvl)
        return tuple(out)


def _show(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def _parse(text: str, label: str, path: str) -> HwTarget:
    try:
        doc = yaml.load(text, Loader=_Loader)  # _Loader is a SafeLoader subclass
    except yaml.YAMLError as exc:
        first = " ".join(str(exc).split())
        raise HwTargetError(f"{label}: not valid YAML: {first}") from None
    return _Validator(label).target(doc, path)


def _bundled_dir() -> Traversable:
    """The bundled targets: the installed package data, or hw_targets/ of a source checkout."""
    try:
        return importlib.resources.files("solar_compiler.hw_targets")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parent.parent / "hw_targets"


def _bundled() -> dict[str, Traversable]:
    files = {}
    for entry in _bundled_dir().iterdir():
        if entry.name.endswith(".yaml") and entry.is_file():
            files[entry.name[: -len(".yaml")]] = entry
    return dict(sorted(files.items()))


def available_targets() -> list[str]:
    """Names ``load_target`` accepts without a path: the bundled targets plus ``host``."""
    return [*_bundled(), HOST]


def _load_file(path: Path, label: str | None = None) -> HwTarget:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise HwTargetError(f"{path}: cannot read hardware target: {exc.strerror or exc}") from None
    return _parse(text, label or str(path), str(path))


def load_target(name_or_path: str | os.PathLike[str]) -> HwTarget:
    """Load a bundled target by name (case-insensitive), ``host`` (measured on first use and cached),
    or a user YAML file by path. Raises ``HwTargetError`` listing the available names otherwise."""
    text = os.fspath(name_or_path)
    bundled = _bundled()
    by_lower = {k.lower(): k for k in bundled}
    if text.lower() in by_lower:
        key = by_lower[text.lower()]
        entry = bundled[key]
        target = _parse(entry.read_text(encoding="utf-8"), entry.name, str(entry))
        if target.name != key:
            raise HwTargetError(
                f"{entry.name}: field 'name': expected {key!r} (the file name), got {target.name!r}"
            )
        return target
    if text.lower() == HOST:
        cache = host_cache_path()
        if not cache.is_file():
            log.info("no host calibration at %s; measuring this machine", cache)
            return calibrate_host(cache)
        return _load_file(cache)
    path = Path(text).expanduser()
    if path.suffix in (".yaml", ".yml") or os.sep in text or "/" in text or path.exists():
        if not path.is_file():
            raise HwTargetError(f"{text}: no such hardware target file")
        return _load_file(path)
    raise HwTargetError(
        f"unknown hardware target {text!r}; available: {', '.join(available_targets())}"
        " (or a path to a .yaml file)"
    )


def parse_hw_list(spec: str) -> list[HwTarget]:
    """Parse a comma-separated ``--hw`` value ("H100_SXM,H200,my.yaml") into targets, in order,
    without duplicates."""
    names = [part.strip() for part in spec.split(",") if part.strip()]
    if not names:
        raise HwTargetError(f"empty hardware list {spec!r}; available: {', '.join(available_targets())}")
    out: list[HwTarget] = []
    for name in names:
        target = load_target(name)
        if all((t.name, t.path) != (target.name, target.path) for t in out):
            out.append(target)
    return out


# --------------------------------------------------------------------------------------------------
# Host calibration
# --------------------------------------------------------------------------------------------------


def host_cache_path() -> Path:
    """Where the host calibration is cached: ``$XDG_CACHE_HOME/solar-opt/host.yaml``
    (``~/.cache/solar-opt/host.yaml`` when XDG_CACHE_HOME is unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "solar-opt" / "host.yaml"


@dataclass(frozen=True)
class _Bench:
    """Benchmark sizes. The full run stays under ~5 s including importing torch."""

    max_n: int = 2048  # largest matmul edge tried
    start_n: int = 256  # first matmul edge (doubles while one product takes < grow_s)
    grow_s: float = 0.02
    budget_s: float = 0.25  # time spent repeating the final matmul size, per dtype
    copy_min_bytes: int = 64 << 20  # DRAM copy array: max(this, 4 x LLC), capped at copy_max_bytes
    copy_max_bytes: int = 512 << 20
    copy_reps: int = 3


_FULL = _Bench()
_QUICK = _Bench(
    max_n=128,
    start_n=64,
    grow_s=0.0,
    budget_s=0.01,
    copy_min_bytes=4 << 20,
    copy_max_bytes=4 << 20,
    copy_reps=2,
)


def _best_time(fn: Callable[[], object], budget_s: float, min_reps: int = 2, max_reps: int = 50) -> float:
    best = math.inf
    start = time.perf_counter()
    for rep in range(max_reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        if rep + 1 >= min_reps and time.perf_counter() - start >= budget_s:
            break
    return best


def _matmul_rate(
    make: Callable[[int], tuple[Any, Any]], mm: Callable[[Any, Any], object], bench: _Bench
) -> float:
    """Best FLOP/s of an n x n x n product (2 n^3 FLOP), growing n until one product is measurable."""
    n = bench.start_n
    while True:
        a, b = make(n)
        t0 = time.perf_counter()
        mm(a, b)
        elapsed = time.perf_counter() - t0
        if elapsed >= bench.grow_s or n * 2 > bench.max_n:
            break
        n *= 2
    return 2.0 * n**3 / _best_time(lambda: mm(a, b), bench.budget_s)


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMGB") or 0) * mult


def _usable_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def _cpu_caches(cpus: list[int]) -> tuple[int | None, int | None, int | None, str]:
    """(last-level cache bytes summed over the distinct instances these CPUs use, per-core L2 bytes,
    per-core L1d bytes, where it was read from)."""
    root = Path("/sys/devices/system/cpu")
    instances: dict[tuple[int, str], int] = {}
    per_core: dict[int, int] = {}
    for cpu in cpus:
        for idx in sorted((root / f"cpu{cpu}" / "cache").glob("index*")):
            try:
                level = int((idx / "level").read_text())
                kind = (idx / "type").read_text().strip()
                size = _parse_size((idx / "size").read_text())
                shared = (idx / "shared_cpu_list").read_text().strip()
            except (OSError, ValueError):
                continue
            if kind == "Instruction" or size <= 0:
                continue
            instances[(level, shared)] = size
            if cpu == cpus[0]:
                per_core[level] = size
    if instances:
        top = max(level for level, _ in instances)
        llc = sum(size for (level, _), size in instances.items() if level == top)
        return llc, per_core.get(2), per_core.get(1), "/sys/devices/system/cpu/cpu*/cache"
    sizes = {}
    for level in (1, 2, 3):
        key = "SC_LEVEL1_DCACHE_SIZE" if level == 1 else f"SC_LEVEL{level}_CACHE_SIZE"
        try:
            sizes[level] = int(os.sysconf(key)) if key in os.sysconf_names else 0
        except (OSError, ValueError):
            sizes[level] = 0
    llc = sizes[3] or sizes[2] or None
    return llc, (sizes[2] or None), (sizes[1] or None), "os.sysconf"


def _copy_bandwidth(np: Any, nbytes: int, threads: int, reps: int, inner: int = 1) -> float:
    """Best bytes/s (read + write) of copying an ``nbytes`` array, split across ``threads`` threads
    (numpy releases the GIL during copies), ``inner`` copies per timed call."""
    from concurrent.futures import ThreadPoolExecutor

    n = max(nbytes // 8, threads * 1024)
    src = np.ones(n)
    dst = np.zeros(n)
    bounds = [(i * n // threads, (i + 1) * n // threads) for i in range(threads)]

    def work(lo_hi: tuple[int, int]) -> None:
        lo, hi = lo_hi
        for _ in range(inner):
            np.copyto(dst[lo:hi], src[lo:hi])

    best = 0.0
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(reps + 1):  # first pass warms the pool and the pages
            t0 = time.perf_counter()
            list(pool.map(work, bounds))
            best = max(best, 2.0 * src.nbytes * inner / (time.perf_counter() - t0))
    return best


def _cpu_model() -> tuple[str, str]:
    vendor, model = platform.machine() or "cpu", platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, val = line.partition(":")
            key, val = key.strip(), val.strip()
            if key == "vendor_id" and val:
                vendor = val
            elif key in ("model name", "Model", "Hardware") and val and not model:
                model = val
    except OSError:
        pass
    return vendor, model or platform.platform()


def _max_clock_hz() -> float | None:
    try:
        return int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()) * 1e3
    except (OSError, ValueError):
        pass
    try:
        mhz = [
            float(line.split(":")[1])
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("cpu MHz")
        ]
        return max(mhz) * 1e6 if mhz else None
    except (OSError, ValueError, IndexError):
        return None


class _HostDumper(yaml.SafeDumper):
    """Writes floats as 4.920e+10: readable, and a float to every YAML loader (PyYAML needs the dot)."""


_HostDumper.add_representer(float, lambda d, v: d.represent_scalar("tag:yaml.org,2002:float", f"{v:.3e}"))


def calibrate_host(path: Path | None = None, *, quick: bool = False, use_torch: bool = True) -> HwTarget:
    """Measure this machine and write a target YAML (default ``host_cache_path()``); return it loaded.

    Measures matmul FLOP/s for f64/f32 with numpy (and torch where faster), bf16/f16 with torch when it
    is importable; read+write bandwidth of a multi-threaded array copy larger than the last-level cache
    (DRAM) and of one inside it (LLC); cache sizes from /sys (or sysconf); usable core count. Peaks are
    the best observed, so they are achievable rates rather than datasheet maxima. ``quick`` uses tiny
    sizes (tests); ``use_torch=False`` skips torch.
    """
    import numpy as np

    bench = _QUICK if quick else _FULL
    out = Path(path) if path is not None else host_cache_path()
    cpus = _usable_cpus()
    threads = len(cpus)
    llc, l2_core, l1_core, cache_src = _cpu_caches(cpus)
    rng = np.random.default_rng(0)

    def np_make(dt: Any) -> Callable[[int], tuple[Any, Any]]:
        return lambda n: (rng.random((n, n), dtype=dt), rng.random((n, n), dtype=dt))

    rates: dict[str, tuple[float, str]] = {
        "fp64": (_matmul_rate(np_make(np.float64), np.matmul, bench), "numpy float64 matmul"),
        "fp32": (_matmul_rate(np_make(np.float32), np.matmul, bench), "numpy float32 matmul"),
    }
    torch: Any = None
    if use_torch:
        try:
            import torch
        except ImportError:
            torch = None
    if torch is not None:
        for fmt, dt in (
            ("fp64", torch.float64),
            ("fp32", torch.float32),
            ("bf16", torch.bfloat16),
            ("fp16", torch.float16),
        ):

            def t_make(n: int, dt: Any = dt) -> tuple[Any, Any]:
                return torch.rand(n, n, dtype=torch.float32).to(dt), torch.rand(n, n, dtype=torch.float32).to(
                    dt
                )

            try:
                rate = _matmul_rate(t_make, torch.matmul, bench)
            except (RuntimeError, TypeError):  # dtype unsupported on this CPU build
                continue
            if rate > rates.get(fmt, (0.0, ""))[0]:
                rates[fmt] = (rate, f"torch {str(dt).removeprefix('torch.')} matmul")

    dram_bytes = min(max(bench.copy_min_bytes, 4 * (llc or 0)), bench.copy_max_bytes)
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        phys = 0
    if phys:
        dram_bytes = min(dram_bytes, phys // 8)
    dram_bw = _copy_bandwidth(np, dram_bytes, threads, bench.copy_reps)
    llc_bw = None
    if llc:
        inner_bytes = max(llc // 4, 64 << 10)
        inner = max(1, min(50, (64 << 20) // inner_bytes)) if not quick else 2
        llc_bw = _copy_bandwidth(np, inner_bytes, threads, bench.copy_reps, inner=inner)

    def fig(value: float, unit: str, note: str | None = None) -> dict[str, Any]:
        d: dict[str, Any] = {
            "value": float(f"{value:.4g}") if unit not in ("count", "bytes") else int(value),
            "unit": unit,
            "source": HOST_SOURCE,
            "estimate": False,
        }
        if note:
            d["note"] = note
        return d

    vendor, model = _cpu_model()
    today = datetime.date.today().isoformat()
    doc: dict[str, Any] = {
        "name": HOST,
        "vendor": vendor,
        "description": f"{model} ({threads} usable cores), measured {today}",
        "matrix": {fmt: fig(rate, "FLOP/s", f"best {how}") for fmt, (rate, how) in rates.items()},
        "vector": {
            fmt: fig(
                rates[fmt][0],
                "FLOP/s",
                f"FMA throughput via {rates[fmt][1]} (elementwise numpy is memory-bound)",
            )
            for fmt in ("fp64", "fp32")
        },
        "dram": {
            "bandwidth": fig(
                dram_bw, "bytes/s", f"{threads}-thread copy of {dram_bytes >> 20} MiB, read+write"
            )
        },
    }
    if phys:
        doc["dram"]["capacity"] = fig(phys, "bytes", "physical memory (sysconf)")
    if llc:
        doc["l2"] = {"size": fig(llc, "bytes", f"last-level cache, from {cache_src}")}
        if llc_bw:
            doc["l2"]["bandwidth"] = fig(llc_bw, "bytes/s", "copy inside the last-level cache, read+write")
    doc["sm"] = {"count": fig(threads, "count", "CPU cores this process may use")}
    if l1_core:
        doc["sm"]["smem_per_sm"] = fig(l1_core, "bytes", f"per-core L1d, from {cache_src}")
    clock = _max_clock_hz()
    if clock:
        doc["clock_hz"] = fig(clock, "Hz", "max frequency reported by the OS")
    levels: list[dict[str, Any]] = []
    if llc:
        levels.append(
            {
                "name": "dram",
                "capacity": fig(llc, "bytes", "last-level cache"),
                "bandwidth": fig(dram_bw, "bytes/s", "DRAM copy bandwidth"),
            }
        )
        if l2_core and llc_bw and l2_core < llc:
            levels.append(
                {
                    "name": "l2",
                    "capacity": fig(l2_core, "bytes", "per-core L2"),
                    "bandwidth": fig(llc_bw, "bytes/s", "last-level-cache copy bandwidth"),
                }
            )
    doc["levels"] = levels
    doc["measured_on"] = today

    header = (
        "# Host target measured by solar-opt --calibrate-host; regenerate with that flag.\n"
        "# Rates are the best observed dense FLOP/s (never MAC/s); bandwidths count bytes read + written.\n"
        "# 'l2' here is the last-level cache; levels: dram boundary = LLC size, l2 boundary = per-core L2.\n"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
    tmp.write_text(
        header + yaml.dump(doc, Dumper=_HostDumper, sort_keys=False, width=1000, default_flow_style=None),
        encoding="utf-8",
    )
    os.replace(tmp, out)
    return _load_file(out)
