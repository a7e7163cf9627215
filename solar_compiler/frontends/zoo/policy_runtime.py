"""What a generated model file of a robot policy spec (`hf:pi0`) runs: pi0's inference (one action
chunk), built from transformers' PaliGemma and Gemma classes, and its inputs.

pi0 (Black et al., arXiv 2410.24164; reference code: Physical-Intelligence/openpi,
`src/openpi/models/pi0.py`, `sample_actions`) is a vision-language-action flow model:
1. prefix: each camera image through the SigLIP So400m/14 tower and PaliGemma's projector (256 tokens
   per 224x224 image), then the prompt's token embeddings; the PaliGemma Gemma-2B backbone runs
   the prefix once, with full attention among prefix tokens, and keeps its K/V per layer;
2. suffix, `num_steps` Euler steps of flow matching (t from 1 to 0): a state token and one token per
   action of the chunk (the noisy action mixed with a sine-cosine time embedding by a two-layer MLP)
   run through the action expert (a Gemma-300M of the same depth and head geometry) attending to the
   prefix K/V and to the suffix (the state token to the prefix and itself, the actions to all);
   `action_out_proj` of the action tokens is the velocity, and x <- x + dt * v.

Where this differs from openpi's JAX code: nothing in the arithmetic except that each step builds the
attention over `cat(prefix K/V, suffix K/V)` as transformers' cache does (an intermediate). Image
preprocessing (resize, normalisation) happens before the model and is not part of it.

Imported by the generated file inside the capture's sandboxed child; transformers is imported lazily.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import torch
import torch.nn.functional as F
from torch._guards import detect_fake_mode

from solar_compiler.frontends.zoo.runtime import DTYPES, transformers_module

__all__ = ["Pi0Policy", "policy_inputs"]


def _sub_configs(cfg: dict[str, Any]):
    tf = transformers_module()
    vision = tf.SiglipVisionConfig(
        hidden_size=cfg["vision_heads"] * cfg["vision_head_dim"],
        intermediate_size=cfg["vision_intermediate_size"], num_hidden_layers=cfg["vision_layers"],
        num_attention_heads=cfg["vision_heads"], image_size=cfg["image_size"], patch_size=cfg["patch_size"],
        hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6, vision_use_head=False)
    gemma = dict(num_hidden_layers=cfg["num_hidden_layers"], num_attention_heads=cfg["num_attention_heads"],
                 num_key_value_heads=cfg["num_key_value_heads"], head_dim=cfg["head_dim"],
                 hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6)
    text = tf.GemmaConfig(hidden_size=cfg["hidden_size"], intermediate_size=cfg["intermediate_size"],
                          vocab_size=cfg["vocab_size"], **gemma)
    # the expert reads embeddings, never token ids: a one-row table instead of an unused vocabulary
    expert = tf.GemmaConfig(hidden_size=cfg["expert_hidden_size"],
                            intermediate_size=cfg["expert_intermediate_size"], vocab_size=1,
                            bos_token_id=None, eos_token_id=None, **gemma)
    pali = tf.PaliGemmaConfig(vision_config=vision.to_dict(), text_config=text.to_dict(),
                              projection_dim=cfg["hidden_size"])
    return tf, pali, expert


def _recording_cache():
    """A transformers DynamicCache that keeps each layer's (key, value) as written, so the prefix's
    K/V can be handed to every denoising step's fresh cache."""
    from transformers.cache_utils import DynamicCache

    class Recorder(DynamicCache):
        def __init__(self) -> None:
            super().__init__()
            self.written: list[tuple[torch.Tensor, torch.Tensor]] = []

        def update(self, key_states, value_states, layer_idx, *args, **kwargs):
            self.written.append((key_states, value_states))
            return super().update(key_states, value_states, layer_idx, *args, **kwargs)

    return Recorder()


def posemb_sincos(t: torch.Tensor, dim: int, min_period: float = 4e-3,
                  max_period: float = 4.0) -> torch.Tensor:
    """openpi's sine-cosine embedding of the flow time `t` [B] -> [B, dim]."""
    fraction = torch.linspace(0.0, 1.0, dim // 2, dtype=torch.float32)
    period = min_period * (max_period / min_period) ** fraction
    angle = t.float()[:, None] * (2 * math.pi / period)[None, :]
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)


@contextlib.contextmanager
def _building(dtype: torch.dtype):
    """Parameters created at the model's dtype (no .to() copy). Under the capture's fake tensors
    transformers' weight initialisation is skipped: there are no values to initialise, and SigLIP's
    truncated-normal init asks for one (`.item()`). A real instance (the reduced one that validates)
    is initialised as usual."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with contextlib.ExitStack() as stack:
            if detect_fake_mode() is not None:
                from transformers.initialization import no_init_weights

                stack.enter_context(no_init_weights())
            yield
    finally:
        torch.set_default_dtype(previous)


class Pi0Policy(torch.nn.Module):
    """pi0's `sample_actions` for a batch of observations: (images, prompt ids, state, noise) ->
    the action chunk [B, action_horizon, action_dim]."""

    def __init__(self, cfg: dict[str, Any], dtype: str):
        super().__init__()
        tf, pali, expert = _sub_configs(cfg)
        width, adim = cfg["expert_hidden_size"], cfg["action_dim"]
        with _building(DTYPES[dtype]):
            self.paligemma = tf.PaliGemmaModel(pali)
            self.expert = tf.GemmaModel(expert)
            self.state_proj = torch.nn.Linear(adim, width)
            self.action_in_proj = torch.nn.Linear(adim, width)
            self.action_time_mlp_in = torch.nn.Linear(2 * width, width)
            self.action_time_mlp_out = torch.nn.Linear(width, width)
            self.action_out_proj = torch.nn.Linear(width, adim)
        self.steps = cfg["num_steps"]
        self.width = width

    def prefix_kv(self, images: torch.Tensor, prompt: torch.Tensor) -> list[tuple[torch.Tensor, ...]]:
        batch, cameras = images.shape[:2]
        vision = self.paligemma.vision_tower(pixel_values=images.flatten(0, 1)).last_hidden_state
        image_tokens = self.paligemma.multi_modal_projector(vision)
        image_tokens = image_tokens.reshape(batch, cameras * image_tokens.shape[1], -1)
        text = self.paligemma.language_model
        tokens = torch.cat([image_tokens, text.embed_tokens(prompt)], dim=1)  # embed scales by sqrt(width)
        n = tokens.shape[1]
        full = torch.ones(batch, 1, n, n, dtype=torch.bool)  # the prefix attends to itself in full
        cache = _recording_cache()
        text(inputs_embeds=tokens, attention_mask=full, position_ids=torch.arange(n).expand(batch, n),
             cache=cache, use_cache=True)
        return cache.written

    def velocity(self, prefix, state, x, t: float) -> torch.Tensor:
        batch, horizon = x.shape[:2]
        state_token = self.state_proj(state)[:, None, :]
        time = posemb_sincos(torch.full((batch,), t), self.width).to(x.dtype)
        mixed = torch.cat([self.action_in_proj(x), time[:, None, :].expand(batch, horizon, self.width)], -1)
        actions = self.action_time_mlp_out(F.silu(self.action_time_mlp_in(mixed)))
        suffix = torch.cat([state_token, actions], dim=1)
        p, s = prefix[0][0].shape[-2], suffix.shape[1]
        # state token: the prefix and itself; action tokens: the prefix, the state and every action
        inner = torch.ones(s, s, dtype=torch.bool)
        inner[0, 1:] = False
        mask = torch.cat([torch.ones(s, p, dtype=torch.bool), inner], dim=1).expand(batch, 1, s, p + s)
        from transformers.cache_utils import DynamicCache

        cache = DynamicCache()
        for i, (k, v) in enumerate(prefix):
            cache.update(k, v, i)
        out = self.expert(inputs_embeds=suffix, attention_mask=mask,
                          position_ids=(p + torch.arange(s)).expand(batch, s), cache=cache,
                          use_cache=True).last_hidden_state
        return self.action_out_proj(out[:, -horizon:])

    def forward(self, images, prompt, state, noise):
        prefix = self.prefix_kv(images, prompt)
        x, dt = noise, -1.0 / self.steps
        for step in range(self.steps):
            x = x + dt * self.velocity(prefix, state, x, 1.0 + step * dt)
        return x


def policy_inputs(cfg: dict[str, Any], dtype: str, batch: int) -> list[torch.Tensor]:
    """Camera images in [-1, 1] (after openpi's preprocessing), prompt ids, the robot state and the
    initial noise of the action chunk."""
    dt = DTYPES[dtype]
    size = cfg["image_size"]
    images = torch.rand(batch, cfg["num_images"], 3, size, size, dtype=dt) * 2 - 1
    prompt = torch.randint(0, cfg["vocab_size"], (batch, cfg["prompt_tokens"]))
    state = torch.randn(batch, cfg["action_dim"], dtype=dt)
    noise = torch.randn(batch, cfg["action_horizon"], cfg["action_dim"], dtype=dt)
    return [images, prompt, state, noise]
