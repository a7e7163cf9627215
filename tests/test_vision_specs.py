"""Vision model specs (`torchvision:NAME`, `timm:NAME`, docs/model-zoo.md): parsing, one-line errors
(unknown names, a missing extra), the generated file's size sites, and two small models through
`solar-opt` whose matrix FLOPs are derived independently: ResNet-18 against FlopCounterMode (less the
taps on zero padding, counted from the convolutions' geometry) and a 2-block ViT by hand."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import os
import sys
from pathlib import Path

import pytest

from solar_compiler.driver import main
from solar_compiler.errors import SolarError
from solar_compiler.frontends.model_file import find_size_sites
from solar_compiler.frontends.zoo.spec import parse_request

REQUIRED = os.environ.get("SOLAR_TEST_REQUIRE_OPTIONAL") == "1"  # make test installs the vision extra


def _library(name: str):
    from solar_compiler.frontends.zoo.vision_runtime import load_library

    try:
        return load_library(name)
    except SolarError:
        if REQUIRED:
            raise
        pytest.skip(f"{name} is not installed (the vision extra)")


def _run(argv: list[str], tmp_path, monkeypatch) -> tuple[int, str, str]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([*argv, "--quiet"])
    return rc, out.getvalue(), err.getvalue().strip()


def _report(argv: list[str], tmp_path, monkeypatch) -> dict:
    rc, out, err = _run([*argv, "--format", "json"], tmp_path, monkeypatch)
    assert rc == 0, err
    return json.loads(out)


# ---- parsing (no library) -----------------------------------------------------------------------------
def test_vision_flags_are_consumed():
    req, rest = parse_request(["torchvision:resnet50", "--image-size", "160", "--batch=2", "--dtype", "bf16",
                               "--roofline=fused"])
    assert rest == ["torchvision:resnet50", "--roofline=fused"]
    assert (req.library, req.name, req.image_size, req.batch, req.dtype) == \
        ("torchvision", "resnet50", 160, 2, "bf16")
    req, _ = parse_request(["timm:vit_base_patch16_224", "drop_path_rate=0.1"])
    assert (req.library, req.is_vision, req.overrides, req.image_size) == \
        ("timm", True, {"drop_path_rate": 0.1}, None)


@pytest.mark.parametrize("argv, message", [
    (["hf:gpt2", "--image-size", "224"], "hf:gpt2: --image-size applies to torchvision: and timm: specs"),
    (["timm:vit_base_patch16_224", "--image-size", "big"], "--image-size takes an integer, not 'big'"),
    (["torchvision:"], "torchvision:: name a model (torchvision:resnet50)"),
    (["m.py", "--image-size", "64"], "--image-size: options of a model spec (hf:NAME, torchvision:NAME, "
                                     "timm:NAME); the input is a file"),
])
def test_bad_vision_flags_are_one_line(argv, message):
    with pytest.raises(SolarError) as e:
        parse_request(argv)
    assert str(e.value) == message


@pytest.mark.parametrize("flags, message", [
    (["--seq", "16"], "timm:vit_base_patch16_224: --seq applies to hf: specs"),
    (["--phase", "decode"], "timm:vit_base_patch16_224: --phase applies to hf: specs"),
    (["--image-size", "0"], "timm:vit_base_patch16_224: --image-size must be at least 1"),
])
def test_hf_flags_on_a_vision_spec_are_one_line(flags, message, tmp_path, monkeypatch):
    rc, _, err = _run(["timm:vit_base_patch16_224", *flags], tmp_path, monkeypatch)
    assert rc == 1 and "\n" not in err and message in err, err


# ---- names and the extra ------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, message", [
    ("torchvision:resnet51", "torchvision:resnet51: no torchvision classification model of that name; list "
                             "the classifiers: python -c 'import torchvision; print(torchvision.models."
                             "list_models(module=torchvision.models))'"),
    ("torchvision:fasterrcnn_resnet50_fpn", "torchvision:fasterrcnn_resnet50_fpn: a torchvision model but "
                                            "not an image classifier; list the classifiers:"),
    ("timm:vit_huge_potato", "timm:vit_huge_potato: no timm model of that name; list them: python -c "
                             "'import timm; print(timm.list_models())'"),
])
def test_unknown_names_are_one_line_saying_how_to_list_them(spec, message, tmp_path, monkeypatch):
    _library(spec.split(":")[0])
    rc, _, err = _run([spec, "--roofline=fused"], tmp_path, monkeypatch)
    assert rc == 1 and "\n" not in err and message in err, err


@pytest.mark.parametrize("spec, package", [("torchvision:resnet18", "torchvision"),
                                           ("timm:resnet18", "timm")])
def test_a_missing_extra_is_one_line_naming_the_pip_install(spec, package, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, package, None)  # `import package` raises ModuleNotFoundError
    rc, _, err = _run([spec], tmp_path, monkeypatch)
    assert rc == 1 and "\n" not in err, err
    assert f"model specs {package}:NAME need the Python package '{package}', which is not installed: " \
        "pip install 'solar-opt[vision]'" in err, err


def test_batch_and_image_are_the_only_size_sites(tmp_path, monkeypatch):
    """The reduced instance of validation may scale the image and the batch, nothing else: the
    channel count and the library's keyword arguments are fixed(...)."""
    _library("timm")
    from solar_compiler.frontends.zoo.spec import spec_source

    req, _ = parse_request(["timm:vit_base_patch16_224", "num_classes=100", "--batch", "32"])
    src = spec_source(req)
    sites = find_size_sites(ast.parse(src))
    assert {k: s.value for k, s in sites.items()} == {"BATCH": 32, "IMAGE_SIZE": 224}
    assert "KWARGS = fixed({'num_classes': 100})" in src and "CHANNELS = fixed(3)" in src
    req, _ = parse_request(["timm:vit_base_patch16_384"])
    assert "IMAGE_SIZE = 384" in spec_source(req)  # the pretrained configuration's input size


def test_a_suite_lists_vision_specs(tmp_path, monkeypatch):
    _library("timm")
    from solar_compiler.bench.suite import discover

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    tv, tm = discover(["torchvision:resnet50 --batch 8 --dtype fp16", "timm:vit_base_patch16_224"])
    assert (tv.group, tm.group) == ("torchvision", "timm")
    src = open(tv.path).read()
    assert "NAME = 'resnet50'" in src and "BATCH = 8" in src and "DTYPE = 'fp16'" in src
    assert "IMAGE_SIZE = 224" in open(tm.path).read()


# ---- FLOPs derived independently ----------------------------------------------------------------------
def _padding_taps(model, images) -> int:  # noqa: ANN001
    """benchmarks/vision_flop_counter.py's count of the convolution taps on zero padding (from each
    Conv2d's geometry, not from our IR)."""
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "vision_flop_counter.py"
    spec = importlib.util.spec_from_file_location("vision_flop_counter", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.padding_taps(model, images)


def test_resnet18_matrix_flops_are_flop_counters_less_the_padding_taps(tmp_path, monkeypatch):
    """torchvision ResNet-18, batch 1, 64 x 64 images, classical algorithms: our matrix FLOPs are
    FlopCounterMode's (convolution + addmm, 2 per MAC, bias left out) less the taps on zero padding
    (docs/torch-frontend.md, "FLOPs against FlopCounterMode"); the program validates at full size."""
    _library("torchvision")
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from solar_compiler.frontends.zoo.vision_runtime import VisionModel, vision_inputs

    r = _report(["torchvision:resnet18", "--image-size", "64", "--lift-einsum", "--roofline=fused",
                 "--hw", "H100_SXM", "--algorithms", "classical"], tmp_path, monkeypatch)
    assert r["validation"]["validated"] and r["validation"]["sizes"] == "full", r["validation"]
    torch.manual_seed(0)
    model, (images,) = VisionModel("torchvision", "resnet18", "fp32", 64, {}), vision_inputs("fp32", 1, 3, 64)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(images)
    counts = {str(k): v for k, v in counter.get_flop_counts()["Global"].items()}
    assert counts == {"aten.convolution": 296_091_648, "aten.addmm": 2 * 512 * 1000}
    padding = _padding_taps(model, images)
    assert padding == 70_142_464
    assert r["totals"]["flops_matrix"] == r["totals"]["flops_matrix_as_written"] == \
        sum(counts.values()) - padding == 226_973_184


def test_timm_vit_validates_and_its_matrix_flops_by_hand(tmp_path, monkeypatch):
    """timm ViT-Tiny/16 with 2 blocks (`depth=2`) on 32 x 32 images: 4 patches + the class token
    (T = 5), width D = 192, 3 heads of 64, MLP 768, 1000 classes; validated at full size. FLOPs 2
    per MAC, by hand; the img_size keyword reached timm (4 patches, not 196)."""
    _library("timm")
    r = _report(["timm:vit_tiny_patch16_224", "depth=2", "--image-size", "32", "--lift-einsum",
                 "--roofline=fused", "--hw", "H100_SXM", "--algorithms", "classical"], tmp_path, monkeypatch)
    assert r["validation"]["validated"] and r["validation"]["sizes"] == "full", r["validation"]
    t, d, h, hd, mlp, classes = 5, 192, 3, 64, 768, 1000
    patch_embed = 2 * 4 * d * (3 * 16 * 16)

    def block(q_rows: int, rows: int) -> int:
        """A block whose output is needed at `rows` tokens, queries computed for `q_rows`."""
        qkv = 2 * q_rows * d * d + 2 * t * d * 2 * d
        attention = 2 * (2 * h * rows * t * hd)  # Q K^T and P V
        return qkv + attention + 2 * rows * d * d + 2 * (2 * rows * d * mlp)  # + proj, fc1, fc2

    def norms(rows: int) -> int:  # a LayerNorm's sum of squares: a self dot product (torch-frontend.md)
        return 2 * rows * d

    head = 2 * d * classes
    as_written = patch_embed + 2 * block(t, t) + head + 5 * norms(t)
    assert as_written - 5 * norms(t) == 10_449_408  # FlopCounterMode's count (SDPA on the math backend)
    # The head reads the class token only, so the last block's proj, MLP, second norm, the final norm
    # and its attention rows shrink to that token; its K and V stay whole (every token is attended),
    # and its queries shrink to the class token too: qkv is one linear whose kept outputs (the class
    # token's q, every token's k and v) are two pieces writing apart, one copy of the product each.
    narrowed = patch_embed + block(t, t) + block(1, 1) + head + 3 * norms(t) + 2 * norms(1)
    assert (r["totals"]["flops_matrix_as_written"], r["totals"]["flops_matrix"]) == (as_written, narrowed) \
        == (10_459_008, 7_491_456)


def test_a_zero_initialised_weight_matrix_is_redrawn_so_validation_checks_something():
    """torchvision's ViT initialises its head to zero: every logit would be its bias, and comparing
    outputs would check nothing (max relative error exactly 0). A zero weight matrix is redrawn,
    seeded; biases and non-zero weights stay."""
    import torch

    from solar_compiler.frontends.zoo.vision_runtime import redraw_zero_weights

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    torch.nn.init.zeros_(m[1].weight)
    torch.nn.init.zeros_(m[1].bias)
    before = m[0].weight.clone()
    assert redraw_zero_weights(m) == 1
    assert m[1].weight.count_nonzero() == 6 and m[1].bias.count_nonzero() == 0
    assert torch.equal(m[0].weight, before)
    x = torch.randn(5, 4)
    assert not torch.equal(m(x)[0], m(x)[1])  # the outputs now depend on the input
    again = torch.nn.Linear(3, 2)
    torch.nn.init.zeros_(again.weight)
    redraw_zero_weights(again)
    assert torch.equal(again.weight, m[1].weight)  # seeded: the same values every build
