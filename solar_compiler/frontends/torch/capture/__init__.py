"""Capture a KernelBench-style PyTorch model file as a flat ATen graph.

The result, :class:`CapturedProgram` (``frontends/captured_program.py``), is what the loop-IR
translator consumes.
Two capture methods exist:

``export`` (``export.py``)
    ``torch.export.export(model, inputs, strict=False)`` followed by
    ``run_decompositions`` with the Core ATen table minus :data:`KEEP_UNDECOMPOSED` (ops the
    translator has one template for) plus a decomposition of ``native_dropout`` into a plain
    ``rand_like`` draw (``ops.py``).

``dispatch`` (``dispatch.py``, ``recorder.py``)
    The fallback when export fails or forward mutates module state (``self.h = ...``): the
    executed ATen ops are recorded by a ``TorchDispatchMode`` on the sample inputs, tracking
    tensors by identity.  The mode functionalizes what it records: an in-place op becomes its
    functional counterpart producing a new version of the tensor, a view is a node of its own
    op, a write through a view is scattered back into its base (``slice_scatter`` ...), and
    views of an updated base are regenerated.  The same op-preservation (the Python
    dispatcher with export's composite-op overrides) and decomposition tables as the export
    path are applied, so both methods produce the same op vocabulary.

With ``fake=True`` (the default) both methods run on ``FakeTensorMode`` tensors, so full-size
programs (several GB of inputs) are captured without allocating them.  Only when the program
needs real values (Python control flow on tensor values, data-dependent shapes) is it run for
real, and only when its inputs and weights are small (``util.REAL_RUN_LIMIT_BYTES``).

``entry.py`` chooses the method, ``graph.py`` holds what both share, ``inputs.py`` names and
re-samples the inputs, ``reference.py`` runs the model eagerly for validation, and ``util.py`` has
the public helpers other modules of the frontend use. See ``docs/torch-capture.md`` for the naming
rules and the ops that survive decomposition.
"""

from solar_compiler.frontends.captured_program import (
    AtenNode,
    CapturedProgram,
    CaptureError,
    TensorMeta,
    TensorRef,
    sanitize,
)

from .entry import capture
from .graph import torch_dtype
from .inputs import fresh_inputs, input_names, on_fresh_sample
from .ops import KEEP_UNDECOMPOSED
from .reference import ModelReuse, run_reference, run_reference_f64

__all__ = [
    "AtenNode",
    "CaptureError",
    "CapturedProgram",
    "KEEP_UNDECOMPOSED",
    "ModelReuse",
    "TensorMeta",
    "TensorRef",
    "capture",
    "fresh_inputs",
    "input_names",
    "on_fresh_sample",
    "run_reference",
    "run_reference_f64",
    "sanitize",
    "torch_dtype",
]
