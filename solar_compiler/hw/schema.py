"""Reading target YAML files: a safe loader plus a validator that turns a document into an ``HwTarget``
or fails with one line naming the file and the field (``<file>: field 'dram.bandwidth.value': ...``).
The schema is documented in docs/hw-targets.md."""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from solar_compiler.hw.errors import HwTargetError
from solar_compiler.hw.model import (
    MATRIX_KEYS,
    UNITS,
    VECTOR_KEYS,
    Emulation,
    Figure,
    HwTarget,
    MemoryLevel,
)

_INT_FORMATS = ("int8", "int4", "binary", "int32")
_LEVEL_KEYS = ("name", "capacity", "bandwidth", "units")

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
    "emulation",
    "measured",
    "measured_on",
    "machine",
)
_EMULATION_KEYS = ("computes", "via", "products", "source", "estimate", "note")
#: Figures a calibrated target may keep a measured value of, beside its ceiling, and their units.
_MEASURED_UNITS = {"dram.bandwidth": ("bytes/s",), "l2.bandwidth": ("bytes/s",), "clock_hz": ("Hz",)}
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
        emulation = self.emulation(doc.get("emulation"), matrix, vector)
        measured = self.measured(doc.get("measured"))
        dram = self.mapping(doc["dram"], "dram")
        self.keys(dram, "dram", ("bandwidth", "capacity"), required=("bandwidth",))
        l2 = self.mapping(doc.get("l2", {}), "l2")
        self.keys(l2, "l2", ("size", "bandwidth", "latency"))
        sm = self.mapping(doc.get("sm", {}), "sm")
        self.keys(sm, "sm", ("count", "smem_per_sm", "regfile_per_sm", "cluster_size"))
        sm_count = self.opt_figure(sm, "count", "sm.count", ("count",))
        cluster = self.opt_figure(sm, "cluster_size", "sm.cluster_size", ("count",))
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
            sm_count=sm_count,
            smem_per_sm=self.opt_figure(sm, "smem_per_sm", "sm.smem_per_sm", ("bytes",)),
            regfile_per_sm=self.opt_figure(sm, "regfile_per_sm", "sm.regfile_per_sm", ("bytes",)),
            clock_hz=self.figure(doc["clock_hz"], "clock_hz", ("Hz",)) if "clock_hz" in doc else None,
            levels=self.levels(doc["levels"], sm_count, cluster),
            cluster_size=cluster,
            l2_latency=self.opt_figure(l2, "latency", "l2.latency", ("s",)),
            emulation=emulation,
            measured=measured,
            path=path,
            measured_on=measured_on,
        )

    def emulation(
        self, data: Any, matrix: Mapping[str, Figure], vector: Mapping[str, Figure]
    ) -> dict[str, Emulation]:
        """``emulation: {name: {computes, via, products, source, estimate[, note]}}``: a method reaching
        format ``computes``'s accuracy with ``products`` products on the listed figure ``via`` (not
        ``on``, which YAML 1.1 reads as true)."""
        data = {} if data is None else self.mapping(data, "emulation")
        out: dict[str, Emulation] = {}
        for name, item in data.items():
            field = f"emulation.{name}"
            if not isinstance(name, str) or not _NAME_RE.match(name):
                raise self.fail(field, "expected a name of letters, digits and _.+-")
            item = self.mapping(item, field)
            self.keys(item, field, _EMULATION_KEYS, required=_EMULATION_KEYS[:-1])
            computes = item["computes"]
            if computes not in (*MATRIX_KEYS, *VECTOR_KEYS):
                got = _show(computes)
                raise self.fail(f"{field}.computes", f"expected a format (fp32, fp64, ...), got {got}")
            via = item["via"]
            section, _, fmt = str(via).partition(".")
            if (section, fmt) not in [("matrix", k) for k in matrix] + [("vector", k) for k in vector]:
                raise self.fail(f"{field}.via", f"expected a rate the target lists, got {via!r}")
            products = item["products"]
            if isinstance(products, bool) or not isinstance(products, (int, float)) or not products >= 1:
                raise self.fail(f"{field}.products", f"expected a number >= 1, got {_show(products)}")
            estimate = item["estimate"]
            if not isinstance(estimate, bool):
                raise self.fail(f"{field}.estimate", f"expected true or false, got {_show(estimate)}")
            note = item.get("note")
            if note is not None and not isinstance(note, str):
                raise self.fail(f"{field}.note", f"expected a string, got {_show(note)}")
            source = self.text(item["source"], f"{field}.source")
            out[name] = Emulation(name, computes, str(via), products, source, estimate, note)
        return out

    def measured(self, data: Any) -> dict[str, Figure]:
        """``measured: {matrix.fp32: FIGURE, dram.bandwidth: FIGURE, ...}``: rates observed on a
        calibrated machine, kept beside its ceilings (reported, never used as a peak)."""
        data = {} if data is None else self.mapping(data, "measured")
        out: dict[str, Figure] = {}
        for key, fig in data.items():
            section, _, fmt = str(key).partition(".")
            formats = {"matrix": MATRIX_KEYS, "vector": VECTOR_KEYS}.get(section, ())
            if fmt in formats:
                units: tuple[str, ...] = ("OP/s",) if fmt in _INT_FORMATS else ("FLOP/s",)
            elif key in _MEASURED_UNITS:
                units = _MEASURED_UNITS[key]
            else:
                raise self.fail(f"measured.{key}", "expected matrix.<format>, vector.<format>, "
                                "dram.bandwidth, l2.bandwidth or clock_hz")
            out[str(key)] = self.figure(fig, f"measured.{key}", units)
        return out

    def levels(self, data: Any, sm_count: Figure | None, cluster: Figure | None) -> tuple[MemoryLevel, ...]:
        if not isinstance(data, list):
            raise self.fail(
                "levels", f"expected a list (outermost level first, may be empty), got {_show(data)}"
            )
        out: list[MemoryLevel] = []
        for i, item in enumerate(data):
            field = f"levels[{i}]"
            item = self.mapping(item, field)
            self.keys(item, field, _LEVEL_KEYS, required=_LEVEL_KEYS)
            per, units = self.units(item["units"], f"{field}.units", sm_count, cluster)
            lvl = MemoryLevel(
                name=self.text(item["name"], f"{field}.name"),
                capacity=self.figure(item["capacity"], f"{field}.capacity", ("bytes",)),
                bandwidth=self.figure(item["bandwidth"], f"{field}.bandwidth", ("bytes/s",)),
                units=units,
                per=per,
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

    def units(
        self, value: Any, field: str, sm_count: Figure | None, cluster: Figure | None
    ) -> tuple[str, int]:
        """(what one unit is, how many): ``1`` is the whole chip; ``sm`` and ``core`` count ``sm.count``
        copies; ``cluster`` counts ceil(sm.count / sm.cluster_size) (rounded up: more units only
        weaken a reuse bound)."""
        if value == 1 and not isinstance(value, bool):
            return "chip", 1
        if value in ("sm", "core", "cluster"):
            if sm_count is None:
                raise self.fail(field, f"{value!r} needs sm.count (how many units the chip has)")
            if value != "cluster":
                return value, int(sm_count.value)
            if cluster is None:
                raise self.fail(field, "'cluster' needs sm.cluster_size (SMs per cluster)")
            return value, -(-int(sm_count.value) // int(cluster.value))
        raise self.fail(field, f"expected 1, sm, core or cluster, got {_show(value)}")


def _show(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def parse(text: str, label: str, path: str) -> HwTarget:
    try:
        doc = yaml.load(text, Loader=_Loader)  # _Loader is a SafeLoader subclass
    except yaml.YAMLError as exc:
        first = " ".join(str(exc).split())
        raise HwTargetError(f"{label}: not valid YAML: {first}") from None
    return _Validator(label).target(doc, path)


def load_file(path: Path, label: str | None = None) -> HwTarget:
    """Read and validate a target file; unreadable files fail with one line too."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise HwTargetError(f"{path}: cannot read hardware target: {exc.strerror or exc}") from None
    return parse(text, label or str(path), str(path))
