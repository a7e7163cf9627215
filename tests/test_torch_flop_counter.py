"""`totals.flops_matrix` of the torch pipeline against `torch.utils.flop_counter.FlopCounterMode`.

Both sides are hand-derived integers (a MAC = 2 FLOPs). "default" is the counter as torch runs the
model on CPU; "decomposed" turns oneDNN off (the CPU LSTM is otherwise one `mkldnn_rnn_layer`, which
the counter has no formula for) and runs SDPA on its math backend (no formula for the CPU flash
kernel). The documented differences (docs/torch-frontend.md, "FLOPs against FlopCounterMode"): taps on
zero padding, the step-0 recurrent product with a zero initial state, the masked half of causal
attention, and torch's pairwise contraction of a 3-operand einsum. The whole table is
benchmarks/flop_counter_compare.py.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import pytest
from translated import cached_translations

torch = pytest.importorskip("torch")

from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from solar_compiler.driver import main  # noqa: E402
from solar_compiler.frontends.model_file import load_model_file  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# toggling oneDNN warns about Intel-GPU TF32 on every call
pytestmark = pytest.mark.filterwarnings("ignore:TF32 acceleration on top of oneDNN:UserWarning")

# example: (ours, counter default, counter decomposed); derivations in the comments
CASES: dict[str, tuple[int, int, int]] = {
    # 2*M*K*N = 2*256*128*192
    "matmul.py": (12582912, 12582912, 12582912),
    # 2*B*M*K*N = 2*8*64*96*80
    "bmm.py": (7864320, 7864320, 7864320),
    # 2*64*256*128; the bias is the init of the output, not matrix work (addmm's formula omits it too)
    "linear_relu.py": (4194304, 4194304, 4194304),
    # 2*64*256*512 + 2*64*512*10
    "mlp2.py": (17432576, 17432576, 17432576),
    # unpadded 5x5 convs: 2*8*6*28*28*3*25 + 2*8*16*10*10*6*25; linears 2*8*400*120 + 2*8*120*10
    "small_cnn.py": (10272000, 10272000, 10272000),
    # 3x3, stride 2, padding 1 on 32x32 -> 16x16: per spatial dim 16*3 = 48 (p, r) pairs, of which
    # 2p + r - 1 = -1 (p = 0, r = 0) is padding: 47 valid. ours 2*4*32*16*47*47, counter 2*4*32*16*48*48
    "conv2d_strided_padded.py": (9048064, 9437184, 9437184),
    # kernel 4, stride 2, padding 1, 16x16 -> 32x32: output row 2i + r - 1 leaves [0, 32) for
    # (i, r) = (0, 0) and (15, 3): 62 of 64 pairs per dim. ours 2*4*16*8*62*62, counter 2*4*16*8*16*16*16
    "conv_transpose2d.py": (3936256, 4194304, 4194304),
    # 2 layers, B=8, T=32, I=64, H=128, 4 gates. Input projections 2*B*T*4H*I + 2*B*T*4H*H
    # = 16777216 + 33554432; recurrent 2*B*4H*H = 1048576 per step and layer: the counter counts all
    # 32 steps (2*32*1048576), we drop step 0, whose h0 is zero (2*31*1048576); narrowing also drops
    # the forget gate's input projection at step 0 (it multiplies c0 = 0): 2*B*H*(64 + 128) = 393216
    "lstm.py": (114950144, 0, 117440512),
    # B=8, T=32, I=64, H=96, 3 gates, h0 given: 2*T*B*3H*I + 2*T*B*3H*H = 9437184 + 14155776
    "gru.py": (23592960, 23592960, 23592960),
    # "bi,oij,bj->bo", B=32, I=32, J=48, O=16: ours one contraction 2*B*O*I*J; torch's einsum does
    # bmm(oij, bj) -> boi (2*B*O*I*J), then bmm with bi (2*B*O*I = 32768)
    "einsum_bilinear.py": (1572864, 1605632, 1605632),
    # B=4, H=8, L=128, D=64: QK^T and PV, 2*(2*B*H*L*L*D); the CPU flash kernel has no formula
    "sdpa.py": (134217728, 0, 134217728),
    # causal: L*(L+1)/2 = 8256 (m, l) pairs: 2*(2*B*H*8256*D); the math backend computes all L*L
    "sdpa_causal.py": (67633152, 0, 134217728),
}


def counted(path: str, decomposed: bool) -> int:
    """FlopCounterMode's total for one eval-mode, no-grad forward on the file's get_inputs()."""
    spec = load_model_file(path)
    torch.manual_seed(0)
    model = spec.build_model().eval()
    inputs = spec.sample_inputs()
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), torch.backends.mkldnn.flags(enabled=not decomposed), \
            sdpa_kernel(SDPBackend.MATH) if decomposed else nullcontext(), counter:
        model(*inputs)
    return counter.get_total_flops()


#: the default model's matrix FLOPs where a fast convolution prices a conv below its products as
#: written. small_cnn: both unpadded 5 x 5 convs at the FFT of their whole maps (cuDNN's FFT), 32 x 32
#: (28 x 28 outputs, 1,534 real products per channel pair: 3 x (1024 - 4) / 2 + 4) and 14 x 14
#: (10 x 10 outputs, 292: 3 x (196 - 4) / 2 + 4), each fewer than the direct taps (19,600; 2,500):
#: 2*8*6*3*1534 + 2*8*16*6*292 + the linears' 787,200
AS_WRITTEN = {"lstm.py": 115343360}  # before narrowing: its forget gate at step 0 included
FAST_CONV: dict[str, int] = {"small_cnn.py": 2 * 8 * 6 * 3 * 1534 + 2 * 8 * 16 * 6 * 292 + 787_200}


@pytest.fixture(scope="session")
def reports(tmp_path_factory, translation_cache) -> dict[str, dict]:
    """The JSON report of `solar-opt examples/torch/<name> --translate --lift-einsum --roofline=all
    --hw H100_SXM --format=json` per case, the driver run in-process on the session's shared
    translation cache, filled first where it lacks a case (the same `translate_job` the sandboxed
    child runs, validated)."""
    out = tmp_path_factory.mktemp("reports")
    result: dict[str, dict] = {}
    with cached_translations(translation_cache, {n: f"examples/torch/{n}" for n in CASES}):
        for name in CASES:
            path = f"examples/torch/{name}"
            target = out / f"{name}.json"
            rc = main([path, "--translate", "--lift-einsum", "--roofline=all", "--hw", "H100_SXM",
                       "--format=json", "-o", str(target)])
            assert rc == 0, name
            result[name] = json.loads(target.read_text())
    return result


@pytest.mark.parametrize("name", list(CASES))
def test_flops_matrix_against_flop_counter(name, reports, monkeypatch):
    monkeypatch.chdir(ROOT)
    ours, default, decomposed = CASES[name]
    report = reports[name]
    assert report["validation"]["validated"] is True
    # the products as written (the classical model) are what FlopCounterMode counts
    written = report["classical"]["totals"]
    assert written["flops_matrix"] == ours
    # no masked work is removed by narrowing in these programs but the LSTM's: as written = needed
    assert written["flops_matrix_as_written"] == AS_WRITTEN.get(name, ours)
    assert report["totals"]["flops_matrix"] == FAST_CONV.get(name, ours)
    path = f"examples/torch/{name}"
    assert counted(path, decomposed=False) == default
    assert counted(path, decomposed=True) == decomposed


def test_the_differences_are_exactly_the_documented_ones():
    """Each difference from the decomposed count is the derived excluded work, nothing else."""
    padding_taps = 2 * 4 * 32 * 16 * (48 * 48 - 47 * 47)
    cropped_taps = 2 * 4 * 16 * 8 * (64 * 64 - 62 * 62)
    zero_h0_steps = 2 * (2 * 8 * 4 * 128 * 128) + 2 * 8 * 128 * (64 + 128)  # and the step-0 forget gate
    masked_half = 2 * (2 * 4 * 8 * (128 * 128 - 128 * 129 // 2) * 64)
    second_contraction = 2 * 32 * 16 * 32
    expected = {"conv2d_strided_padded.py": padding_taps, "conv_transpose2d.py": cropped_taps,
                "lstm.py": zero_h0_steps, "sdpa_causal.py": masked_half,
                "einsum_bilinear.py": second_contraction}
    got = {n: dec - ours for n, (ours, _, dec) in CASES.items() if dec != ours}
    assert got == expected
