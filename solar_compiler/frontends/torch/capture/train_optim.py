"""The optimizer update a training step appends (`--optimizer sgd|adamw`, or the model's own
optimizer), written as torch's single-tensor update rule so that it traces into ATen ops, and the
torch optimizer validation runs against it (docs/training.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from solar_compiler.frontends import OPTIMIZER_DEFAULTS, OPTIMIZERS
from solar_compiler.frontends.captured_program import CaptureError
from solar_compiler.frontends.model_file import ModelSpec


@dataclass(frozen=True)
class Optimizer:
    """An optimizer's update rule and hyperparameters (torch's defaults unless the model file's own
    optimizer says otherwise). `kind` is "sgd" (plain, no momentum) or "adamw" (torch.optim.Adam
    without weight decay is the same rule with weight_decay 0)."""

    kind: str
    lr: float
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    @staticmethod
    def default(kind: str) -> Optimizer:
        if kind not in OPTIMIZER_DEFAULTS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, not {kind!r}")
        return Optimizer(kind, **OPTIMIZER_DEFAULTS[kind])

    @property
    def state(self) -> tuple[str, ...]:
        """The per-parameter state tensors the update reads and writes."""
        return ("exp_avg", "exp_avg_sq") if self.kind == "adamw" else ()

    def update(self, p: torch.Tensor, g: torch.Tensor, state: list[torch.Tensor]) -> list[torch.Tensor]:
        """[new parameter, *new state]: torch's single-tensor update (`torch.optim.sgd/adamw`,
        `foreach=False`) of its first step, written functionally."""
        if self.kind == "sgd":
            if self.weight_decay:
                g = g.add(p, alpha=self.weight_decay)
            return [p.add(g, alpha=-self.lr)]
        b1, b2 = self.betas
        m, v = state
        p = p.mul(1 - self.lr * self.weight_decay)
        m = m.add(g.sub(m), alpha=1 - b1)  # m.lerp(g, 1 - b1) as torch computes it for a weight < 0.5
        v = v.mul(b2).addcmul(g, g, value=1 - b2)
        step = 1
        bias1, bias2 = 1 - b1**step, 1 - b2**step
        denom = v.sqrt().div(math.sqrt(bias2)).add(self.eps)
        return [p.addcdiv(m, denom, value=-self.lr / bias1), m, v]

    def torch_optimizer(self, params: list[torch.Tensor]) -> torch.optim.Optimizer:
        """The torch optimizer validation runs (`reference_step`)."""
        if self.kind == "sgd":
            return torch.optim.SGD(params, lr=self.lr, weight_decay=self.weight_decay, foreach=False)
        return torch.optim.AdamW(params, lr=self.lr, betas=self.betas, eps=self.eps,
                                 weight_decay=self.weight_decay, foreach=False)


def model_optimizer(spec: ModelSpec, model: torch.nn.Module) -> Optimizer | None:
    """The optimizer a self-training model holds (an attribute of the model or a submodule), as an
    `Optimizer`; None when it holds none. One it cannot express is an error naming it."""
    for mod in model.modules():
        for attr, v in vars(mod).items():
            if not isinstance(v, torch.optim.Optimizer):
                continue
            if len(v.param_groups) != 1:
                raise CaptureError(f"{spec.path}: optimizer self.{attr} has {len(v.param_groups)} parameter "
                                   "groups; a training step is captured with one")
            g = v.param_groups[0]
            name = type(v).__name__
            if name == "SGD" and not g.get("momentum") and not g.get("nesterov"):
                return Optimizer("sgd", lr=float(g["lr"]), weight_decay=float(g.get("weight_decay", 0.0)))
            if name == "AdamW" or (name == "Adam" and not g.get("weight_decay")):
                if g.get("amsgrad"):
                    raise CaptureError(f"{spec.path}: optimizer self.{attr} ({name}, amsgrad) has no "
                                       "captured update rule")
                return Optimizer("adamw", lr=float(g["lr"]), weight_decay=float(g.get("weight_decay", 0.0)),
                                 betas=tuple(float(b) for b in g["betas"]), eps=float(g["eps"]))
            raise CaptureError(f"{spec.path}: optimizer self.{attr} ({name}) has no captured update rule "
                               f"(supported: SGD without momentum, AdamW, Adam without weight decay)")
    return None


# ---- the loss ------------------------------------------------------------------------------------------
