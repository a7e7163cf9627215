"""Error classes of a failed model, from the sandbox's outcome and the pipeline's one-line message.

| class           | when                                                                          |
|-----------------|-------------------------------------------------------------------------------|
| timeout         | the model's sandbox ran past `--timeout` and was killed                       |
| memory          | an allocation failed under the sandbox's `--memory-gb` limit (MemoryError,     |
|                 | "can't allocate memory", ...), or the kernel's OOM killer sent SIGKILL        |
| crash           | the sandbox died from a signal (SIGSEGV, SIGABRT, ...) or exited without result |
| unsupported op  | the frontend has no translation for an op ("no loop-IR template for aten.x")  |
| validate        | the translation ran but disagrees with the framework ("validation failed")    |
| translate       | any other pipeline failure: model file, capture, translation, lifting, bounds |
| measure         | the timing of a bounded model failed (building, running or timing it)         |

Timing is a phase of its own: its failures are `measure` (or timeout, memory, crash, which name the
sandbox's cause), never a pipeline class (`phase_class`).
"""

from __future__ import annotations

import re

CLASSES = ("translate", "validate", "unsupported op", "timeout", "memory", "crash", "measure")
SANDBOX = ("timeout", "memory", "crash")  # classes that the sandbox gives, whatever ran in it

_MEMORY = re.compile(
    r"exceeded memory limit|can't allocate memory|cannot allocate memory|out of memory|"
    r"bad_alloc|MemoryError",
    re.IGNORECASE,
)
_UNSUPPORTED = re.compile(r"no loop-IR template for|\bunsupported\b|\bnot supported\b", re.IGNORECASE)
_VALIDATE = re.compile(r"validation failed", re.IGNORECASE)
_TIMEOUT = re.compile(r"timed out after", re.IGNORECASE)


def classify(message: str) -> str:
    """The class of a pipeline failure from its one-line message (first match in the table order:
    memory, timeout, unsupported op, validate, else translate)."""
    if _MEMORY.search(message):
        return "memory"
    if _TIMEOUT.search(message):
        return "timeout"
    if _UNSUPPORTED.search(message):
        return "unsupported op"
    if _VALIDATE.search(message):
        return "validate"
    return "translate"


def phase_class(kind: str, error_class: str | None) -> str | None:
    """The class of a failed job of `kind` ("bounds" or "measure"): a timing job that failed in its
    own code is `measure` (its message was classified as if the pipeline had failed)."""
    if kind == "measure" and error_class not in SANDBOX:
        return "measure"
    return error_class
