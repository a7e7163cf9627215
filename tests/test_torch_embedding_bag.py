"""`nn.EmbeddingBag` through its template (`templates/embedding_bag.py`): sum, mean and max, per-sample
weights, explicit offsets with an empty bag, `padding_idx`, `include_last_offset`, 2-d input without
offsets; each captured, translated, executed on real data and compared with torch (get_inputs() and
two fresh samples), and its work counted by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from solar_compiler.errors import SolarError  # noqa: E402
from solar_compiler.frontends.model_file import load_model_file  # noqa: E402
from solar_compiler.frontends.torch.capture import capture  # noqa: E402
from solar_compiler.frontends.torch.translate import translate_program  # noqa: E402
from solar_compiler.frontends.torch.validation import run_samples  # noqa: E402
from solar_compiler.loopir.ast import statements  # noqa: E402
from solar_compiler.loopir.domain import check_bounds  # noqa: E402
from solar_compiler.transforms.kernels import kernel_costs  # noqa: E402

N, D, ROWS = 8, 4, 10  # lookups, embedding width, table rows
OFFSETS = "[0, 2, 2, 5]"  # 4 bags: positions 0-1, none (empty), 2-4, 5-7


def bag_model(tmp_path: Path, bag: str, sig: str, body: str, inputs: str, extra: str = "") -> str:
    """A model file: `self.bag = nn.EmbeddingBag(ROWS, D, <bag>)`, the buffer `offsets`, and
    `forward(self, <sig>): return <body>`."""
    lines = ["import torch", "import torch.nn as nn", "", "", "class Model(nn.Module):",
             "    def __init__(self):", "        super().__init__()",
             f"        self.bag = nn.EmbeddingBag({ROWS}, {D}, {bag})",
             f'        self.register_buffer("offsets", torch.tensor({OFFSETS}))',
             *([f"        {extra}"] if extra else []), "",
             f"    def forward(self, {sig}):", f"        return {body}", "", "",
             "def get_inputs():", f"    return [{inputs}]", "", "",
             "def get_init_inputs():", "    return []", ""]
    p = tmp_path / "bag.py"
    p.write_text("\n".join(lines))
    return str(p)


def translate(path: str):
    spec = load_model_file(path)
    prog = capture(spec, mode="eval")
    tt = translate_program(prog)
    check_bounds(tt.kernel)
    record = run_samples(spec, prog, tt, "eval")
    assert record["validated"] and record["samples"] == 3
    return tt, kernel_costs(tt.kernel)


IDX = f"torch.randint(0, {ROWS}, ({N},))"


def test_sum_with_per_sample_weights_and_an_empty_bag(tmp_path):
    body = "self.bag(x, self.offsets, per_sample_weights=w)"
    tt, costs = translate(bag_model(tmp_path, 'mode="sum"', "x, w", body, f"{IDX}, torch.rand({N})"))
    # bag starts: 3 marks (offsets[1..3]); running sum over positions 1..7: 7 adds; the scatter: per
    # looked-up element one multiply by the weight and one accumulation: 2 * 8 * 4
    assert (costs.flops_matrix, costs.flops_vector) == (0, 3 + 7 + 2 * N * D)
    scatter = [c.stmt for c in statements(tt.kernel) if c.stmt.indirect and c.stmt.kind == "+="]
    assert len(scatter) == 2  # the bag-start marks and the rows into their bags


def test_mean_skips_padding_idx_and_counts_only_the_rest(tmp_path):
    # padding_idx 3 (drawn often among 10 rows): padded entries go to a spare row, one comparison each
    tt, costs = translate(bag_model(tmp_path, 'mode="mean", padding_idx=3', "x", "self.bag(x, self.offsets)",
                                    IDX))
    # marks 3 + scan 7 + slot (compare and select) per position 2 * 8 + scatter 8 * 4 + count 8 + the
    # mean: max(count, 1) once per bag (it does not depend on the column: minimal vector work), 4, and
    # the division per bag and column, 4 * 4; counted literally max(count, 1) is per column too
    assert costs.flops_vector == 3 + 7 + 2 * N + N * D + N + 4 + 4 * D
    assert costs.flops_vector_literal == 3 + 7 + 2 * N + N * D + N + 2 * 4 * D
    names = {t.name for t in tt.kernel.tensors}
    assert any(n.endswith("_slot") for n in names) and any(n.endswith("_bags") for n in names)


def test_max_with_include_last_offset_and_an_empty_bag(tmp_path):
    path = bag_model(tmp_path, 'mode="max", include_last_offset=True', "x", "self.bag(x, self.last)", IDX,
                     extra=f'self.register_buffer("last", torch.tensor({OFFSETS[:-1]}, {N}]))')
    _, costs = translate(path)
    # marks 3 + scan 7 + scatter (max=) 8 * 4 + count 8 + empty-bag fix: the compare once per bag (it
    # does not depend on the column), 4, and the select per element, 4 * 4 (literally: both per element)
    assert costs.flops_vector == 3 + 7 + N * D + N + 4 + 4 * D
    assert costs.flops_vector_literal == 3 + 7 + N * D + N + 2 * 4 * D


def test_two_d_input_is_fixed_size_bags(tmp_path):
    path = bag_model(tmp_path, 'mode="sum"', "x", "self.bag(x)", f"torch.randint(0, {ROWS}, (4, 2))")
    _, costs = translate(path)
    # offsets = arange(0, 8, 2) (a generator, no tensor): marks 3 + scan 7 + scatter 8 * 4
    assert costs.flops_vector == 3 + 7 + N * D


def test_bookkeeping_results_have_no_template(tmp_path):
    path = bag_model(tmp_path, 'mode="max"', "x",
                     "torch.ops.aten._embedding_bag(self.bag.weight, x, self.offsets, False, 2)[3]", IDX)
    spec = load_model_file(path)
    with pytest.raises(SolarError, match="no loop-IR template for embedding_bag's max_indices result"):
        translate_program(capture(spec, mode="eval"))
