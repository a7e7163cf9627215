"""Compulsory bytes (`totals.bytes_fused`) of torch programs on which a public einsum-graph SOL tool
was measured wrong (docs: /work/shared/docs/domain-notes.md, section 2): a weight used through `.T`
dropped, RNN weights counted at every time step, one input counted once per view, a bool mask priced
at 4 bytes, a discarded output counted (fused > unfused). Every figure is derived by hand from the
example's sizes (all f32 = 4 bytes, bool = 1 byte): each input and weight once, each output once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from translated import cached_translations, driver_options

pytest.importorskip("torch")

from solar_compiler.driver import main  # noqa: E402
from solar_compiler.frontends import Translation  # noqa: E402
from solar_compiler.frontends.cache import cache_load  # noqa: E402
from solar_compiler.frontends.torch import frontend as fe  # noqa: E402
from solar_compiler.transforms.kernels import kernel_costs  # noqa: E402
from solar_compiler.transforms.narrow import narrow  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("weight_transpose.py", "lstm.py", "gru.py", "two_views.py", "bool_mask.py",
         "max_discard_indices.py")


@pytest.fixture(scope="session")
def runs(tmp_path_factory, translation_cache) -> dict[str, tuple[Translation, dict]]:
    """Per example: the translation and the JSON report of `solar-opt examples/torch/<name> --translate
    --lift-einsum --roofline=all --hw H100_SXM --format=json` (the driver in-process, on the session's
    shared translation cache, filled first where it lacks one with the same validated `translate_job`)."""
    out = tmp_path_factory.mktemp("reports")
    result: dict[str, tuple[Translation, dict]] = {}
    with cached_translations(translation_cache, {n: f"examples/torch/{n}" for n in NAMES}):
        for name in NAMES:
            path, opts = f"examples/torch/{name}", driver_options()
            tr = cache_load(fe.cache_key(path, opts))
            target = out / f"{name}.json"
            rc = main([path, "--translate", "--lift-einsum", "--roofline=all", "--hw", "H100_SXM",
                       "--format=json", "-o", str(target)])
            assert rc == 0, name
            result[name] = (tr, json.loads(target.read_text()))
    return result


def per_tensor(tr: Translation) -> dict[str, int]:
    """Compulsory bytes per kernel tensor, of the kernel the pipeline prices (narrowed)."""
    (k,) = tr.kernels
    return kernel_costs(narrow(k).kernel).compulsory


def test_weight_used_through_transpose_is_counted(runs):
    """x @ W.T, x: 64x128, W: 96x128 (the parameter, read as W[n, k]), out 64x96.
    x 64*128*4 = 32768 + W 96*128*4 = 49152 + out 64*96*4 = 24576 = 106496 (without W: 57344)."""
    tr, report = runs["weight_transpose.py"]
    assert report["totals"]["bytes_fused"] == 106496
    assert per_tensor(tr) == {"x": 32768, "weight_t": 49152, "mm": 24576}
    (k,) = tr.kernels
    assert [(t.name, t.shape) for t in k.tensors if t.role == "weight"] == [("weight_t", (96, 128))]


def test_lstm_weights_count_once_not_per_time_step(runs):
    """2-layer LSTM, B=8, T=32, I=64, H=128 (4H = 512): x 8*32*64*4 = 65536; layer 0: W_ih 512*64*4
    = 131072, W_hh 512*128*4 = 262144, two biases 512*4 = 2048 each; layer 1: W_ih and W_hh
    512*128*4 = 262144 each, biases 2048 each; out 8*32*128*4 = 131072. Sum 1122304. Counting W_hh
    at each of the 32 steps would add 31*2*262144 = 16252928."""
    tr, report = runs["lstm.py"]
    assert report["totals"]["bytes_fused"] == 1122304
    got = per_tensor(tr)
    (k,) = tr.kernels
    assert all(got[t.name] == t.nbytes for t in k.tensors if t.role != "local")
    assert got["lstm_weight_hh_l0"] == 262144 and got["lstm_weight_hh_l1"] == 262144


def test_gru_weights_count_once_not_per_time_step(runs):
    """GRU, T=32, B=8, I=64, H=96 (3H = 288): x 32*8*64*4 = 65536, h0 8*96*4 = 3072, W_ih 288*64*4
    = 73728, W_hh 288*96*4 = 110592, biases 288*4 = 1152 each, h_n 8*96*4 = 3072. Sum 258304."""
    tr, report = runs["gru.py"]
    assert report["totals"]["bytes_fused"] == 258304
    assert per_tensor(tr) == {"x": 65536, "h0": 3072, "gru_weight_ih_l0": 73728, "gru_weight_hh_l0": 110592,
                              "gru_bias_ih_l0": 1152, "gru_bias_hh_l0": 1152, "getitem_1": 3072}


def test_input_reached_through_two_views_counts_once(runs):
    """x: 64x64 read as x.reshape(2048, 2) (all of it) and as x.t()[:64, :32] (rows 0..31 of x):
    the union is x, 64*64*4 = 16384; out 64x32: 8192. Sum 24576 (x once per view: 32768)."""
    tr, report = runs["two_views.py"]
    assert report["totals"]["bytes_fused"] == 24576
    assert per_tensor(tr) == {"x": 16384, "add": 8192}


def test_bool_mask_is_one_byte_per_element(runs):
    """x 32x256 f32 = 32768, mask 32x256 bool = 8192 (not 4 * 8192), softmax out 32768. Sum 73728."""
    tr, report = runs["bool_mask.py"]
    assert report["totals"]["bytes_fused"] == 73728
    assert per_tensor(tr) == {"x": 32768, "mask": 8192, "softmax": 32768}
    (k,) = tr.kernels
    assert k.tensor("mask").dtype == "bool"


def test_discarded_indices_are_not_an_output(runs):
    """torch.max(x, 1)[0], x 32x512: x 65536 + values 32*4 = 128 = 65664; the i64 indices (32*8 =
    256 bytes) are neither an output nor computed. Unfused: one eager kernel (aten.max.dim: its -inf
    init and its max= reduction) reading x and writing the values, 65664 = fused; its two einsum
    nodes: the init writes 128, the reduction reads x and its accumulator 128 and writes 128."""
    tr, report = runs["max_discard_indices.py"]
    totals = report["totals"]
    assert (totals["bytes_fused"], totals["bytes_unfused"]) == (65664, 65664)
    assert [(k["op"], k["reads"], k["writes"]) for k in report["kernels_unfused"]] == \
        [("aten.max.dim", {"x": 65536}, {"getitem": 128})]
    assert [o["bytes"] for o in report["ops"]] == [128, 65664 + 128]
    (k,) = tr.kernels
    assert [(t.name, t.dtype, t.shape, t.role) for t in k.tensors] == \
        [("x", "f32", (32, 512), "input"), ("getitem", "f32", (32,), "output")]
