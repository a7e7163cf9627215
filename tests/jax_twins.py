"""Twin programs for tests/test_jax_twins.py: the same function on the same shapes written in PyTorch
(KernelBench form) and in JAX (a `model` function). Each entry: (torch forward body, torch input
constructors, JAX model body, JAX input constructors); `x`, `y`, `z`, `w` name the inputs."""

from __future__ import annotations

import textwrap

TWINS: dict[str, tuple[str, list[str], str, list[str]]] = {
    "matmul": ("return x @ y", ["torch.randn(64, 32)", "torch.randn(32, 48)"],
               "return x @ y", ["normal(k, (64, 32))", "normal(k, (32, 48))"]),
    "bmm": ("return torch.bmm(x, y)", ["torch.randn(4, 16, 32)", "torch.randn(4, 32, 24)"],
            "return jnp.einsum('bmk,bkn->bmn', x, y)", ["normal(k, (4, 16, 32))", "normal(k, (4, 32, 24))"]),
    "linear_no_bias": ("return torch.nn.functional.linear(x, w)",
                       ["torch.randn(32, 64)", "torch.randn(48, 64)"],
                       "return x @ w.T", ["normal(k, (32, 64))", "normal(k, (48, 64))"]),
    "transposed_matmul": ("return x.t() @ y", ["torch.randn(40, 24)", "torch.randn(40, 16)"],
                          "return x.T @ y", ["normal(k, (40, 24))", "normal(k, (40, 16))"]),
    "relu": ("return torch.relu(x)", ["torch.randn(32, 64)"],
             "return jax.nn.relu(x)", ["normal(k, (32, 64))"]),
    "sigmoid_chain": ("return torch.sigmoid(x * y + z)", ["torch.randn(16, 48)"] * 3,
                      "return jax.nn.sigmoid(x * y + z)", ["normal(k, (16, 48))"] * 3),
    "conv2d_padded": ("return torch.nn.functional.conv2d(x, w, padding=1)",
                      ["torch.randn(2, 8, 16, 16)", "torch.randn(16, 8, 3, 3)"],
                      "return lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)))",
                      ["normal(k, (2, 8, 16, 16))", "normal(k, (16, 8, 3, 3))"]),
    "sum_rows": ("return x.sum(-1)", ["torch.randn(24, 80)"],
                 "return jnp.sum(x, axis=-1)", ["normal(k, (24, 80))"]),
    "max_pool": ("return torch.nn.functional.max_pool2d(x, 2)", ["torch.randn(2, 4, 16, 16)"],
                 "return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), 'VALID')",
                 ["normal(k, (2, 4, 16, 16))"]),
    "cumsum": ("return torch.cumsum(x, 1)", ["torch.randn(8, 64)"],
               "return jnp.cumsum(x, axis=1)", ["normal(k, (8, 64))"]),
    "concat": ("return torch.cat([x, y], 1)", ["torch.randn(8, 16)", "torch.randn(8, 24)"],
               "return jnp.concatenate([x, y], axis=1)", ["normal(k, (8, 16))", "normal(k, (8, 24))"]),
    # named differences (tests/test_jax_twins.py derives each one)
    "argmax": ("return torch.argmax(x, 1)", ["torch.randn(16, 32)"],
               "return jnp.argmax(x, axis=1)", ["normal(k, (16, 32))"]),
    "mean_rows": ("return x.mean(-1)", ["torch.randn(24, 80)"],
                  "return jnp.mean(x, axis=-1)", ["normal(k, (24, 80))"]),
    "linear_bias": ("return torch.nn.functional.linear(x, w, b)",
                    ["torch.randn(32, 64)", "torch.randn(48, 64)", "torch.randn(48)"],
                    "return x @ w.T + b", ["normal(k, (32, 64))", "normal(k, (48, 64))", "normal(k, (48,))"]),
    # the same ids in both (the rows a gather touches on get_inputs() are traced and priced): 40
    # distinct rows, 37 being prime to 100
    "embedding": ("return torch.nn.functional.embedding(x, w)",
                  ["torch.arange(40, dtype=torch.int32) * 37 % 100", "torch.randn(100, 32)"],
                  "return w[x]", ["jnp.arange(40, dtype=jnp.int32) * 37 % 100", "normal(k, (100, 32))"]),
}

INPUT_NAMES = {"linear_bias": "x, w, b", "linear_no_bias": "x, w", "embedding": "x, w",
               "conv2d_padded": "x, w"}


def _names(name: str, n: int) -> str:
    return INPUT_NAMES.get(name, ", ".join("xyzw"[:n]))


def torch_source(name: str) -> str:
    body, inputs, _, _ = TWINS[name]
    args = _names(name, len(inputs))
    return textwrap.dedent(f"""\
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def forward(self, {args}):
                {body}


        def get_inputs():
            return [{", ".join(inputs)}]


        def get_init_inputs():
            return []
        """)


def jax_source(name: str) -> str:
    _, _, body, inputs = TWINS[name]
    args = _names(name, len(inputs))
    return textwrap.dedent(f"""\
        import jax
        import jax.numpy as jnp
        from jax import lax


        def model({args}):
            {body}


        def get_inputs():
            k = jax.random.key(0)
            normal = jax.random.normal
            return [{", ".join(inputs)}]
        """)
