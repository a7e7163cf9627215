"""What the JAX capture hands the translation besides the shared `CapturedProgram`: the bodies of
control-flow primitives (`scan`, `while`, `cond`), captured with the program into node lists of their
own. jax-free, like `frontends/captured_program.py`."""

from __future__ import annotations

from dataclasses import dataclass

from solar_compiler.frontends.captured_program import AtenNode, TensorMeta, TensorRef

Operand = TensorRef | bool | int | float  # a named tensor, or a jaxpr literal as a Python scalar


@dataclass
class SubProgram:
    """A body jaxpr with its call-like primitives inlined: the template binds `invars` (names of the
    body's parameters, in the jaxpr's order) to values, translates `nodes` where the body runs, and
    reads the body's results `outvars`."""

    invars: list[TensorMeta]
    nodes: list[AtenNode]
    outvars: list[Operand]


# Primitives whose body is inlined into the program at capture (a call is not a kernel of its own):
# primitive -> the parameter holding the body (a ClosedJaxpr or an open Jaxpr).
INLINED = {
    "pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
    "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
    "remat": "jaxpr", "remat2": "jaxpr", "checkpoint": "jaxpr", "custom_lin": "jaxpr",
}
# Primitives whose bodies become SubPrograms (kwargs "bodies": {name: SubProgram}).
CONTROL_FLOW = {"scan": ("jaxpr",), "while": ("cond_jaxpr", "body_jaxpr"), "cond": ("branches",)}
