"""Results are not IR: the roofline report is a result the analysis manager serves (computed once
per module state, asked for by the output targets), dropped when a pass changes the IR, and never
stored in the module."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from passes import roofline as roofline_pass
from passes.lift_einsum import LiftEinsumPass
from passes.roofline import RooflinePass
from solar_compiler.analysis import costs
from solar_compiler.analysis.manager import invalidate_analyses
from solar_compiler.analysis.summary import module_report
from solar_compiler.dialects.convert import kernels_to_module
from solar_compiler.driver import run_pipeline
from solar_compiler.errors import SolarError
from solar_compiler.records import Alias, ChainsRecord, ChainTree, ProgramInfo, Validation
from solar_compiler.report import JsonReportTarget, TextReportTarget
from solar_compiler.text.parser import parse_kernels

ROOT = Path(__file__).resolve().parent.parent
MATMUL = ROOT / "examples/loop/matmul.loop"


def _lifted() -> ModuleOp:
    module = kernels_to_module(parse_kernels(MATMUL.read_text(), MATMUL.name))
    LiftEinsumPass().apply(Context(), module)
    return module


def _emit(target, module: ModuleOp) -> str:  # noqa: ANN001
    out = io.StringIO()
    target.emit(Context(), module, out)
    return out.getvalue()


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Calls of the report builder and of the costs analysis (the module's programs priced)."""
    calls = {"build_report": 0, "costs": 0}
    build, module_costs = roofline_pass.build_report, costs._module_costs

    def count_build(*a, **k):  # noqa: ANN002, ANN003, ANN202
        calls["build_report"] += 1
        return build(*a, **k)

    def count_costs(m: ModuleOp) -> list[costs.GraphCosts]:
        calls["costs"] += 1
        return module_costs(m)

    monkeypatch.setattr(roofline_pass, "build_report", count_build)
    monkeypatch.setattr(costs, "_module_costs", count_costs)
    return calls


def test_a_report_built_twice_serves_the_cached_result(counted: dict[str, int]) -> None:
    module = _lifted()
    RooflinePass(hw="H100_SXM", algorithms="classical").apply(Context(), module)
    assert counted == {"build_report": 1, "costs": 1}
    first = _emit(JsonReportTarget(), module)
    assert _emit(JsonReportTarget(), module) == first
    text = _emit(TextReportTarget(), module)
    assert counted == {"build_report": 1, "costs": 1}  # the targets computed nothing
    # 2 * 64 * 16 * 32 = 65,536 matrix FLOPs (examples/loop/matmul.loop: 64x32 @ 32x16)
    assert json.loads(first)["totals"]["flops_matrix"] == 65536
    assert "H100_SXM" in text
    # a second roofline on another target reads the costs the manager holds: priced once
    RooflinePass(hw="B200", algorithms="classical").apply(Context(), module)
    assert counted == {"build_report": 2, "costs": 1}
    assert list(json.loads(_emit(JsonReportTarget(), module))["bounds"]) == ["B200"]


def test_a_change_of_the_ir_drops_the_results(counted: dict[str, int]) -> None:
    module = _lifted()
    RooflinePass(hw="H100_SXM", algorithms="classical").apply(Context(), module)
    assert module_report(module) is not None
    invalidate_analyses(module)  # what every pass that changes the IR does (the driver too)
    assert module_report(module) is None
    with pytest.raises(SolarError, match="no roofline report for the module: run the roofline pass"):
        _emit(JsonReportTarget(), module)
    RooflinePass(hw="H100_SXM", algorithms="classical").apply(Context(), module)
    assert counted == {"build_report": 2, "costs": 2}  # priced again, from the IR as it is now


def test_the_driver_drops_the_report_after_a_pass_that_changes_the_ir() -> None:
    """`reorder-chains` does not preserve analyses: a report from before it would describe another IR."""
    assert run_pipeline([str(MATMUL), "-p", "lift-einsum,roofline{hw=H100_SXM}", "-t", "json"])["totals"][
        "flops_matrix"] == 65536
    with pytest.raises(SolarError, match="no roofline report for the module"):
        run_pipeline([str(MATMUL), "-p", "lift-einsum,roofline{hw=H100_SXM},reorder-chains", "-t", "json"])


def test_the_module_carries_no_report() -> None:
    module = _lifted()
    before = dict(module.attributes)
    RooflinePass(hw="H100_SXM").apply(Context(), module)
    assert dict(module.attributes) == before


# ---- typed records: JSON round trips, key for key ------------------------------------------------------
TORCH_VALIDATION = {"frontend": "torch-export", "validated": True, "method": "full", "max_rel_err": 1.5e-06,
                    "samples": 3, "elements_checked": 4096, "sizes": "full", "mode": "export",
                    "notes": ["a note"], "seconds": 0.25}
ALIAS = {"position": 1, "output": "view", "of": "x", "role": "input", "how": "a view"}
TREE = {"kernel": "k", "root": "S3", "output": "Y", "nodes": ["S2", "S3"], "locs": ["m.py:4", "m.py:5"],
        "equation": "i j, j k, k -> i", "order_as_written": "(A B) v", "flops_as_written": 6_291_456,
        "bytes_as_written": 1024, "order_best": "A (B v)", "path_best": [[1, 2], [0, 1]],
        "optimizer": "optimal", "flops_best": 524_288, "bytes_best": 512, "ratio": 12.0, "better": True,
        "applied": True, "nodes_best": ["S3_r0", "S3"], "note": None}


def test_typed_records_round_trip_through_json() -> None:
    v = Validation.from_json(TORCH_VALIDATION)
    assert (v.validated, v.frontend, v.max_rel_err, v.samples) == (True, "torch-export", 1.5e-06, 3)
    assert v.detail("notes") == ["a note"] and v.detail("reason") is None
    assert v.to_json() == TORCH_VALIDATION and Validation.from_json(v.to_json()) == v
    # the four keys every record has come first, the frontend's others in its order
    assert list(v.to_json())[:5] == ["validated", "frontend", "max_rel_err", "samples", "method"]
    a = Alias.from_json(ALIAS)
    assert a.of == "x" and list(a.to_json()) == list(ALIAS) and Alias.from_json(a.to_json()) == a
    t = ChainTree.from_json(TREE)
    assert t.path_best == ((1, 2), (0, 1)) and t.nodes_best == ("S3_r0", "S3")
    assert list(t.to_json().items()) == list(TREE.items()) and ChainTree.from_json(t.to_json()) == t


def test_typed_records_round_trip_through_the_module() -> None:
    """Stored on the module (`solar.program`, `solar.chains`) and loaded back: equal records."""
    module = ModuleOp([])
    info = ProgramInfo("m.py", "torch", TORCH_VALIDATION, aliases=[ALIAS])
    assert isinstance(info.validation, Validation) and info.aliases == (Alias.from_json(ALIAS),)
    info.store(module)
    assert ProgramInfo.load(module) == info
    chains = ChainsRecord(applied=True, trees=[TREE] * 9)  # >= 8 rows: stored as a table of columns
    chains.store(module)
    assert ChainsRecord.load(module) == chains and chains.trees[0] == ChainTree.from_json(TREE)


def test_a_malformed_record_is_an_error_naming_it() -> None:
    with pytest.raises(SolarError, match="validation record misses samples"):
        Validation.from_json({"validated": True, "frontend": "torch", "max_rel_err": 0.0})
    with pytest.raises(SolarError, match="'validated' is 'yes', not true or false"):
        Validation.from_json({"validated": "yes", "frontend": "torch", "max_rel_err": 0.0, "samples": 1})
    with pytest.raises(SolarError, match=r"alias record: expected the keys position, output, of, role, how"):
        Alias.from_json({**ALIAS, "extra": 1})
    with pytest.raises(SolarError, match="contraction tree record: expected the keys kernel"):
        ChainTree.from_json({k: v for k, v in TREE.items() if k != "note"})
