"""solar-opt's dialects, passes, frontends and output targets as an xDSL `Universe`, registered under
the `xdsl.universe` entry point: plain `xdsl-opt` (and any xDSL tool) loads them too, e.g.
`xdsl-opt k.mlir -p lift-einsum,annotate-costs`. `solar-opt` stays the front door (its shorthand
flags, the `.py` and `.loop` inputs, one-line errors). Everything is named here and imported only
when used, which keeps start-up fast.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from xdsl.universe import Universe

from solar_compiler.passes import all_passes

DIALECTS = {
    "loop": "solar_compiler.dialects.loop:Loop",
    "einsum": "solar_compiler.dialects.einsum:Einsum",
    "solar": "solar_compiler.dialects.solar:Solar",
}
FRONTENDS = {
    "loop": "solar_compiler.driver:LoopTextFrontend",
    "py": "solar_compiler.driver:SourceFileFrontend",
}
TARGETS = {
    "loop": "solar_compiler.driver:LoopTextTarget",
    "report": "solar_compiler.report:TextReportTarget",
    "json": "solar_compiler.report:JsonReportTarget",
}


def lazy(target: str) -> Callable[[], Any]:
    """A factory that imports `module:attr` when called."""
    def load() -> Any:
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)

    return load


SOLAR_UNIVERSE = Universe(
    all_dialects={name: lazy(t) for name, t in DIALECTS.items()},
    all_passes=all_passes(),
    all_targets={name: lazy(t) for name, t in TARGETS.items()},
    all_frontends={name: lazy(t) for name, t in FRONTENDS.items()},
)
