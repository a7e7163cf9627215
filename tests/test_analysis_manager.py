"""The analysis manager's seeds: a pass that built the IR from results it holds offers them, the
driver adopts them between passes only, and a seeded program is exactly what the analyses would
read back from the ops."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from passes.lift_einsum import LiftEinsumPass
from passes.narrow_needed import NarrowNeededPass
from solar_compiler.analysis.graphs import module_graphs
from solar_compiler.analysis.manager import get_analysis, invalidate_analyses, renew_analyses, seed_analysis
from solar_compiler.dialects.convert import kernels_to_module
from solar_compiler.dialects.einsum import GraphOp
from solar_compiler.text.parser import parse_kernels
from solar_compiler.transforms import kernels as kernels_analysis

ROOT = Path(__file__).resolve().parent.parent
LOOPS = sorted([*ROOT.glob("examples/loop/*.loop"), *ROOT.glob("examples/loop/bounds/*.loop"),
                ROOT / "lit_tests/loop/everything.loop", ROOT / "lit_tests/roofline/narrowing.loop"])


def test_a_seed_is_used_only_once_the_driver_adopts_it() -> None:
    module = ModuleOp([])
    calls: list[int] = []

    def fn(m: ModuleOp) -> str:
        calls.append(1)
        return "computed"

    seed_analysis(module, fn, "seeded")
    assert get_analysis(module, fn) == "computed"  # not adopted: a seed is only a proposal
    invalidate_analyses(module)
    seed_analysis(module, fn, "seeded")
    invalidate_analyses(module)  # a later change drops it unused
    renew_analyses(module)
    assert get_analysis(module, fn) == "computed" and len(calls) == 2
    seed_analysis(module, fn, "seeded")
    renew_analyses(module)  # what the driver does right after the pass that seeded
    assert get_analysis(module, fn) == "seeded" and len(calls) == 2
    renew_analyses(module)  # after the next pass that changes the IR: gone
    assert get_analysis(module, fn) == "computed" and len(calls) == 3


@pytest.mark.parametrize("path", LOOPS, ids=lambda p: p.stem)
def test_seeded_kernels_are_what_the_ops_read_back(path: Path) -> None:
    """After `narrow-needed`, the kernels it seeds equal the ones read back from the IR it left, and
    after `lift-einsum` the graphs the analyses read are the module's own."""
    module = kernels_to_module(parse_kernels(path.read_text(), path.name))
    NarrowNeededPass().apply(Context(), module)
    renew_analyses(module)
    seeded = kernels_analysis.module_kernels(module)
    read_back = kernels_analysis._module_kernels(module)
    assert seeded == read_back
    LiftEinsumPass().apply(Context(), module)
    renew_analyses(module)
    assert module_graphs(module) == [o for o in module.body.block.ops if isinstance(o, GraphOp)]
