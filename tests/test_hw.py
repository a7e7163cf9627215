"""Hardware targets: bundled figures, precision policy, schema errors, host calibration."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from solar_compiler import hw
from solar_compiler.hw import HwTargetError, load_target

BUNDLED = ["A100_SXM", "B200", "B300", "GB200", "H100_NVL", "H100_PCIe", "H100_SXM", "H200", "Jetson_Thor",
           "L40S", "MI300X"]
REPO = Path(__file__).resolve().parent.parent


def _figures(t: hw.HwTarget) -> list[tuple[str, hw.Figure]]:
    return list(t._named_figures())


# ---------------------------------------------------------------------------------------------- bundled


def test_available_targets() -> None:
    assert hw.available_targets() == [*BUNDLED, "host"]


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_target_loads_and_is_consistent(name: str) -> None:
    t = load_target(name)
    assert t.name == name
    assert Path(t.path).name == f"{name}.yaml"
    assert t.measured_on is None
    for field, fig in _figures(t):
        assert fig.unit in hw.UNITS, field
        assert fig.value > 0, field
        assert fig.source.startswith("https://"), field
    # Levels, named for what they hold: all on-chip storage behind the DRAM boundary (more than L2
    # alone, one unit), then one SM's own storage behind the L2 boundary (one unit per SM).
    assert [(lvl.name, lvl.per) for lvl in t.levels] == [("chip", "chip"), ("sm", "sm")]
    chip, sm = t.levels
    assert t.sm_count is not None and (chip.units, sm.units) == (1, t.sm_count.value)
    assert chip.bandwidth.value == t.dram_bw.value
    assert t.l2_size is not None and chip.capacity.value > t.l2_size.value
    assert t.l2_bw is not None and sm.bandwidth.value == t.l2_bw.value
    assert t.smem_per_sm is not None and t.regfile_per_sm is not None
    assert sm.capacity.value >= t.smem_per_sm.value + t.regfile_per_sm.value
    assert chip.capacity.value >= t.l2_size.value + t.sm_count.value * sm.capacity.value
    # Dense peaks keep the tensor-core ladder: a sparse figure slipped into one field breaks a ratio.
    m = {k: f.value for k, f in t.matrix.items()}
    assert m["bf16"] == m["fp16"]
    assert m["bf16"] / m["tf32"] == pytest.approx(2.0, rel=0.02)
    if "fp8" in m:
        assert m["fp8"] / m["bf16"] == pytest.approx(2.0, rel=0.02)
    for e in t.emulation.values():  # every method sourced, on a unit the target lists
        assert e.source.startswith("https://") and e.computes in ("fp32", "fp64") and e.products >= 1
        assert t.price_matrix("f32" if e.computes == "fp32" else "f64", "fp32").rate >= t.matrix[
            e.via.split(".")[1]].value / e.products
    if "int4" in m:  # the integer ladder: INT4 2x INT8, binary 4x INT4 (Ampere whitepaper)
        assert m["int4"] / m["int8"] == pytest.approx(2.0, rel=0.02)
    if "binary" in m:
        assert m["binary"] / m["int4"] == pytest.approx(4.0, rel=0.02)
    ints = ("int8", "int4", "binary")
    assert t.matrix["int8"].unit == "OP/s" and all(t.matrix[k].unit == "OP/s" for k in ints if k in m)
    assert all(f.unit == "FLOP/s" for k, f in t.matrix.items() if k not in ints)
    assert hash(t) == hash(load_target(name))


@pytest.mark.parametrize("path", sorted((REPO / "hw_targets").glob("*.yaml")))
def test_bundled_files_read_as_numbers_by_plain_pyyaml(path: Path) -> None:
    """Values are written 3.35e+12 so any YAML loader (not only ours) reads floats, and the file
    header says dense / FLOP/s."""
    text = path.read_text()
    assert "DENSE" in text and "never MAC/s" in text

    def walk(x: object) -> None:
        if isinstance(x, dict):
            if "value" in x:
                assert isinstance(x["value"], (int, float)) and not isinstance(x["value"], bool), x
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(yaml.safe_load(text))


def test_h100_sxm_datasheet_figures() -> None:
    t = load_target("H100_SXM")
    assert t.vendor == "NVIDIA"
    assert t.matrix["bf16"].value == 989.4e12
    assert t.matrix["fp16"].value == 989.4e12
    assert t.matrix["tf32"].value == 494.7e12
    assert t.matrix["fp8"].value == 1978.9e12
    assert t.matrix["int8"].value == 1978.9e12
    assert t.matrix["fp64"].value == 66.9e12
    assert t.vector["fp32"].value == 66.9e12
    assert t.vector["fp64"].value == 33.5e12
    assert t.dram_bw.value == 3.35e12 and t.dram_bw.unit == "bytes/s"
    assert t.l2_size is not None and t.l2_size.value == 50 * 2**20
    assert t.sm_count is not None and t.sm_count.value == 132
    assert t.levels[0].capacity.value == 121634816  # ~120 MB on chip
    assert t.levels[1].capacity.value == 512 * 1024
    assert t.levels[0].describe() == "on-chip capacity 121.6 MB"
    assert t.levels[1].describe() == "per-SM storage 512 KiB x 132"
    assert not t.matrix["tf32"].estimate and not t.dram_bw.estimate
    assert t.l2_bw is not None and t.l2_bw.estimate
    assert "l2.bandwidth" in t.estimated_fields() and "matrix.bf16" not in t.estimated_fields()
    assert load_target("H200").dram_bw.value == 4.8e12


def test_datasheet_fixes_and_new_targets() -> None:
    # H100 PCIe: 5120-bit HBM2e at 1593 MHz DDR = 2.039 TB/s (the datasheet rounds to 2.0)
    pcie = load_target("H100_PCIe")
    assert pcie.dram_bw.value == pytest.approx(5120 / 8 * 2 * 1.593e9, rel=1e-4)
    assert pcie.dram_bw.value == 2.039e12 == pcie.levels[0].bandwidth.value
    # B200 is the HGX (1000 W) part; GB200 is the same GPU at 1200 W: 1.25 / 2.5 / 5.0 PFLOP/s dense
    assert "HGX" in load_target("B200").description and "1000 W" in load_target("B200").description
    gb = load_target("GB200")
    assert [gb.matrix[k].value for k in ("tf32", "bf16", "fp16", "fp8")] == [1.25e15, 2.5e15, 2.5e15, 5.0e15]
    assert gb.matrix["int8"].value == 5.0e15 and gb.dram_bw.value == 8.0e12 and "1200 W" in gb.description
    nvl = load_target("H100_NVL")
    assert (nvl.dram_bw.value, nvl.matrix["bf16"].value) == (3.9e12, 835.5e12)
    assert nvl.matrix["tf32"].value == 417.5e12
    # Jetson Thor: 16-bit vector work at 2 x fp32 (packed), as on every other Blackwell part
    thor = load_target("Jetson_Thor")
    assert thor.vector_peak("bf16") == thor.vector_peak("f16") == 2 * thor.vector["fp32"].value
    assert thor.vector_figure("bf16") == "vector.bf16"


def test_blackwell_fp4_fp8_dense_rates_and_b300() -> None:
    """Dense per-GPU tensor rates in FLOP/s: NVIDIA's board / superchip figures with sparsity, / GPUs
    / 2. HGX B200 FP8 72 PF and FP4 144 PF per 8 GPUs; GB200 superchip FP8 20 PF and FP4 40 PF per 2
    GPUs; HGX B300 keeps Blackwell's FP8 (72 PF / 8 / 2) with FP4 at the higher of 105 PF dense / 8
    and the secondary ~15 PF dense, FP64 10 TF / 8."""
    b200, gb200, b300 = (load_target(n) for n in ("B200", "GB200", "B300"))
    assert (b200.matrix["fp8"].value, b200.matrix["fp4"].value) == (4.5e15, 9.0e15)
    assert (gb200.matrix["fp8"].value, gb200.matrix["fp4"].value) == (5.0e15, 10.0e15)
    assert (b300.matrix["fp8"].value, b300.matrix["fp4"].value) == (4.5e15, 15.0e15)
    assert b300.matrix["fp4"].estimate and not b300.matrix["fp8"].estimate
    assert (b300.matrix["fp64"].value, b300.matrix["bf16"].value) == (1.25e12, 2.25e15)
    assert b300.dram_bw.value == 8e12
    assert b300.sm_count.value == 160 and b300.levels[0].capacity.value == 2**27 + 160 * 768 * 1024
    assert all(f.unit == "FLOP/s" for t in (b200, gb200, b300) for k, f in t.matrix.items() if k != "int8")


def test_jetson_thor_rates_are_all_estimates() -> None:
    t = load_target("Jetson_Thor")
    assert all(f.estimate for f in t.matrix.values())
    assert t.clock_hz is not None and not t.clock_hz.estimate


# ------------------------------------------------------------------------------------- precision policy


def test_matrix_peak_f32_policies() -> None:
    t = load_target("H100_SXM")
    assert t.matrix_peak("f32") == 494.7e12  # auto = TF32
    assert t.matrix_peak("f32", "auto") == 494.7e12
    assert t.matrix_peak("f32", "tf32") == 494.7e12
    # fp32 accuracy: the fastest method is Ozaki-II on INT8 (6 INT8 products per fp32 product)
    assert t.matrix_peak("f32", "fp32") == 1978.9e12 / 6
    assert t.matrix_figure("f32", "fp32") == "emulation.ozaki2_int8_fp32"
    assert t.matrix_peak("f32", "bf16") == 989.4e12
    assert t.matrix_peak("f32", "fp16") == 989.4e12
    assert t.matrix_peak("f32", "fp8") == 1978.9e12
    with pytest.raises(HwTargetError, match="precision policy 'int4'"):
        t.matrix_peak("f32", "int4")


@pytest.mark.parametrize("precision", hw.PRECISIONS)
def test_matrix_peak_other_dtypes_ignore_policy(precision: str) -> None:
    t = load_target("H100_SXM")
    assert t.matrix_peak("bf16", precision) == 989.4e12
    assert t.matrix_peak("f16", precision) == 989.4e12
    assert t.matrix_peak("f8e4m3", precision) == 1978.9e12
    assert t.matrix_peak("f8e5m2", precision) == 1978.9e12
    assert t.matrix_peak("i8", precision) == 1978.9e12
    assert t.matrix_peak("f64", precision) == 1978.9e12 / 14  # Ozaki-II on INT8, 14 products
    assert t.matrix_peak("i32", precision) == 1978.9e12 / 14  # i32 fits fp64: an fp64-accurate method


# Published measurements of accurate emulation (GEMMul8 README and result CSVs; Ootomo & Yokota 2022):
# (target, dtype, measured FLOP/s). No implementation the policy allows may beat its bound, so the
# ceiling of the fp32 policy (f32) and of f64 must stay above each.
MEASURED_EMULATION = [
    ("B200", "f32", 259e12),       # Ozaki-II SGEMM emulation, fast mode, 16384^3 (native SGEMM 67.2)
    ("B200", "f64", 123e12),       # Ozaki-II DGEMM emulation, 14-17 moduli (native DGEMM 36.0)
    ("H100_SXM", "f64", 80.2e12),  # Ozaki-II DGEMM emulation on GH200 (native FP64 peak 66.9)
    ("A100_SXM", "f32", 51e12),    # FP16x3 with error correction (native FP32 peak 19.5)
]


@pytest.mark.parametrize(("name", "dtype", "measured"), MEASURED_EMULATION)
def test_published_emulation_never_beats_the_ceiling(name: str, dtype: str, measured: float) -> None:
    t = load_target(name)
    native = max(f.value for k, f in [*t.matrix.items(), *t.vector.items()] if k == dtype.replace("f", "fp"))
    assert measured > native  # each of these beats the native peak the policy used to price at
    assert t.matrix_peak(dtype, "fp32") >= measured


def test_matrix_peak_fallbacks() -> None:
    # A100 has no FP8 unit: f8 values are exact in fp16/bf16, so f8 runs at the FP16 tensor rate.
    assert load_target("A100_SXM").matrix_peak("f8e4m3") == 312e12
    # L40S has no FP64 tensor unit and 1/64-rate FP64 lanes (1.43): Ozaki-II on INT8 is 36x faster.
    assert load_target("L40S").matrix_peak("f64") == 733e12 / 14
    # MI300X lists an FP32 matrix rate (163.4); Ozaki-II on its INT8 matrix cores beats it.
    assert load_target("MI300X").matrix_peak("f32", "fp32") == 2614.9e12 / 6
    # Jetson Thor publishes no FP64 figure: f64 contractions only through the emulation ...
    assert load_target("Jetson_Thor").matrix_peak("f64") == 517.5e12 / 14
    with pytest.raises(HwTargetError, match="unknown dtype 'f128'"):
        load_target("H100_SXM").matrix_peak("f128")


def test_vector_peak() -> None:
    t = load_target("H100_SXM")
    assert t.vector_peak("f32") == 66.9e12
    assert t.vector_peak("f64") == 33.5e12
    assert t.vector_peak("f16") == 133.8e12  # packed half2 beats fp32
    assert t.vector_peak("bf16") == 133.8e12
    assert t.vector_peak("f8e4m3") == 133.8e12
    assert t.vector_peak("i32") == 66.9e12
    assert t.vector_peak("bool") == 133.8e12
    a100 = load_target("A100_SXM")
    assert a100.vector_peak("f16") == 78e12 and a100.vector_peak("bf16") == 39e12
    # L40S lists no 16-bit vector rate: 16-bit work at max(fp32) = 91.6.
    assert load_target("L40S").vector_peak("bf16") == 91.6e12
    with pytest.raises(HwTargetError, match=r"Jetson_Thor.*f64"):
        load_target("Jetson_Thor").vector_peak("f64")


def test_figure_keys_name_the_figure_priced() -> None:
    t = load_target("H100_SXM")
    assert t.vector_figure("bf16") == "vector.bf16" and t.vector_figure("f16") == "vector.fp16"
    assert t.vector_figure("f32") == "vector.fp32" and t.vector_figure("i32") == "vector.fp32"
    assert t.matrix_figure("f32") == "matrix.tf32" and t.matrix_figure("bf16") == "matrix.bf16"
    assert t.matrix_figure("f8e5m2") == "matrix.fp8" and t.matrix_figure("i8") == "matrix.int8"
    p = t.price_vector("bf16")
    assert (p.rate, p.key, p.label, p.estimate) == (133.8e12, "vector.bf16", "BF16 vector", True)


def test_describe_precision() -> None:
    t = load_target("H100_SXM")
    assert t.describe_precision("auto") == "auto: f32 contractions at TF32 tensor rate (494.7 TFLOP/s)"
    assert t.describe_precision("fp32") == ("fp32: f32 contractions at ozaki2_int8_fp32 emulation "
                                            "(6 INT8 tensor products each) rate (329.8 TFLOP/s)")
    assert t.describe_precision("bf16") == "bf16: f32 contractions at BF16 tensor rate (989.4 TFLOP/s)"


# ---------------------------------------------------------------------------------------- user files


def _h100_doc() -> dict:
    return yaml.safe_load((REPO / "hw_targets" / "H100_SXM.yaml").read_text())


def _write(tmp_path: Path, doc: object, name: str = "bad.yaml") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return path


def test_user_target_file(tmp_path: Path) -> None:
    doc = _h100_doc()
    doc["name"] = "MyGPU"
    del doc["matrix"]["tf32"]
    path = _write(tmp_path, doc, "mine.yaml")
    t = load_target(str(path))
    assert t.name == "MyGPU" and t.path == str(path)
    # No TF32: the auto policy falls back to the fp32 contract (its fastest method), and says so.
    assert t.matrix_peak("f32") == 1978.9e12 / 6
    assert t.describe_precision("auto").endswith("MyGPU lists no TF32 rate")
    assert hw.parse_hw_list(f"H100_SXM, {path}")[1].name == "MyGPU"
    # Without emulation methods only native units remain: FP32 lanes = FP64 tensor = 66.9.
    del doc["emulation"]
    bare = load_target(str(_write(tmp_path, doc, "bare.yaml")))
    assert bare.matrix_peak("f32") == 66.9e12 and bare.matrix_peak("f64") == 66.9e12
    assert bare.estimated_fields() == tuple(k for k in t.estimated_fields() if not k.startswith("emulation."))


def test_no_unit_for_a_dtype_is_an_error_not_a_guess(tmp_path: Path) -> None:
    doc = yaml.safe_load((REPO / "hw_targets" / "Jetson_Thor.yaml").read_text())
    del doc["emulation"]["ozaki2_int8_fp64"]
    t = load_target(str(_write(tmp_path, doc, "thor.yaml")))
    with pytest.raises(HwTargetError, match=r"Jetson_Thor: no rate for f64 contractions \(would use one of: "
                       r"matrix.fp64, vector.fp64\)"):
        t.matrix_peak("f64")


def test_level_units_resolve_from_the_targets_own_figures(tmp_path: Path) -> None:
    doc = _h100_doc()
    doc["sm"]["cluster_size"] = {"value": 16, "unit": "count", "source": "x", "estimate": True}
    doc["levels"][1]["units"] = "cluster"
    doc["levels"][1]["capacity"]["value"] = 16 * 524288
    t = load_target(str(_write(tmp_path, doc, "c.yaml")))
    assert (t.levels[1].per, t.levels[1].units) == ("cluster", 9)  # ceil(132 / 16): never fewer units
    assert t.levels[1].describe() == "per-cluster storage 8.389 MB x 9"
    del doc["sm"]["count"]
    doc["levels"][1]["units"] = "sm"
    with pytest.raises(HwTargetError, match=r"field 'levels\[1\].units': 'sm' needs sm.count"):
        load_target(str(_write(tmp_path, doc, "d.yaml")))


def test_yaml12_exponents_are_numbers(tmp_path: Path) -> None:
    text = (REPO / "hw_targets" / "H100_SXM.yaml").read_text().replace("3.35e+12", "3.35e12")
    assert "value: 3.35e12" in text
    assert load_target(str(_write(tmp_path, text, "h.yaml"))).dram_bw.value == 3.35e12


def _set(doc: dict, dotted: str, value: object) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        doc = doc[int(key)] if isinstance(doc, list) else doc[key]
    if value is _DELETE:
        del doc[last]
    else:
        doc[last] = value


_DELETE = object()


@pytest.mark.parametrize(
    ("dotted", "value", "field", "words"),
    [
        ("dram.bandwidth", _DELETE, "dram.bandwidth", "missing"),
        ("name", _DELETE, "name", "missing"),
        ("matrix.bf16.source", _DELETE, "matrix.bf16.source", "missing"),
        ("dram.bandwidth.value", "fast", "dram.bandwidth.value", "expected a positive number, got 'fast'"),
        ("matrix.bf16.unit", "MAC/s", "matrix.bf16.unit", "got 'MAC/s'"),
        ("matrix.tf32.value", -494.7e12, "matrix.tf32.value", "expected a positive number"),
        ("vector.fp32.value", 0, "vector.fp32.value", "expected a positive number"),
        ("dram.bandwidth.unit", "GB/s", "dram.bandwidth.unit", "expected one of"),
        ("dram.bandwidth.unit", "bytes", "dram.bandwidth.unit", "expected bytes/s here"),
        ("matrix.bf16.estimate", "maybe", "matrix.bf16.estimate", "expected true or false"),
        (
            "matrix.fp6",
            {"value": 1.0, "unit": "FLOP/s", "source": "x", "estimate": True},
            "matrix.fp6",
            "unknown key",
        ),
        ("dram.bandwith", 1, "dram.bandwith", "unknown key"),
        ("levels.1.capacity.value", 2e9, "levels[1].capacity.value", "outermost first"),
        ("levels.1.units", _DELETE, "levels[1].units", "missing"),
        ("emulation.bf16x9.via", "matrix.fp4", "emulation.bf16x9.via", "expected a rate the target lists"),
        ("emulation.bf16x9.products", 0.5, "emulation.bf16x9.products", "expected a number >= 1"),
        ("emulation.bf16x9.computes", "fp128", "emulation.bf16x9.computes", "expected a format"),
        ("emulation.bf16x9.source", _DELETE, "emulation.bf16x9.source", "missing"),
        ("levels.1.units", "warp", "levels[1].units", "expected 1, sm, core or cluster, got 'warp'"),
        ("levels.1.units", 132, "levels[1].units", "expected 1, sm, core or cluster, got 132"),
        ("levels.1.units", "cluster", "levels[1].units", "'cluster' needs sm.cluster_size"),
        ("sm.count.value", 13.5, "sm.count.value", "whole number"),
    ],
)
def test_malformed_yaml_names_file_and_field(
    tmp_path: Path, dotted: str, value: object, field: str, words: str
) -> None:
    doc = _h100_doc()
    _set(doc, dotted, value)
    path = _write(tmp_path, doc)
    with pytest.raises(HwTargetError) as info:
        load_target(str(path))
    msg = str(info.value)
    assert msg.startswith(f"{path}: field '{field}': "), msg
    assert words in msg
    assert "\n" not in msg


def test_malformed_exact_message(tmp_path: Path) -> None:
    doc = _h100_doc()
    doc["dram"]["bandwidth"]["value"] = "fast"
    path = _write(tmp_path, doc)
    with pytest.raises(HwTargetError) as info:
        load_target(str(path))
    assert str(info.value) == f"{path}: field 'dram.bandwidth.value': expected a positive number, got 'fast'"


def test_invalid_yaml_syntax(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: [unclosed\n")
    with pytest.raises(HwTargetError, match=r"bad\.yaml: not valid YAML"):
        load_target(str(path))


def test_unknown_target_lists_available() -> None:
    with pytest.raises(HwTargetError) as info:
        load_target("H999")
    msg = str(info.value)
    assert "unknown hardware target 'H999'" in msg
    for name in [*BUNDLED, "host"]:
        assert name in msg
    with pytest.raises(HwTargetError, match="no such hardware target file"):
        load_target("does/not/exist.yaml")


def test_unknown_target_names_the_closest() -> None:
    with pytest.raises(HwTargetError, match=r"target 'H100'; did you mean H100_NVL, H100_PCIe or H100_SXM\?"):
        load_target("H100")
    with pytest.raises(HwTargetError, match=r"'h100sxm'; did you mean H100_SXM\?"):
        load_target("h100sxm")
    with pytest.raises(HwTargetError) as info:
        load_target("TPUv9")
    assert "did you mean" not in str(info.value)


def test_errors_are_user_facing_solar_errors() -> None:
    from solar_compiler.errors import SolarError

    assert issubclass(HwTargetError, SolarError)


def test_names_are_case_insensitive_and_lists_parse() -> None:
    assert load_target("h100_sxm").name == "H100_SXM"
    targets = hw.parse_hw_list("H100_SXM,H200")
    assert [t.name for t in targets] == ["H100_SXM", "H200"]
    assert [t.name for t in hw.parse_hw_list(" H200 , H200,MI300X ")] == ["H200", "MI300X"]
    with pytest.raises(HwTargetError, match="empty hardware list"):
        hw.parse_hw_list(" , ")
    with pytest.raises(HwTargetError, match="available: A100_SXM"):
        hw.parse_hw_list("H100_SXM,TPUv9")


def test_import_is_cheap() -> None:
    code = (
        "import sys, solar_compiler; before = {'numpy', 'torch'} & set(sys.modules)\n"
        "import solar_compiler.hw\n"
        "print(sorted(({'numpy', 'torch'} & set(sys.modules)) - before))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[]"
