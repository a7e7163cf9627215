"""`capture.util.WideMatrixProducts`: the reference runs' bf16/f16 matrix products and convolutions on
CPU computed on float32 copies and rounded once (a CPU without native bf16 runs them 25-80x slower:
a 2,048^3 bf16 matmul took about 30 s on 2 AVX2 cores, past the translation's 120 s budget for a
program of two). The result is what the narrow kernel computes, up to the order of its float32 sums."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from solar_compiler.frontends.torch.capture.util import WideMatrixProducts  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_narrow_products_are_float32_products_rounded_once(dtype):
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(64, 96, generator=g).to(dtype), torch.randn(96, 32, generator=g).to(dtype))
    bias = torch.randn(32, generator=g).to(dtype)
    native = a @ b
    with WideMatrixProducts():
        got = a @ b
        got_bmm = torch.bmm(a[None], b[None])[0]
        got_addmm = torch.addmm(bias, a, b)
    assert got.dtype == got_bmm.dtype == got_addmm.dtype == dtype
    assert torch.equal(got, (a.float() @ b.float()).to(dtype))
    assert torch.equal(got_bmm, got)
    assert torch.equal(got_addmm, (bias.float() + a.float() @ b.float()).to(dtype))
    # the native kernel accumulates in float32 too: at most one rounding step apart
    eps = torch.finfo(dtype).eps
    assert ((got.float() - native.float()).abs() <= eps * native.float().abs() + 1e-6).all()


def test_narrow_convolutions_and_their_gradients_run_wide():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 8, 9, 9, generator=g).to(torch.bfloat16).requires_grad_()
    w = torch.randn(4, 8, 3, 3, generator=g).to(torch.bfloat16).requires_grad_()
    with WideMatrixProducts():
        y = torch.nn.functional.conv2d(x, w, padding=1)
        y.sum().backward()
    want = torch.nn.functional.conv2d(x.detach().float(), w.detach().float(), padding=1).to(torch.bfloat16)
    assert y.dtype == torch.bfloat16 and torch.equal(y.detach(), want)
    assert x.grad is not None and x.grad.dtype == torch.bfloat16 and w.grad.dtype == torch.bfloat16


def test_float32_integer_and_fake_tensors_are_left_alone():
    from torch._subclasses.fake_tensor import FakeTensorMode

    a = torch.randn(8, 8)
    i = torch.randint(0, 5, (8, 8))
    with WideMatrixProducts():
        assert torch.equal(a @ a, torch.mm(a, a))
        assert (i @ i).dtype == torch.int64
    with FakeTensorMode() as fm:
        f = fm.from_tensor(torch.randn(4, 4, dtype=torch.bfloat16))
        with WideMatrixProducts():
            assert (f @ f).dtype == torch.bfloat16
