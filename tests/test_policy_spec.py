"""Robot policies as model specs (`hf:pi0`, docs/model-zoo.md): the generated file's size sites, the
one-line errors, and a small pi0 (the same architecture with narrow widths, one layer per tower, two
denoising steps) through `solar-opt`, its matrix FLOPs derived by hand from the configuration."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os

import pytest

from solar_compiler.driver import main
from solar_compiler.errors import SolarError
from solar_compiler.frontends.model_file import find_size_sites
from solar_compiler.frontends.zoo.policy import POLICY_OPTIONS
from solar_compiler.frontends.zoo.spec import (
    ZooRequest,
    expand_argv,
    find_shipped,
    model_source,
    with_timeout,
)

REQUIRED = os.environ.get("SOLAR_TEST_REQUIRE_OPTIONAL") == "1"  # make test installs the zoo extra


def test_pi0_widths_are_size_sites_layers_repeat_sites_and_counts_neither():
    """The reduced instance scales widths, image size and token counts, may run fewer layers (repeat
    sites); head, camera and step counts make the statement list and stay."""
    src = model_source(ZooRequest("hf:pi0", "pi0", dtype="bf16"))
    sites = find_size_sites(ast.parse(src))
    assert {k for k, s in sites.items() if not s.repeat} == {
        "BATCH", "vision_head_dim", "vision_intermediate_size", "image_size", "hidden_size",
        "intermediate_size", "head_dim", "vocab_size", "expert_hidden_size", "expert_intermediate_size",
        "prompt_tokens", "action_horizon", "action_dim"}
    repeats = {k: s.value for k, s in sites.items() if s.repeat}
    assert repeats == {"vision_layers": 27, "num_hidden_layers": 18}
    assert (sites["image_size"].value, sites["hidden_size"].value, sites["expert_hidden_size"].value,
            sites["action_horizon"].value) == (224, 2048, 1024, 50)
    for count in ("vision_layers = repeated(27)", "num_hidden_layers = repeated(18)", "'num_steps': 10",
                  "'num_images': 3"):
        assert count in src
    assert find_shipped("pi0-base")["config"]["architectures"] == ["Pi0Policy"]


@pytest.mark.parametrize("req, message", [
    (ZooRequest("hf:pi0", "pi0", phase="decode", kv_len=8),
     "hf:pi0: --phase, --kv-len apply to causal language models; Pi0Policy runs one action chunk"),
    (ZooRequest("hf:pi0", "pi0", overrides={"image_size": 100}),
     "hf:pi0: image_size 100 is not a multiple of patch_size 14"),
    (ZooRequest("hf:pi0", "pi0", overrides={"num_steps": "ten"}),
     "hf:pi0: the Pi0Policy configuration needs integer num_steps"),
])
def test_pi0_requests_are_checked(req, message):
    with pytest.raises(SolarError) as e:
        model_source(req)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


# ---- through solar-opt ------------------------------------------------------------------------------
SMALL = {"num_images": 1, "image_size": 28, "vision_heads": 2, "vision_head_dim": 8, "vision_layers": 1,
         "vision_intermediate_size": 32, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
         "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "vocab_size": 50,
         "expert_hidden_size": 16, "expert_intermediate_size": 32, "prompt_tokens": 3, "action_horizon": 4,
         "action_dim": 4, "num_steps": 2}


def test_small_pi0_matrix_flops_by_hand(tmp_path, monkeypatch):
    """pi0 with the small configuration above, fp32, classical algorithms, narrowed to the work the
    action chunk needs. With one layer per Gemma, the backbone's only layer is also its last: of the
    prefix only its K and V are needed (the expert attends to them), so its queries, attention,
    output projection and MLP are dead; likewise the state token's own path through the expert's
    last layer (only the action tokens are read out), while its K and V are needed."""
    if not REQUIRED:
        pytest.importorskip("transformers")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["hf:pi0", *(f"{k}={v}" for k, v in SMALL.items()), "--lift-einsum", "--roofline=fused",
                   "--hw", "Jetson_Thor", "--algorithms", "classical", "--format", "json", "--quiet"])
    assert rc == 0
    r = json.loads(out.getvalue())
    assert r["validation"]["validated"], r["validation"]
    c = SMALL
    patches = (c["image_size"] // 14) ** 2                                   # 4 per camera
    dv = c["vision_heads"] * c["vision_head_dim"]                           # SigLIP width 16
    siglip = (2 * patches * 3 * 14 * 14 * dv                                # patch embedding (no padding)
              + 4 * 2 * patches * dv * dv                                   # q, k, v, out projections
              + 2 * 2 * c["vision_heads"] * patches * patches * c["vision_head_dim"]  # QK^T, PV
              + 2 * 2 * patches * dv * c["vision_intermediate_size"]        # fc1, fc2
              + 3 * 2 * patches * dv                                        # LayerNorm variances (below)
              + 2 * patches * dv * c["hidden_size"])                        # PaliGemma's projector
    prefix = patches * c["num_images"] + c["prompt_tokens"]                 # 7 prefix tokens
    backbone = 2 * 2 * prefix * c["hidden_size"] * c["head_dim"]            # k, v of the prefix (1 KV head)
    w, h, hd, a = c["expert_hidden_size"], c["action_horizon"], c["head_dim"], c["action_dim"]
    s = 1 + h                                                               # state token + action tokens
    heads, keys = c["num_attention_heads"], prefix + s
    step = (2 * a * w                                   # state_proj
            + 2 * h * a * w                             # action_in_proj
            + 2 * h * 2 * w * w                         # action_time_mlp_in over [action, time]
            + 2 * h * w * w                             # action_time_mlp_out
            + 2 * h * w * heads * hd                    # q of the action tokens
            + 2 * 2 * s * w * hd                        # k, v of state and action tokens
            + 2 * 2 * heads * h * keys * hd             # QK^T, PV: each action token over all 12 keys
            + 2 * h * heads * hd * w                    # o_proj of the action tokens
            + 3 * 2 * h * w * c["expert_intermediate_size"]  # gate, up, down
            + 2 * h * w * a)                            # action_out_proj
    # The LayerNorm variance `sum((x - mean) * (x - mean))` is a product reduced over the width: a
    # contraction, counted as matrix work (2 FLOPs per element; the ViT row of docs/model-zoo.md).
    # Gemma's RMSNorm is `x.pow(2).mean(-1)`, a square and then a mean: vector work.
    assert (siglip, backbone, step) == (97_152, 14_336, 39_040)
    assert r["totals"]["flops_matrix"] == siglip + backbone + c["num_steps"] * step


@pytest.mark.parametrize("args, expected", [
    (["m.py"], ["m.py", "--frontend-options", "timeout=900 time_budget=40"]),
    (["m.py", "--frontend-options", "time_budget=90"],
     ["m.py", "--frontend-options", "time_budget=90 timeout=900"]),
    (["m.py", "--frontend-options=timeout=60 time_budget=5"],
     ["m.py", "--frontend-options=timeout=60 time_budget=5"]),
])
def test_a_policy_spec_gets_a_larger_validation_budget_unless_one_is_given(args, expected):
    assert with_timeout(args, POLICY_OPTIONS) == expected


def test_a_policy_spec_expands_with_its_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    args = expand_argv(["hf:pi0", "--dtype", "bf16", "--roofline=fused"])
    assert args[0].endswith(".py") and args[-2:] == ["--frontend-options", "timeout=900 time_budget=40"]
    llama = expand_argv(["hf:llama-2-7b", "--phase", "prefill", "--seq", "16"])
    assert llama[-2:] == ["--frontend-options", "timeout=900"]
