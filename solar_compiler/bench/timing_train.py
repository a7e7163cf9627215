"""The timed call of `solar-bench --step train --measure`: one real training step, as the bound of
`solar-opt --step train` covers it (docs/training.md): forward, the loss (`get_loss`, or the sum of
the float outputs, or the tensor a self-training forward calls `backward()` on), backward, and the
optimizer's update when the bound has one (`--optimizer`, or the model's own optimizer).

The loss and the optimizer are found by the capture's own helpers (`step_loss`, `model_optimizer`),
so the timed step is the captured one. The update is torch's own optimizer with the captured
hyperparameters and its default implementation (foreach where torch picks it): a bound must hold
against the step as users run it, not only against the single-tensor rule validation compares with.
Gradients are set to None before each step (as `zero_grad()` does), so backward writes them afresh
as the captured step does instead of accumulating into them."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType


def train_step_fn(torch, path: str, mod: ModuleType, model, optimizer: str | None) \
        -> tuple[Callable[..., None], str | None]:  # noqa: ANN001 - torch, imported lazily
    """(step(*inputs), the optimizer kind it runs or None)."""
    from solar_compiler.frontends.model_file import ModelSpec
    from solar_compiler.frontends.torch.capture.train import step_loss, trainable
    from solar_compiler.frontends.torch.capture.train_optim import Optimizer, model_optimizer

    spec = ModelSpec(path=path, source="", module=mod, Model=mod.Model, get_inputs=mod.get_inputs,
                     get_init_inputs=getattr(mod, "get_init_inputs", None))
    own = model_optimizer(spec, model)
    chosen = own if optimizer is None or (own is not None and own.kind == optimizer) else \
        Optimizer.default(optimizer) if optimizer is not None else None
    params = list(trainable(model).values())
    opt = None
    if chosen is not None:
        if chosen.kind == "sgd":
            opt = torch.optim.SGD(params, lr=chosen.lr, weight_decay=chosen.weight_decay)
        else:
            opt = torch.optim.AdamW(params, lr=chosen.lr, betas=chosen.betas, eps=chosen.eps,
                                    weight_decay=chosen.weight_decay)

    def step(*inputs) -> None:
        for p in params:
            p.grad = None
        with torch.enable_grad():
            loss, _ = step_loss(spec, model, lambda: model(*inputs), list(inputs))
            loss.backward()
        if opt is not None:
            opt.step()

    return step, None if chosen is None else chosen.kind
