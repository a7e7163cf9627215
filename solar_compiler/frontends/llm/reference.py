"""The source side of a whole-program LLM translation of a PyTorch model file: the tensors the
kernel must have (inputs by forward parameter name, weights by state_dict name, outputs in return
order) and the reference outputs to compare with, computed exactly as the deterministic path does
(`run_reference`: weights under seed 0, `get_inputs()` and the fresh samples of `fresh_inputs`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .check import Param, Sample

SAMPLE_SEEDS = (1, 2)   # as the deterministic path: get_inputs() plus two fresh samples


@dataclass
class SourceProgram:
    spec: object                 # ModelSpec
    program: object              # a CapturedProgram with no nodes: names, shapes, dtypes only
    params: list[Param]

    @property
    def outputs(self) -> list[str]:
        return list(self.program.outputs)


def describe(spec, mode: str) -> SourceProgram:
    """Run forward once on `get_inputs()` to learn the output shapes; name every tensor."""
    import torch

    from solar_compiler.errors import SolarError
    from solar_compiler.frontends.torch.capture import CapturedProgram, TensorMeta, input_names, sanitize
    from solar_compiler.frontends.torch.capture.graph import dtype_name
    from solar_compiler.frontends.torch.capture.util import build_model, quiet

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


def samples(src: SourceProgram, mode: str) -> list[Sample]:
    """get_inputs() and the fresh samples, with the model's outputs on each."""
    from solar_compiler.executor.numeric import USER
    from solar_compiler.frontends.torch.capture import fresh_inputs, run_reference

    dtypes = {p.name: p.dtype for p in src.params}
    out = []
    for seed in (None, *SAMPLE_SEEDS):
        inputs = None if seed is None else fresh_inputs(src.spec, seed)
        ins, ws, outs, _ = run_reference(src.spec, mode, inputs=inputs, seed=0, program=src.program)
        feed = {k: np.ascontiguousarray(a, dtype=USER[dtypes[k]]) for k, a in {**ins, **ws}.items()}
        label = "get_inputs()" if seed is None else f"fresh sample (seed {seed})"
        out.append(Sample(label, feed, outs))
    return out
