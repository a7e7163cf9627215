"""sort, argsort, bincount and unique (templates/sort.py): ranks by comparison, the element and its position
written at their rank, a histogram by a scatter of ones; top-k (templates/select.py) by k selections.
Each program is validated against torch on fresh samples (integer keys with ties check the stable
order); the nests stand in for a radix sort, a radix select and a histogram, so no compute term is
priced and the traffic is derived by hand."""

from __future__ import annotations

import pytest
from translated import forward_program as _program
from translated import translated_programs, validated_json

pytest.importorskip("torch")


PROGRAMS = {
    # values and indices along the last dim, descending; both outputs used
    "sort_desc": _program("x", "return torch.sort(x, dim=-1, descending=True)", "torch.randn(4, 16)"),
    # expert ids with many ties, as MoE dispatch sorts them: the stable order decides the indices (a
    # sort that is not stable orders ties as its implementation likes: only its values are checked)
    "argsort_ties": _program("e", "return torch.argsort(e.flatten(), stable=True), torch.sort(e, dim=0)[0]",
                             "torch.randint(0, 4, (32, 2))"),
    # top-4 of 64 logits per row, as sampling and MoE routing take them: a radix select's stand-in
    "topk": _program("x", "return torch.topk(x, 4, dim=-1)", "torch.randn(8, 64)"),
    # the distinct expert ids, each token's slot among them and the tokens per id
    "unique": _program("e", "return torch.unique(e, return_inverse=True, return_counts=True)",
                       "torch.arange(20).reshape(5, 4) % 6"),
    # sampling as vLLM and FlashInfer do it: Gumbel-max with exponential noise, and multinomial draws
    # (validation feeds torch's draws; the argmax over probs / q is checked against them)
    "sampling": _program("logits", """
probs = torch.softmax(logits / 0.7, dim=-1)
q = torch.empty_like(probs).exponential_()
return (probs / q).argmax(dim=-1), torch.multinomial(probs, 2)
""", "torch.randn(4, 100)"),
    # tokens per expert, and a weighted histogram
    "bincount": _program("e, w", """
return torch.bincount(e, minlength=8), torch.bincount(e, weights=w, minlength=8)
""", "torch.randint(0, 8, (64,)), torch.rand(64)"),
}


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    with translated_programs(tmp_path_factory.mktemp("sort"), PROGRAMS) as p:
        yield p


def _report(capsys, paths, name: str) -> dict:
    r = validated_json(capsys, paths[name])
    assert r["totals"]["flops"] == 0
    assert [o["by"] for o in r["llm_ops"]] and {o["by"] for o in r["llm_ops"]} == {"stand-in"}
    return r


def test_a_sort_prices_its_traffic_only(capsys, paths):
    r = _report(capsys, paths, "sort_desc")
    assert r["totals"]["bytes_fused"] == 4 * 16 * 4 * 2 + 4 * 16 * 8  # x, the values, the i64 indices
    assert r["llm_ops"][0]["flops_written"] > 0


def test_an_argsort_of_tied_keys_follows_the_stable_order(capsys, paths):
    r = _report(capsys, paths, "argsort_ties")
    assert r["totals"]["bytes_fused"] == 64 * 8 * 3  # the keys and two index outputs, all i64


def test_a_top_k_stands_in_for_a_radix_select(capsys, paths):
    r = _report(capsys, paths, "topk")
    assert r["totals"]["bytes_fused"] == 8 * 64 * 4 + 8 * 4 * 4 + 8 * 4 * 8  # x, values, i64 indices


def test_a_bincount_is_value_dependent_and_validated_on_samples_of_the_same_length(capsys, paths):
    r = _report(capsys, paths, "bincount")
    v = r["validation"]
    assert v["samples"] == 3 and "output shape depends on values" in str(v["value_dependent"]), v
    # the keys (i64) and weights (f32), two histograms of 8 bins (i64, and f32 as torch gives)
    assert r["totals"]["bytes_fused"] == 64 * 8 + 64 * 4 + 8 * 8 + 8 * 4


def test_unique_with_inverse_and_counts_validates(capsys, paths):
    r = _report(capsys, paths, "unique")
    # the 20 ids, the 6 distinct ones, 20 inverse indices, 6 counts: all i64
    assert r["totals"]["bytes_fused"] == (20 + 6 + 20 + 6) * 8


def test_gumbel_max_and_multinomial_sampling_validate(capsys, paths):
    """The softmax, the exponential draw and the division by it are priced as written; the
    multinomial's inverse-CDF nest is a stand-in for a sampling kernel (no compute term)."""
    r = validated_json(capsys, paths["sampling"])
    assert [o["op"] for o in r["llm_ops"]] == ["multinomial"] and r["llm_ops"][0]["flops_priced"] == 0
    # the probabilities are read once, the draws written: 4 x 100 f32 logits, 4 + 4 x 2 i64 indices
    assert r["totals"]["bytes_fused"] == 4 * 100 * 4 + (4 + 4 * 2) * 8
