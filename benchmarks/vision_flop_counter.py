"""ResNet-50 and ViT-B/16 matrix FLOPs at batch 1 and 64 against `torch.utils.flop_counter.FlopCounterMode`.

Ours: `totals.flops_matrix` of `solar-opt SPEC --batch B --translate --frontend-options validate=false
--lift-einsum --roofline=fused --algorithms classical --format=json` (the products as written, less
the work no output needs; the figures do not depend on validation, which tests/test_vision_specs.py
runs for ResNet-18 and a 2-block ViT). The counter: the same model (`VisionModel`, random weights),
eval mode, run on fake images (FlopCounterMode needs shapes only), SDPA on the math backend
(no formula covers the CPU flash kernel). Both count a MAC as 2 FLOPs.

Every difference must be the derived one (docs/model-zoo.md, "FLOPs against FlopCounterMode"), or the
exit status is 1:
* convolutions: the taps on zero padding, which we do not count: computed here from each Conv2d's
  geometry (the in-bounds (output, tap) pairs are the sum of a ones-conv2d with its stride, padding and
  dilation), at batch 1 on real tensors, and 64 times that at batch 64;
* layer norms: each variance is a dot product (2 FLOPs per element) that we price as a contraction
  and the counter has no formula for;
* narrowing: the head reads the class token only, so of the last block only the keys and values of
  every token are needed, and the rest for the class token alone (`transformer_terms`).

    .venv/bin/python benchmarks/vision_flop_counter.py [resnet50|vit] [--batch 1 64]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPECS = {"resnet50": ("torchvision", "resnet50"), "vit": ("timm", "vit_base_patch16_224")}
IMAGE = 224


def ours(library: str, name: str, batch: int) -> int:
    exe = str(Path(sys.executable).parent / "solar-opt")
    argv = [exe, f"{library}:{name}", "--batch", str(batch), "--translate", "--frontend-options",
            "validate=false", "--lift-einsum", "--roofline=fused", "--algorithms", "classical", "--hw",
            "H100_SXM", "--format=json"]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(out.stdout)["totals"]["flops_matrix"]


def counted(library: str, name: str, batch: int) -> int:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from solar_compiler.frontends.zoo.vision_runtime import VisionModel, vision_inputs

    torch.manual_seed(0)
    model = VisionModel(library, name, "fp32", IMAGE, {}).eval()  # real weights: timm's init reads values
    with FakeTensorMode(allow_non_fake_inputs=True):
        (images,) = vision_inputs("fp32", batch, 3, IMAGE)
        counter = FlopCounterMode(display=False)
        with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), counter:
            model(images)
    return counter.get_total_flops()


def padding_taps(model, images) -> int:  # noqa: ANN001 - a torch module and tensor
    """FLOPs of the convolution taps of `model(images)` that fall on zero padding: FlopCounterMode
    counts every tap of every output position (2 per MAC), we count the in-bounds ones. For a
    convolution, the in-bounds (output position, tap) pairs are the sum of conv2d(ones input, ones
    kernel) with its stride, padding and dilation: computed from each Conv2d's geometry, not from our IR."""
    import torch

    total = 0

    def hook(conv, args, out) -> None:  # noqa: ANN001
        nonlocal total
        n, _, h, w = args[0].shape
        kh, kw = conv.kernel_size
        ones = torch.nn.functional.conv2d(torch.ones(1, 1, h, w), torch.ones(1, 1, kh, kw),
                                          stride=conv.stride, padding=conv.padding, dilation=conv.dilation)
        dense = out.shape[-2] * out.shape[-1] * kh * kw
        total += 2 * n * conv.out_channels * (conv.in_channels // conv.groups) * (dense - int(ones.sum()))

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        model(images)
    for h in handles:
        h.remove()
    return total


def image_padding_taps(library: str, name: str) -> int:
    """`padding_taps` of one image through the named model."""
    import torch

    from solar_compiler.frontends.zoo.vision_runtime import VisionModel, vision_inputs

    torch.manual_seed(0)
    model = VisionModel(library, name, "fp32", IMAGE, {}).eval()
    (images,) = vision_inputs("fp32", 1, 3, IMAGE)
    return padding_taps(model, images)


def transformer_terms(library: str, name: str) -> int:
    """One image's differences of a ViT (0 for a model without layer norms): each layer-norm variance
    is a dot product to us, +2 per element normalised; the head reads the class token only, so
    narrowing keeps, of the last block, the keys and values of all T tokens but the queries, the
    attention rows, the output projection, the second norm and the MLP of the class token alone:
    -(T - 1) (2 D^2 + 2 T D + 2 T D + 2 D^2 + 2 D M + 2 M D + 2 D), and the final norm of 1 row."""
    import torch

    from solar_compiler.frontends.zoo.vision_runtime import VisionModel

    model = VisionModel(library, name, "fp32", IMAGE, {}).eval()
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    if not norms:
        return 0
    d = norms[0].normalized_shape[0]
    m = next(x.out_features for x in model.modules() if isinstance(x, torch.nn.Linear)
             and x.in_features == d and x.out_features > 3 * d)  # the MLP's expansion (3 D is qkv)
    t = (IMAGE // 16) ** 2 + 1
    variances = 2 * d * (t * (len(norms) - 1) + 1)
    last_block = (t - 1) * (4 * d * d + 4 * t * d + 4 * d * m + 2 * d)
    return variances - last_block


def main() -> int:
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=list(SPECS))
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 64])
    a = ap.parse_args()
    print(f"{'model':10} {'batch':>5} {'ours':>16} {'counter':>16} {'derived diff':>15}  verdict")
    bad = 0
    for key in a.models:
        library, name = SPECS[key]
        per_image = -image_padding_taps(library, name) + transformer_terms(library, name)
        for batch in a.batch:
            mine, theirs = ours(library, name, batch), counted(library, name, batch)
            want = batch * per_image
            ok = mine - theirs == want
            bad += not ok
            print(f"{key:10} {batch:5d} {mine:16,d} {theirs:16,d} {want:+15,d}  "
                  f"{'as derived' if ok else f'UNEXPLAINED: {mine - theirs:+,d}'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
