"""The latency floor (docs/bounds.md section 9): a program that reads memory takes at least one read's
round trip, the target's `l2.latency`. Figures are derived here by hand from the cited measurement
(L2-hit cycles over the highest clock of the die), never read back from the code under test."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from solar_compiler.analysis.bounds import graph_bounds, inverse_roofline, latency_floor_s
from solar_compiler.analysis.costs import Access, GraphCosts, OpCost
from solar_compiler.driver import main
from solar_compiler.hw import HwTargetError, load_target

ROOT = Path(__file__).resolve().parents[1]
H100_BW = 3.35e12

# target -> (measured L2-hit cycles, clock the cycles are divided by): the floor is their quotient,
# rounded down to whole nanoseconds; the clock is never below the target's own highest clock, so the
# quotient is never above the latency in seconds.
MEASURED = {
    "A100_SXM": (210, 1.41e9),
    "H100_SXM": (281, 1.98e9), "H100_PCIe": (281, 1.98e9), "H100_NVL": (281, 1.98e9),
    "H200": (281, 1.98e9),
    "B200": (295, 2.38e9), "GB200": (295, 2.38e9), "B300": (295, 2.38e9),
}
WITHOUT = ("L40S", "MI300X", "Jetson_Thor")


def acc(tensor: str, nbytes: int) -> Access:
    return Access(tensor, "f32", nbytes // 4, nbytes)


def copy_op(nbytes: int, reads: bool = True) -> OpCost:
    """Y = X (nbytes each) or, without reads, Y = 1.0."""
    return OpCost("S0", "Y[i] = X[i]", "i->i", "c.py:1", "memory", 0, 0, 0, None, "f32", nbytes // 4,
                  (acc("X", nbytes),) if reads else (), (acc("Y", nbytes),))


def program(nbytes: int, reads: bool = True) -> GraphCosts:
    total = 2 * nbytes if reads else nbytes
    return GraphCosts("k", [copy_op(nbytes, reads)], total, compulsory_written=nbytes)


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_each_floor_is_the_measured_cycles_over_a_clock_no_slower_than_the_part(name):
    cycles, clock = MEASURED[name]
    t = load_target(name)
    fig = t.l2_latency
    assert fig is not None and fig.unit == "s" and fig.estimate is True
    assert fig.value == pytest.approx(math.floor(cycles / clock * 1e9) * 1e-9, rel=1e-12)  # whole ns
    assert fig.value <= cycles / clock
    assert clock >= t.clock_hz.value  # dividing by a faster clock gives a shorter time
    assert "markdewing/AI_kernels" in fig.source


@pytest.mark.parametrize("name", WITHOUT)
def test_targets_without_a_measurement_have_no_floor(name):
    t = load_target(name)
    assert t.l2_latency is None
    assert graph_bounds(program(64), t).latency_floor_s == 0.0


def test_a_small_program_is_bound_by_the_floor_at_every_fidelity():
    h100 = load_target("H100_SXM")
    b = graph_bounds(program(4096), h100)  # 8,192 B: 2.445 ns of bytes
    assert b.fused_memory_s == 8192 / H100_BW
    assert b.latency_floor_s == 1.41e-7
    assert b.fused_s == b.unfused_s == 1.41e-7
    assert b.fused_bottleneck == "latency"


def test_a_large_program_is_bound_by_its_bytes():
    h100 = load_target("H100_SXM")
    n = 1 << 20  # 2 MiB: 626 ns of bytes, above the 141 ns floor
    b = graph_bounds(program(n), h100)
    assert b.fused_s == 2 * n / H100_BW > b.latency_floor_s == 1.41e-7
    assert b.fused_bottleneck == "memory"


def test_the_floor_binds_exactly_where_the_bytes_take_less_than_one_round_trip():
    h100 = load_target("H100_SXM")
    edge = 1.41e-7 * H100_BW  # 472,350 B
    below, above = int(edge // 8) * 4, int(edge // 8 + 1) * 4  # each program moves 2x this
    assert graph_bounds(program(below), h100).fused_bottleneck == "latency"
    assert graph_bounds(program(above), h100).fused_bottleneck == "memory"


def test_each_eager_kernel_that_reads_takes_one_round_trip():
    """Unfused: kernels run one after another, each that reads takes the floor; a fill does not."""
    h100 = load_target("H100_SXM")
    fill = replace(copy_op(4096, reads=False), name="S1")
    g = GraphCosts("k", [copy_op(4096), fill, replace(copy_op(4096), name="S2")], 5 * 4096)
    b = graph_bounds(g, h100)
    assert [k.t_latency for k in b.kernels] == [1.41e-7, 0.0, 1.41e-7]
    assert [k.bottleneck for k in b.kernels] == ["latency", "memory", "latency"]
    assert b.unfused_s == 2 * 1.41e-7 + 4096 / H100_BW
    assert b.fused_s == 1.41e-7  # one fused kernel: one round trip
    inv = inverse_roofline(b, [g], 200e-9)
    assert inv["fused"]["met"] is True and inv["unfused"]["met"] is False
    assert inv["unfused"]["latency_floor_s"] == 2 * 1.41e-7


def test_a_program_that_reads_nothing_has_no_floor():
    h100 = load_target("H100_SXM")
    b = graph_bounds(program(4096, reads=False), h100)
    assert b.latency_floor_s == 0.0 and b.fused_s == 4096 / H100_BW
    assert latency_floor_s(h100, 0) == 0.0 and latency_floor_s(h100, 1) == 1.41e-7


def test_the_floor_holds_warm_too():
    """The figure is an L2 hit, which a warm L2 does not beat."""
    h100 = load_target("H100_SXM")
    b = graph_bounds(program(4096), h100, cache_state="warm")
    assert b.fused_memory_s < 1e-9  # the chip holds it all; per-SM storage does not persist
    assert b.fused_s == 1.41e-7 and b.fused_bottleneck == "latency"


def test_inverse_roofline_never_meets_a_latency_below_the_floor():
    h100 = load_target("H100_SXM")
    g = program(4096)
    b = graph_bounds(g, h100)
    inv = inverse_roofline(b, [g], 100e-9)
    assert inv["fused"]["met"] is False and inv["fused"]["latency_floor_s"] == 1.41e-7
    assert inv["fused"]["scale_x"] == pytest.approx(8192 / H100_BW / 100e-9)  # < 1, yet not met
    assert inverse_roofline(b, [g], 200e-9)["fused"]["met"] is True


def test_schema_rejects_a_latency_in_cycles(tmp_path):
    text = (ROOT / "hw_targets" / "H100_SXM.yaml").read_text().replace(
        "latency: {value: 1.41e-7, unit: s,", "latency: {value: 281, unit: cycles,")
    path = tmp_path / "mine.yaml"
    path.write_text(text.replace("name: H100_SXM", "name: mine"))
    with pytest.raises(HwTargetError, match=r"mine.yaml: field 'l2.latency.unit': .*'cycles'"):
        load_target(str(path))


def test_a_target_file_without_the_figure_loads_without_a_floor(tmp_path):
    lines = (ROOT / "hw_targets" / "H100_SXM.yaml").read_text().splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("  latency: {value:"))
    path = tmp_path / "mine.yaml"
    path.write_text("\n".join(lines[:i] + lines[i + 2:]).replace("name: H100_SXM", "name: mine") + "\n")
    t = load_target(str(path))
    assert t.l2_latency is None
    assert replace(load_target("H100_SXM"), l2_latency=None).matrix == t.matrix


def test_report_and_measured_time_below_the_floor(tmp_path, capsys):
    src = tmp_path / "tiny.loop"
    src.write_text("kernel scale(X: f32[16] input, Y: f32[16] output):\n"
                   "    for i in range(16):\n"
                   "        Y[i] = X[i] * 2.0\n")
    rc = main([str(src), "--roofline=all", "--hw", "H100_SXM,B200,L40S", "--format=json"])
    r = json.loads(capsys.readouterr().out)
    assert rc == 0
    b = r["bounds"]
    assert (b["H100_SXM"]["fused_s"], b["B200"]["fused_s"]) == (1.41e-7, 1.23e-7)
    assert b["L40S"]["fused_s"] == 128 / 864e9 and b["L40S"]["latency_floor_s"] == 0.0
    assert b["H100_SXM"]["cache_aware_bottleneck"] == "latency"
    assert b["H100_SXM"]["cache_aware_terms_s"]["latency"] == 1.41e-7
    assert r["hw"]["B200"]["latency"] == {"value": 1.23e-7, "figure": "l2.latency", "estimate": True,
                                          "source": load_target("B200").l2_latency.source}
    assert r["hw"]["L40S"]["latency"] is None
    rc = main([str(src), "--roofline=fused", "--hw", "H100_SXM,L40S"])
    text = capsys.readouterr().out
    assert "  latency:  floor 141 ns: one read's round trip from outside an SM (l2.latency, estimate)" in text
    assert text.count("  latency:") == 1  # L40S has none
    # 100 ns measured: below the floor, so a violation (a measurement of something else)
    rc = main([str(src), "--roofline=fused", "--hw", "H100_SXM", "--measured", "100ns"])
    out = capsys.readouterr()
    assert rc != 0 and "VIOLATION" in out.out
    rc = main([str(src), "--roofline=fused", "--hw", "H100_SXM", "--inverse-roofline", "100ns"])
    assert rc == 0 and "no, below the latency floor 141 ns" in capsys.readouterr().out
