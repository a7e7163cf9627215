"""Typed records that passes leave on the module for later passes and the output targets.

Each record is a dataclass with `to_attr` / `from_attr`: it travels as a builtin `DictionaryAttr`
(nested arrays, integers, floats, strings, `none`), so it prints and parses as MLIR, round-trips
exactly, and a malformed one is a one-line error naming the attribute, never a JSON decoding
failure deep in a pass. The records:

* `ProgramInfo` (`solar.program`): the source file, the frontend that translated it, its
  validation record, the ops whose work depends on input values, notes, and the outputs that
  alias another tensor (no work).
* `ChainsRecord` (`solar.chains`): what `reorder-chains` did to each contraction tree.

The roofline report is not a record: it is a result the `roofline` pass registers with the analysis
manager (`analysis/summary.register_report`), never stored in the module.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache
from typing import Any, ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    NoneAttr,
    NoneType,
    StringAttr,
    i64,
)
from xdsl.ir import Attribute

from solar_compiler.errors import SolarError

PROGRAM_ATTR = "solar.program"
CHAINS_ATTR = "solar.chains"


# ---- plain data <-> attributes ----------------------------------------------------------------------
TABLE_KEY = "solar.table"   # a list of rows with the same keys, stored column by column
_COLUMNAR = 8               # lists at least this long are stored as dense arrays / tables


def data_to_attr(value: Any) -> Attribute:
    """JSON-like data (dict with str keys, list, tuple, str, int, float, bool, None) as an attribute.
    Long lists of plain ints or floats become one dense array, and long lists of rows with the same
    keys a table of columns: a report of a large network has ~40 fields per op, and one attribute
    per field made storing it cost more than computing it."""
    if isinstance(value, list | tuple) and len(value) >= _COLUMNAR:
        dense = _dense(value)
        if dense is not None:
            return dense
        if all(isinstance(r, dict) for r in value) and TABLE_KEY not in value[0] and \
                all(r.keys() == value[0].keys() for r in value):
            keys = list(value[0])
            return DictionaryAttr({TABLE_KEY: ArrayAttr([StringAttr(k) for k in keys]),
                                   **{k: data_to_attr([r[k] for r in value]) for k in keys}})
    if value is None or type(value) in (bool, int, str):
        return _scalar_attr(type(value), value)
    if isinstance(value, float):
        return FloatAttr(value, Float64Type())
    if isinstance(value, bool | int | str):  # a subclass (an IntEnum, a str enum): its plain value
        return data_to_attr(bool(value) if isinstance(value, bool) else
                            int(value) if isinstance(value, int) else str(value))
    if isinstance(value, list | tuple):
        return ArrayAttr([data_to_attr(v) for v in value])
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise SolarError(f"record keys must be strings, got {sorted(map(repr, value))[:3]}")
        return DictionaryAttr({k: data_to_attr(v) for k, v in value.items()})
    raise SolarError(f"cannot store a {type(value).__name__} in a record")


@lru_cache(maxsize=1 << 16)
def _scalar_attr(kind: type, value: Any) -> Attribute:
    """None, a bool, an int or a str as an attribute, built once per value: attributes are immutable,
    and a report repeats the same names, flags and small counts thousands of times. (`kind` keeps
    True and 1 apart; floats are not cached, since -0.0 == 0.0.)"""
    if value is None:
        return NoneAttr()
    if kind is bool:
        return IntegerAttr.from_bool(value)
    if kind is int:
        if not -(2 ** 63) <= value < 2 ** 63:
            return StringAttr(f"int:{value}")  # beyond i64: exact as text
        return IntegerAttr(value, i64)
    return StringAttr(value)


def _dense(values: list | tuple) -> DenseArrayBase | None:
    if all(type(v) is int for v in values) and all(-(2 ** 63) <= v < 2 ** 63 for v in values):
        return DenseArrayBase.from_list(i64, list(values))
    if all(type(v) is float for v in values):
        return DenseArrayBase.from_list(Float64Type(), list(values))
    return None


def attr_to_data(attr: Attribute) -> Any:
    """The inverse of `data_to_attr`."""
    if isinstance(attr, NoneAttr | NoneType):  # `none` parses back as the NoneType
        return None
    if isinstance(attr, IntegerAttr):
        t = attr.type
        v = attr.value.data
        return bool(v) if isinstance(t, IntegerType) and t.width.data == 1 else int(v)
    if isinstance(attr, FloatAttr):
        v = attr.value.data
        return float(v) if not math.isnan(v) else math.nan
    if isinstance(attr, StringAttr):
        return int(attr.data[4:]) if attr.data.startswith("int:") else attr.data
    if isinstance(attr, ArrayAttr):
        return [attr_to_data(a) for a in attr.data]
    if isinstance(attr, DenseArrayBase):
        return list(attr.get_values())
    if isinstance(attr, DictionaryAttr):
        if TABLE_KEY in attr.data:
            keys = [k.data for k in attr.data[TABLE_KEY].data]  # type: ignore[union-attr]
            columns = [attr_to_data(attr.data[k]) for k in keys]
            return [dict(zip(keys, row, strict=True)) for row in zip(*columns, strict=True)]
        return {k: attr_to_data(v) for k, v in attr.data.items()}
    raise SolarError(f"attribute {attr} is not record data")


# ---- records ------------------------------------------------------------------------------------------
@dataclass
class Record:
    """A dataclass stored on the module under `ATTR`."""

    ATTR: ClassVar[str]

    def to_attr(self) -> DictionaryAttr:
        return data_to_attr(asdict(self))  # type: ignore[return-value]

    @classmethod
    def from_attr(cls, attr: Attribute) -> Record:
        data = attr_to_data(attr)
        names = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or not set(data) <= names:
            raise SolarError(f"module attribute {cls.ATTR}: expected a dictionary with keys among "
                             f"{', '.join(sorted(names))}")
        try:
            return cls(**data)
        except (TypeError, SolarError) as e:
            raise SolarError(f"module attribute {cls.ATTR}: {e}") from None

    def store(self, module: ModuleOp) -> None:
        module.attributes[self.ATTR] = self.to_attr()

    @classmethod
    def load(cls, module: ModuleOp) -> Any:
        attr = module.attributes.get(cls.ATTR)
        return None if attr is None else cls.from_attr(attr)


# ---- typed parts of the records: frozen, with to_json() / from_json() ------------------------------------
def _plain(value: Any) -> Any:
    """A record field as JSON data: tuples (frozen sequences) become lists, at any depth."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _frozen(value: Any) -> Any:
    """JSON data as a frozen field value: lists become tuples, at any depth."""
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def _exact_fields(cls: type, data: Any, what: str) -> dict[str, Any]:
    """`data`'s fields for `cls`: a dictionary with exactly the dataclass's field names."""
    names = [f.name for f in fields(cls)]
    if not isinstance(data, dict) or set(data) != set(names):
        got = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise SolarError(f"{what}: expected the keys {', '.join(names)}; got {got}")
    return {k: _frozen(data[k]) for k in names}


@dataclass(frozen=True)
class Alias:
    """A program output that aliases an input, a weight or another output and so costs nothing (the
    torch frontend's `Alias.record`): its position among the outputs, its name, the tensor it is
    (`of`, whose `role` that is) and `how` (a view, the same tensor returned twice)."""

    position: int
    output: str
    of: str
    role: str
    how: str

    def to_json(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_json(cls, data: Any) -> Alias:
        return cls(**_exact_fields(cls, data, "alias record"))


@dataclass(frozen=True)
class ChainTree:
    """One contraction tree as `reorder-chains` recorded it (`analysis/chain_order.ChainPlan.row`):
    its nodes, the order as written and the best one found with their figures, whether the best
    order was applied and the nodes it made. The report's `chains.trees[]` rows, key for key."""

    kernel: str
    root: str
    output: str
    nodes: tuple[str, ...]
    locs: tuple[Any, ...]
    equation: str
    order_as_written: str
    flops_as_written: int
    bytes_as_written: int
    order_best: str | None
    path_best: tuple[tuple[int, ...], ...] | None
    optimizer: str | None
    flops_best: int | None
    bytes_best: int | None
    ratio: float | None
    better: bool
    applied: bool
    nodes_best: tuple[str, ...]
    note: str | None

    def to_json(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_json(cls, data: Any) -> ChainTree:
        return cls(**_exact_fields(cls, data, "contraction tree record"))


# the keys every frontend's validation record has (the report's `validation` always shows them)
VALIDATION_KEYS = ("validated", "frontend", "max_rel_err", "samples")


@dataclass(frozen=True)
class Validation:
    """How far a frontend checked its translation by executing it (docs/torch-frontend.md): whether
    it was validated, by which frontend, the worst relative error and the number of samples, which
    every record has; `details` are the frontend's further fields in its order (`method`, `sizes`,
    `elements_checked`, `mode`, `reason`, ...: they differ by frontend and validation method), each a
    (key, JSON value) pair."""

    validated: bool
    frontend: str
    max_rel_err: float | None
    samples: int
    details: tuple[tuple[str, Any], ...] = ()

    def detail(self, key: str, default: Any = None) -> Any:
        return next((_plain(v) for k, v in self.details if k == key), default)

    def to_json(self) -> dict[str, Any]:
        return {"validated": self.validated, "frontend": self.frontend, "max_rel_err": self.max_rel_err,
                "samples": self.samples, **{k: _plain(v) for k, v in self.details}}

    @classmethod
    def from_json(cls, data: Any) -> Validation:
        if not isinstance(data, dict):
            raise SolarError(f"validation record: expected a dictionary, got {type(data).__name__}")
        missing = [k for k in VALIDATION_KEYS if k not in data]
        if missing:
            raise SolarError(f"validation record misses {', '.join(missing)}")
        if not isinstance(data["validated"], bool):
            raise SolarError(f"validation record: 'validated' is {data['validated']!r}, not true or false")
        return cls(data["validated"], data["frontend"], data["max_rel_err"], data["samples"],
                   tuple((k, _frozen(v)) for k, v in data.items() if k not in VALIDATION_KEYS))


@dataclass
class ProgramInfo(Record):
    """What the input tells later passes: where the program came from and how far its translation
    was checked (`validation`, see `Validation`). A frontend's plain records (dictionaries) are typed
    on construction, so a malformed one fails where it is made, naming what is wrong."""

    ATTR: ClassVar[str] = PROGRAM_ATTR
    source: str
    frontend: str | None = None
    validation: Validation | None = None
    value_dependent: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # program outputs that alias an input, a weight or another output and so cost nothing; stored
    # only when there are some
    aliases: tuple[Alias, ...] = ()

    def __post_init__(self) -> None:
        if self.validation is not None and not isinstance(self.validation, Validation):
            self.validation = Validation.from_json(self.validation)
        self.aliases = tuple(a if isinstance(a, Alias) else Alias.from_json(a) for a in self.aliases)

    def to_attr(self) -> DictionaryAttr:
        data: dict[str, Any] = {"source": self.source, "frontend": self.frontend,
                                "validation": None if self.validation is None else self.validation.to_json(),
                                "value_dependent": self.value_dependent, "notes": self.notes}
        if self.aliases:
            data["aliases"] = [a.to_json() for a in self.aliases]
        return data_to_attr(data)  # type: ignore[return-value]


@dataclass
class ChainsRecord(Record):
    """Left by `reorder-chains`: one `ChainTree` per contraction tree (figures as written and in the
    best order, whether it was applied) and the execution check of the rewritten graph
    (`transforms/chain_check.validate_reorder`; None when nothing was rewritten)."""

    ATTR: ClassVar[str] = CHAINS_ATTR
    applied: bool
    trees: tuple[ChainTree, ...] = ()
    validation: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.trees = tuple(t if isinstance(t, ChainTree) else ChainTree.from_json(t) for t in self.trees)

    def to_attr(self) -> DictionaryAttr:
        return data_to_attr({"applied": self.applied, "trees": [t.to_json() for t in self.trees],
                             "validation": self.validation})  # type: ignore[return-value]


def program_info(module: ModuleOp) -> ProgramInfo:
    """The module's `ProgramInfo`, or one naming an unknown source when the input had none."""
    info = ProgramInfo.load(module)
    return info if info is not None else ProgramInfo("<module>")

