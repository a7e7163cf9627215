"""Matrix FLOPs of every torch example against `torch.utils.flop_counter.FlopCounterMode`.

Ours: `totals.flops_matrix` of `solar-opt F --translate --lift-einsum --roofline=all` (needed work:
the kernel after `narrow-needed`), computed in-process the way the pipeline does (translate_job with
validation, `narrow`, `kernel_costs`); "as written" is the same without narrowing.
The counter: the model in eval mode, `torch.manual_seed(0)`, its `get_inputs()`, under `no_grad`,
counted twice: as torch runs it by default on CPU ("default"), and "decomposed": oneDNN off (the
CPU LSTM is otherwise one `mkldnn_rnn_layer` the counter has no formula for) and SDPA on the math
backend (the CPU flash kernel has no formula either), so that every contraction reaches a formula.
The 6 GB example runs on fake tensors (the counter needs shapes only).

Every difference from the decomposed count must be listed in EXPECTED with its hand-derived value
(derivations: docs/torch-frontend.md, "FLOPs against FlopCounterMode"); an unexplained or
mis-derived difference is printed as such and makes the exit status 1. Not a unit test
(tests/test_torch_flop_counter.py asserts a subset); `[substring ...]` selects examples.

    .venv/bin/python benchmarks/flop_counter_compare.py [substring ...]
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from solar_compiler.errors import SolarError
from solar_compiler.frontends import FrontendOptions
from solar_compiler.frontends.model_file import load_model_file
from solar_compiler.frontends.torch.frontend import translate_job
from solar_compiler.transforms.kernels import kernel_costs
from solar_compiler.transforms.narrow import narrow

ROOT = Path(__file__).resolve().parent.parent
FAKE = {"big_elementwise_6gb.py"}  # inputs too large to allocate: count on fake tensors

PAD = "padding taps (we count only taps inside the input; the counter counts all)"
CROP = "transposed conv: taps scattered outside the cropped output (we exclude them)"
NORM = "sum of squares of a norm/variance is a dot product: we price it as a contraction; no counter formula"
CAUSAL = "causal SDPA: we count the unmasked half only; the math backend computes the masked half too"
# example -> (ours - decomposed counter, reason); values derived in docs/torch-frontend.md
EXPECTED: dict[str, tuple[int, str]] = {
    "conv1d.py": (-196608, PAD),
    "conv2d_strided_padded.py": (-389120, PAD),
    "conv3d.py": (-1119232, PAD),
    "conv_bn_relu.py": (-291840, PAD),
    "depthwise_conv.py": (-84992, PAD),
    "mobilenet_block.py": (-382464, PAD),
    "resnet_block.py": (-3080192, PAD),
    "conv_transpose2d.py": (-258048, CROP),
    "cosine_similarity.py": (262144, NORM),
    "groupnorm.py": (131072, NORM),
    "instancenorm.py": (262144, NORM),
    "layernorm.py": (262144, NORM),
    "reductions.py": (131072, NORM),
    "tied_weights.py": (32768, NORM),
    "transformer_encoder_manual.py": (131072, NORM),
    "transformer_encoder_sdpa.py": (131072 - 4128768, f"{NORM}; {CAUSAL}"),
    "sdpa_causal.py": (-66584576, CAUSAL),
    "lstm.py": (-2097152, "the step-0 recurrent product with the zero initial state is not work"),
    "einsum_bilinear.py": (-32768, "torch contracts the 3-operand einsum pairwise (2 bmm); we count one "
                                   "contraction plus 1 vector multiply per point"),
}
DEFAULT_ZERO = {  # the default count is 0 for a reason other than the table above
    "lstm.py": "default: oneDNN LSTM (mkldnn_rnn_layer) has no formula",
    "sdpa.py": "default: CPU flash SDPA has no formula",
    "sdpa_causal.py": "default: CPU flash SDPA has no formula",
}


@dataclass
class Row:
    name: str
    ours: int | None
    as_written: int | None
    default: int
    decomposed: int
    error: str | None = None


def ours(path: str) -> tuple[int, int]:
    """(needed, as written) matrix FLOPs of the translated kernel."""
    (k,) = translate_job(path, FrontendOptions()).kernels
    return kernel_costs(narrow(k).kernel).flops_matrix, kernel_costs(k).flops_matrix


def counted(path: str, decomposed: bool, fake: bool) -> int:
    """FlopCounterMode's total for one eval-mode forward on get_inputs()."""
    spec = load_model_file(path)
    torch.manual_seed(0)
    with FakeTensorMode() if fake else torch.no_grad():
        model = spec.build_model().eval()
        inputs = spec.sample_inputs()
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), torch.backends.mkldnn.flags(enabled=not decomposed), \
            sdpa_kernel(SDPBackend.MATH) if decomposed else nullcontext(), counter:
        model(*inputs)
    return counter.get_total_flops()


def measure(name: str) -> Row:
    path = f"examples/torch/{name}"
    fake = name in FAKE
    default, decomposed = counted(path, False, fake), counted(path, True, fake)
    try:
        needed, written = ours(path)
    except SolarError as e:
        return Row(name, None, None, default, decomposed, " ".join(str(e).split())[:90])
    return Row(name, needed, written, default, decomposed)


def verdict(r: Row, expected: dict[str, tuple[int, str]] = EXPECTED,
            default_notes: dict[str, str] = DEFAULT_ZERO, strict_default: bool = False) -> tuple[bool, str]:
    """(explained, note) of one row: its difference from the decomposed count is the derived one of
    `expected` (0 where none is listed). `default_notes` says why a default count is lower (the
    forward's: why it is 0); with `strict_default`, a default count below the decomposed one without
    a note is unexplained too."""
    if r.ours is None:
        return not strict_default, f"not translated: {r.error}"
    notes = [default_notes[r.name]] if r.name in default_notes and r.default < r.decomposed else []
    if strict_default and r.default != r.decomposed and not notes:
        return False, f"UNEXPLAINED default count {r.default}"
    diff = r.ours - r.decomposed
    if diff == 0 and r.name not in expected:
        return True, "; ".join(["equal", *notes])
    if r.name not in expected:
        return False, f"UNEXPLAINED difference {diff}"
    want, why = expected[r.name]
    if diff != want:
        return False, f"difference {diff}, derived {want}: {why}"
    return True, "; ".join([f"{diff:+d}: {why}", *notes])


def print_table(title: str, names: list[str], measure: Callable[[str], Row],
                judge: Callable[[Row], tuple[bool, str]]) -> int:
    """Measure, judge and print each example; the number of unexplained rows."""
    cols = ("ours", "as written", "counter", "decomposed")
    head = f"{title:30} " + " ".join(f"{c:>11}" for c in cols) + f" {'ratio':>6}  note"
    print(head)
    print("-" * len(head))
    bad = 0
    for name in names:
        r = measure(name)
        ok, note = judge(r)
        bad += not ok
        nums = " ".join(f"{v:11d}" if v is not None else f"{'-':>11}"
                        for v in (r.ours, r.as_written, r.default, r.decomposed))
        ratio = f"{r.ours / r.decomposed:6.3f}" if r.ours is not None and r.decomposed else f"{'-':>6}"
        print(f"{name:30} {nums} {ratio}  {note}", flush=True)
    print(f"\n{len(names)} examples, {bad} unexplained difference(s)")
    return bad


def main() -> int:
    os.chdir(ROOT)
    warnings.filterwarnings("ignore")
    names = sorted(p.name for p in (ROOT / "examples" / "torch").glob("*.py"))
    names = [n for n in names if not sys.argv[1:] or any(w in n for w in sys.argv[1:])]
    return 1 if print_table("example", names, measure, verdict) else 0


if __name__ == "__main__":
    sys.exit(main())
