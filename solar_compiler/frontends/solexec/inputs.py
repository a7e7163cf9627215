"""Random inputs of a SOL-ExecBench workload, drawn as the harness draws them.

A bound is derived from the program the reference runs on its inputs, and the validation compares
our translation with the reference on such inputs: both should see what the benchmark's kernels see.
The harness (`sol_execbench/core/bench/io.py`) does not draw every `random` input from one
distribution: it first tries rules on the input's name and description (`heuristic_tensor`), so a
norm weight is all ones, a causal mask is a real causal mask, an SSM decay is negative, a weight
matrix is scaled by 1/sqrt(fan_in); only when none applies is the input plain random
(`random_tensor`: floats standard normal, fp8 clamped to [-2, 2], fp4 rounded from normal values,
int8 in [-128, 128), wider ints in [-1024, 1024), bool 0/1). For a problem whose `op_type` is
`sampling`, the input named `probs` is a softmax over its last dimension. A random input of shape
null is a Python scalar: a 0-d draw's value, with no rule applied.

Values (and the seeds that draw them) need not equal the harness's; the rules, ranges and dtypes do.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from solar_compiler.errors import SolarError
from solar_compiler.loopir.rules import E2M1_VALUES

TORCH_DTYPES = {
    "float64": torch.float64, "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2,
    "float4_e2m1fn_x2": torch.float4_e2m1fn_x2, "int64": torch.int64, "int32": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "bool": torch.bool,
}
INT_RANGES = {"int8": (-128, 128), "int16": (-1024, 1024), "int32": (-1024, 1024), "int64": (-1024, 1024)}
_WIDE_FLOATS = ("float64", "float32", "float16", "bfloat16")  # the dtypes the name rules apply to


# ---- packed fp4 ----------------------------------------------------------------------------------
def encode_e2m1(x: torch.Tensor) -> torch.Tensor:
    """The e2m1 codes (uint8, 0..15) nearest to `x` (ties to the code of the smaller magnitude)."""
    table = torch.tensor(E2M1_VALUES[:8], dtype=torch.float32)
    mag = x.abs().to(torch.float32).clamp(max=6.0)
    code = (mag.unsqueeze(-1) - table).abs().argmin(-1).to(torch.uint8)
    return code | (x < 0).to(torch.uint8) << 3


def pack_fp4(codes: torch.Tensor) -> torch.Tensor:
    """Codes [..., 2n] -> packed float4_e2m1fn_x2 [..., n] (element 2i in the low nibble)."""
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return packed.contiguous().view(torch.float4_e2m1fn_x2)


# ---- plain random --------------------------------------------------------------------------------
def random_tensor(shape: tuple[int, ...], dtype: str, name: str) -> torch.Tensor:
    """A plain random input of a definition dtype (the ranges of the module docstring)."""
    td = TORCH_DTYPES[dtype]
    if dtype in _WIDE_FLOATS:
        return torch.randn(shape, dtype=td)
    if dtype in ("float8_e4m3fn", "float8_e5m2"):
        return torch.randn(shape).clamp_(-2.0, 2.0).to(td)
    if dtype == "float4_e2m1fn_x2":
        if not shape or shape[-1] % 2:
            raise SolarError(f"input '{name}': a packed fp4 tensor needs an even last dimension, got {shape}")
        return pack_fp4(encode_e2m1(torch.randn(shape)))
    if dtype == "bool":
        return torch.randint(0, 2, shape).to(torch.bool)
    lo, hi = INT_RANGES[dtype]
    return torch.randint(lo, hi, shape, dtype=td)


# ---- the harness's name rules ----------------------------------------------------------------------
_DIGITS = "0123456789"
_WEIGHT_SUFFIXES = ("_weight", "_weights", "_proj", "_projs", "_proj_weight", "_proj_weights",
                    "_weight_matrix")
_NORMS = ("_norm", "_layernorm", "layernorm")
_ROPE = {"cos": True, "cos_cached": True, "rope_cos": True,  # name -> cosine (else sine)
         "sin": False, "sin_cached": False, "rope_sin": False}
_POSITIVE = ("rstd", "std", "variance", "var")
_MASKS = ("x_mask", "text_mask", "aspect_ratio_mask", "drop_mask", "attention_mask")
_BINARY_WORDS = ("binary", "{0, 1}", "0 or 1", "1.0 for valid", "0.0 for masked")
_SOFTMAX = ("attn_weights", "attention_weights", "routing_weights")


def _of_norm(name: str, suffix: str) -> bool:
    """`<...norm>_weight` / `<...norm>_bias` (a trailing layer number allowed: `norm2_weight`)."""
    if name == f"norm{suffix}":
        return True
    if not name.endswith(suffix):
        return False
    prefix = name[: -len(suffix)]
    stripped = prefix.rstrip(_DIGITS)
    return prefix.endswith(_NORMS) or bool(stripped) and stripped.endswith(("norm", "layernorm"))


def _is_weight_matrix(name: str, shape: tuple[int, ...]) -> bool:
    stripped = name.rstrip(_DIGITS)
    return len(shape) >= 2 and (name == "weight" or name.endswith(_WEIGHT_SUFFIXES) or stripped == "weight"
                                or stripped.endswith(_WEIGHT_SUFFIXES))


def _is_positive(name: str) -> bool:
    base = name.rstrip(_DIGITS)
    return (name in _POSITIVE or name.endswith(("_rstd", "_std", "_variance", "_var")) or base in _POSITIVE
            or base.endswith(("_rstd", "_std", "_var")))


def heuristic_tensor(name: str, shape: tuple[int, ...], dtype: str,
                     description: str | None) -> torch.Tensor | None:
    """The harness's tensor for an input its name or description identifies, else None (plain
    random). Rules apply to float inputs of at least 16 bits only, first match wins, in this order:
    norm weight (ones), norm bias (zeros), causal attention mask (0 on and below the diagonal, the
    dtype's lowest value above), binary mask (0/1), RoPE cos/sin (of normal angles clamped to
    [-pi, pi]), positive statistics (|N(0, 1)| + 0.1), SSM decays (`A` in [-1, -0.001), `A_log` in
    [-5, -1), `g` in [-5, 0), `A_cumsum` the running sum of draws in [-0.1, 0)), softmax outputs
    (rows summing to 1), weight matrices (N(0, 1) / sqrt(last dimension))."""
    if dtype not in _WIDE_FLOATS:
        return None
    td = TORCH_DTYPES[dtype]
    desc = (description or "").lower()
    if _of_norm(name, "_weight"):
        return torch.ones(shape, dtype=td)
    if _of_norm(name, "_bias"):
        return torch.zeros(shape, dtype=td)
    square = len(shape) >= 2 and shape[-1] == shape[-2]
    causal = name in ("attention_mask", "causal_mask") or "attention mask" in desc and "causal" in desc
    if square and causal:
        above = torch.ones(shape[-1], shape[-1]).triu(1).bool()
        return torch.zeros(shape, dtype=td).masked_fill(above, torch.finfo(td).min)
    if name in _MASKS or name.endswith("_mask") and any(w in desc for w in _BINARY_WORDS):
        return torch.randint(0, 2, shape).to(td)
    if name in _ROPE:
        angle = torch.randn(shape).clamp_(-math.pi, math.pi)
        return (torch.cos(angle) if _ROPE[name] else torch.sin(angle)).to(td)
    if _is_positive(name):
        return torch.randn(shape, dtype=td).abs() + 0.1
    decay = {"A": (-1.0, -0.001), "A_log": (-5.0, -1.0), "g": (-5.0, 0.0), "A_cumsum": (-0.1, 0.0)}
    if name in decay:
        t = torch.empty(shape, dtype=td).uniform_(*decay[name])
        return t.cumsum(dim=-1) if name == "A_cumsum" else t
    if name in _SOFTMAX or "softmax" in desc and "output" in desc:
        return torch.softmax(torch.randn(shape), dim=-1).to(td)
    if _is_weight_matrix(name, shape):
        return torch.randn(shape, dtype=td) / math.sqrt(shape[-1])
    return None


def random_input(name: str, spec: dict[str, Any], shape: tuple[int, ...] | None,
                 definition: dict[str, Any]) -> Any:
    """The value of a `random` input of the definition (`spec` its entry in `inputs`): a Python scalar
    for shape null, else the name rules' tensor or a plain random one, softmaxed for a sampling
    problem's `probs`."""
    if shape is None:
        return random_tensor((), spec["dtype"], name).item()
    value = heuristic_tensor(name, shape, spec["dtype"], spec.get("description"))
    if value is None:
        value = random_tensor(shape, spec["dtype"], name)
    if definition.get("op_type") == "sampling" and name == "probs":
        value = torch.softmax(value, dim=-1)
    return value
