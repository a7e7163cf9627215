"""The entry points every generated model file ends with (`spec.py`, `vision.py`, `policy.py`): a
`Model` class over the runtime's module, `get_inputs` and `get_init_inputs`, the KernelBench-style
interface the torch frontend loads."""

from __future__ import annotations

__all__ = ["entry_points"]


def entry_points(base: str, init_args: str, inputs: str,
                 forward: tuple[str, str] | None = None) -> list[str]:
    """Source lines: `class Model(base)` built with `init_args`, an optional `forward` (signature,
    body), and `get_inputs()` returning `inputs`."""
    lines = ["", "", f"class Model({base}):", "    def __init__(self):",
             f"        super().__init__({init_args})"]
    if forward is not None:
        lines += ["", f"    def forward({forward[0]}):", f"        return {forward[1]}"]
    return lines + ["", "", "def get_inputs():", f"    return {inputs}", "", "", "def get_init_inputs():",
                    "    return []", ""]
