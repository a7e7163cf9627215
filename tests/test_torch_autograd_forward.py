"""A forward that calls autograd itself (capture/autograd.py): recognised while export traces it (its
decompositions segfault on `native_layer_norm_backward` under fake tensors), traced by make_fx,
translated and validated like any forward. Each program's FLOPs and bytes are derived by hand below
(f32: 4 bytes an element)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
import torch
from translated import forward_program

from solar_compiler.driver import main
from solar_compiler.frontends.captured_program import CaptureError
from solar_compiler.frontends.torch.capture import capture

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"

#: a layer norm's backward through autograd on a batch of one (siglip's first workload, small): the
#: saved statistics are [1, T, 1], whose keepdim dim is the last one, not the first
LAYER_NORM = forward_program(
    "x, w, b, g",
    """with torch.enable_grad():
    x = x.detach().requires_grad_(True)
    w = w.detach().requires_grad_(True)
    y = torch.nn.functional.layer_norm(x, (8,), w, b, eps=1e-6)
    gx, gw = torch.autograd.grad(y, (x, w), g)
return gx, gw""",
    "torch.randn(1, 6, 8), torch.randn(8), torch.randn(8), torch.randn(1, 6, 8)")

#: autograd reached under another name, inside a forward that swallows every Exception
HIDDEN = """import torch
from torch.autograd import grad as differentiate


class Model(torch.nn.Module):
    def forward(self, x):
        try:
            with torch.enable_grad():
                x = x.detach().requires_grad_(True)
                (gx,) = differentiate(torch.sin(x).sum(), x)
        except Exception:
            return x
        return gx


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
"""


def _json_reports(argv: list[str], out: Path) -> list[dict]:
    """The JSON report(s) of `solar-opt ARGV --roofline=all --hw H100_SXM --format=json`."""
    with open(out, "w") as f, contextlib.redirect_stdout(f):
        rc = main([*argv, "--roofline=all", "--hw", "H100_SXM", "--format=json", "--quiet"])
    assert rc == 0, argv
    text = out.read_text()
    if not text.startswith("# workload"):
        return [json.loads(text)]
    return [json.loads(p.split("\n", 1)[1]) for p in text.split("# workload ") if p.strip()]


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("autograd")
    (tmp / "layer_norm.py").write_text(LAYER_NORM)
    runs = {
        "mlp": [str(DATA / "autograd" / "mlp_input_grad.py"), "--translate"],
        "backward": [str(DATA / "autograd" / "backward_grad.py"), "--translate"],
        "layer_norm": [str(tmp / "layer_norm.py"), "--translate"],
        "rmsnorm": [str(DATA / "solexec" / "rmsnorm_backward_autograd"), "--workload", "all"],
    }
    out: dict[str, dict] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp / "xdg"))
        for name, argv in runs.items():
            [out[name]] = _json_reports(argv, tmp / f"{name}.json")
    return out


def _validated(r: dict) -> dict:
    v = r["validation"]
    assert v["validated"] and v["frontend"] == "torch-make_fx", v
    assert v["export_failed"].startswith("forward calls "), v
    return r["totals"]


def test_mlp_input_gradient(reports) -> None:
    # gx = d(fc2(relu(fc1(x))))/dx . g, B=4, D=8, H=16, O=2: fc1's addmm (its bias the accumulator's
    # start: no FLOPs), relu (1 a element), gr = g @ W2, threshold_backward (compare + select: 2 an
    # element), gx = gr' @ W1; fc2's own product and bias no gradient needs (narrowed away)
    b, d, h, o = 4, 8, 16, 2
    t = _validated(reports["mlp"])
    assert reports["mlp"]["validation"]["method"] == "full"
    assert t["flops_matrix"] == 2 * b * d * h + 2 * b * o * h + 2 * b * h * d
    assert t["flops_vector"] == 3 * b * h
    # compulsory: x, g, W1, b1, W2 and gx once (fc2's bias is not read)
    assert t["bytes_fused"] == 4 * (b * d + b * o + h * d + h + o * h + b * d)
    # per kernel: addmm (x, W1, b1 -> h), relu (h -> r), mm (g, W2 -> gr),
    # threshold_backward (gr, r -> gh), mm (gh, W1 -> gx)
    assert t["bytes_unfused"] == 4 * ((b * d + h * d + h + b * h) + 2 * b * h + (b * o + o * h + b * h)
                                      + 3 * b * h + (b * h + h * d + b * d))


def test_backward_then_grad_read(reports) -> None:
    # y = tanh(x) * x; y.backward(g); x.grad = g * tanh(x) + tanh_backward(g * x, tanh(x)), N=8, D=32:
    # tanh, two products, tanh_backward (t * t, 1 - ., times: 3 an element), the sum: 7 an element;
    # the product y itself is not needed
    n = 8 * 32
    t = _validated(reports["backward"])
    assert (t["flops_matrix"], t["flops_vector"]) == (0, 7 * n)
    assert t["bytes_fused"] == 4 * 3 * n  # x, g, x.grad
    assert t["bytes_unfused"] == 4 * (2 * n + 4 * 3 * n)  # tanh reads one, the four others two


def test_layer_norm_backward_batch_of_one(reports) -> None:
    # x [1, 6, 8]: gx and gw of a layer norm; the bias is not read (no gradient depends on it)
    t = _validated(reports["layer_norm"])
    assert t["bytes_fused"] == 4 * (48 + 8 + 48 + 48 + 8)  # x, w, g; gx, gw


def test_rmsnorm_backward_problem(reports) -> None:
    # tests/data/solexec/rmsnorm_backward_autograd, T=16, H=64 (n = T*H): r = rsqrt(mean(x^2) + eps),
    # y = x * r * w; autograd's ops (as written, narrowed): x^2, mean (n adds, T divides), + eps and
    # rsqrt (T each), x*r, g*(x*r), g*w, its row sum for gw (n), (g*w)*x, (g*w)*r, their row sum (n),
    # r^3 (2T), *-0.5, *r^3, /H (the division before the broadcast: T each), x^1 (a copy), *2, times
    # the broadcast, + (n each)
    T, H = 16, 64
    n = T * H
    r = reports["rmsnorm"]
    t = _validated(r)
    classical = 11 * n + (n + T) + 2 * T + 2 * T + 3 * T
    assert r["classical"]["totals"]["flops"] == classical
    # the default model: gw = sum_t g * x * r is one contraction (2n on the matrix unit) instead of
    # three vector ops (3n); x*2 * (sum2 * -0.5 * r^3 / H) is x times one factor a row (n, 4T and two
    # constant products once: 2) instead of 2n + 5T as written (r^3 being 2T)
    assert t["flops_matrix"] == 2 * n
    assert t["flops_vector"] == classical - 3 * n - ((2 * n + 5 * T) - (n + 4 * T + 2))
    assert t["bytes_fused"] == 4 * (n + H + n + n + H)  # x, w, g; gx, gw
    # per kernel, f32 (n-element tensors "N", rows "T", columns "H"): x^2 NN, mean NT, add TT, rsqrt TT,
    # x*r NTN, g*(x*r) NNN, g*w NHN, row sum NH, (g*w)*x NNN, (g*w)*r NTN, row sum NT, r^3 TT,
    # *-0.5 TT, * TTT, /H TN, x^1 NN, *2 NN, times NNN, + NNN
    per_kernel = (2 * n + (n + T) + 2 * T + 2 * T + (2 * n + T) + 3 * n + (2 * n + H) + (n + H) + 3 * n
                  + (2 * n + T) + (n + T) + 2 * T + 2 * T + 3 * T + (T + n) + 2 * n + 2 * n + 3 * n + 3 * n)
    assert t["bytes_unfused"] == 4 * per_kernel


def test_probe_sees_autograd_however_reached(tmp_path) -> None:
    """`from torch.autograd import grad as ...` and an `except Exception` around it: the probe is the
    engine's one Python binding, raised as a BaseException; the engine is restored afterwards."""
    from torch.autograd.variable import Variable

    engine = Variable._execution_engine
    (tmp_path / "m.py").write_text(HIDDEN)
    prog = capture(tmp_path / "m.py")
    assert (prog.method, prog.step) == ("make_fx", "forward")
    assert prog.fallback_reason == f"forward calls torch.autograd.grad at {tmp_path / 'm.py'}:10"
    ops = [n.op for n in prog.nodes]
    assert ops[-2:] == ["aten.cos.default", "aten.mul.Tensor"]
    assert prog.outputs == [prog.nodes[-1].outputs[0].name]
    assert Variable._execution_engine is engine


def test_plain_forward_still_exports() -> None:
    assert capture(ROOT / "examples" / "torch" / "matmul.py").method == "export"


def test_backward_without_grad_is_one_line() -> None:
    # forward runs under no_grad (as the reference does): a loss computed outside enable_grad has no
    # graph to differentiate
    with pytest.raises(CaptureError) as e:
        capture(ROOT / "examples" / "train" / "linear_mse.py")
    msg = str(e.value)
    assert "\n" not in msg
    where = ROOT / "examples" / "train" / "linear_mse.py"
    assert msg.startswith(f"{where}:21: forward calls Tensor.backward on a tensor that does not require grad")


def test_reference_starts_without_parameter_grads(tmp_path) -> None:
    """The reference of a forward that reads `.grad` of a parameter after `backward()`: each run starts
    with none, as the trace does (a reused model would otherwise accumulate the last run's)."""
    from solar_compiler.frontends.torch.capture import ModelReuse, run_reference

    text = forward_program("x", "with torch.enable_grad():\n    self.fc(x).pow(2).sum().backward()\n"
                           "return self.fc.weight.grad", "torch.randn(5, 8)")
    text = text.replace("class Model(nn.Module):\n",
                        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                        "        self.fc = nn.Linear(8, 4)\n\n")
    path = tmp_path / "pgrad.py"
    path.write_text(text)
    prog = capture(path)
    assert prog.method == "make_fx"
    reuse = ModelReuse(0)
    first = run_reference(path, program=prog, reuse=reuse)[2]
    again = run_reference(path, program=prog, reuse=reuse)[2]
    [name] = prog.outputs
    assert torch.equal(torch.from_numpy(first[name]), torch.from_numpy(again[name]))
