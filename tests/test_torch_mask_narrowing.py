"""Causal masks in translated PyTorch programs reach needed-work narrowing: index-valued tensors (arange,
its comparisons, tril's iota) are inlined as affine comparisons, and a constant 0/1 mask buffer equal to
a triangle is read as the comparison of its indices. Numbers are derived by hand below."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
from translated import forward_program

torch = pytest.importorskip("torch")

from solar_compiler.driver import main  # noqa: E402
from solar_compiler.frontends.model_file import load_model_file  # noqa: E402
from solar_compiler.frontends.torch.capture import capture  # noqa: E402
from solar_compiler.frontends.torch.masks import recognise  # noqa: E402
from solar_compiler.frontends.torch.translate import translate_program  # noqa: E402
from solar_compiler.frontends.torch.validation import run_samples  # noqa: E402
from solar_compiler.loopir.ast import reads, statements  # noqa: E402
from solar_compiler.text.printer import print_kernel  # noqa: E402

H100_DRAM = 3.35e12


def report(capsys, path: str) -> dict:
    rc = main([path, "--translate", "--no-cache", "--roofline=all", "--hw", "H100_SXM", "--format=json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    r = json.loads(out.out)
    assert r["validation"]["validated"] and r["narrowed"]
    return r


def test_recognise_bands():
    # (hi, lo): ones exactly where lo <= j - i <= hi, None for a side at the array's edge
    n = 5
    ones = np.ones((n, n))
    assert recognise(np.tril(ones)) == (0, None)                 # i >= j
    assert recognise(np.tril(ones, -1)) == (-1, None)            # i >= j + 1
    assert recognise(np.triu(ones)) == (None, 0)                 # i <= j
    assert recognise(np.triu(ones, 2).astype(bool)) == (None, 2)   # i <= j - 2
    assert recognise(np.tril(np.ones((3, 6)), 2)) == (2, None)   # non-square: i >= j - 2
    assert recognise(ones) is None and recognise(np.zeros((n, n))) is None
    assert recognise(np.tril(ones) * 2) is None                  # not 0/1
    assert recognise(np.tril(ones) - np.tril(ones, -2)) == (0, -1)  # a band: j <= i <= j + 1
    assert recognise(np.eye(n)) == (0, 0)                        # the identity: i == j
    checker = np.indices((n, n)).sum(0) % 2
    assert recognise(checker) is None                            # not a band


def test_tril_matmul_narrows_to_the_triangles(capsys):
    """tril(tril(a) @ tril(b)): only i >= k >= j contributes; N = 256."""
    n = 256
    r = report(capsys, "examples/torch/tril_matmul.py")
    t = r["totals"]
    # as written: one full mm (2 N^3) and three selects of an inlined compare (N^2 points each); the
    # compare is the same in all three (computed once: analysis/vector_work.py), so 3 + 1 per point
    assert (t["flops_matrix_as_written"], t["flops_vector_as_written"]) == (2 * n**3, (3 + 1) * n * n)
    # needed: the triples j <= k <= i, C(N + 2, 3) of them; the selects resolve to copies / zeros
    triples = (n + 2) * (n + 1) * n // 6
    assert triples == 2_829_056
    assert (t["flops"], t["flops_matrix"], t["flops_vector"]) == (2 * triples, 2 * triples, 0)
    assert t["flops"] < t["flops_as_written"]
    # compulsory: a and b on their lower triangles, the output written whole
    tri = n * (n + 1) // 2 * 4
    assert t["bytes_fused"] == 2 * tri + n * n * 4 == 525_312
    assert t["bytes_fused_as_written"] == 3 * n * n * 4
    b = r["bounds"]["H100_SXM"]
    assert b["fused_bottleneck"] == "memory"
    assert b["fused_s"] == pytest.approx(525_312 / H100_DRAM, rel=1e-3)


@pytest.mark.parametrize("name,buffer,block", [("causal_attention_manual", "mask", 64),
                                               ("causal_attention_buffer_mask", "bias", 128)])
def test_causal_attention_narrows_to_the_lower_triangle(capsys, name, buffer, block):
    """B=4, T=64, C=128, 4 heads of D=32. Scores (QK^T), their scaling, the softmax row max and sum
    are needed only for j <= i: 2080 = 64*65/2 pairs per head. The masked probabilities are known
    zeros (exp(-inf - m) = 0, then 0 / sum = 0: a row sum with its diagonal entry is non-zero), so
    they become constant stores (no FLOPs) and P @ V skips them: it too runs on 2080 pairs."""
    b_, t_, c_, h, d = 4, 64, 128, 4, 32
    bh, tri, full = b_ * h, t_ * (t_ + 1) // 2, t_ * t_
    assert tri == 2080
    r = report(capsys, f"examples/torch/{name}.py")
    assert r["validation"]["notes"] == [
        f"mask buffer '{buffer}' [1, 1, {block}, {block}] recognised as affine region i >= j "
        "(i, j: dims 2, 3); computed from indices, not read"]
    t = r["totals"]
    qkv, proj = 2 * b_ * t_ * 3 * c_ * c_, 2 * b_ * t_ * c_ * c_
    assert t["flops_matrix_as_written"] == qkv + 2 * (2 * bh * full * d) + proj == 41_943_040
    # the fewest vector operations (analysis/vector_work.py): scale 1, select 1, max 1, sum (sub, exp,
    # +=) 3 and the output's division 1 per score (its exp(s - max) is the sum's), and the compare
    # i >= j once per (i, j), not per head (10 per score counted literally: 655,360)
    assert t["flops_vector_as_written"] == (1 + 1 + 1 + 3 + 1) * bh * full + full == 462_848
    assert t["flops_matrix"] == qkv + 2 * (2 * bh * tri * d) + proj == 37_814_272
    assert r["classical"]["totals"]["flops_vector"] == (1 + 1 + 3 + 1) * bh * tri == 199_680
    # the default model reassociates the scores' tree: the scale folds into the QK^T contraction
    assert t["flops_vector"] == (1 + 3 + 1) * bh * tri == 166_400
    assert t["flops"] < t["flops_as_written"]
    # compulsory: x, the four linear parameters and the output; the mask buffer is not read
    compulsory = 4 * (b_ * t_ * c_ + 3 * c_ * c_ + 3 * c_ + c_ * c_ + c_ + b_ * t_ * c_)
    assert t["bytes_fused"] == t["bytes_fused_as_written"] == compulsory == 526_336
    b = r["bounds"]["H100_SXM"]
    assert b["fused_bottleneck"] == "memory"
    assert b["fused_s"] == pytest.approx(compulsory / H100_DRAM, rel=1e-3)


def _model(tmp_path: Path, init: str, forward: str) -> str:
    src = textwrap.dedent("""\
        import torch
        import torch.nn as nn
        T = 16
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
        {init}
            def forward(self, x):
        {forward}
        def get_inputs():
            return [torch.randn(2, T, T)]
        def get_init_inputs():
            return []
        """).format(init=textwrap.indent(textwrap.dedent(init), " " * 8),
                    forward=textwrap.indent(textwrap.dedent(forward), " " * 8))
    p = tmp_path / "m.py"
    p.write_text(src)
    return str(p)


def _translate(path: str):
    spec = load_model_file(path)
    prog = capture(spec)
    tt = translate_program(prog)
    assert run_samples(spec, prog, tt, "eval")["validated"]
    return tt


def _read_tensors(tt) -> set[str]:
    return {r.tensor for c in statements(tt.kernel) for r in reads(c.stmt.value)}


def test_upper_mask_buffer_with_offset(tmp_path):
    """A bool triu(.., 1) buffer (the positions to hide) is `i <= j - 1`; masked_fill reads it inline."""
    tt = _translate(_model(tmp_path, 'self.register_buffer("hide", torch.triu(torch.ones(T, T), 1).bool())',
                           'return x.masked_fill(self.hide, 0.0)'))
    assert tt.notes == ["mask buffer 'hide' [16, 16] recognised as affine region i <= j - 1 "
                        "(i, j: dims 0, 1); computed from indices, not read"]
    assert _read_tensors(tt) == {"x"}
    assert print_kernel(tt.kernel).splitlines()[-1].strip().startswith(
        "where[i0, i1, i2] = 0.0 if i1 <= i2 - 1 else x[i0, i1, i2]")


def test_a_mask_buffer_is_read_when_the_weights_are_too_large_to_build(tmp_path, monkeypatch):
    """The buffers' values come from a build with the parameters on the meta device: a model whose
    weights exceed the real-run limit (here set below them: GPT-Neo 2.7B's are 10 GB) still has its
    mask recognised, as the same model below the limit does. A buffer computed from a parameter has
    no value that way, and stays data."""
    from solar_compiler.frontends.torch import masks

    monkeypatch.setattr(masks, "REAL_RUN_LIMIT_BYTES", 20_000)  # the buffers 1 KB, the weights 256 KB
    init = """\
        self.w = nn.Parameter(torch.randn(256, 256))
        self.register_buffer("hide", torch.triu(torch.ones(T, T), 1).bool())
        self.register_buffer("copy", self.w[:T, :T].detach().clone())"""
    forward = "return (x + self.copy).masked_fill(self.hide, 0.0) @ self.w[:T, :T]"
    tt = _translate(_model(tmp_path, init, forward))
    assert tt.notes == ["mask buffer 'hide' [16, 16] recognised as affine region i <= j - 1 "
                        "(i, j: dims 0, 1); computed from indices, not read"]
    assert _read_tensors(tt) >= {"copy"} and "hide" not in _read_tensors(tt)


def test_parameter_mask_is_data(tmp_path):
    """A frozen nn.Parameter holding a triangle is still a parameter (its values may be trained): read."""
    init = "self.m = nn.Parameter(torch.tril(torch.ones(T, T)), requires_grad=False)"
    tt = _translate(_model(tmp_path, init, "return x * self.m"))
    assert tt.notes == [] and _read_tensors(tt) == {"x", "m"}


def test_seed_dependent_buffer_is_data(tmp_path):
    """A buffer drawn at construction is not a fixed mask, even when this draw happens to be 0/1."""
    tt = _translate(_model(tmp_path, 'self.register_buffer("r", torch.randint(0, 2, (T, T)).float())',
                           "return x * self.r"))
    assert tt.notes == [] and _read_tensors(tt) == {"x", "r"}


def test_arange_compare_is_inlined(tmp_path):
    """A causal mask built in forward from aranges: no tensor for the iota or the comparison."""
    tt = _translate(_model(tmp_path, "", """\
        i = torch.arange(T)
        keep = i[:, None] >= i[None, :] + 1
        return torch.where(keep, x, torch.zeros_like(x))"""))
    assert [t.name for t in tt.kernel.tensors if t.role == "local"] == []
    (ctx,) = statements(tt.kernel)
    assert _read_tensors(tt) == {"x"} and ctx.stmt.target == tt.outputs[0]
    assert print_kernel(tt.kernel).splitlines()[-1].strip().startswith(
        "where[i0, i1, i2] = x[i0, i1, i2] if i1 >= i2 + 1 else 0.0")


# ---- constant buffers beyond 0/1 bands: one value, block masks, two values of any kind --------------
def test_recognise_constant_block_bands_and_values():
    from solar_compiler.frontends.torch.masks import recognise_constant

    n = 8
    # ((br, bc), hi, lo, inside, outside): inside exactly where lo <= j // bc - i // br <= hi
    assert recognise_constant(np.tril(np.ones((n, n)))) == ((1, 1), 0, None, 1.0, 0.0)
    assert recognise_constant(np.kron(np.eye(4), np.ones((2, 2)))) == ((2, 2), 0, 0, 1.0, 0.0)  # block-diag
    assert recognise_constant(np.kron(np.tril(np.ones((2, 2))), np.ones((4, 4)))) == \
        ((4, 4), 0, None, 1.0, 0.0)                                           # block-causal
    assert recognise_constant(np.kron(np.eye(2), np.ones((4, 2)))) == ((4, 2), 0, 0, 1.0, 0.0)  # 8 x 4 blocks
    assert recognise_constant(np.kron(np.fliplr(np.eye(3)), np.ones((2, 2)))) is None  # anti-diagonal
    # an additive mask: -inf strictly above the diagonal, 0 elsewhere (the rarer value is tried first)
    assert recognise_constant(np.triu(np.full((n, n), -np.inf), 1)) == ((1, 1), None, 1, -np.inf, 0.0)
    assert recognise_constant(3 * np.eye(n)) == ((1, 1), 0, 0, 3.0, 0.0)     # a scaled identity
    # block-diagonal 0 / -inf: only the 0s form a block band (the -infs are two sides of it)
    blocks = np.kron(np.eye(4), np.ones((2, 2))) > 0
    assert recognise_constant(np.where(blocks, 0.0, -np.inf)) == ((2, 2), 0, 0, 0.0, -np.inf)
    assert recognise_constant(np.indices((n, n)).sum(0) % 2) is None          # a checkerboard
    assert recognise_constant(np.zeros((n, n))) is None                      # one value: not a region
    assert recognise_constant(np.arange(n * n).reshape(n, n) % 3) is None    # three values


_ATTN = """\
import math
import torch
import torch.nn as nn
T = 64
D = 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mask", {mask})

    def forward(self, q, k, v):
        s = q @ k.transpose(-1, -2) / math.sqrt(D)
        s = {apply}
        return torch.softmax(s, -1) @ v


def get_inputs():
    return [torch.randn(2, T, D), torch.randn(2, T, D), torch.randn(2, T, D)]


def get_init_inputs():
    return []
"""

_ZEROS = """\
import torch
import torch.nn as nn
N = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("Z", torch.zeros(N, N))

    def forward(self, x):
        return x @ self.Z + x


def get_inputs():
    return [torch.randn(N, N)]


def get_init_inputs():
    return []
"""


def test_a_zeros_buffer_is_a_literal_and_its_products_are_not_needed(tmp_path, capsys):
    """`x @ Z + x`, Z a zeros buffer, N = 64: the products are all zero (narrowing drops them), and the
    add of their zero to x is no operation: a copy; x read and the output written once."""
    p = tmp_path / "zeros_mm.py"
    p.write_text(_ZEROS)
    r = report(capsys, str(p))
    assert r["validation"]["notes"] == ["constant buffer 'Z' [64, 64] is 0 everywhere; a literal, not read"]
    t = r["totals"]
    assert (t["flops_matrix"], t["flops_vector"]) == (0, 0)
    assert t["bytes_fused"] == 2 * 64 * 64 * 4


@pytest.mark.parametrize("mask,apply,note,pairs", [
    # block-diagonal 0/1 (4 blocks of 16): 4 x 16 x 16 = 1,024 (i, j) pairs needed per batch
    ("torch.block_diag(*[torch.ones(16, 16)] * 4)", 's.masked_fill(self.mask == 0, float("-inf"))',
     "mask buffer 'mask' [64, 64] recognised as affine region i // 16 >= j // 16 and i // 16 <= j // 16 "
     "(i, j: dims 0, 1); computed from indices, not read", 4 * 16 * 16),
    # an additive causal mask, -inf above the diagonal: 64 x 65 / 2 = 2,080 pairs
    ('torch.triu(torch.full((T, T), float("-inf")), 1)', "s + self.mask",
     "constant buffer 'mask' [64, 64] recognised as affine region i <= j - 1 (-inf there, 0 elsewhere) "
     "(i, j: dims 0, 1); computed from indices, not read", 64 * 65 // 2),
    # block-causal 0/1 (blocks of 16): 10 of the 16 blocks, 2,560 pairs
    ("torch.kron(torch.tril(torch.ones(4, 4)), torch.ones(16, 16))",
     's.masked_fill(self.mask == 0, -math.inf)',
     "mask buffer 'mask' [64, 64] recognised as affine region i // 16 >= j // 16 (i, j: dims 0, 1); "
     "computed from indices, not read", 10 * 16 * 16),
])
def test_block_and_additive_mask_buffers_narrow_attention(tmp_path, capsys, mask, apply, note, pairs):
    """B = 2, T = 64, D = 32: QK^T and PV need 2 D FLOPs per needed (i, j) pair each."""
    p = tmp_path / "attn.py"
    p.write_text(_ATTN.format(mask=mask, apply=apply))
    r = report(capsys, str(p))
    assert r["validation"]["notes"] == [note]
    t = r["totals"]
    assert t["flops_matrix"] == 2 * 2 * (2 * 32 * pairs)
    assert t["flops_matrix_as_written"] == 2 * 2 * (2 * 32 * 64 * 64)
    assert t["bytes_fused"] == 4 * 2 * 64 * 32 * 4  # q, k, v in, the output written; the mask not read


# ---- masks computed in forward by index arithmetic beyond comparisons: //, %, |x| -------------------
_ARANGE_ATTN = """\
import torch
import torch.nn as nn
T = 64
D = 32


class Model(nn.Module):
    def forward(self, q, k, v):
        i = torch.arange(T)
        keep = {keep}
        s = (q @ k.transpose(-1, -2)).masked_fill(~keep, float("-inf"))
        return torch.softmax(s, -1) @ v


def get_inputs():
    return [torch.randn(2, T, D), torch.randn(2, T, D), torch.randn(2, T, D)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("keep,pairs", [
    # block-causal, blocks of 16: 10 of the 16 blocks (was priced whole: `i // 16` was stored)
    ("(i[:, None] // 16) >= (i[None, :] // 16)", 10 * 16 * 16),
    # a band |i - j| < 8: 15 per row less the 2 x (7 + ... + 1) cut at the edges (`abs` was stored)
    ("(i[:, None] - i[None, :]).abs() < 8", 64 * 15 - 2 * 28),
    # causal and every 4th key: row i keeps i // 4 + 1 keys, 4 x (0 + ... + 15) + 64 in all
    ("((i[:, None] - i[None, :]) % 4 == 0) & (i[:, None] >= i[None, :])", 4 * 120 + 64),
    # |i - j| <= 4 through max(i - j, j - i): the same split as abs, 64 x 9 - 2 x 10
    ("torch.maximum(i[:, None] - i[None, :], i[None, :] - i[:, None]) <= 4", 64 * 9 - 2 * 10),
])
def test_index_arithmetic_masks_narrow_attention(tmp_path, capsys, keep, pairs):
    """B = 2, T = 64, D = 32, the mask built in forward from an arange: QK^T and PV need 2 D FLOPs
    per needed (i, j) pair each, as for the mask buffers above."""
    p = tmp_path / "attn.py"
    p.write_text(_ARANGE_ATTN.format(keep=keep))
    r = report(capsys, str(p))
    t = r["totals"]
    assert t["flops_matrix"] == 2 * 2 * (2 * 32 * pairs)
    assert t["flops_matrix_as_written"] == 2 * 2 * (2 * 32 * 64 * 64)
    assert t["bytes_fused"] == 4 * 2 * 64 * 32 * 4  # no mask tensor: it is computed from indices


def test_index_arithmetic_folds_to_affine_comparisons():
    """`fold` makes `i // 16` and `i % 4` index values, and splits order comparisons of an integer
    |x|, max or min of index values into comparisons of the operands; one of a tensor value stays."""
    from solar_compiler.frontends.builder.exprs import fold
    from solar_compiler.loopir.affine import AffExpr
    from solar_compiler.loopir.ast import Binary, Cmp, Const, IndexValue, Read, Unary

    i, j = AffExpr.var("i"), AffExpr.var("j")
    div = fold(Binary("floordiv", IndexValue(i), Const(16, "i64"), "i64"))
    assert div == IndexValue(i // 16)
    mod = fold(Binary("mod", IndexValue(i - j), Const(4, "i64"), "i64"))
    assert mod == IndexValue((i - j) % 4)
    band = fold(Cmp("lt", Unary("abs", IndexValue(i - j), "i64"), Const(8, "i64"), "bool"))
    assert band == Binary("and", Cmp("lt", IndexValue(i - j), Const(8, "i64"), "bool"),
                          Cmp("lt", IndexValue(j - i), Const(8, "i64"), "bool"), "bool")
    wide = fold(Cmp("gt", Const(2, "i64"), Binary("min", IndexValue(i), IndexValue(j), "i64"), "bool"))
    assert wide == Binary("or", Cmp("lt", IndexValue(i), Const(2, "i64"), "bool"),
                          Cmp("lt", IndexValue(j), Const(2, "i64"), "bool"), "bool")
    data = Cmp("lt", Unary("abs", Read("x", (i,), "i64"), "i64"), Const(8, "i64"), "bool")
    assert fold(data) == data  # a tensor's |x| is arithmetic: left as written


@pytest.mark.parametrize("n", [200, 512])
def test_an_identity_built_in_forward_is_computed_from_indices(tmp_path, capsys, n):
    """`x @ torch.eye(n)` in forward: torch decomposes eye into aranges of the narrowest unsigned
    dtype (uint8 up to 256, uint16 beyond: a capture error before) compared for equality, cast to
    the operand's dtype. The casts keep the indices (all in range), so the products by the zeros are
    not needed: no matrix FLOPs, x read and the output written (f32); one product by 1 per element."""
    p = tmp_path / "eye.py"
    p.write_text(forward_program("x", f"return x @ torch.eye({n}, dtype=x.dtype)", f"torch.randn(64, {n})"))
    r = report(capsys, str(p))
    t = r["totals"]
    assert (t["flops_matrix"], t["flops_vector"]) == (0, 64 * n)
    assert t["flops_matrix_as_written"] == 2 * 64 * n * n
    assert t["bytes_fused"] == 2 * 64 * n * 4



# ---- buffers of any values that are zero outside a block band -----------------------------------------
_ZERO_OUTSIDE = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("B", {buffer})

    def forward(self, x):
        return x @ self.B


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("buffer,region,points,read", [
    # a diagonal of random values: one product per (i, j), the 64 diagonal values read
    ("torch.diag(torch.rand(64) + 1)", "i >= j and i <= j", 64 * 64, 64),
    # four random 16 x 16 blocks on the diagonal: 16 products per (i, j), the 4 blocks read
    ("torch.block_diag(*[torch.randn(16, 16) for _ in range(4)])",
     "i // 16 >= j // 16 and i // 16 <= j // 16", 64 * 64 * 16, 4 * 16 * 16),
    # a lower-triangular random matrix (TRMM): k >= j, 64 x 65 / 2 per row of x
    ("torch.tril(torch.randn(64, 64))", "i >= j", 64 * 64 * 65 // 2, 64 * 65 // 2),
])
def test_a_buffer_zero_outside_a_block_band_is_read_and_multiplied_there_only(
        tmp_path, capsys, buffer, region, points, read):
    """x @ B, B a buffer whose values change with the construction seed but whose zeros do not: the
    zeros are fixed when the model is built, so a kernel skips their products and never reads them
    (before: 2 x 64^3 matrix FLOPs and all of B read, as for any data)."""
    p = tmp_path / "zero_outside.py"
    p.write_text(_ZERO_OUTSIDE.format(buffer=buffer))
    r = report(capsys, str(p))
    assert r["validation"]["notes"] == [
        f"buffer 'B' [64, 64] is 0 outside affine region {region} (i, j: dims 0, 1); read there only"]
    t = r["totals"]
    assert t["flops_matrix"] == 2 * points
    assert t["flops_matrix_as_written"] == 2 * 64 ** 3
    assert t["bytes_fused"] == (2 * 64 * 64 + read) * 4
