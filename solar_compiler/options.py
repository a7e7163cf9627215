"""Parsers of option values as users write them: a target latency (`inverse=2ms`, `500Hz`) and a
cache size (`cache-size=64MB`, `0.5MiB`). They sit below every layer because both the passes (whose
options they are) and the command line read them, and a bad value is a one-line `OptionError` (a
`SolarError` of class "input") naming the value and the forms it may take."""

from __future__ import annotations

import re
from fractions import Fraction

from solar_compiler.errors import SolarError


class OptionError(SolarError):
    """A value an option cannot take: the input is wrong."""

    error_class = "input"


_LATENCY_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
_RATE_UNITS = {"hz": 1.0, "khz": 1e3}
_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]+)\s*$")


def parse_latency(text: str) -> float:
    """'2ms' -> 0.002 s, '500Hz' -> 0.002 s (one frame). Units: ns us ms s Hz kHz."""
    m = _NUMBER.match(text)
    unit = m.group(2) if m else ""
    if m is None or (unit not in _LATENCY_UNITS and unit.lower() not in _RATE_UNITS):
        raise OptionError(f"bad target latency {text!r}: expected a number with one of "
                         f"ns, us, ms, s, Hz, kHz (e.g. 2ms or 500Hz)")
    value = float(m.group(1))
    if value <= 0:
        raise OptionError(f"bad target latency {text!r}: must be positive")
    if unit in _LATENCY_UNITS:
        return value * _LATENCY_UNITS[unit]
    return 1.0 / (value * _RATE_UNITS[unit.lower()])


_SIZE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text: str | int) -> int:
    """'64MB' -> 64_000_000, '0.5MiB' -> 524_288, '4096' -> 4096 bytes (kB/MB/GB decimal,
    KiB/MiB/GiB binary, letters in any case). The result must be a whole, positive number of bytes."""
    if isinstance(text, int) and not isinstance(text, bool):
        text = str(text)
    m = _SIZE.match(text) if isinstance(text, str) else None
    if m is None or m.group(2).lower() not in _SIZE_UNITS:
        raise OptionError(f"bad cache size {text!r}: expected bytes, optionally with one of "
                         f"B, kB, MB, GB, KiB, MiB, GiB (e.g. 64MB or 0.5MiB)")
    value = Fraction(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]  # exact: 1.1kB is 1100 bytes
    if value <= 0 or value.denominator != 1:
        raise OptionError(f"bad cache size {text!r}: must be a positive whole number of bytes")
    return int(value)
