"""The source side of a whole-program LLM translation of a PyTorch model file: the tensors the
kernel must have (inputs by forward parameter name, weights by state_dict name, outputs in return
order, shapes from a fake-tensor run) and the reference input/output pair the prompt shows, computed
as the deterministic path does (`run_reference`: weights under seed 0, on `get_inputs()`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .check import Param


@dataclass
class SourceProgram:
    spec: object                 # ModelSpec
    program: object              # a CapturedProgram with no nodes: names, shapes, dtypes only
    params: list[Param]

    @property
    def outputs(self) -> list[str]:
        return list(self.program.outputs)


def describe(spec, mode: str) -> SourceProgram:
    """Run forward once on `get_inputs()` to learn the output shapes; name every tensor. Forward
    runs on fake tensors (shapes and dtypes only, no memory: a 4096 x 393216 input costs nothing),
    and for real only when fake tensors cannot run it (a value read by Python, as `x.tolist()`)
    and its inputs and weights are below the capture's real-run limit, as the deterministic
    capture does."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from solar_compiler.errors import SolarError
    from solar_compiler.frontends.torch.capture import CapturedProgram, TensorMeta, input_names, sanitize
    from solar_compiler.frontends.torch.capture.graph import dtype_name
    from solar_compiler.frontends.torch.capture.util import REAL_RUN_LIMIT_BYTES, build_model, nbytes, quiet

    torch.manual_seed(0)
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    model, sample = build_model(spec, mode, fake_mode)
    try:
        with torch.no_grad(), quiet(), fake_mode:
            out = model(*sample)
    except Exception as e:  # noqa: BLE001 - fake tensors cannot run value-dependent code: run for real
        size = nbytes(sample) + nbytes(model.parameters()) + nbytes(model.buffers())
        if size > REAL_RUN_LIMIT_BYTES:
            raise SolarError(f"{spec.path}:1: forward needs real tensor values ({type(e).__name__}) but its "
                             f"inputs and weights take {size / 2**30:.1f} GB; make the module-level sizes "
                             "smaller") from None
        torch.manual_seed(0)
        model, sample = build_model(spec, mode, None)
        with torch.no_grad(), quiet():
            out = model(*sample)
    flat = [o for o in torch.utils._pytree.tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
    if not flat:
        raise SolarError(f"{spec.path}:1: forward returns no tensor")
    taken: set[str] = set()

    def fresh(base: str) -> str:
        name, k = sanitize(base), 1
        while name in taken:
            name, k = f"{sanitize(base)}_{k}", k + 1
        taken.add(name)
        return name

    def meta(name: str, t: torch.Tensor) -> TensorMeta:
        try:
            return TensorMeta(name, tuple(t.shape), dtype_name(t.dtype))
        except Exception as e:  # noqa: BLE001 - an unsupported dtype: one line naming the tensor
            raise SolarError(f"{spec.path}:1: tensor '{name}' has dtype {t.dtype}, which the loop IR "
                             f"does not have ({e})") from None

    tensors = [v for v in sample if isinstance(v, torch.Tensor)]
    inputs = [meta(fresh(n), t) for n, t in zip(input_names(spec, sample), tensors, strict=True)]
    weights, sources = [], {}
    for fqn, t in [*model.named_parameters(), *model.named_buffers()]:
        m = meta(fresh(fqn), t)
        weights.append(m)
        sources[m.name] = fqn
    outs = [meta(fresh("out" if len(flat) == 1 else f"out{i}"), t) for i, t in enumerate(flat)]
    prog = CapturedProgram(spec.path, mode, "eager", inputs, weights, [], [o.name for o in outs],
                           weight_sources=sources)
    params = [Param(m.name, m.dtype, tuple(m.shape), "input") for m in inputs] + \
        [Param(m.name, m.dtype, tuple(m.shape), "weight") for m in weights] + \
        [Param(m.name, m.dtype, tuple(m.shape), "output") for m in outs]
    return SourceProgram(spec, prog, params)


def reference_pair(src: SourceProgram, options) -> str:
    """The prompt's reference input/output pair: the program run on `get_inputs()` (weights under
    seed 0), every parameter printed (the corners of a large one). A program whose tensors take
    more than half the validation memory budget is shown on its mildest reduced instance that fits
    (module-level sizes scaled down, as validation does), and the text says so."""
    from solar_compiler.frontends.torch.capture import run_reference
    from solar_compiler.frontends.validation import REDUCIBLE, candidates
    from solar_compiler.loopir.ast import DTYPES

    from .ops import reference_text

    def size(s: SourceProgram) -> int:
        return sum(math.prod(p.shape) * DTYPES[p.dtype] for p in s.params)

    budget = options.memory_budget_gb * 2**30 / 2
    note = "the program's outputs on get_inputs(), weights initialised under torch.manual_seed(0)"
    if size(src) > budget:
        sizes = {k: v for k, v in src.spec.size_constants.items() if v >= REDUCIBLE}
        for _, ov in candidates(sizes) if sizes else ():
            small = describe(src.spec.with_sizes(ov), options.mode) if ov else None
            if small is not None and size(small) <= budget:
                src = small
                note = (f"on the reduced instance {', '.join(f'{k}={v}' for k, v in ov.items())}: the "
                        f"full-size program is too large to run here; {note}")
                break
        else:
            return "(none: the program is too large to run here and has no module-level size to scale down)"
    ins, ws, outs, _ = run_reference(src.spec, options.mode, seed=0, program=src.program)
    feed = {**ins, **ws}
    return reference_text(src.params, feed, dict(outs), note)
