"""Pass registry: name -> "module:Class", imported only when the pass runs (fast start-up).

Adding a pass = one file in this folder + one line below. A separate package adds passes through
the `solar_compiler.passes` entry-point group (value "pkg.module:PassClass"), as pytest plugins do.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points

from xdsl.passes import ModulePass

REGISTRY: dict[str, str] = {
    "loop-stats": "solar_compiler.passes.loop_stats:LoopStatsPass",
    "translate": "solar_compiler.passes.translate:TranslatePass",
    "lift-einsum": "solar_compiler.passes.lift_einsum:LiftEinsumPass",
    "annotate-costs": "solar_compiler.passes.annotate_costs:AnnotateCostsPass",
    "roofline": "solar_compiler.passes.roofline:RooflinePass",
    "narrow-needed": "solar_compiler.passes.narrow_needed:NarrowNeededPass",
    "reorder-chains": "solar_compiler.passes.reorder_chains:ReorderChainsPass",
}


def _loader(target: str) -> Callable[[], type[ModulePass]]:
    def load() -> type[ModulePass]:
        module, _, cls = target.partition(":")
        return getattr(importlib.import_module(module), cls)

    return load


def all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    passes = {name: _loader(target) for name, target in REGISTRY.items()}
    for ep in entry_points(group="solar_compiler.passes"):
        passes.setdefault(ep.name, ep.load if ":" not in ep.value else _loader(ep.value))
    return passes
