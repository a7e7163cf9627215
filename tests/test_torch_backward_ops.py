"""Templates of the backward ATen ops a training step's joint graph leaves (docs/torch-frontend.md,
"Backward ops"): each is captured whole from a model whose forward calls the op directly, executed
on real data (get_inputs() and two fresh samples) and compared with torch; FLOP and byte counts of
small cases are derived by hand."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from test_torch_translate import check, model, stmts, write  # noqa: E402

from solar_compiler.loopir.domain import iteration_count  # noqa: E402
from solar_compiler.transforms.kernels import kernel_costs  # noqa: E402

A = "torch.ops.aten"
SDPA_BWD = "aten._scaled_dot_product_flash_attention_for_cpu_backward.default"


def ops(prog) -> list[str]:
    return [n.op for n in prog.nodes]


def test_activation_backwards_are_one_statement_each(tmp_path):
    fwd = f"""
    return ({A}.threshold_backward(g, x, 0.0), {A}.gelu_backward(g, x),
            {A}.gelu_backward(g, x, approximate="tanh"), {A}.sigmoid_backward(g, torch.sigmoid(x)),
            {A}.tanh_backward(g, torch.tanh(x)), {A}.silu_backward(g, x))
    """
    tt, prog, _ = check(model(tmp_path, fwd, "torch.randn(4, 6), torch.randn(4, 6) * 2", sig="g, x"))
    assert ops(prog) == ["aten.threshold_backward.default", "aten.gelu_backward.default",
                         "aten.gelu_backward.default", "aten.sigmoid.default",
                         "aten.sigmoid_backward.default", "aten.tanh.default", "aten.tanh_backward.default",
                         "aten.silu_backward.default"]
    assert len(stmts(tt)) == 8
    costs = kernel_costs(tt.kernel)
    # no contraction; bytes: g and x read once (2 x 24 f32), six 24-element outputs
    assert costs.flops_matrix == 0
    assert costs.compulsory_bytes == 4 * (2 * 24 + 6 * 24)


def test_threshold_backward_on_a_relu_boundary(tmp_path):
    """Elements exactly at the threshold get no gradient (torch: x <= threshold -> 0)."""
    fwd = f"return {A}.threshold_backward(g, torch.relu(x) - 0.5, 0.25)"
    check(model(tmp_path, fwd, "torch.randn(3, 5), torch.randn(3, 5)", sig="g, x"))


def test_softmax_backwards(tmp_path):
    fwd = f"""
    y = torch.softmax(x, dim=1)
    ly = torch.log_softmax(x, dim=-1)
    return ({A}._softmax_backward_data(g, y, 1, torch.float32),
            {A}._log_softmax_backward_data(g, ly, 2, torch.float32))
    """
    tt, prog, _ = check(model(tmp_path, fwd, "torch.randn(2, 5, 7), torch.randn(2, 5, 7) * 3", sig="g, x"))
    assert "aten._softmax_backward_data.default" in ops(prog)
    bwd = [g for g in tt.source_ops if "backward" in g["op"]]
    # row sum (init, +=) and the output statement
    assert [g["count"] for g in bwd] == [3, 3]
    rowsums = sorted(t.shape for t in tt.kernel.tensors if t.name.endswith("_rowsum"))
    assert rowsums == [(2, 5), (2, 7)]


def test_convolution_backward_gradients_are_contractions_with_the_forward_flops(tmp_path):
    """conv2d 3 -> 5 channels, 3x3, padding 1 on 6x7: valid (p, r) pairs per dim 3P - 2; each of the
    two gradients does the forward's 2 * N * O * C * 16 * 19 FLOPs; the bias gradient sums g."""
    fwd = f"return {A}.convolution_backward(g, x, w, [5], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, " \
          "[True, True, True])"
    inputs = "torch.randn(2, 5, 6, 7), torch.randn(2, 3, 6, 7), torch.randn(5, 3, 3, 3)"
    tt, prog, _ = check(model(tmp_path, fwd, inputs, sig="g, x, w"))
    assert ops(prog) == ["aten.convolution_backward.default"]
    acc = [s for s in stmts(tt) if s.stmt.kind == "+="]
    pairs = (3 * 6 - 2) * (3 * 7 - 2)
    assert [iteration_count(s) for s in acc] == [2 * 5 * 3 * pairs, 2 * 5 * 3 * pairs, 5 * 2 * 6 * 7]
    costs = kernel_costs(tt.kernel)
    assert costs.flops_matrix == 2 * (2 * 2 * 5 * 3 * pairs)
    # g, x, w read once; gx, gw, gb written once
    assert costs.compulsory_bytes == 4 * (2 * 5 * 42 + 2 * 3 * 42 + 5 * 27 + 2 * 3 * 42 + 5 * 27 + 5)


def test_convolution_backward_variants(tmp_path):
    """1-d stride/padding/dilation/groups without the bias, 2-d strided with an uneven last window,
    a transposed convolution, and an output_mask asking for the input gradient only."""
    fwd = f"""
    y1 = F.conv1d(x1, w1, None, 2, 2, 2, 2)
    a = {A}.convolution_backward(torch.ones_like(y1) * g1[:, :, :y1.shape[2]], x1, w1, None, [2], [2], [2],
                                 False, [0], 2, [True, True, False])
    y2 = F.conv2d(x2, w2, None, 2, 1)
    b = {A}.convolution_backward(y2 * 0.5, x2, w2, [6], [2, 2], [1, 1], [1, 1], False, [0, 0], 1,
                                 [True, True, True])
    yt = F.conv_transpose2d(x2, wt, None, 2, 1, 1, 2)
    t = {A}.convolution_backward(yt.sin(), x2, wt, [6], [2, 2], [1, 1], [1, 1], True, [1, 1], 2,
                                 [True, True, True])
    d = {A}.convolution_backward(y2, x2, w2, [6], [2, 2], [1, 1], [1, 1], False, [0, 0], 1,
                                 [True, False, False])
    return a[0], a[1], b[0], b[1], b[2], t[0], t[1], t[2], d[0]
    """
    inputs = ("torch.randn(2, 4, 11), torch.randn(6, 2, 3), torch.randn(2, 6, 11), torch.randn(2, 4, 7, 8), "
              "torch.randn(6, 4, 3, 3), torch.randn(4, 3, 3, 3)")
    tt, prog, _ = check(model(tmp_path, fwd, inputs, sig="x1, w1, g1, x2, w2, wt"))
    assert ops(prog).count("aten.convolution_backward.default") == 4


def test_layer_norm_backward(tmp_path):
    """Over the last two dims (N = 30), with and without affine; the weight and bias gradients
    reduce over the 3 rows."""
    fwd = f"""
    y, m, r = {A}.native_layer_norm(x, [5, 6], w, b, 1e-5)
    a = {A}.native_layer_norm_backward(g, x, [5, 6], m, r, w, b, [True, True, True])
    y2, m2, r2 = {A}.native_layer_norm(x, [6], None, None, 1e-5)
    c = {A}.native_layer_norm_backward(g, x, [6], m2, r2, None, None, [True, False, False])
    d = {A}.native_layer_norm_backward(g, x, [5, 6], m, r, w, b, [False, True, True])
    return a[0], a[1], a[2], c[0], d[1], d[2]
    """
    inputs = "torch.randn(3, 5, 6), torch.randn(3, 5, 6) * 2 + 1, torch.randn(5, 6), torch.randn(5, 6)"
    tt, prog, _ = check(model(tmp_path, fwd, inputs, sig="g, x, w, b"))
    assert ops(prog).count("aten.native_layer_norm_backward.default") == 3
    counts = [g["count"] for g in tt.source_ops if g["op"] == "aten.native_layer_norm_backward.default"]
    # input grad: 2 row sums (2 each) + output; weight and bias grads: 2 each
    assert counts == [2 * 2 + 1 + 2 * 2, 2 * 2 + 1, 2 * 2]


def test_batch_norm_backward_train_and_eval(tmp_path):
    fwd = f"""
    y, sm, si = {A}.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)[:3]
    tr = {A}.native_batch_norm_backward(g, x, w, rm, rv, sm, si, True, 1e-5, [True, True, True])
    ev = {A}.native_batch_norm_backward(g, x, w, rm, rv, None, None, False, 1e-5, [True, True, True])
    nw = {A}.native_batch_norm_backward(g, x, None, rm, rv, sm, si, True, 1e-5, [True, False, False])
    return tr[0], tr[1], tr[2], ev[0], ev[1], ev[2], nw[0]
    """
    inputs = ("torch.randn(4, 3, 5, 2), torch.randn(4, 3, 5, 2) * 2 + 1, torch.rand(3) + 0.5, "
              "torch.randn(3), torch.randn(3), torch.rand(3) + 0.5")
    tt, prog, _ = check(model(tmp_path, fwd, inputs, sig="g, x, w, b, rm, rv"))
    assert ops(prog).count("aten.native_batch_norm_backward.default") == 3


def test_embedding_dense_backward_is_a_scatter_add(tmp_path):
    """gw[I[b, t], d] += g[b, t, d] over 3 x 4 tokens, the padding row excluded."""
    fwd = f"""
    return ({A}.embedding_dense_backward(g, idx, 10, -1, False),
            {A}.embedding_dense_backward(g, idx, 10, 2, False))
    """
    tt, prog, _ = check(model(tmp_path, fwd, "torch.randn(3, 4, 6), torch.randint(0, 10, (3, 4))",
                              sig="g, idx"))
    scat = [s for s in stmts(tt) if s.stmt.kind == "+="]
    assert len(scat) == 2 and all(iteration_count(s) == 3 * 4 * 6 for s in scat)
    assert all(not hasattr(s.stmt.indices[0], "coeffs") for s in scat)  # a loaded row index


def test_max_pool_backward_scatters_to_the_argmax(tmp_path):
    fwd = f"""
    o, i = {A}.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1])
    a = {A}.max_pool2d_with_indices_backward(g, x, [3, 3], [2, 2], [1, 1], [1, 1], False, i)
    o3, i3 = {A}.max_pool3d_with_indices(x3, [2, 2, 2], [2, 2, 2])
    b = {A}.max_pool3d_with_indices_backward(o3.cos(), x3, [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1], False,
                                             i3)
    return a, b
    """
    inputs = "torch.randn(2, 3, 8, 7), torch.randn(2, 3, 4, 4), torch.randn(2, 2, 4, 6, 4)"
    tt, prog, _ = check(model(tmp_path, fwd, inputs, sig="x, g, x3"))
    assert "aten.max_pool2d_with_indices_backward.default" in ops(prog)


def test_loss_backwards(tmp_path):
    fwd = f"""
    return ({A}.mse_loss_backward(gs, a, b, 1), {A}.mse_loss_backward(gs, a, b, 2),
            {A}.mse_loss_backward(a, a, b, 0),
            {A}.nll_loss_backward(gs, a, t, None, 1, -100, torch.tensor(5.0)),
            {A}.nll_loss_backward(gs, a, t, w, 2, 1, gs),
            {A}.nll_loss_backward(gn, a, t, None, 0, -100, gs))
    """
    inputs = ("torch.randn(()), torch.randn(5, 4), torch.randn(5, 4), torch.tensor([0, 1, 3, 1, 2]), "
              "torch.rand(4), torch.randn(5)")
    tt, prog, _ = check(model(tmp_path, fwd, inputs, sig="gs, a, b, t, w, gn"))
    assert ops(prog).count("aten.nll_loss_backward.default") == 3


def test_sdpa_cpu_forward_with_logsumexp_and_its_backward(tmp_path):
    """The joint graph's forward op (output and row log-sum-exp) feeding the backward, causal."""
    fwd = f"""
    o, lse = {A}._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True, scale=0.6)
    return (o, lse) + {A}._scaled_dot_product_flash_attention_for_cpu_backward(go, q, k, v, o, lse, 0.0, True,
                                                                                 scale=0.6)
    """
    inputs = ", ".join(["torch.randn(2, 2, 6, 4)"] * 4)
    tt, prog, _ = check(model(tmp_path, fwd, inputs, sig="q, k, v, go"))
    assert ops(prog) == ["aten._scaled_dot_product_flash_attention_for_cpu.default", SDPA_BWD]


def test_sdpa_backward_cpu_variant(tmp_path):
    """Plain, causal, scaled and boolean/float-masked; lse is the forward's row log-sum-exp."""
    fwd = f"""
    s = (q @ k.transpose(-1, -2)) * 0.5
    lse = torch.logsumexp(s, -1)
    o = F.scaled_dot_product_attention(q, k, v)
    a = {A}._scaled_dot_product_flash_attention_for_cpu_backward(go, q, k, v, o, lse, 0.0, False)
    sq = (q @ q.transpose(-1, -2)) * 0.3
    cm = torch.ones(5, 5, dtype=torch.bool).tril()
    lc = torch.logsumexp(sq.masked_fill(~cm, float("-inf")), -1)
    oc = F.scaled_dot_product_attention(q, q, q, is_causal=True, scale=0.3)
    b = {A}._scaled_dot_product_flash_attention_for_cpu_backward(go, q, q, q, oc, lc, 0.0, True, scale=0.3)
    mf = torch.randn(5, 7) * 0.5
    lm = torch.logsumexp(s + mf, -1)
    om = F.scaled_dot_product_attention(q, k, v, attn_mask=mf)
    d = {A}._scaled_dot_product_flash_attention_for_cpu_backward(go, q, k, v, om, lm, 0.0, False,
                                                                   attn_mask=mf)
    return a + b + d
    """
    inputs = ("torch.randn(2, 3, 5, 4), torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 4), "
              "torch.randn(2, 3, 5, 4)")
    tt, prog, _ = check(model(tmp_path, fwd, inputs, sig="q, k, v, go"))
    assert ops(prog).count(SDPA_BWD) == 3


def test_sdpa_backward_flops_and_bytes(tmp_path):
    """B*H = 2, L = 5, M = 7, E = 4, the forward's output and lse given: five contractions of
    2 * (2 * 5 * 7 * 4) = 560 FLOPs each (the recomputed scores, dV, dP, dQ, dK) and the row dot
    D = sum_d dO * O, 2 * (2 * 5 * 4) = 80; bytes: q, k, v, dO, O, lse read and dQ, dK, dV written once."""
    src = f"""
    class Model(nn.Module):
        def forward(self, q, k, v, go, o, lse):
            return {A}._scaled_dot_product_flash_attention_for_cpu_backward(go, q, k, v, o, lse, 0.0, False)

    def get_inputs():
        q, go = torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
        k, v = torch.randn(1, 2, 7, 4), torch.randn(1, 2, 7, 4)
        o, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)
        return [q, k, v, go, o, lse]

    def get_init_inputs():
        return []
    """
    tt, prog, _ = check(write(tmp_path, src))
    assert ops(prog) == [SDPA_BWD]
    costs = kernel_costs(tt.kernel)
    assert costs.flops_matrix == 5 * 560 + 80
    assert costs.compulsory_bytes == 4 * (40 + 56 + 56 + 40 + 40 + 10 + 40 + 56 + 56)


@pytest.mark.parametrize("variant", ["flash", "efficient"])
def test_sdpa_backward_cuda_variants_share_the_template(tmp_path, variant):
    """The CUDA flash and efficient backward ops have no CPU kernel: the captured CPU node is rewritten
    into each variant's argument layout, translated, executed, and compared with torch's CPU backward."""
    import dataclasses

    import numpy as np

    from solar_compiler.executor.run import execute
    from solar_compiler.frontends.torch.translate import translate_program

    src = f"""
    class Model(nn.Module):
        def forward(self, q, k, v, go, o, lse):
            return {A}._scaled_dot_product_flash_attention_for_cpu_backward(go, q, k, v, o, lse, 0.0, True,
                                                                             scale=0.4)

    def get_inputs():
        q, k, v, go = (torch.randn(2, 2, 6, 4) for _ in range(4))
        o, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, is_causal=True,
                                                                             scale=0.4)
        return [q, k, v, go, o, lse]

    def get_init_inputs():
        return []
    """
    _, prog, _ = check(write(tmp_path, src))
    (node,) = prog.nodes
    go, q, k, v, o, lse = node.args[:6]
    if variant == "flash":
        op = "aten._scaled_dot_product_flash_attention_backward.default"
        args = (go, q, k, v, o, lse, None, None, 6, 6, 0.0, True, None, None)
        outs = node.all_outputs
    else:
        op = "aten._scaled_dot_product_efficient_attention_backward.default"
        args = (go, q, k, v, None, o, lse, None, None, 0.0, [True, True, True, False], True)
        outs = (*node.all_outputs, None)
    new = dataclasses.replace(node, op=op, args=args, kwargs={"scale": 0.4}, outputs=outs, all_outputs=outs)
    tt = translate_program(dataclasses.replace(prog, nodes=[new]))
    torch.manual_seed(3)
    qt, kt, vt, gt = (torch.randn(2, 2, 6, 4) for _ in range(4))
    ot, lt = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(qt, kt, vt, is_causal=True, scale=0.4)
    names = ("q", "k", "v", "go", "o", "lse")
    feed = {tt.inputs[n]: t.numpy() for n, t in zip(names, (qt, kt, vt, gt, ot, lt), strict=True)}
    got = execute(tt.kernel, feed)
    want = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(gt, qt, kt, vt, ot, lt, 0.0,
                                                                               True, scale=0.4)
    for name, ref in zip(tt.outputs, want, strict=True):
        np.testing.assert_allclose(got[name], ref.numpy(), rtol=1e-4, atol=1e-5)


def test_average_pool_backwards(tmp_path):
    """avg_pool2d with padding, ceil mode and both divisor rules (overlapping windows: a scatter);
    avg_pool3d; adaptive 2-d divisible (7 -> 1: a global average) and not (7x5 -> 3x2)."""
    fwd = f"""
    a = F.avg_pool2d(x, 3, 2, 1, ceil_mode=True)
    ga = {A}.avg_pool2d_backward(a.cos(), x, [3, 3], [2, 2], [1, 1], True, True, None)
    b = F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)
    gb = {A}.avg_pool2d_backward(b.sin(), x, [3, 3], [2, 2], [1, 1], False, False, None)
    gd = {A}.avg_pool2d_backward(b, x, [3, 3], [2, 2], [1, 1], False, True, 5)
    c3 = F.avg_pool3d(x3, 2)
    g3 = {A}.avg_pool3d_backward(c3 * 2, x3, [2, 2, 2], [], [0, 0, 0], False, True, None)
    gg = {A}._adaptive_avg_pool2d_backward(F.adaptive_avg_pool2d(x, 1) + 1, x)
    gn = {A}._adaptive_avg_pool2d_backward(F.adaptive_avg_pool2d(x, (3, 2)).exp(), x)
    return ga, gb, gd, g3, gg, gn
    """
    tt, prog, _ = check(model(tmp_path, fwd, "torch.randn(2, 3, 7, 5), torch.randn(1, 2, 4, 4, 6)",
                              sig="x, x3"))
    assert ops(prog).count("aten.avg_pool2d_backward.default") == 3
    assert ops(prog).count("aten._adaptive_avg_pool2d_backward.default") == 2


def test_global_average_pool_backward_counts(tmp_path):
    """ResNet's head: adaptive 8x8 -> 1x1 over N*C = 6 planes: one zero fill and one += statement of
    6 * 64 points (one division each); bytes: g (6) and x's shape only (x is not read: 0 bytes), gx."""
    fwd = f"return {A}._adaptive_avg_pool2d_backward(g, x)"
    tt, _, _ = check(model(tmp_path, fwd, "torch.randn(2, 3, 1, 1), torch.randn(2, 3, 8, 8)", sig="g, x"))
    acc = [s for s in stmts(tt) if s.stmt.kind == "+="]
    assert [iteration_count(s) for s in acc] == [6 * 64]
    costs = kernel_costs(tt.kernel)
    assert costs.flops_matrix == 0
    assert costs.compulsory_bytes == 4 * (6 + 6 * 64)


def test_more_activation_backwards(tmp_path):
    """Mish, hardtanh (ReLU6 bounds), leaky ReLU, ELU (from the input and from the result, SELU's
    constants), softplus (beta 2, threshold 3: both branches), hardswish, hardsigmoid."""
    fwd = f"""
    y = F.elu(x, 0.7)
    return ({A}.mish_backward(g, x), {A}.hardtanh_backward(g, x, 0.0, 6.0),
            {A}.leaky_relu_backward(g, x, 0.2, False), {A}.elu_backward(g, 0.7, 1.0, 1.0, False, x),
            {A}.elu_backward(g, 0.7, 1.0, 1.0, True, y),
            {A}.elu_backward(g, 1.6732632423543772, 1.0507009873554805, 1.0, False, x),
            {A}.softplus_backward(g, x, 2.0, 3.0), {A}.hardswish_backward(g, x),
            {A}.hardsigmoid_backward(g, x))
    """
    tt, prog, _ = check(model(tmp_path, fwd, "torch.randn(5, 8), torch.randn(5, 8) * 4", sig="g, x"))
    assert sum("backward" in op for op in ops(prog)) == 9
    assert len(stmts(tt)) == 10  # the elu forward, then one statement per backward op


def test_more_loss_backwards(tmp_path):
    fwd = f"""
    p = torch.sigmoid(a)
    t01 = torch.sigmoid(b)
    return ({A}.smooth_l1_loss_backward(gs, a, b, 1, 0.5), {A}.smooth_l1_loss_backward(gn, a, b, 0, 0.0),
            {A}.huber_loss_backward(gs, a, b, 2, 0.7),
            {A}.binary_cross_entropy_backward(gs, p, t01, None, 1),
            {A}.binary_cross_entropy_backward(gn, p, t01, w, 0))
    """
    inputs = "torch.randn(()), torch.randn(5, 4), torch.randn(5, 4), torch.randn(5, 4), torch.rand(5, 4)"
    tt, prog, _ = check(model(tmp_path, fwd, inputs, sig="gs, a, b, gn, w"))
    assert sum("backward" in op for op in ops(prog)) == 5


CONV_CASES = [  # (x shape, w shape, stride, padding, dilation, transposed, output_padding, groups)
    ((2, 4, 11), (6, 2, 3), [2], [2], [2], False, [0], 2),
    ((2, 3, 7, 8), (5, 3, 3, 3), [2, 2], [1, 1], [1, 1], False, [0, 0], 1),
    ((1, 6, 13, 9), (6, 2, 4, 3), [3, 2], [2, 1], [2, 1], False, [0, 0], 3),
    ((2, 4, 5, 6), (4, 3, 3, 3), [2, 2], [1, 1], [1, 1], True, [1, 1], 2),
    ((1, 2, 5, 6, 4), (3, 2, 2, 3, 3), [1, 2, 1], [0, 1, 1], [1, 1, 2], False, [0, 0, 0], 1),
]


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_convolution_backward_matrix_flops_are_twice_the_forward(tmp_path, case):
    """Input and weight gradients each do the forward's matrix FLOPs (2x in all); a first layer
    (no input gradient) 1x. Padding taps, uneven last windows, dilation, groups and transposition
    change the count of valid (p, r) pairs: it must be the same set in all three contractions."""
    xs, ws, s, p, d, t, op, g = CONV_CASES[case]
    conv = f"{A}.convolution(x, w, None, {s}, {p}, {d}, {t}, {op}, {g})"
    inputs = f"torch.randn{xs}, torch.randn{ws}"
    fwd_tt, _, _ = check(model(tmp_path, f"return {conv}", inputs, sig="x, w", name="fwd"))
    forward = kernel_costs(fwd_tt.kernel).flops_matrix
    assert forward > 0
    for mask, factor in (([True, True, False], 2), ([False, True, False], 1), ([True, False, False], 1)):
        body = f"""
        y = {conv}
        return {A}.convolution_backward(y.cos(), x, w, None, {s}, {p}, {d}, {t}, {op}, {g}, {mask})
        """
        tt, _, _ = check(model(tmp_path, body, inputs, sig="x, w", name="bwd"))
        assert kernel_costs(tt.kernel).flops_matrix == (1 + factor) * forward  # the forward's own + grads


def test_nearest_upsample_backwards(tmp_path):
    """Integer factors (a window sum: x2 in 2-d, x3 in 1-d) and a non-integer one (5 -> 7, a
    scatter), plain and exact."""
    fwd = f"""
    return ({A}.upsample_nearest2d_backward(g2, [8, 10], [2, 3, 4, 5]),
            {A}.upsample_nearest1d_backward(g1, [12], [2, 3, 4]),
            {A}.upsample_nearest2d_backward(g7, [7, 7], [2, 3, 5, 5]),
            {A}._upsample_nearest_exact2d_backward(g7, [7, 7], [2, 3, 5, 5]),
            {A}._upsample_nearest_exact2d_backward(g2, [8, 10], [2, 3, 4, 5]))
    """
    inputs = "torch.randn(2, 3, 8, 10), torch.randn(2, 3, 12), torch.randn(2, 3, 7, 7)"
    tt, prog, _ = check(model(tmp_path, fwd, inputs, sig="g2, g1, g7"))
    acc = [s for s in stmts(tt) if s.stmt.kind == "+="]
    # every output element of the gradient is read once: iterations = grad_output elements
    assert [iteration_count(s) for s in acc] == [480, 72, 294, 294, 480]


def test_group_norm_backward(tmp_path):
    """6 channels in 3 groups over 4x5 (M = 40 per group), with and without the affine weight."""
    fwd = f"""
    y, m, r = {A}.native_group_norm(x, w, b, 2, 6, 20, 3, 1e-5)
    a = {A}.native_group_norm_backward(g, x, m, r, w, 2, 6, 20, 3, [True, True, True])
    d = {A}.native_group_norm_backward(g, x, m, r, None, 2, 6, 20, 3, [True, False, False])
    e = {A}.native_group_norm_backward(g, x, m, r, w, 2, 6, 20, 3, [False, True, True])
    return a[0], a[1], a[2], d[0], e[1], e[2]
    """
    inputs = "torch.randn(2, 6, 4, 5), torch.randn(2, 6, 4, 5) * 2 + 1, torch.randn(6), torch.randn(6)"
    tt, prog, _ = check(model(tmp_path, fwd, inputs, sig="g, x, w, b"))
    assert ops(prog).count("aten.native_group_norm_backward.default") == 3


def test_half_precision_backwards(tmp_path):
    """bf16 operands: statistics of the norm gradients in f32, results in bf16 (validated at the bf16
    tolerance); the convolution gradients' contractions keep bf16 operands (tensor-core priced)."""
    fwd = f"""
    y, m, r = {A}.native_layer_norm(x, [8], w, b, 1e-5)
    ln = {A}.native_layer_norm_backward(g, x, [8], m, r, w, b, [True, True, True])
    cb = {A}.convolution_backward(gc, xc, wc, None, [1], [1], [1], False, [0], 1, [True, True, False])
    return ln[0], ln[1], ln[2], cb[0], cb[1]
    """
    inputs = ("torch.randn(4, 8).bfloat16(), torch.randn(4, 8).bfloat16(), torch.randn(8).bfloat16(), "
              "torch.randn(8).bfloat16(), torch.randn(2, 5, 9).bfloat16(), torch.randn(2, 3, 9).bfloat16(), "
              "torch.randn(5, 3, 3).bfloat16()")
    tt, _, _ = check(model(tmp_path, fwd, inputs, sig="g, x, w, b, gc, xc, wc"))
    dts = {t.name: t.dtype for t in tt.kernel.tensors}
    assert {dts[n] for n in tt.outputs} == {"bf16"}
    assert {dts[t.name] for t in tt.kernel.tensors if t.name.endswith(("_sum", "_dot"))} == {"f32"}
    conv = [o for o in kernel_costs(tt.kernel).ops if "gc[" in o.label and o.flops_matrix]
    assert [(o.flops_matrix, o.matrix_dtype) for o in conv] == [(2 * 2 * 5 * 3 * (3 * 9 - 2), "bf16")] * 2


def test_bilinear_upsample_backward(tmp_path):
    """4x5 -> 9x7 with and without align_corners, and an explicit scale factor of 2."""
    fwd = f"""
    return ({A}.upsample_bilinear2d_backward(g, [9, 7], [2, 3, 4, 5], False),
            {A}.upsample_bilinear2d_backward(g, [9, 7], [2, 3, 4, 5], True),
            {A}.upsample_bilinear2d_backward(g2, [8, 10], [2, 3, 4, 5], False, 2.0, 2.0))
    """
    tt, prog, _ = check(model(tmp_path, fwd, "torch.randn(2, 3, 9, 7), torch.randn(2, 3, 8, 10)",
                              sig="g, g2"))
    acc = [s for s in stmts(tt) if s.stmt.kind == "+="]
    assert [iteration_count(s) for s in acc] == [2 * 3 * 9 * 7] * 8 + [2 * 3 * 8 * 10] * 4


CNN_STEP = f"""
class Model(nn.Module):
    def forward(self, x, w, b, W, bias2, t):
        y = F.conv2d(x, w, b, padding=1)
        r = torch.relu(y)
        p, idx = {A}.max_pool2d_with_indices(r, [2, 2], [2, 2])
        h = p.flatten(1)
        z = F.linear(h, W, bias2)
        ls = torch.log_softmax(z, 1)
        loss, total = {A}.nll_loss_forward(ls, t, None, 1, -100)
        gl = {A}.nll_loss_backward(torch.ones_like(loss), ls, t, None, 1, -100, total)
        gz = {A}._log_softmax_backward_data(gl, ls, 1, torch.float32)
        gW, gb2, gh = gz.t() @ h, gz.sum(0), gz @ W
        gr = {A}.max_pool2d_with_indices_backward(gh.view(p.shape), r, [2, 2], [2, 2], [0, 0], [1, 1], False,
                                                   idx)
        gy = {A}.threshold_backward(gr, r, 0)
        _, gw, gb = {A}.convolution_backward(gy, x, w, [4], [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
                                              [False, True, True])
        return gw, gb, gW, gb2


def get_inputs():
    return [torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3) * 0.3, torch.randn(4) * 0.1,
            torch.randn(5, 64) * 0.1, torch.randn(5) * 0.1, torch.randint(0, 5, (2,))]


def get_init_inputs():
    return []
"""


def test_a_cnn_training_steps_backward_ops_chain_to_autograd_and_price_2x(tmp_path):
    """conv(3 -> 4, 3x3, pad 1, 8x8) -> ReLU -> max pool 2 -> linear(64 -> 5) -> cross-entropy, its
    backward written with the backward ops a joint graph has: eager, the chain gives autograd's
    parameter gradients; translated, it validates, and its matrix FLOPs are the forward's
    (conv 2*2*4*3*22*22 = 23232 over the valid taps, linear 2*2*64*5 = 1280) plus the backward's:
    the first layer's weight gradient only (1x: its input needs no gradient), the linear layer's
    weight and input gradients (2x)."""
    import importlib.util

    path = write(tmp_path, CNN_STEP)
    spec = importlib.util.spec_from_file_location("cnn_step", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    inputs = mod.get_inputs()
    with torch.no_grad():
        got = mod.Model()(*inputs)
    x, *params, t = [a.clone() for a in inputs]
    params = [p.requires_grad_() for p in params]
    w, b, W, b2 = params
    h = F.max_pool2d(torch.relu(F.conv2d(x, w, b, padding=1)), 2).flatten(1)
    want = torch.autograd.grad(F.cross_entropy(F.linear(h, W, b2), t), params)
    for a, e in zip(got, want, strict=True):
        torch.testing.assert_close(a, e)
    tt, _, _ = check(path)
    assert kernel_costs(tt.kernel).flops_matrix == 2 * 23232 + 3 * 1280
