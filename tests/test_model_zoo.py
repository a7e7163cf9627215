"""Model specs (`hf:NAME`, docs/model-zoo.md): parsing and checking a spec's flags (one-line errors),
the generated model file's size sites, and a small Llama of the same architecture as Llama-2-7B through
`solar-opt` in decode, whose compulsory bytes are derived by hand from its configuration."""

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
from solar_compiler.frontends.zoo.spec import (
    ZooRequest,
    find_shipped,
    model_source,
    parse_request,
    shipped_names,
    with_timeout,
)

REQUIRED = os.environ.get("SOLAR_TEST_REQUIRE_OPTIONAL") == "1"  # make test installs the zoo extra


def _transformers():
    if REQUIRED:
        import transformers
        return transformers
    return pytest.importorskip("transformers")


# ---- spec parsing (no framework) ---------------------------------------------------------------------
def test_flags_and_overrides_are_consumed():
    req, rest = parse_request(["hf:llama-2-7b", "num_hidden_layers=2", "rope_theta=5e5", "--phase", "decode",
                               "--kv-len=4096", "--dtype", "fp16", "--batch", "16", "--roofline=fused"])
    assert rest == ["hf:llama-2-7b", "--roofline=fused"]
    assert (req.name, req.phase, req.kv_len, req.dtype, req.batch) == \
        ("llama-2-7b", "decode", 4096, "fp16", 16)
    assert req.overrides == {"num_hidden_layers": 2, "rope_theta": 500000.0}


def test_overrides_follow_the_spec_and_option_values_stay():
    req, rest = parse_request(["hf:gpt2", "n_layer=2", "--frontend-options", "timeout=600", "--translate"])
    assert req.overrides == {"n_layer": 2}
    assert rest == ["hf:gpt2", "--frontend-options", "timeout=600", "--translate"]


@pytest.mark.parametrize("args, expected", [
    (["m.py"], ["m.py", "--frontend-options", "timeout=900"]),
    (["m.py", "--frontend-options", "no-cache=true"],
     ["m.py", "--frontend-options", "no-cache=true timeout=900"]),
    (["m.py", "--frontend-options=validate=false"],
     ["m.py", "--frontend-options=validate=false timeout=900"]),
    (["m.py", "--frontend-options", "timeout=60"], ["m.py", "--frontend-options", "timeout=60"]),
])
def test_a_spec_gets_a_longer_translation_timeout_unless_one_is_given(args, expected):
    assert with_timeout(args) == expected


def test_a_file_is_left_alone():
    assert parse_request(["m.py", "--translate"]) == (None, ["m.py", "--translate"])


@pytest.mark.parametrize("argv, message", [
    (["m.py", "--batch", "2"], "--batch: options of a model spec (hf:NAME, torchvision:NAME, timm:NAME); "
                               "the input is a file"),
    (["hf:llama-2-7b", "--dtype", "fp8"], "--dtype is one of fp32, fp16, bf16, not 'fp8'"),
    (["hf:llama-2-7b", "--phase", "train"], "--phase is prefill or decode, not 'train'"),
    (["hf:llama-2-7b", "--seq", "many"], "--seq takes an integer, not 'many'"),
    (["hf:a", "hf:b"], "one model spec at a time (got hf:a and hf:b)"),
    (["hf:"], "hf:: name a model"),
])
def test_bad_flags_are_one_line(argv, message):
    with pytest.raises(SolarError) as e:
        parse_request(argv)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


@pytest.mark.parametrize("req, message", [
    (ZooRequest("hf:no-such-model", "no-such-model"), "hf:no-such-model: no shipped configuration named"),
    (ZooRequest("hf:llama-2-7b", "llama-2-7b", phase="decode"), "--phase decode needs --kv-len L"),
    (ZooRequest("hf:llama-2-7b", "llama-2-7b", kv_len=8), "--kv-len applies to --phase decode"),
    (ZooRequest("hf:llama-2-7b", "llama-2-7b", phase="decode", kv_len=8, seq=4), "decode runs one new token"),
    (ZooRequest("hf:bert-base", "bert-base", phase="prefill"),
     "--phase prefill applies to causal language models; BertForMaskedLM is not one"),
    # GPT-2 has 1024 learned positions: 1000 cached + 1 new is fine, 1024 + 1 is not
    (ZooRequest("hf:gpt2", "gpt2", phase="decode", kv_len=1024),
     "1025 positions, but GPT2LMHeadModel has 1024"),
])
def test_requests_checked_against_the_model(req, message):
    with pytest.raises(SolarError, match=message.replace("(", r"\(").replace(")", r"\)")):
        model_source(req)


def test_shipped_names_and_repository_ids_resolve():
    assert {"llama-2-7b", "llama-3-8b", "mistral-7b", "qwen2.5-7b", "gpt2", "bert-base-uncased"} <= \
        set(shipped_names())
    assert find_shipped("meta-llama/Llama-2-7b-hf")["name"] == "llama-2-7b"
    assert find_shipped("Llama-2-7B")["name"] == "llama-2-7b"
    for name in shipped_names():
        entry = find_shipped(name)
        assert entry["source"].startswith(("https://huggingface.co/", "https://github.com/")), entry["source"]
        assert entry["config"]["architectures"]


def test_widths_are_size_sites_layers_repeat_sites_and_other_counts_neither():
    """The reduced instance scales widths and lengths, may run fewer layers (a repeat site, checked
    by `same_program_repeated`), and keeps head counts, which make each layer's statement list."""
    src = model_source(ZooRequest("hf:llama-3-8b", "llama-3-8b", phase="decode", kv_len=4096, dtype="fp16"))
    sites = find_size_sites(ast.parse(src))
    assert {k for k, s in sites.items() if not s.repeat} == \
        {"BATCH", "SEQ", "KV_LEN", "hidden_size", "intermediate_size", "vocab_size"}
    assert {k: s.value for k, s in sites.items() if s.repeat} == {"num_hidden_layers": 32}
    assert (sites["KV_LEN"].value, sites["hidden_size"].value, sites["vocab_size"].value) == \
        (4096, 4096, 128256)
    assert "num_hidden_layers = repeated(32)" in src and "'num_key_value_heads': 8" in src


def test_gpt2_prefill_defaults_to_its_positions():
    src = model_source(ZooRequest("hf:gpt2", "gpt2"))
    assert "PHASE = 'prefill'" in src and "SEQ = 1024" in src


# ---- through solar-opt ------------------------------------------------------------------------------
SMALL_LLAMA = ["hidden_size=128", "intermediate_size=256", "num_hidden_layers=2", "num_attention_heads=4",
               "num_key_value_heads=2", "vocab_size=512"]


def _report(argv: list[str], tmp_path, monkeypatch) -> dict:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([*argv, "--format", "json", "--quiet"])
    assert rc == 0
    return json.loads(out.getvalue())


def test_small_llama_decode_bytes_by_hand(tmp_path, monkeypatch):
    """The Llama-2-7B architecture (hf:llama-2-7b with smaller widths and 2 layers), decode of one
    token against a KV cache of 64 tokens, fp16: the fused bound's bytes are weights + KV cache +
    small terms, each named here."""
    _transformers()
    r = _report(["hf:llama-2-7b", *SMALL_LLAMA, "--phase", "decode", "--kv-len", "64", "--dtype", "fp16",
                 "--lift-einsum", "--roofline=fused", "--hw", "H100_SXM"], tmp_path, monkeypatch)
    assert r["validation"]["validated"], r["validation"]
    h, inter, layers, heads, kv_heads, vocab, kv_len, b = 128, 256, 2, 4, 2, 512, 64, 2  # b: fp16 bytes
    d = h // heads  # head dim 32
    per_layer = (h * h                # q_proj
                 + 2 * h * kv_heads * d  # k_proj, v_proj (grouped: 2 KV heads)
                 + h * h              # o_proj
                 + 3 * h * inter      # gate, up, down
                 + 2 * h)             # input and post-attention RMSNorm weights
    weights = b * (layers * per_layer + h + vocab * h)  # + final norm + lm_head (the embedding: below)
    kv_cache = b * layers * 2 * kv_heads * kv_len * d  # read once: every layer's K and V
    small = {
        "embedding row of the one token": b * h,
        "token id (int64)": 8,
        "new K/V rows (outputs)": b * layers * 2 * kv_heads * d,
        "logits (fp16)": b * vocab,
        "rotary inv_freq buffer (f32, d/2)": 4 * d // 2,
    }
    assert weights == 722_176 and kv_cache == 32_768 and sum(small.values()) == 1_864
    assert r["totals"]["bytes_fused"] == weights + kv_cache + sum(small.values())


KB_FILE = '''
import torch
from transformers import AutoModelForCausalLM, AutoConfig

class Model(torch.nn.Module):
    def __init__(self, model_name, config):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(model_name, config=config)

    def forward(self, x):
        return self.model(x).logits

model_name = "{name}"
config = AutoConfig.from_pretrained(model_name)
config.n_layer, config.n_embd, config.n_head, config.vocab_size = 1, 32, 2, 64
sequence_length = 8
batch_size = 2

def get_inputs():
    return [torch.randint(0, config.vocab_size, (batch_size, sequence_length))]

def get_init_inputs():
    return [model_name, config]
'''


def test_kernelbench_level4_from_pretrained_resolves_without_the_hub(tmp_path, monkeypatch):
    """A KernelBench level-4 file as written (AutoConfig / AutoModelForCausalLM.from_pretrained of
    'gpt2', here narrowed by the file itself to 1 layer of width 32): the shipped GPT-2 configuration,
    random weights. Matrix FLOPs by hand: tokens T = 2*8 = 16, c_attn 2*T*32*96, c_proj 2*T*32*32,
    MLP 2*(2*T*32*128), lm_head 2*T*32*64, causal attention 2*2*B*H*(d=16)*(8*9/2) pairs."""
    _transformers()
    f = tmp_path / "16_gpt2_small.py"
    f.write_text(KB_FILE.format(name="gpt2"))
    r = _report([str(f), "--translate", "--lift-einsum", "--roofline=fused", "--hw", "H100_SXM",
                 "--algorithms", "classical"], tmp_path, monkeypatch)
    assert r["validation"]["validated"], r["validation"]
    t, h = 16, 32
    matrix = 2 * t * h * 3 * h + 2 * t * h * h + 2 * (2 * t * h * 4 * h) + 2 * t * h * 64 \
        + 2 * 2 * 2 * 2 * 16 * (8 * 9 // 2)
    norms = 2 * 2 * t * h  # two layer norms' sums of squares (self dot products: see torch-frontend.md)
    norms += 2 * t * h  # the final layer norm
    assert r["totals"]["flops_matrix"] == matrix + norms


TINY_GPT2 = {"name": "tiny-gpt2", "repo": "test/tiny-gpt2", "aliases": [], "source": "(a test)",
             "config": {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 64, "n_head": 2,
                        "n_layer": 6, "n_positions": 64, "vocab_size": 256, "bos_token_id": 0,
                        "eos_token_id": 0}}


@pytest.mark.parametrize("file_sets_width", [False, True])
def test_a_kernelbench_level4_file_validates_on_fewer_layers_of_its_configuration(
        tmp_path, monkeypatch, file_sets_width):
    """A level-4 file's widths and layer count are in the shipped configuration, not in the file: they
    are size sites `config.KEY` all the same, so the reduced instance runs 3 of the 6 layers, narrower
    (the full-size kernel checked to be the same program with more copies of its layer block). A
    value the file sets itself after `from_pretrained` is the file's, and no site."""
    _transformers()
    from solar_compiler.frontends import FrontendOptions
    from solar_compiler.frontends.model_file import load_model_file
    from solar_compiler.frontends.torch import frontend as fe
    from solar_compiler.frontends.zoo import spec as zoo_spec

    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "tiny-gpt2.json").write_text(json.dumps(TINY_GPT2))
    monkeypatch.setattr(zoo_spec, "CONFIG_DIR", configs)
    own = "config.n_embd = 48\n" if file_sets_width else ""
    f = tmp_path / "m.py"
    f.write_text(KB_FILE.format(name="test/tiny-gpt2").replace(
        "config.n_layer, config.n_embd, config.n_head, config.vocab_size = 1, 32, 2, 64\n", own).replace(
        "sequence_length = 8", "sequence_length = 32"))
    spec = load_model_file(f)
    widths = {"config.vocab_size": 256, **({} if file_sets_width else {"config.n_embd": 64})}
    assert (spec.size_constants, spec.repeat_counts) == (
        {"sequence_length": 32, "batch_size": 2, **widths}, {"config.n_layer": 6})
    v = fe.translate_job(str(f), FrontendOptions(memory_budget_gb=0.002)).validation
    assert (v["validated"], v["method"], v["full_size_same_program"]) == (True, "reduced", True), v
    sizes = dict(part.split("=", 1) for part in v["sizes"].removeprefix("reduced: ").split(", "))
    assert sizes["config.n_layer"] == "3 (of 6)" and v["repeated_blocks"] == ["config.n_layer"]
    assert ("config.n_embd" in sizes) != file_sets_width and sizes["config.vocab_size"].endswith("(of 256)")
    reduced = spec.with_sizes({"config.n_layer": 3, "config.n_embd": 32})
    model = reduced.build_model()
    assert (model.model.config.n_layer, len(model.model.transformer.h)) == (3, 3)
    assert model.model.config.n_embd == (48 if file_sets_width else 32)


TINY_REFORMER = {
    "name": "tiny-reformer", "repo": "test/tiny-reformer", "aliases": [], "source": "(a test)",
    "config": {"architectures": ["ReformerModelWithLMHead"], "model_type": "reformer",
               "attn_layers": ["local", "lsh"] * 3, "hidden_size": 64, "axial_pos_embds_dim": [16, 48],
               "axial_pos_shape": [4, 8], "max_position_embeddings": 32, "feed_forward_size": 128,
               "num_attention_heads": 2, "attention_head_size": 16, "local_attn_chunk_length": 8,
               "lsh_attn_chunk_length": 32, "num_buckets": 4, "num_hashes": 2, "vocab_size": 64,
               "is_decoder": True, "hidden_act": "relu", "pad_token_id": 0, "eos_token_id": 2}}


def test_a_reformer_validates_on_two_blocks_of_its_alternating_layers(tmp_path, monkeypatch):
    """Reformer's six layers (local and LSH attention alternating) are counted by the length of
    `attn_layers`: the reduced instance keeps four (three are not copies of one block), narrower, with
    the axial position widths scaled to the hidden size they must sum to. The LSH chunk holds the whole
    sequence, as in KernelBench's Reformer files (256 tokens, chunks of 256): transformers then runs
    LSH layers as standard attention, without the bucket sort (no loop-IR template for `sort`)."""
    _transformers()
    from solar_compiler.frontends import FrontendOptions
    from solar_compiler.frontends.model_file import load_model_file
    from solar_compiler.frontends.torch import frontend as fe
    from solar_compiler.frontends.zoo import spec as zoo_spec

    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "tiny-reformer.json").write_text(json.dumps(TINY_REFORMER))
    monkeypatch.setattr(zoo_spec, "CONFIG_DIR", configs)
    f = tmp_path / "m.py"
    f.write_text(KB_FILE.format(name="test/tiny-reformer").replace(
        "config.n_layer, config.n_embd, config.n_head, config.vocab_size = 1, 32, 2, 64\n", "").replace(
        "sequence_length = 8", "sequence_length = 32"))
    spec = load_model_file(f)
    assert spec.repeat_counts == {"config.num_hidden_layers": 6}
    assert {"config.hidden_size": 64, "config.feed_forward_size": 128}.items() <= spec.size_constants.items()
    v = fe.translate_job(str(f), FrontendOptions(memory_budget_gb=0.002)).validation
    assert (v["validated"], v["method"], v["full_size_same_program"]) == (True, "reduced", True), v
    sizes = dict(part.split("=", 1) for part in v["sizes"].removeprefix("reduced: ").split(", "))
    assert sizes["config.num_hidden_layers"] == "4 (of 6)" and sizes["config.hidden_size"].endswith("(of 64)")
    hidden = int(sizes["config.hidden_size"].split()[0])
    model = spec.with_sizes({"config.num_hidden_layers": 4, "config.hidden_size": hidden}).build_model()
    assert list(model.model.config.axial_pos_embds_dim) == [hidden // 4, 3 * hidden // 4]
    assert len(model.model.reformer.encoder.layers) == 4


def test_from_pretrained_of_an_unknown_name_is_one_line(tmp_path, monkeypatch):
    _transformers()
    f = tmp_path / "m.py"
    f.write_text(KB_FILE.format(name="acme/no-such-model"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main([str(f), "--translate", "--quiet"])
    assert rc == 1
    line = err.getvalue().strip()
    assert "\n" not in line and "m.py:14: " in line and "from_pretrained('acme/no-such-model'): no shipped " \
        "configuration" in line and "--config FILE.json" in line, line


def test_small_llama_prefill_flops_by_hand(tmp_path, monkeypatch):
    """Prefill of S = 16 tokens through the same small Llama (fp32, classical algorithms): every
    projection over all tokens, and attention over the causal pairs only (S(S+1)/2 = 136 per head,
    the narrowed SDPA). Matrix FLOPs by hand, 2 per multiply-add."""
    _transformers()
    r = _report(["hf:llama-2-7b", *SMALL_LLAMA, "--phase", "prefill", "--seq", "16", "--lift-einsum",
                 "--roofline=fused", "--hw", "H100_SXM", "--algorithms", "classical"], tmp_path, monkeypatch)
    assert r["validation"]["validated"], r["validation"]
    s, h, inter, heads, kv_heads, vocab = 16, 128, 256, 4, 2, 512
    d = h // heads
    per_layer = (2 * s * h * h * 2                   # q_proj, o_proj
                 + 2 * 2 * s * h * kv_heads * d      # k_proj, v_proj
                 + 3 * 2 * s * h * inter             # gate, up, down
                 + 2 * (2 * heads * d * s * (s + 1) // 2))  # QK^T and PV over the causal pairs
    lm_head = 2 * s * h * vocab
    # Not matrix work: RMSNorm is `x.pow(2).mean(-1)` (a square, then a mean: vector work, unlike a
    # self dot product), and the rotary angles `inv_freq[d/2, 1] @ positions[1, S]` have K = 1 (a
    # broadcast product, no reduction).
    assert r["totals"]["flops_matrix"] == 2 * per_layer + lm_head == 11_673_600


SMALL_DEEPSEEK = ["hidden_size=64", "intermediate_size=128", "moe_intermediate_size=32",
                  "num_hidden_layers=2", "num_attention_heads=4", "num_key_value_heads=4",
                  "n_routed_experts=4", "num_experts_per_tok=2", "kv_lora_rank=32", "qk_rope_head_dim=8",
                  "v_head_dim=16", "qk_nope_head_dim=16", "vocab_size=256"]


def test_a_small_deepseek_v2_with_complex_rotary_embeddings_validates(tmp_path, monkeypatch):
    """DeepSeek-V2 (MLA, a dense first layer, then routed and shared experts) applies its rotary
    embedding as a complex product (`view_as_complex(q) * freqs_cis`, `freqs_cis = polar(1, angles)`):
    captured on (real, imaginary) pairs, decode against a KV cache validates against transformers,
    and its attention is priced absorbed."""
    _transformers()
    r = _report(["hf:deepseek-v2-lite", *SMALL_DEEPSEEK, "--phase", "decode", "--kv-len", "32",
                 "--lift-einsum", "--roofline=fused", "--hw", "H100_SXM"], tmp_path, monkeypatch)
    v = r["validation"]
    assert v["validated"] and v["method"] == "full", v
    # MLA decode priced absorbed (docs/model-zoo.md): per layer, 4 heads, 33 keys, latent 32, nope
    # and value widths 16. The keys' tree as written: the expansion 2 * 33 * 32 * (4 * 16) = 135,168
    # and the scores' nope part 2 * 4 * 33 * 16 = 4,224; absorbed, q_nope W_UK 2 * 4 * 16 * 32 =
    # 4,096 and against the latent 2 * 4 * 33 * 32 = 8,448. The values' tree with o_proj (2 * 64 *
    # 64 = 8,192): 135,168 + 4,224 + 8,192 as written; P c_kv 8,448, W_UV 4,096 and o_proj absorbed.
    absorbed = sorted((x["flops_before"], x["flops_after"]) for x in r["rewrites"]
                      if x["kind"] == "reassociated" and "kv_b_proj" in x["what"])
    assert absorbed == [(139_392, 12_544)] * 2 + [(147_584, 20_736)] * 2


def test_a_suite_lists_specs(tmp_path, monkeypatch):
    from solar_compiler.bench.suite import discover

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (unit,) = discover(["hf:llama-2-7b --phase decode --kv-len 4096 --dtype fp16"])
    src = open(unit.path).read()
    assert unit.group == "hf" and "PHASE = 'decode'" in src and "KV_LEN = 4096" in src
    assert "DTYPE = 'fp16'" in src
    with pytest.raises(SolarError, match="a spec in a suite takes only its own flags"):
        discover(["hf:gpt2 --roofline=fused"])


def test_from_pretrained_builds_float32_like_kernelbench_expects(tmp_path):
    """The shipped OPT-1.3B configuration says torch_dtype float16 (its checkpoint's); KernelBench's
    files were written for transformers 4, whose from_pretrained loaded float32: so is the model."""
    _transformers()
    from solar_compiler.frontends.model_file import load_model_file

    src = KB_FILE.format(name="facebook/opt-1.3b").replace(
        "config.n_layer, config.n_embd, config.n_head, config.vocab_size = 1, 32, 2, 64",
        "config.num_hidden_layers, config.hidden_size, config.word_embed_proj_dim, config.ffn_dim = "
        "1, 32, 32, 64")
    f = tmp_path / "opt.py"
    f.write_text(src)
    model = load_model_file(str(f)).build_model()
    assert type(model.model).__name__ == "OPTForCausalLM"
    assert {p.dtype for p in model.parameters()} == {__import__("torch").float32}


def test_an_architecture_name_takes_overrides_on_its_defaults(tmp_path):
    req, _ = parse_request(["hf:LlamaForCausalLM", "hidden_size=256", "num_hidden_layers=3"])
    src = model_source(req)
    assert "LlamaForCausalLM from transformers defaults" in src and "hidden_size = 256" in src
    assert "num_hidden_layers = repeated(3)" in src
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 96}))
    req, _ = parse_request(["hf:my-gpt", "--config", str(cfg), "--seq", "64"])
    src = model_source(req)
    assert "ARCHITECTURE = 'GPT2LMHeadModel'" in src and "n_embd = 96" in src and "SEQ = 64" in src
    cfg.write_text("{\n  \"n_embd\": ,\n}")
    with pytest.raises(SolarError, match=r"config.json:2: not JSON"):
        model_source(parse_request(["hf:my-gpt", "--config", str(cfg)])[0])


def test_per_layer_lists_follow_a_reduced_layer_count():
    """A reduced instance's fewer layers cut the configuration's per-layer lists (the configuration
    classes reject a list longer than the count): GPT-Neo's `attention_types` (kinds and repeats)
    and a plain list of layer kinds. Other lists stay."""
    from solar_compiler.frontends.zoo.spec import fit_layer_lists

    config = {"attention_types": [[["global", "local"], 16]], "num_layers": 4, "axial_pos_shape": [128, 512],
              "layer_types": ["full", "sliding"] * 3}
    assert fit_layer_lists(config, 4) == {**config, "attention_types": [[["global", "local"] * 2, 1]],
                                          "layer_types": ["full", "sliding"] * 2}
    transformers = _transformers()
    from solar_compiler.frontends.zoo.hub import offline_hub, resolving

    offline_hub()
    with resolving({"num_layers": 4}) as resolved:
        cfg = transformers.AutoConfig.from_pretrained("EleutherAI/gpt-neo-2.7B")
    assert cfg.attention_layers == ["global", "local", "global", "local"] and len(resolved) == 1
    full = transformers.AutoConfig.from_pretrained("EleutherAI/gpt-neo-2.7B")
    assert len(full.attention_layers) == full.num_layers == 32


def test_a_width_carries_its_parts_and_a_list_length_is_a_layer_count():
    """Reformer states its layer count only as the length of `attn_layers`, and checks that
    `axial_pos_embds_dim` sums to `hidden_size`: a reduced instance's `num_hidden_layers` cuts the
    list, and a narrower hidden size scales the parts that sum to it (other integer lists stay)."""
    from solar_compiler.frontends.zoo.spec import implicit_layer_count, with_overrides

    config = {"attn_layers": ["local", "lsh"] * 6, "hidden_size": 1024, "axial_pos_embds_dim": [256, 768],
              "axial_pos_shape": [128, 512], "num_buckets": [64, 128], "feed_forward_size": 4096}
    assert implicit_layer_count(config) == 12
    assert implicit_layer_count({**config, "num_hidden_layers": 12}) is None
    reduced = {"hidden_size": 256, "num_hidden_layers": 4, "feed_forward_size": 1024}
    assert with_overrides(config, reduced) == {
        **config, "attn_layers": ["local", "lsh"] * 2, "hidden_size": 256, "axial_pos_embds_dim": [64, 192],
        "feed_forward_size": 1024}
    # parts that would not stay whole are left (the model then rejects the width: no reduced instance)
    assert with_overrides(config, {"hidden_size": 1022})["axial_pos_embds_dim"] == [256, 768]
    transformers = _transformers()
    from solar_compiler.frontends.zoo.hub import config_sites, offline_hub, resolving

    offline_hub()
    with resolving({"num_hidden_layers": 4, "hidden_size": 512}) as resolved:
        cfg = transformers.AutoConfig.from_pretrained("google/reformer-enwik8")
    assert (cfg.attn_layers, cfg.num_hidden_layers) == (["local", "lsh"] * 2, 4)
    assert list(cfg.axial_pos_embds_dim) == [128, 384]
    assert config_sites(resolved)[1] == {"config.num_hidden_layers": 4}
    with resolving() as resolved:
        transformers.AutoConfig.from_pretrained("google/reformer-enwik8")
    widths, counts = config_sites(resolved)
    assert counts == {"config.num_hidden_layers": 12}
    assert (widths["config.hidden_size"], widths["config.feed_forward_size"]) == (1024, 4096)
