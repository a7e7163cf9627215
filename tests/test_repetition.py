"""Repeated layer blocks (issue 24 item 6): the tandem repeats of a kernel's top-level nodes, the
check that a kernel with fewer layers is the same program with fewer copies of its layer block
(`loopir/repetition.py`), and a reduced instance that runs fewer layers when that check holds."""

from __future__ import annotations

from dataclasses import replace

import pytest

from solar_compiler.loopir.repetition import Repeat, repeats, same_program_repeated
from solar_compiler.text.parser import parse_kernel


def stack(n: int, d: int = 8, read=None, copies=None, op: str = "*", scale=lambda i: "0.5",
          pairs: bool = False):
    """A prefix node, `n` layers of two nodes (a product with the layer's own weight of the previous
    layer's output, then a scaling) and a suffix node. `read(l)`: the tensor layer l reads instead of
    the previous layer's output; `copies(l)`: each weight is first copied in a loop before the layers
    (as a decode step copies each layer's KV cache), and layer l reads copy `copies(l)`; `pairs`: after
    the layers, two outputs per layer copy its output (as a prefill returns each layer's K and V)."""
    ws = ", ".join(f"w{i}: f32[{d}, {d}] weight" for i in range(n))
    outs = "".join(f", o{i}: f32[{d}] output" for i in range(2 * n if pairs else 0))
    lines = [f"kernel k(x: f32[{d}] input, {ws}, y: f32[{d}] output{outs}):", f"  local e: f32[{d}]"]
    lines += [f"  local h{i}: f32[{d}]" for i in range(n)]
    lines += [f"  local c{i}: f32[{d}, {d}]" for i in range(n)] if copies else []
    lines += [f"  for i in range({d}):", "    e[i] = x[i] * 2.0"]
    for i in range(n if copies else 0):
        lines += [f"  for i in range({d}):", f"    for j in range({d}):", f"      c{i}[i, j] = w{i}[i, j]"]
    for i in range(n):
        src = read(i) if read else ("e" if i == 0 else f"h{i - 1}")
        w = f"c{copies(i)}" if copies else f"w{i}"
        lines += [f"  for i in range({d}):", f"    h{i}[i] = 0.0", f"    for j in range({d}):",
                  f"      h{i}[i] += {src}[j] * {w}[j, i]",
                  f"  for i in range({d}):", f"    h{i}[i] = h{i}[i] {op} {scale(i)}"]
    lines += [f"  for i in range({d}):", f"    y[i] = h{n - 1}[i] + e[i]"]
    for i in range(2 * n if pairs else 0):
        lines += [f"  for i in range({d}):", f"    o{i}[i] = h{i // 2}[i]"]
    return parse_kernel("\n".join(lines) + "\n")


def test_the_layers_are_one_repeat_of_their_two_nodes():
    assert repeats(stack(5)) == [0, Repeat(start=1, period=2, count=5, body=[1, 2]), 11]
    with_copies = repeats(stack(4, copies=lambda i: i))  # the copies: a repeat of period 1 before
    assert with_copies == [0, Repeat(1, 1, 4, [1]), Repeat(5, 2, 4, [5, 6]), 13]


def test_sizes_and_literals_do_not_make_layers_differ():
    k = stack(4, scale=lambda i: "0.25" if i == 2 else "0.5")
    assert repeats(k)[1] == Repeat(1, 2, 4, [1, 2])


@pytest.mark.parametrize("reduced", [stack(3), stack(2), stack(3, d=4), stack(5)])
def test_fewer_copies_of_the_layer_block_are_the_same_program(reduced):
    assert same_program_repeated(stack(5), reduced) is None


@pytest.mark.parametrize("full, reduced", [
    # copies read by the layers in order, in reverse: an index that moves with the layer
    (stack(5, copies=lambda i: i), stack(3, copies=lambda i: i)),
    (stack(5, copies=lambda i: 4 - i), stack(3, copies=lambda i: 2 - i)),
])
def test_per_layer_work_before_the_layers_moves_with_them(full, reduced):
    assert same_program_repeated(full, reduced) is None


def test_alike_nests_per_layer_are_one_copy_together():
    """Two alike output nests per layer (a K and a V) compress as one repeat of 2 x n nests, whose
    copy c reads layer c // 2: no index moves with that copy, but with two nests as one copy it does."""
    full = stack(5, pairs=True)
    assert repeats(full)[-1] == Repeat(12, 1, 10, [12])
    assert same_program_repeated(full, stack(3, pairs=True)) is None


@pytest.mark.parametrize("full, reduced, why", [
    (stack(5), stack(1), "3 vs 4 blocks at top level"),                         # no repeat left
    (stack(5), stack(3, op="+"), "item 1 of item 1 of top level differs (structure)"),
    # the fourth layer reads the second's output: not one block repeated
    (stack(5, read=lambda i: "e" if i == 0 else "h1" if i == 3 else f"h{i - 1}"), stack(3),
     "12 vs 3 blocks at top level"),
    # the reduced kernel's second layer reads the prefix again
    (stack(5), stack(3, read=lambda i: "e" if i < 2 else f"h{i - 1}"),
     "item 0 of item 1 of top level differs (sources)"),
    # layers reading the copies out of order (0, 1, 4, 4, 1): no index moves with the layer
    (stack(5, copies=lambda i: i * i % 5), stack(3, copies=lambda i: i * i % 3),
     "13 vs 4 blocks at top level"),
    (stack(5, copies=lambda i: i), stack(3, copies=lambda i: 2 - i),
     "item 0 of item 2 of top level differs (sources)"),
])
def test_a_different_program_is_named(full, reduced, why):
    assert same_program_repeated(full, reduced) == why


def _with_twin(k, source: str):
    """`k` with `f[i] = {source}[i] * 2.0` (f a local; z a new input) after its first node."""
    twin = parse_kernel(f"kernel z(x: f32[8] input, z: f32[8] input, f: f32[8] output):\n"
                        f"  for i in range(8):\n    f[i] = {source}[i] * 2.0\n")
    k.tensors.insert(1, twin.tensors[1])
    k.tensors.append(replace(twin.tensors[2], role="local"))
    k.body.insert(1, twin.body[0])
    return k


def test_alike_nodes_that_read_different_tensors_are_no_repeat():
    """cos and sin of one angle, or two projections of one input, are alike node for node but read
    different sources: they stay plain nodes in both kernels, and the layers still match."""
    full = _with_twin(stack(5), "z")
    assert repeats(full)[0] == Repeat(0, 1, 2, [0])  # e and f: alike
    assert same_program_repeated(full, _with_twin(stack(3), "z")) is None
    assert same_program_repeated(full, _with_twin(stack(3), "x")) is not None  # x twice: not the same


# ---- a reduced instance with fewer layers ---------------------------------------------------------
LAYERS = """import torch
import torch.nn as nn


def repeated(n):
    return n


class Block(nn.Module):
    def __init__(self, d, i):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.act = (torch.relu, torch.tanh, torch.sigmoid)[i % KINDS]

    def forward(self, x):
        return x + self.act(self.fc(x))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(dim, dim)
        self.layers = nn.ModuleList([Block(dim, i) for i in range(layers)])

    def forward(self, x):
        x = self.embed(x)
        for layer in self.layers:
            x = layer(x)
        return x.sum(-1)


dim = 1024
tokens = 256
layers = repeated(6)
KINDS = {kinds}


def get_inputs():
    return [torch.randn(tokens, dim)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize(("kinds", "kept"), [(1, "3 (of 6)"), (2, "4 (of 6)"), (3, None)])
def test_a_reduced_instance_runs_fewer_layers_when_they_repeat(tmp_path, kinds, kept):
    """Six identical layers validate on three (widths scaled too). Layers that alternate two kinds
    are not one block repeated three times (three layers are not two copies of the pair): they
    validate on four, two copies of the two-layer block. Three kinds in turn repeat a block of three,
    which neither three nor four layers hold twice: every layer is kept."""
    pytest.importorskip("torch")
    from solar_compiler.frontends import FrontendOptions
    from solar_compiler.frontends.model_file import load_model_file
    from solar_compiler.frontends.torch import frontend as fe

    path = tmp_path / "m.py"
    path.write_text(LAYERS.format(kinds=kinds))
    assert load_model_file(path).repeat_counts == {"layers": 6}
    v = fe.translate_job(str(path), FrontendOptions(memory_budget_gb=0.02)).validation
    assert (v["validated"], v["method"], v["full_size_same_program"]) == (True, "reduced", True)
    sizes = dict(part.split("=", 1) for part in v["sizes"].removeprefix("reduced: ").split(", "))
    if kept is None:
        assert "layers" not in sizes and "repeated_blocks" not in v
    else:
        assert sizes["layers"] == kept and v["repeated_blocks"] == ["layers"]
    assert sizes["dim"].endswith("(of 1024)") and v["max_rel_err"] < 1e-4


def test_the_report_says_the_layers_ran_fewer():
    from solar_compiler.report import _validation_lines

    v = {"validated": True, "frontend": "torch-export", "method": "reduced", "max_rel_err": 2e-3,
         "samples": 3, "elements_checked": 100, "full_size_same_program": True,
         "sizes": "reduced: hidden_size=2048 (of 4096), num_hidden_layers=3 (of 32)",
         "repeated_blocks": ["num_hidden_layers"]}
    assert _validation_lines(v)[0].endswith(
        "on a size-reduced instance (hidden_size=2048 (of 4096), num_hidden_layers=3 (of 32); the full-size "
        "kernel checked to be the same program with more copies of its repeated layer block "
        "(num_hidden_layers), every copy checked to read its inputs alike)")
