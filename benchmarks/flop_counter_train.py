"""Matrix FLOPs of every bundled training step against `torch.utils.flop_counter.FlopCounterMode`.

Ours: `totals.flops_matrix` of `solar-opt F --step train --translate --lift-einsum --roofline=all
--algorithms classical` (the classical model: products as written, only the work the outputs need),
computed in-process the way the pipeline does (translate_job with validation against autograd,
`narrow`, `kernel_costs`); "as written" is the same without narrowing. The counter: one real
training step (`bench/timing_train.py`: forward, the loss the capture differentiates, `backward()`;
no optimizer, which has no matrix work), `torch.manual_seed(0)`, in the mode the test suite
translates the model in, counted twice as `flop_counter_compare.py` does: as torch runs it on CPU
("default") and "decomposed" (oneDNN off, SDPA on the math backend), so that every contraction of
the forward and of autograd's backward reaches a formula.

Every difference from the decomposed count must be listed in EXPECTED with its hand-derived value
(derivations: docs/training.md, "FLOPs against FlopCounterMode"); an unexplained or mis-derived
difference is printed as such and makes the exit status 1. Not a unit test
(tests/test_train_flop_counter.py asserts a subset); `[substring ...]` selects examples.

    .venv/bin/python benchmarks/flop_counter_train.py [substring ...]
"""

from __future__ import annotations

import os
import sys
import warnings
from contextlib import nullcontext
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling, also when loaded by path
from flop_counter_compare import Row, print_table, verdict  # noqa: E402

from solar_compiler.bench.timing_train import train_step_fn
from solar_compiler.errors import SolarError
from solar_compiler.frontends import FrontendOptions
from solar_compiler.frontends.model_file import load_model_file
from solar_compiler.frontends.torch.frontend import translate_job
from solar_compiler.transforms.kernels import kernel_costs
from solar_compiler.transforms.narrow import narrow

ROOT = Path(__file__).resolve().parent.parent
MODES = {"bn_cnn.py": "train"}  # the mode tests/test_train_suite.py translates in (else eval)

# the reasons, each explained in docs/training.md
PAD = "taps on zero padding (forward and each backward product)"
GROUPS = "counter: grouped weight gradient x groups"
NORM = "norm dot products"
SOFTMAX = "softmax-backward dot product"
CAUSAL = "causal mask (2 forward, 4 backward products)"
ZERO = "products with the zero initial state"


def _pad(n: int, c_out: int, c_in: int, dense: int, valid: int) -> int:
    """One convolution product's taps on zero padding: 2 N C_out C_in (dense - valid (output, tap) pairs)."""
    return 2 * n * c_out * c_in * (dense - valid)


# example -> (ours - decomposed counter, reason); derivations in docs/training.md, "FLOPs against
# FlopCounterMode". A convolution whose input needs a gradient has 3 products (forward, input and
# weight gradients), else 2. Dot products over a norm's elements, 2 FLOPs each: a layer norm has 1 in
# its forward (the variance) and 3 in its backward when its input needs a gradient (sum dy w and
# sum dy w x-hat per row, sum dy x-hat per feature), else 1; a batch norm has 1 in its backward (sum
# dy x-hat, shared by both gradients) and, with batch statistics, the variance's 1 in its forward
EXPECTED: dict[str, tuple[int, str]] = {
    # 3x3 padding 1: 12x12 (36 dense, 34 valid pairs per dim), then 6x6 after pooling (18, 16)
    "bn_cnn.py": (-2 * _pad(2, 8, 3, 36**2, 34**2) - 3 * _pad(2, 16, 8, 18**2, 16**2)
                  + 2 * 2 * (2 * 8 * 12 * 12) + 2 * 2 * (2 * 16 * 6 * 6), f"{PAD}; {NORM}"),
    "bn_mlp.py": (2 * 16 * 64, NORM),  # eval: the weight gradient's dot product only
    # 16x16 padding 1 (48, 46); 8x8 stride 2 padding 1 -> 4x4 (12, 11)
    "cnn.py": (-2 * _pad(4, 8, 3, 48**2, 46**2) - 3 * _pad(4, 16, 8, 12**2, 11**2), PAD),
    # the 3x3 depthwise conv, 16 groups on 8x8 (24, 22); its weight gradient over-counted 16x
    "depthwise_block.py": (-3 * _pad(2, 16, 1, 24**2, 22**2) - 15 * 2 * 2 * 16 * 1 * 24**2,
                           f"{PAD}; {GROUPS}"),
    # 2 layer norms over 16 tokens x 32; softmax over 2 x 4 heads x 8 x 8
    "encoder_layer.py": (2 * (1 + 3) * 2 * 16 * 32 + 2 * 2 * 4 * 8 * 8, f"{NORM}; {SOFTMAX}"),
    "gru.py": (-2 * (2 * 4 * 3 * 24 * 24), ZERO),  # B 4, 3 gates of H 24
    # the norm reads the model's input: its variance, and the weight gradient's dot product only
    "layernorm_mlp.py": ((1 + 1) * 2 * 8 * 24, NORM),
    # B 4, 4 gates of H 32, 16 features; narrowing also drops the step-0 forget gate (it multiplies
    # the zero cell state): its input projection and that projection's weight gradient
    "lstm.py": (-2 * (2 * 4 * 4 * 32 * 32) - 2 * (2 * 4 * 32 * 16), ZERO),
    "resnet_block.py": (-2 * _pad(2, 8, 3, 24**2, 22**2) - 6 * _pad(2, 8, 8, 24**2, 22**2)
                        + 2 * (2 * 2 * 8 * 8 * 8), f"{PAD}; {NORM}"),
    "sdpa_attention.py": (2 * 2 * 4 * 8 * 8, SOFTMAX),
    # Conv1d over 20 steps: padding 1 (60, 58); dilation 2 padding 2 (60, 56)
    "tcn.py": (-2 * _pad(4, 12, 6, 60, 58) - 3 * _pad(4, 12, 12, 60, 56), PAD),
    # 2 x 16 tokens x 32; 4 heads of 8, causal over 16: 136 of 256 pairs
    "transformer_block.py": (2 * (1 + 3) * 2 * 32 * 32 + 2 * 2 * 4 * 136 - 6 * 2 * 2 * 4 * (256 - 136) * 8,
                             f"{NORM}; {SOFTMAX}; {CAUSAL}"),
}
DEFAULT_BELOW = {  # why the default count is below the decomposed one
    "lstm.py": "default: no formula for oneDNN's LSTM",
    "encoder_layer.py": "default: no formula for CPU flash SDPA",
    "sdpa_attention.py": "default: no formula for CPU flash SDPA",
    "transformer_block.py": "default: no formula for CPU flash SDPA",
}


def ours(path: str, mode: str) -> tuple[int, int]:
    """(needed, as written) matrix FLOPs of the translated training step."""
    (k,) = translate_job(path, FrontendOptions(mode=mode, step="train")).kernels
    return kernel_costs(narrow(k).kernel).flops_matrix, kernel_costs(k).flops_matrix


def counted(path: str, mode: str, decomposed: bool) -> int:
    """FlopCounterMode's total for one training step on get_inputs()."""
    spec = load_model_file(path)
    torch.manual_seed(0)
    model = spec.build_model()
    model.train(mode == "train")
    inputs = spec.sample_inputs()
    step, _ = train_step_fn(torch, path, spec.module, model, None)
    counter = FlopCounterMode(display=False)
    with torch.backends.mkldnn.flags(enabled=not decomposed), \
            sdpa_kernel(SDPBackend.MATH) if decomposed else nullcontext(), counter:
        step(*inputs)
    return counter.get_total_flops()


def measure(name: str) -> Row:
    path = f"examples/train/{name}"
    mode = MODES.get(name, "eval")
    default, decomposed = counted(path, mode, False), counted(path, mode, True)
    try:
        needed, written = ours(path, mode)
    except SolarError as e:
        return Row(name, None, None, default, decomposed, " ".join(str(e).split())[:90])
    return Row(name, needed, written, default, decomposed)


def main() -> int:
    os.chdir(ROOT)
    warnings.filterwarnings("ignore")
    names = sorted(p.name for p in (ROOT / "examples" / "train").glob("*.py"))
    names = [n for n in names if not sys.argv[1:] or any(w in n for w in sys.argv[1:])]
    bad = print_table("training step", names, measure,
                      lambda r: verdict(r, EXPECTED, DEFAULT_BELOW, strict_default=True))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
