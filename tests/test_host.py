"""The host target as a ceiling: peaks derived from the CPU (injected cpuinfo text), measured rates
beside them (injected measurements), busy machines refused, and a later calibration never lowering
a figure. No assertion depends on how fast this machine is."""

from __future__ import annotations

import functools
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from solar_compiler import hw
from solar_compiler.hw import HwTargetError, load_target
from solar_compiler.hw.cpu import TURBO_ALLOWANCE, cpu_series, describe_cpu, max_clock, usable_cores
from solar_compiler.hw.host import (
    DERIVED_SOURCE,
    DRAM_MARGIN,
    IMPLAUSIBLE,
    HostFacts,
    calibrate_host,
    summary,
)
from solar_compiler.hw.measure import Measurements, Rate

ZEN5 = """processor	: 0
vendor_id	: AuthenticAMD
model name	: AMD EPYC
cpu MHz		: 2596.122
flags		: fpu sse2 avx fma avx2 avx512f avx512dq avx512_bf16 avx512_vnni avx_vnni
processor	: 1
vendor_id	: AuthenticAMD
model name	: AMD EPYC
cpu MHz		: 2596.122
flags		: fpu sse2 avx fma avx2 avx512f avx512dq avx512_bf16 avx512_vnni avx_vnni
"""
SPR = """vendor_id	: GenuineIntel
model name	: Intel(R) Xeon(R) Platinum 8480+ @ 2.00GHz
cpu MHz		: 2000.000
flags		: sse2 avx fma avx2 avx512f avx512_bf16 avx512_vnni avx512_fp16 amx_bf16 amx_int8 amx_tile
"""
HASWELL = """vendor_id	: GenuineIntel
model name	: Intel(R) Xeon(R) CPU E5-2680 v3 @ 2.50GHz
flags		: sse2 avx fma avx2
"""
MIB = 1 << 20
DAY = "2026-05-01"


def facts(cpuinfo: str = ZEN5, cpus: int = 2, load: float | None = 0.1, freq: tuple[str, ...] = (),
          quota: str | None = None) -> HostFacts:
    return HostFacts(cpuinfo, tuple(range(cpus)), quota, freq, 32 * MIB, MIB, 48 * 1024,
                     "fake /sys", 24 << 30, load)


def measured(fp32: float = 200e9, dram: float = 30e9, cache: float = 150e9,
             spread: float = 0.05) -> Measurements:
    return Measurements({"fp64": Rate(90e9, "numpy float64 matmul 2048^3", spread),
                         "fp32": Rate(fp32, "torch float32 matmul 2048^3", spread),
                         "bf16": Rate(900e9, "torch bfloat16 matmul 2048^3", spread)},
                        Rate(dram, "2-thread numpy copy of 256 MiB", spread),
                        Rate(cache, "2-thread numpy copy of 8 MiB", spread))


# ---- the CPU's own description ------------------------------------------------------------------

def test_peaks_from_flags_cores_and_cpufreq_clock() -> None:
    cpu = describe_cpu(ZEN5, [0, 1], None, ["3700000", "3500000"])
    assert (cpu.cores, cpu.clock_hz, cpu.clock_exact) == (2, 3.7e9, True)
    m = cpu.matrix_peaks()
    assert m["fp64"][0] == 2 * 32 * 3.7e9  # 2 x 512-bit FMA x 8 lanes x 2 FLOP
    assert m["fp32"][0] == 2 * 64 * 3.7e9
    assert m["bf16"][0] == 2 * 128 * 3.7e9  # VDPBF16PS, two per cycle
    assert m["int8"][0] == 2 * 256 * 3.7e9  # VPDPBUSD, two per cycle
    assert "fp16" not in m and "(avx512f)" in m["fp32"][1]
    assert set(cpu.vector_peaks()) == {"fp64", "fp32"}


def test_clock_without_cpufreq_is_a_stated_clock_times_the_turbo_allowance() -> None:
    assert max_clock([], "AMD EPYC", [2596.122, 2596.0]) == pytest.approx(
        (2596.122e6 * TURBO_ALLOWANCE, "2.596 GHz from /proc/cpuinfo cpu MHz x turbo allowance 2", False))
    hz, how, exact = max_clock([], "Intel(R) Xeon(R) Platinum 8480+ @ 2.00GHz", [])
    assert (hz, exact) == (4.0e9, False) and "model name" in how  # 8480+ turbo: 3.8 GHz < 4.0
    with pytest.raises(ValueError, match="no clock"):
        max_clock(["garbage"], "Some CPU", [])


GENOA_VM = """processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 17
model name	: AMD EPYC
stepping	: 1
cpu MHz		: 2596.140
bogomips	: 5192.28
flags		: fpu sse2 avx fma avx2 avx512f avx512_bf16 avx512_vnni
"""


def test_clock_of_a_vm_without_cpufreq_is_its_series_max_boost() -> None:
    """The 2.6 GHz EPYC VM (captured /proc/cpuinfo, no cpufreq in sysfs) whose ceiling was 5.19 GHz
    (cpu MHz x 2): family 25 model 17 is EPYC 9004, whose fastest part boosts to 4.4 GHz."""
    assert cpu_series(GENOA_VM) == ("AuthenticAMD", 25, 17)
    cpu = describe_cpu(GENOA_VM, [0, 1], None, [])
    assert (cpu.clock_hz, cpu.clock_exact) == (4.4e9, False)
    assert "EPYC 9174F max boost 4.4 GHz" in cpu.clock_how and "2.596 GHz, not a maximum" in cpu.clock_how
    # sysfs cpufreq, when present, is the CPU's own maximum and wins over the series' figure
    assert describe_cpu(GENOA_VM, [0, 1], None, ["3700000\n"]).clock_how == "cpufreq cpuinfo_max_freq"
    # a series outside the table (and no family line at all) keeps the stated clock x allowance
    other = GENOA_VM.replace("cpu family\t: 25", "cpu family\t: 21")
    assert cpu_series(other) == ("AuthenticAMD", 21, 17)
    assert describe_cpu(other, [0], None, []).clock_hz == pytest.approx(2596.14e6 * TURBO_ALLOWANCE)
    assert cpu_series(ZEN5) is None


def test_calibration_summary_says_where_the_clock_comes_from(tmp_path: Path) -> None:
    t = calibrate_host(tmp_path / "h.yaml", facts=facts(cpuinfo=GENOA_VM), measurements=measured())
    line = next(x for x in summary(t) if x.strip().startswith("clock_hz"))
    assert line.startswith("  clock_hz: 4.4e+09 Hz (no cpufreq; highest max boost of the series")


def test_usable_cores_follow_affinity_and_cgroup_quota() -> None:
    assert usable_cores(range(8), None) == (8, "8 CPUs in the affinity mask")
    assert usable_cores(range(8), "max 100000")[0] == 8
    assert usable_cores(range(8), "-1 100000")[0] == 8  # cgroup v1: no quota
    assert usable_cores(range(8), "150000 100000") == (2, "cgroup CPU quota 150000/100000 us")  # 1.5 -> 2
    assert usable_cores(range(2), "800000 100000")[0] == 2


def test_isa_variants() -> None:
    spr = describe_cpu(SPR, range(4), None, [])
    assert spr.clock_hz == 4.0e9
    m = spr.matrix_peaks()
    assert m["bf16"][0] == 4 * 1024 * 4.0e9 and "(amx_bf16)" in m["bf16"][1]
    assert m["int8"][0] == 4 * 2048 * 4.0e9 and m["fp16"][0] == 4 * 128 * 4.0e9
    assert spr.vector_peaks()["fp16"][0] == 4 * 128 * 4.0e9
    old = describe_cpu(HASWELL, range(1), None, [])
    assert old.per_cycle() == {"fp64": 16, "fp32": 32}


# ---- calibration ----------------------------------------------------------------------------------

def test_calibration_derives_ceilings_and_keeps_measurements_beside(tmp_path: Path) -> None:
    t = calibrate_host(tmp_path / "host.yaml", facts=facts(), measurements=measured(), today=DAY)
    assert load_target(str(tmp_path / "host.yaml")) == t
    clock = 2596.122e6 * TURBO_ALLOWANCE
    assert t.matrix["fp32"].value == pytest.approx(2 * 64 * clock, rel=1e-3)
    assert t.matrix["bf16"].value == pytest.approx(2 * 128 * clock, rel=1e-3)
    assert t.vector["fp32"].value == t.matrix["fp32"].value
    assert t.matrix["fp32"].source == DERIVED_SOURCE and t.matrix["fp32"].estimate  # no cpufreq: estimate
    assert t.measured["matrix.fp32"].value == 200e9 and t.measured["dram.bandwidth"].value == 30e9
    assert t.dram_bw.value == 30e9 * DRAM_MARGIN and t.levels[0].bandwidth.value == t.dram_bw.value
    # levels: all cache storage on the chip, then one core's L2 + L1d, one unit per core
    chip, core = t.levels
    assert (chip.name, chip.units, chip.capacity.value) == ("chip", 1, 32 * MIB + 2 * (MIB + 48 * 1024))
    assert (core.name, core.per, core.units, core.capacity.value) == ("core", "core", 2, MIB + 48 * 1024)
    assert core.describe() == "per-core storage 1.098 MB x 2"
    assert core.bandwidth.value == pytest.approx(2 * 64 * clock, rel=1e-3)  # cores x 64 B/cycle > measured
    # no TF32 on a CPU; fp32 accuracy: AVX-512 FMA beats Ozaki-II on VNNI (256 / 6 < 64)
    assert t.price_matrix("f32").key == "matrix.fp32" and t.price_matrix("f64").key == "matrix.fp64"
    assert set(t.emulation) == {"bf16x9", "ozaki2_int8_fp32", "ozaki2_int8_fp64"}
    lines = summary(t)
    assert any(ln.startswith("  matrix.fp32: 6.647e+11 FLOP/s; measured 2e+11 (30% of it)") for ln in lines)


def test_amx_prices_fp32_accuracy_through_emulation(tmp_path: Path) -> None:
    t = calibrate_host(tmp_path / "h.yaml", facts=facts(SPR, cpus=4), measurements=measured(),
                       today=DAY)
    # AMX-INT8 2048 OP/cycle / 6 products beats 64 FP32 FLOP/cycle: f32 matmuls can run faster than FMA
    assert t.matrix_peak("f32", "fp32") == pytest.approx(t.matrix["int8"].value / 6)
    assert t.matrix_figure("f32") == "emulation.ozaki2_int8_fp32"


def test_measurement_above_a_derived_peak_raises_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    one_core = facts(HASWELL, cpus=1)  # 32 FLOP/cycle x 5.0 GHz = 160 GFLOP/s
    with caplog.at_level(logging.WARNING):
        t = calibrate_host(tmp_path / "h.yaml", facts=one_core, measurements=measured(fp32=200e9),
                           today=DAY)
    assert t.matrix["fp32"].value == pytest.approx(200e9 * IMPLAUSIBLE)
    assert "IMPLAUSIBLE" in (t.matrix["fp32"].note or "")
    # bf16 has no derived peak here and 900 GFLOP/s beats the fp32 rate it would fall back to
    assert t.matrix["bf16"].value == pytest.approx(900e9 * IMPLAUSIBLE)
    assert "exceeds the derived" in caplog.text


def test_busy_machine_is_refused_unless_forced(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "h.yaml"
    with pytest.raises(HwTargetError, match=r"busy \(load average 7.68 on 2 usable cores"):
        calibrate_host(path, facts=facts(load=7.68), measurements=measured())
    with pytest.raises(HwTargetError, match=r"busy \(trials differ by up to 60%"):
        calibrate_host(path, facts=facts(), measurements=measured(spread=0.6))
    assert not path.exists()
    with caplog.at_level(logging.WARNING):
        t = calibrate_host(path, facts=facts(load=7.68), measurements=measured(), force=True, today=DAY)
    assert "BUSY: load average 7.68" in t.description and "busy machine" in caplog.text
    # a loaded machine measures bandwidth low: scaled by load / cores = 3.84
    assert t.dram_bw.value == pytest.approx(30e9 * DRAM_MARGIN * 7.68 / 2, rel=1e-3)


def test_a_later_calibration_never_lowers_a_figure(tmp_path: Path) -> None:
    path = tmp_path / "h.yaml"
    first = calibrate_host(path, facts=facts(), measurements=measured(fp32=200e9, dram=30e9), today=DAY)
    low = calibrate_host(path, facts=facts(), measurements=measured(fp32=1e11, dram=12e9), today="2026-05-02")
    assert low.dram_bw.value == first.dram_bw.value == low.levels[0].bandwidth.value
    assert low.measured["matrix.fp32"].value == 200e9 and low.measured["dram.bandwidth"].value == 30e9
    assert low.matrix["fp32"].value == first.matrix["fp32"].value
    high = calibrate_host(path, facts=facts(), measurements=measured(dram=40e9), today="2026-05-03")
    assert high.dram_bw.value == 40e9 * DRAM_MARGIN and high.measured_on == "2026-05-03"
    for key, fig in first._named_figures():
        assert dict(high._named_figures())[key].value >= fig.value, key
    # another machine (another core count): the old file is replaced, not merged
    other = calibrate_host(path, facts=facts(cpus=1), measurements=measured(dram=10e9), today="2026-05-04")
    assert other.dram_bw.value == 10e9 * DRAM_MARGIN


def test_no_clock_is_an_error(tmp_path: Path) -> None:
    no_clock = replace(facts(), cpuinfo="vendor_id: X\nmodel name: Mystery CPU\nflags: sse2\n")
    with pytest.raises(HwTargetError, match="host: cannot derive a ceiling for this CPU: no clock"):
        calibrate_host(tmp_path / "h.yaml", facts=no_clock, measurements=measured())


def test_measured_section_is_validated(tmp_path: Path) -> None:
    path = tmp_path / "h.yaml"
    calibrate_host(path, facts=facts(), measurements=measured(), today=DAY)
    fp6 = "  matrix.fp6: {value: 1.0e+9, unit: FLOP/s, source: x, estimate: false}\n"
    path.write_text(path.read_text().replace("measured:\n", "measured:\n" + fp6))
    with pytest.raises(HwTargetError, match=r"field 'measured.matrix.fp6': expected matrix.<format>"):
        load_target(str(path))


# ---- the real machine (sizes tiny; nothing asserted about speed) ----------------------------------

def test_calibrate_this_machine_quick(tmp_path: Path) -> None:
    t = calibrate_host(tmp_path / "host.yaml", quick=True, use_torch=False, force=True)
    assert t.name == "host" and t.measured_on and t.levels[0].name == "chip"
    assert t.matrix["fp32"].value >= t.measured["matrix.fp32"].value  # a ceiling, never below a measurement
    assert t.dram_bw.value >= t.measured["dram.bandwidth"].value * DRAM_MARGIN
    assert "lists no TF32 rate" in t.describe_precision("auto")


def test_load_host_uses_cache_and_calibrates_when_missing(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert hw.host_cache_path() == tmp_path / "solar-opt" / "host.yaml"
    fake = functools.partial(calibrate_host, facts=facts(), measurements=measured(), today=DAY)
    monkeypatch.setattr(hw.host, "calibrate_host", fake)
    first = load_target("host")
    assert hw.host_cache_path().is_file()

    def fail(*_a: object, **_k: object) -> hw.HwTarget:
        raise AssertionError("cache ignored")

    monkeypatch.setattr(hw.host, "calibrate_host", fail)
    assert load_target("host") == first
