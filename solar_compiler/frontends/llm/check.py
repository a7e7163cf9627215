"""Checking one response: extract, parse, verify, compare the signature, execute, compare values.

The response is data. Its fenced block goes to the loop-IR Lark parser and nowhere else: nothing
in it is evaluated, imported, compiled, used as a path or a shell word. Each rejection is a short
diagnostic for the model's next attempt: the parser's `response:line:col: what`, the verifier's
message, the first parameter that differs from the required signature, or the first mismatching
output element with the value expected and the value computed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from solar_compiler.loopir.ast import Kernel, LoopIRError

RESPONSE = "response"   # the file name diagnostics give the response text
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*```", re.MULTILINE | re.DOTALL)


class Rejected(Exception):
    """A response that is not an acceptable kernel; the message goes back to the model."""


@dataclass(frozen=True)
class Param:
    """One tensor the kernel must declare as a parameter."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    role: str   # input | weight | output

    def text(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(str(d) for d in self.shape)}] {self.role}"


@dataclass(frozen=True)
class Sample:
    """Data to run the kernel on and the outputs the source program gave for it."""

    label: str                          # "get_inputs()", "fresh sample (seed 1)", ...
    feed: Mapping[str, np.ndarray]      # every input and weight, by parameter name
    expected: Mapping[str, np.ndarray]  # every output, by parameter name


def extract(response: str) -> str:
    """The loop text of a response: its fenced ```loop block (else its first fenced block, else
    the whole text when it starts with `kernel`)."""
    blocks = _FENCE.findall(response)
    for lang, body in blocks:
        if lang.lower() == "loop":
            return body
    if blocks:
        return blocks[0][1]
    if response.lstrip().startswith("kernel"):
        return response.strip() + "\n"
    raise Rejected("no fenced ```loop code block in the response")


def parse(text: str) -> Kernel:
    from solar_compiler.text.parser import parse_kernels

    try:
        kernels = parse_kernels(text, RESPONSE)
    except LoopIRError as e:
        raise Rejected(f"parse error: {e}") from None
    if len(kernels) != 1:
        raise Rejected(f"expected exactly one kernel, found {len(kernels)}")
    return kernels[0]


def check_signature(kernel: Kernel, params: Sequence[Param]) -> None:
    """The kernel's non-local tensors are exactly `params` (any order)."""
    want = {p.name: p for p in params}
    got = {t.name: Param(t.name, t.dtype, t.shape, t.role) for t in kernel.tensors if t.role != "local"}
    for name, p in want.items():
        g = got.get(name)
        if g is None:
            local = any(t.name == name for t in kernel.tensors)
            raise Rejected(f"signature mismatch: parameter '{p.text()}' is "
                           f"{'declared local' if local else 'missing'}")
        if g != p:
            raise Rejected(f"signature mismatch: parameter '{g.text()}' must be '{p.text()}'")
    extra = [g.text() for n, g in got.items() if n not in want]
    if extra:
        raise Rejected(f"signature mismatch: unexpected parameter '{extra[0]}' "
                       f"(required: {', '.join(p.text() for p in params)})")


def verify(kernel: Kernel) -> None:
    """What a `.loop` file gets when it is read (affine bounds with islpy, the dialect verifier), and
    the executor's legality check (a dependence carried by a non-scan loop)."""
    from solar_compiler.dialects.convert import kernels_to_module
    from solar_compiler.executor.legality import check_distributable
    from solar_compiler.loopir.ast import typecheck
    from solar_compiler.loopir.domain import check_bounds

    try:
        check_bounds(kernel)
        kernels_to_module([kernel]).verify()
        check_distributable(typecheck(kernel))
    except LoopIRError as e:
        raise Rejected(f"verifier: {e}") from None
    except Exception as e:  # noqa: BLE001 - xDSL's VerifyException and friends: one line back to the model
        raise Rejected(f"verifier: {' '.join(str(e).split())[:400]}") from None


def run(kernel: Kernel, samples: Sequence[Sample]) -> float:
    """Execute on every sample and compare with the dtype tolerances of the deterministic path;
    the largest relative error. A mismatch names the first differing output element."""
    from solar_compiler.executor import compare, execute

    dtypes = {t.name: t.dtype for t in kernel.tensors}
    worst = 0.0
    for s in samples:
        try:
            got = execute(kernel, dict(s.feed))
        except LoopIRError as e:
            raise Rejected(f"execution on {s.label} failed: {e}") from None
        except (ArithmeticError, IndexError, ValueError, MemoryError) as e:
            raise Rejected(f"execution on {s.label} failed: {type(e).__name__}: {e}") from None
        cmp = compare(dict(s.expected), got, dtypes)
        if not cmp.ok:
            raise Rejected(f"validation failed on {s.label}: {cmp.first_mismatch}")
        worst = max(worst, cmp.max_rel_err)
    return worst


def check_response(response: str, params: Sequence[Param], samples: Sequence[Sample]) -> tuple[Kernel, float]:
    """The accepted kernel and its largest relative error, or `Rejected` with the diagnostic."""
    kernel = parse(extract(response))
    check_signature(kernel, params)
    verify(kernel)
    return kernel, run(kernel, samples)
