"""Contraction trees through an intermediate read more than once (`analysis/chains.py`,
`MAX_COPIED_LEAVES`): each read is its own copy of the producer's sum, so the association entry sees
every leaf. `matrix_power(a, 4) @ v` is `a (a (a (a v)))`, four matrix-vector products, not a
squaring and two; a Gram matrix applied twice, `g (g v)` with `g = x^T x`, is four products with x.
And a product that two trees read is computed per tree (`split_parts`), the copies no longer
charged as if CSE had not removed them (`catalogue._work`).

Audit figures (H100_SXM, f32 at TF32 494.7 TFLOP/s, DRAM 3.35 TB/s): `matrix_power(a, 4) @ v`, a
2048^2: 34.76 us printed (the squaring a @ a) against 5.01 us (a read once); `g @ (g @ v)` with x
4096 x 1024: 8.70 us (the symmetric Gram product) against 5.01 us; `b = a @ a; (b @ b) @ v + b @ v`:
34.78 us against 5.01 us. Here at small sizes, FLOPs by hand.
"""

from __future__ import annotations

import pytest
from translated import forward_program, roofline_json, translated_programs

PROGRAMS = {
    "power": forward_program("a, v", "return torch.linalg.matrix_power(a, 4) @ v",
                             "torch.randn(512, 512), torch.randn(512, 1)"),
    "power16": forward_program("a, v", "return torch.linalg.matrix_power(a, 16) @ v",
                               "torch.randn(256, 256) / 16, torch.randn(256, 1)"),
    "gram": forward_program("x, v", "g = x.t() @ x\nreturn g @ (g @ v)",
                            "torch.randn(1024, 256), torch.randn(256, 1)"),
    "two_trees": forward_program("a, v", "b = a @ a\nreturn (b @ b) @ v + b @ v",
                                 "torch.randn(512, 512), torch.randn(512, 1)"),
    "square": forward_program("a", "return torch.linalg.matrix_power(a, 4)", "torch.randn(256, 256)"),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    with translated_programs(tmp_path_factory.mktemp("copies"), PROGRAMS) as paths:
        yield paths


def _words(r: dict) -> list[str]:
    return [w["what"] for w in r["rewrites"]]


def test_a_matrix_power_times_a_vector_is_four_matrix_vector_products(capsys, files):
    r = roofline_json(capsys, files["power"])
    assert r["validation"]["validated"]
    assert "(a * (a * (a * (a * v))))" in _words(r)
    assert r["totals"]["flops_matrix"] == 4 * 2 * 512 * 512  # was 2 * 2 * 512^3 + 2 * 512^2
    assert r["classical"]["totals"]["flops_matrix"] == 2 * 2 * 512**3 + 2 * 512**2


def test_sixteen_copies_stay_within_the_leaf_limit(capsys, files):
    r = roofline_json(capsys, files["power16"])
    assert r["totals"]["flops_matrix"] == 16 * 2 * 256 * 256


def test_a_gram_matrix_applied_twice_is_four_products_with_x(capsys, files):
    r = roofline_json(capsys, files["gram"])
    assert r["validation"]["validated"]
    assert "(x * (x * (x * (x * v))))" in _words(r)
    assert r["totals"]["flops_matrix"] == 4 * 2 * 1024 * 256


def test_a_product_two_trees_read_is_computed_per_tree(capsys, files):
    # a (a (a (a v))) and a (a v): the first step `a v` is the same in both (CSE): 5 products
    r = roofline_json(capsys, files["two_trees"])
    assert r["validation"]["validated"]
    kinds = [w["kind"] for w in r["rewrites"]]
    assert "split per part" in kinds and kinds.count("reassociated") == 2
    assert r["totals"]["flops_matrix"] == 5 * 2 * 512 * 512


def test_repeated_squaring_stays_two_products(capsys, files):
    # a^4 with no vector: (a a)(a a), the second square of the copies a CSE twin: 2 products
    r = roofline_json(capsys, files["square"])
    assert r["totals"]["flops_matrix"] == 2 * 2 * 256**3
