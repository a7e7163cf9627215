"""Complex tensors (issues 22 and 24): ops on complex values are captured as ops on (real, imaginary)
pairs (`capture/complex_pairs.py`) and FFTs as DFT nests that stand in for cuFFT's algorithm
(`templates/fft.py`). Each program is validated against torch on fresh samples; FLOPs and bytes are
derived by hand. A complex product is 4 multiplications and 2 additions (6 FLOPs); a complex matrix
product is 3 real ones; an FFT has no compute term, its traffic is counted."""

from __future__ import annotations

import pytest
from translated import forward_program as _program
from translated import translated_programs, validated_json

pytest.importorskip("torch")


PROGRAMS = {
    # the complex product of two (64, 32) complex tensors given as real pairs
    "cmul": _program("a, b", """
za = torch.view_as_complex(a)
zb = torch.view_as_complex(b)
return torch.view_as_real(za * zb)
""", "torch.randn(64, 32, 2), torch.randn(64, 32, 2)"),
    # rotary embedding as DeepSeek-V2 writes it: polar, a real scale, a broadcast complex product
    "rope": _program("q, pos", """
inv = 1.0 / (10000 ** (torch.arange(0, 32, 2, dtype=torch.float32) / 32))
freqs = torch.outer(pos.float(), inv)
cis = torch.polar(torch.ones_like(freqs), freqs) * 0.5
z = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
return torch.view_as_real(z * cis.unsqueeze(0)).flatten(2)
""", "torch.randn(2, 8, 32), torch.arange(8)"),
    # FFT convolution: two rffts, a complex product, an irfft
    "fftconv": _program("x, h", """
n = x.shape[-1]
y = torch.fft.irfft(torch.fft.rfft(x, n=2 * n) * torch.fft.rfft(h, n=2 * n), n=2 * n)
return y[..., :n]
""", "torch.randn(4, 16, 64), torch.randn(16, 64)"),
    # a complex output, a 2-D transform (r2c then c2c), an odd length, ortho normalization
    "rfft2": _program("x", "return torch.fft.rfft2(x, norm='ortho')", "torch.randn(3, 10, 15)"),
    # complex to complex both ways, and the inverse 2-D real transform of an odd length
    "c2c": _program("x", """
z = torch.fft.fft(x, dim=1)
w = torch.fft.ifft(z * 1j + z.conj(), dim=1)
return torch.fft.irfft2(w, s=(6, 9)), w.abs(), w.angle(), torch.add(w, x, alpha=2.0)
""", "torch.randn(6, 12)"),
    # Whisper's log-mel spectrogram: a windowed STFT, power, a mel filterbank product, a log
    "logmel": _program("audio", """
window = torch.hann_window(64)
stft = torch.stft(audio, 64, 16, window=window, return_complex=True)
mel = torch.linspace(0, 1, 8 * 33).reshape(8, 33) @ (stft[..., :-1].abs() ** 2)
log_spec = torch.clamp(mel, min=1e-10).log10()
return (torch.maximum(log_spec, log_spec.max() - 8.0) + 4.0) / 4.0
""", "torch.randn(2, 512)"),
    # a spectral mask between an STFT and its inverse (overlap-add)
    "istft": _program("audio", """
window = torch.hann_window(32)
spec = torch.stft(audio, 32, 8, window=window, return_complex=True)
return torch.istft(spec * torch.sigmoid(spec.abs()), 32, 8, window=window, length=audio.shape[-1])
""", "torch.randn(2, 256)"),
    # a complex matrix product: three real products (cublasCgemm3m)
    "cmatmul": _program("a, b", """
return torch.view_as_real(torch.view_as_complex(a) @ torch.view_as_complex(b))
""", "torch.randn(16, 32, 2), torch.randn(32, 8, 2)"),
}


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    with translated_programs(tmp_path_factory.mktemp("complex"), PROGRAMS) as p:
        yield p


def _report(capsys, paths, name: str) -> dict:
    return validated_json(capsys, paths[name])


def test_a_complex_product_is_six_flops_per_element(capsys, paths):
    r = _report(capsys, paths, "cmul")
    t = r["totals"]
    assert t["flops"] == t["flops_vector"] == 6 * 64 * 32
    assert t["bytes_fused"] == 3 * 64 * 32 * 2 * 4  # two inputs and the output, 8 bytes per complex64


def test_a_rotary_embedding_through_polar_validates_with_exact_counts(capsys, paths):
    r = _report(capsys, paths, "rope")
    # the 16 inverse frequencies (a divide, a power, a reciprocal each); the outer product 8 x 16;
    # polar's magnitude times the cosine and the sine (8 x 16 each); * 0.5 on both parts (8 x 16
    # each); the complex product 2 x 8 x 16 (6 each)
    assert r["totals"]["flops"] == 3 * 16 + 8 * 16 + 2 * 8 * 16 + 2 * 8 * 16 + 6 * 2 * 8 * 16


def test_an_fft_convolution_prices_no_transform_arithmetic(capsys, paths):
    r = _report(capsys, paths, "fftconv")
    # the complex product of 4 x 16 x 65 bins, less the imaginary part of bin 0, which irfft
    # ignores (its 3 FLOPs per row are not needed work)
    assert r["totals"]["flops"] == 6 * 4 * 16 * 65 - 3 * 4 * 16
    assert r["totals"]["bytes_fused"] == (4 * 16 * 64 + 16 * 64 + 4 * 16 * 64) * 4
    rows = r["llm_ops"]  # one row per source line: the two rffts, then the irfft
    assert [o["by"] for o in rows] == ["stand-in", "stand-in"] and rows[0]["op"] != rows[1]["op"]
    assert all(o["flops_priced"] == 0 and o["flops_written"] > 0 for o in rows)


def test_a_complex_output_and_multi_dim_transforms_validate(capsys, paths):
    r = _report(capsys, paths, "rfft2")
    # the ortho scale belongs to the transform's eager kernel, whose arithmetic is not priced
    assert r["totals"]["flops"] == 0
    assert r["totals"]["bytes_fused"] == 3 * 10 * 15 * 4 + 3 * 10 * 8 * 8
    r = _report(capsys, paths, "c2c")
    assert r["totals"]["flops"] > 0


@pytest.mark.parametrize("name", ["logmel", "istft"])
def test_audio_front_ends_through_stft_validate(capsys, paths, name):
    r = _report(capsys, paths, name)
    assert {o["by"] for o in r["llm_ops"]} == {"stand-in"}  # the transforms


def test_a_complex_matrix_product_is_three_real_ones(capsys, paths):
    r = _report(capsys, paths, "cmatmul")
    t = r["totals"]
    assert t["flops_matrix"] == 3 * 2 * 16 * 32 * 8
    # ar + ai (16 x 32), br + bi (32 x 8), re = t1 - t2 and im = t3 - t1 - t2 (16 x 8)
    assert t["flops_vector"] == 16 * 32 + 32 * 8 + 3 * 16 * 8


def test_an_op_on_complex_values_without_a_rule_is_a_one_line_error(tmp_path, capsys):
    from solar_compiler.driver import main

    p = tmp_path / "m.py"
    p.write_text(_program("x", "return torch.view_as_real(torch.log(torch.view_as_complex(x)))",
                          "torch.randn(4, 2)"))
    assert main([str(p), "--translate", "--frontend=torch", "--hw", "H100_SXM"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "m.py:7: aten.log.default on complex values has no rule" in err[0]
