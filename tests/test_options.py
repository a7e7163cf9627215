"""Option values as users write them (`solar_compiler/options.py`): latencies and cache sizes, exact
results and one-line errors of class "input"."""

from __future__ import annotations

import pytest

from solar_compiler.errors import SolarError
from solar_compiler.options import parse_latency, parse_size


@pytest.mark.parametrize("text,seconds", [
    ("2ms", 2e-3), ("500Hz", 2e-3), ("2 kHz", 5e-4), ("10us", 1e-5), ("3ns", 3e-9), ("1.5s", 1.5),
    ("2.5e-1ms", 2.5e-4), ("60hz", 1 / 60),
])
def test_parse_latency(text, seconds):
    assert parse_latency(text) == pytest.approx(seconds, rel=1e-15)


@pytest.mark.parametrize("text", ["2", "2 min", "-1ms", "0ms", "ms", "2ms3"])
def test_parse_latency_rejects(text):
    with pytest.raises(SolarError, match="bad target latency"):
        parse_latency(text)


@pytest.mark.parametrize("text,size", [
    ("64MB", 64_000_000), ("0.5MiB", 524_288), ("4096", 4096), ("1.1kB", 1100), ("2 GiB", 2 * 2**30),
    ("1e3B", 1000), ("64mib", 64 * 2**20), (1024, 1024),
])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["0.3B", "-1MB", "0", "12 parsecs", "MB", "1.5", True])
def test_parse_size_rejects(text):
    with pytest.raises(SolarError, match="bad cache size"):
        parse_size(text)
