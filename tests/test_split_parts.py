"""Reads split per part (`transforms/split_parts.py`): the catalogue entry that lets the association
entry see through an assembled operand and a producer read in disjoint parts, MLA's absorbed decode
among them. Counts by hand; the priced program runs in the executor against the program as
written."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context

from solar_compiler.analysis.graphs import module_graphs
from solar_compiler.dialects.convert import kernels_to_module
from solar_compiler.dialects.graph_convert import graph_to_kernel
from solar_compiler.driver import main
from solar_compiler.executor import execute
from solar_compiler.passes.lift_einsum import LiftEinsumPass
from solar_compiler.text.parser import parse_kernels
from solar_compiler.transforms.catalogue import catalogue_module
from solar_compiler.transforms.chain_sample import to_f64
from solar_compiler.transforms.split_parts import SPLIT, forward_matches, split_matches, split_parts
from tests.translated import forward_program, validated_json

# MLA decode as transformers' DeepseekV2Attention computes it (`expand_kv`): one kv_b_proj expands
# the latent cache into keys and values, keys assembled by new_empty and two copy_ into slices.
MLA = '''import torch
import torch.nn as nn
import torch.nn.functional as F

B, H, L, R, DN, DR, DV = 2, 4, 32, 64, 16, 8, 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.kv_b_proj = nn.Linear(R, H * (DN + DV), bias=False)

    def forward(self, q, c_kv, k_rot):
        b, _, l, _ = c_kv.shape
        kv = self.kv_b_proj(c_kv).view(b, l, -1, DN + DV).transpose(1, 2)
        k_nope, v = torch.split(kv, [DN, DV], dim=-1)
        k_rot = k_rot.expand(-1, k_nope.shape[1], -1, -1)
        k = kv.new_empty(*kv.shape[:-1], DN + DR)
        k[..., :DN].copy_(k_nope)
        k[..., DN:].copy_(k_rot)
        return F.scaled_dot_product_attention(q, k, v, scale=(DN + DR) ** -0.5)


def get_inputs():
    return [torch.randn(B, H, 1, DN + DR), torch.randn(B, 1, L, R), torch.randn(B, 1, L, DR)]


def get_init_inputs():
    return []
'''


def _lifted(capsys, path):
    assert main([str(path), "--translate", "-t", "loop"]) == 0
    text = capsys.readouterr().out
    m = kernels_to_module(parse_kernels(text, str(path)))
    LiftEinsumPass().apply(Context(), m)
    return m


def _same_outputs(before, after, seed: int = 0) -> None:
    """Both programs in float64 on the same random inputs: the rewrites are identities of real
    arithmetic."""
    (g0,), (g1,) = module_graphs(before), module_graphs(after)
    k0, k1 = to_f64(graph_to_kernel(g0)[0]), to_f64(graph_to_kernel(g1)[0])
    rng = np.random.default_rng(seed)
    inputs = {t.name: rng.standard_normal(t.shape) for t in k0.tensors if t.role in ("input", "weight")}
    out0, out1 = execute(k0, inputs), execute(k1, inputs)
    assert out0.keys() == out1.keys()
    for name in out0:
        assert np.allclose(out1[name], out0[name], rtol=1e-10, atol=1e-12), name


def test_mla_decode_is_priced_absorbed(tmp_path, capsys):
    """B = 2, H = 4 heads, L = 32 cached latents of R = 64, nope/rope/value widths 16/8/16. As
    written, the expansion is 2 B L R H (DN + DV) = 1,048,576 matrix FLOPs, the scores 2 B H L (DN +
    DR) = 12,288 and P V 2 B H L DV = 8,192: 1,069,056. Absorbed: q_nope W_UK 2 B H DN R = 16,384,
    against the latent 2 B H L R = 32,768, the rotary part 2 B H L DR = 4,096, P c_kv 2 B H L R =
    32,768, then W_UV 2 B H R DV = 16,384: 102,400. The softmax's vector work is what the default
    model prices unsplit, 1,344: the max over 256 scores with the scale folded into q's 192 elements
    (448; the fold reaches q through the absorbed product), the exponentials' sums (768), the
    division folded into O's 128 elements (through P c_kv, then W_UV)."""
    f = tmp_path / "mla.py"
    f.write_text(MLA)
    r = validated_json(capsys, str(f))
    assert r["classical"]["totals"]["flops_matrix"] == 1_069_056
    assert r["totals"]["flops_matrix"] == 102_400
    assert r["totals"]["flops_vector"] == 1_344
    assert r["classical"]["totals"]["flops_vector"] == 1_536  # scale and division at all 256 scores
    kinds = [x["kind"] for x in r["rewrites"]]
    assert kinds.count(SPLIT) == 2 and kinds.count("reassociated") == 2, kinds
    words = {x["what"] for x in r["rewrites"] if x["kind"] == SPLIT}
    assert words == {"slice_scatter_1 read per copied part", "linear computed per consumer's part"}


def test_the_split_and_reassociated_program_computes_what_was_written(tmp_path, capsys):
    f = tmp_path / "mla.py"
    f.write_text(MLA)
    m = _lifted(capsys, f)
    priced, rewrites = catalogue_module(m)
    assert priced is not m and sum(r.kind == SPLIT for r in rewrites) == 2
    _same_outputs(m, priced)
    _same_outputs(m, priced, seed=1)


def test_a_contraction_over_a_concatenation_is_split_per_part(tmp_path, capsys):
    """`torch.cat([x @ w, z], 1) @ v`, x 64 x 32, w 32 x 48, z 64 x 16, v 64 x 1 (f32): as written
    2 * 64 * 32 * 48 + 2 * 64 * 64 = 204,800 matrix FLOPs. The concatenation is two copies; split
    per part, `x @ (w @ v[:48])` is 2 * 32 * 48 + 2 * 64 * 32 = 7,168 and `z @ v[48:]` 2 * 64 * 16
    = 2,048: 9,216."""
    f = tmp_path / "cat.py"
    f.write_text(forward_program(
        "x, w, z, v", "return torch.cat([x @ w, z], 1) @ v",
        "torch.randn(64, 32), torch.randn(32, 48), torch.randn(64, 16), torch.randn(64, 1)"))
    r = validated_json(capsys, str(f))
    assert r["classical"]["totals"]["flops_matrix"] == 204_800
    assert r["totals"]["flops_matrix"] == 9_216
    assert [x["kind"] for x in r["rewrites"]].count(SPLIT) == 1
    m = _lifted(capsys, f)
    priced, _ = catalogue_module(m)
    _same_outputs(m, priced)


def test_a_producer_read_in_two_parts_is_computed_per_part(tmp_path, capsys):
    """`h = x @ w` (x 64 x 32, w 32 x 96), `a, b = h.split(48, 1)`, outputs `a @ u` and `b @ v` (u, v
    48 x 1): as written 2 * 64 * 32 * 96 + 2 * 2 * 64 * 48 = 405,504. Per part, each is
    `x @ (w_part @ u)`: 2 * (2 * 32 * 48 + 2 * 64 * 32) = 14,336."""
    f = tmp_path / "halves.py"
    f.write_text(forward_program(
        "x, w, u, v", "a, b = (x @ w).split(48, 1)\nreturn a @ u, b @ v",
        "torch.randn(64, 32), torch.randn(32, 96), torch.randn(48, 1), torch.randn(48, 1)"))
    r = validated_json(capsys, str(f))
    assert r["classical"]["totals"]["flops_matrix"] == 405_504
    assert r["totals"]["flops_matrix"] == 14_336
    m = _lifted(capsys, f)
    (g,) = module_graphs(m)
    assert [s.producer.output_name for s in split_matches(g)] == ["mm"]
    priced, _ = catalogue_module(m)
    _same_outputs(m, priced)


def test_a_split_no_cheaper_order_uses_is_not_kept(tmp_path, capsys):
    """A fused projection whose two halves are multiplied element by element (`a * b`, a bilinear
    gate): the split matches (one product node reads two disjoint halves), but no order of
    `(x w1) * (x w2)` is cheaper, so the default model prices the program as written and reports no
    split."""
    f = tmp_path / "bilinear.py"
    f.write_text(forward_program("x, w", "a, b = (x @ w).chunk(2, -1)\nreturn a * b",
                                 "torch.randn(64, 32), torch.randn(32, 96)"))
    r = validated_json(capsys, str(f))
    assert SPLIT not in [x["kind"] for x in r["rewrites"]]
    assert r["totals"] == r["classical"]["totals"]
    m = _lifted(capsys, f)
    (g,) = module_graphs(m)
    assert split_matches(g)  # it matches; `catalogue.py` drops it
    priced, rewrites = catalogue_module(m)
    assert priced is m and rewrites == []


def test_a_read_across_a_region_no_copy_wrote_is_not_forwarded(tmp_path, capsys):
    """`y = zeros(64, 48); y[:, :32] = x @ w; return y @ v`: the columns 32..47 are the fill's, not
    a copy's, so the read of `y` is not split (narrowing drops the zero part on its own)."""
    f = tmp_path / "fill.py"
    f.write_text(forward_program("x, w, v", "y = torch.zeros(64, 48)\ny[:, :32] = x @ w\nreturn y @ v",
                                 "torch.randn(64, 16), torch.randn(16, 32), torch.randn(48, 1)"))
    m = _lifted(capsys, f)
    (g,) = module_graphs(m)
    assert not [x for x in forward_matches(g) if x.var is not None]
    applied = split_parts(g)
    g.verify()
    assert all("read per copied part" not in w for w in applied.words.values())


def test_a_sum_over_a_biased_product_is_split_per_term(tmp_path, capsys):
    """`(x @ w + b).sum(0)`, x 64 x 32, w 32 x 48 (f32): as written the product is 2 * 64 * 32 * 48 =
    196,608 matrix FLOPs and the bias add sits between it and the sum, which blocked the association
    entry. Split per term (distributivity), `sum_i (x w)_ij + 64 b_j`, and the first term is
    `x.sum(0) @ w`: 2 * 32 * 48 = 3,072 (an audit of stop 44 at 4096 bf16: 138.9 -> 20.04 us)."""
    f = tmp_path / "sum_bias.py"
    f.write_text(forward_program("x, w, b", "return (x @ w + b).sum(0)",
                                 "torch.randn(64, 32), torch.randn(32, 48), torch.randn(48)"))
    r = validated_json(capsys, str(f))
    assert r["classical"]["totals"]["flops_matrix"] == 196_608
    assert r["totals"]["flops_matrix"] == 3_072
    assert [x["words"] for x in r["rewrites"]][:2] == ["split per part: sum_1 per term of add",
                                                       "reassociated: (sum(x) * w)"]
    m = _lifted(capsys, f)
    priced, _ = catalogue_module(m)
    _same_outputs(m, priced)


LINEAR_MEAN = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 48)
        self.p = nn.Parameter(torch.randn(48))

    def forward(self, x):
        return (self.fc(x) - self.p).mean(1)


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return []
'''


LINEAR_SCALED = LINEAR_MEAN.replace("return (self.fc(x) - self.p).mean(1)",
                                    "return (self.fc(x) * 0.5).sum(1) + (-self.fc(x)).sum(1) / 3.0")


CONV_SUM = LINEAR_MEAN.replace("self.fc = nn.Linear(32, 48)\n        self.p = nn.Parameter(torch.randn(48))",
                               "self.c = nn.Conv2d(4, 6, 3, padding=1)").replace(
    "return (self.fc(x) - self.p).mean(1)", "return self.c(x).sum((2, 3))").replace(
    "torch.randn(64, 32)", "torch.randn(2, 4, 8, 8)")


@pytest.mark.parametrize("name,text,written,priced,splits", [
    # `(fc(x) - p).mean(1)`, nn.Linear(32, 48) with its bias, x 64 x 32 (KernelBench level 2's
    # Gemm_Subtract_GlobalAvgPool): the layer's products accumulate onto the copied bias, and the
    # mean reads their difference with p. Split per term, the products' sum is `x @ w.sum(0)`: 2 * 64
    # * 32 = 4,096 matrix FLOPs, not 2 * 64 * 32 * 48 = 196,608; the bias and p are summed alone, and
    # the bias copy becomes a zero fill. (KernelBench's 51 at 2048 x 8192 x 8192 f32: 555.6 -> 120.2
    # us on H100_SXM, memory-bound.)
    ("linear_mean", LINEAR_MEAN, 196_608, 4_096, 1),
    # `(fc(x) * 0.5).sum(1)` and `(-fc(x)).sum(1)`: the scale (a literal factor, a negation) between
    # the layer and the sum is carried into each term's sum, and both products' sums are `x @
    # w.sum(0)` (4,096 matrix FLOPs each, against 196,608 each as written)
    ("linear_scaled", LINEAR_SCALED, 2 * 196_608, 2 * 4_096, 2),
    # `conv(x).sum((2, 3))`, Conv2d(4, 6, 3, padding=1) with its bias, x 2 x 4 x 8 x 8: the taps
    # accumulate onto the copied bias under the padding's guards (22 of the 24 (position, tap) pairs
    # per axis are inside): 2 * 2 * 6 * 4 * 22^2 = 46,464 matrix FLOPs as written. Split per term,
    # the taps' sum over positions is x's box sums per (channel, tap) against the filter: 2 * 2 * 6 *
    # 4 * 9 = 864 (KernelBench level 2's conv + global pools, with a bias: 76.52 -> 10.37 us at 16 x
    # 256 x 64^2 bf16 on H100_SXM)
    ("conv_sum", CONV_SUM, 46_464, 864, 1),
])
def test_a_sum_over_a_linear_layer_is_split_per_term(tmp_path, capsys, name, text, written, priced, splits):
    f = tmp_path / f"{name}.py"
    f.write_text(text)
    r = validated_json(capsys, str(f))
    assert r["classical"]["totals"]["flops_matrix"] == written
    assert r["totals"]["flops_matrix"] == priced
    m = _lifted(capsys, f)
    prog, rewrites = catalogue_module(m)
    assert sum(w.kind == SPLIT for w in rewrites) == splits
    _same_outputs(m, prog)
    _same_outputs(m, prog, seed=1)


def test_a_product_of_a_biased_product_is_split_per_term(tmp_path, capsys):
    """`(a @ b + c) @ v`, a, b, c 256 x 256, v 256 x 1 (f32): as written 2 * 256^3 + 2 * 256^2 =
    33,685,504 matrix FLOPs; split per term of the sum the product reads, `a @ (b @ v) + c @ v` is
    3 x 2 * 256^2 = 393,216."""
    f = tmp_path / "bias_chain.py"
    f.write_text(forward_program("a, b, c, v", "return (a @ b + c) @ v",
                                 "torch.randn(256, 256), torch.randn(256, 256), torch.randn(256, 256), "
                                 "torch.randn(256, 1)"))
    r = validated_json(capsys, str(f))
    assert r["classical"]["totals"]["flops_matrix"] == 33_685_504
    assert r["totals"]["flops_matrix"] == 393_216
    assert [x["words"] for x in r["rewrites"]] == ["split per part: mm_1 per term of add",
                                                   "reassociated: (a * (b * v))"]
    m = _lifted(capsys, f)
    priced, _ = catalogue_module(m)
    _same_outputs(m, priced)


def test_a_split_per_term_that_adds_work_is_not_kept(tmp_path, capsys):
    """`(p @ v + x) @ w`, p 64 x 64, v and x 64 x 48 (f32). With w 48 x 32, split per term `p (v w)`
    saves 131,072 FLOPs of `(p v) w` but `x @ w` costs 196,608 more than the one product as written
    (589,824 matrix FLOPs): the split is not kept. With w 48 x 1 it is: `p (v w) + x w` is 2 * 64 * 48
    + 2 * 64 * 64 + 2 * 64 * 48 = 20,480 against 399,360."""
    for cols, written, priced, kept in ((32, 589_824, 589_824, 0), (1, 399_360, 20_480, 1)):
        f = tmp_path / f"residual_{cols}.py"
        f.write_text(forward_program("p, v, x, w", "return (p @ v + x) @ w",
                                     f"torch.randn(64, 64), torch.randn(64, 48), torch.randn(64, 48), "
                                     f"torch.randn(48, {cols})"))
        r = validated_json(capsys, str(f))
        assert r["classical"]["totals"]["flops_matrix"] == written
        assert r["totals"]["flops_matrix"] == priced
        assert [x["kind"] for x in r["rewrites"]].count(SPLIT) == kept



def test_a_product_two_sums_read_is_computed_for_each(tmp_path, capsys):
    """`y = x @ w; y.sum(0) + y.sum(1)`, x 48 x 32, w 32 x 48 (f32): y is read whole by two sums, so
    neither sum's tree reached the product: 2 * 48 * 32 * 48 = 147,456 matrix FLOPs as written. Each
    sum gets a copy of the product, which its tree then reassociates: `x.sum(0) @ w` and `x @
    w.sum(1)`, 2 * 32 * 48 each. With one sum only `y` returned too, the copy would add work: not kept."""
    f = tmp_path / "two_sums.py"
    f.write_text(forward_program("x, w", "y = x @ w\nreturn y.sum(0) + y.sum(1)",
                                 "torch.randn(48, 32), torch.randn(32, 48)"))
    r = validated_json(capsys, str(f))
    assert r["classical"]["totals"]["flops_matrix"] == 147_456
    assert r["totals"]["flops_matrix"] == 2 * 2 * 32 * 48
    assert [x["words"] for x in r["rewrites"]] == ["split per part: mm computed per consumer",
                                                   "reassociated: (sum(x) * w)", "reassociated: (x * sum(w))"]
    m = _lifted(capsys, f)
    priced, _ = catalogue_module(m)
    _same_outputs(m, priced)
    g = tmp_path / "sum_and_y.py"
    g.write_text(forward_program("x, w", "y = x @ w\nreturn y, y.sum(0)",
                                 "torch.randn(48, 32), torch.randn(32, 48)"))
    r = validated_json(capsys, str(g))
    assert r["totals"]["flops_matrix"] == 147_456
    assert not any(x["kind"] == SPLIT for x in r["rewrites"])


OVERWRITTEN_TERM = """\
kernel k(x: f32[64, 32] input, w: f32[32, 48] input, b: f32[48] input, out: f32[48] output):
    local bb: f32[48]
    local mm: f32[64, 48]
    local t: f32[64, 48]
    for j in range(48):
        bb[j] = b[j]
    for i in range(64):
        for j in range(48):
            mm[i, j] = 0.0
            for k in range(32):
                mm[i, j] += x[i, k] * w[k, j]
    for i in range(64):
        for j in range(48):
            t[i, j] = mm[i, j] + bb[j]
    for j in range(48):
        bb[j] = bb[j] * 2.0
    for j in range(48):
        out[j] = 0.0
        for i in range(64):
            out[j] += t[i, j]
"""


def test_a_term_overwritten_before_the_sum_is_not_split():
    """`t = x @ w + bb`, then `bb` doubled, then `sum_i t`: the sum per term would read the doubled
    `bb`, so the sum is not split (the product stays as written) and the priced program computes
    what was written."""
    m = kernels_to_module(parse_kernels(OVERWRITTEN_TERM, "overwritten.loop"))
    LiftEinsumPass().apply(Context(), m)
    (g,) = module_graphs(m)
    assert split_parts(g.clone()).built == {}
    priced, rewrites = catalogue_module(m)
    assert not any(r.kind == SPLIT for r in rewrites)
    _same_outputs(m, priced)
