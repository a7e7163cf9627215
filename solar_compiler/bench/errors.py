"""The class of a failed solar-bench job: the raised error's own `error_class`
(`solar_compiler.errors.error_class_of`), except that timing is a phase of its own.

A timing job that failed in its own code is `measure` (building, running or timing the model), never a
pipeline class; the sandbox's causes (timeout, memory, crash) are kept, since they name what stopped it.
"""

from __future__ import annotations

SANDBOX = ("timeout", "memory", "crash")  # classes that the sandbox gives, whatever ran in it


def phase_class(kind: str, error_class: str | None) -> str | None:
    """The class of a failed job of `kind` ("bounds" or "measure")."""
    if kind == "measure" and error_class not in SANDBOX:
        return "measure"
    return error_class
