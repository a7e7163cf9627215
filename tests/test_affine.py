"""Affine expressions: canonical arithmetic, printing that reads back, islpy text, evaluation."""

from __future__ import annotations

import islpy as isl
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solar_compiler.loopir.affine import AffCond, AffExpr, AffineError, solo_vars
from solar_compiler.text.parser import parse_affine, parse_conds

i, j, k = AffExpr.var("i"), AffExpr.var("j"), AffExpr.var("k")


@pytest.mark.parametrize(("expr", "text"), [
    (2 * i + 3 * j - 1, "2*i + 3*j - 1"),
    (j + i, "i + j"),                      # terms sorted by name
    (i - i, "0"),                          # cancelled terms vanish
    ((i + 1) * 0, "0"),
    (3 - i, "-i + 3"),
    (-i - 1, "-i - 1"),
    ((4 * i + 8) // 4, "i + 2"),           # exact division folds
    ((4 * i + 6) // 4, "(4*i + 6) // 4"),
    (i % 1, "0"),
    ((i + j) // 2 * 3, "3*((i + j) // 2)"),
    (-(i // 3), "-(i // 3)"),              # not `-i // 3`, which is (-i) // 3
    (-(i % 3), "-(i % 3)"),
    (j - i % 3, "j - i % 3"),
    (1 - i // 2, "-(i // 2) + 1"),
    (-3 * (i // 2), "-3*(i // 2)"),
    ((-i) // 2, "(-i) // 2"),
    ((i // 2) // 3, "(i // 2) // 3"),
    (AffExpr.lit(-7) // 2, "-4"),         # constants fold with floor semantics
    (AffExpr.lit(-7) % 3, "2"),
])
def test_canonical_printing(expr: AffExpr, text: str) -> None:
    assert str(expr) == text
    assert parse_affine(text) == expr


def test_equal_expressions_are_identical() -> None:
    assert (i + j) * 2 - j == j + 2 * i
    assert hash((i + j) * 2 - j) == hash(j + 2 * i)
    assert 2 * (i + 1) == 2 * i + 2


def test_queries() -> None:
    e = 2 * i - 3 * (j // 4) + 5
    assert e.vars() == {"i", "j"}
    assert e.coeff("i") == 2
    assert e.coeff("j") == 0  # j appears only under //
    assert e.is_quasi() and not (2 * i + 1).is_quasi()
    assert AffExpr.lit(3).is_const() and i.is_var() and not (i + 1).is_var()


@pytest.mark.parametrize(("thunk", "message"), [
    (lambda: i * j, "product of two non-constant expressions: (i) * (j)"),
    (lambda: i // 0, "'//' needs a positive constant divisor, got 0"),
    (lambda: i % -2, "'%' needs a positive constant divisor, got -2"),
    (lambda: i // j, "'//' by a non-constant expression (j)"),
    (lambda: AffExpr.of(1.5), "not an affine expression: 1.5"),
    (lambda: AffExpr.of(True), "not an affine expression: True"),
])
def test_errors(thunk, message: str) -> None:
    with pytest.raises(AffineError) as e:
        thunk()
    assert str(e.value) == message


def test_evaluate_substitute_bounds() -> None:
    e = 2 * i - j // 2 + i % 3
    assert e.evaluate({"i": 4, "j": 7}) == 8 - 3 + 1
    assert e.evaluate({"i": np.arange(5), "j": 7}).tolist() == [-3, 0, 3, 3, 6]
    assert (AffExpr.lit(0) - j // 2).evaluate({"j": -3}) == 2  # floor, as Python
    assert (i + 2 * j).substitute({"i": j + 1}) == 3 * j + 1
    assert (i // 2).substitute({"i": 2 * k + 4}) == k + 2
    assert (2 * i - j).bounds({"i": (0, 3), "j": (1, 5)}) == (-5, 5)
    assert ((i + 1) // 2).bounds({"i": (0, 9)}) == (0, 5)
    assert (i % 4).bounds({"i": (0, 100)}) == (0, 3)


@pytest.mark.parametrize(("lhs", "op", "rhs", "text", "canon"), [
    (i, "<", j, "j >= i + 1", "-i + j - 1 >= 0"),
    (i, "<=", j + 3, "j + 3 >= i", "-i + j + 3 >= 0"),
    (i, "==", 2 * j, "i == 2*j", "i - 2*j + 0 = 0"),
    (i, ">", AffExpr.lit(0), "i >= 1", "i - 1 >= 0"),
    (2 * i + 1, ">=", j, "2*i + 1 >= j", "2*i - j + 1 >= 0"),
])
def test_conditions(lhs: AffExpr, op: str, rhs: AffExpr, text: str, canon: str) -> None:
    c = AffCond.compare(lhs, op, rhs)
    assert str(c) == text
    assert c.to_isl() == canon
    assert parse_conds(text) == [c]


def test_condition_rejects_not_equal() -> None:
    with pytest.raises(AffineError, match="'!=' is not an affine constraint"):
        AffCond.compare(i, "!=", j)


# ---- properties: random expressions -----------------------------------------------------------
NAMES = ["i", "j", "k"]


@st.composite
def affine(draw, depth: int = 2) -> AffExpr:
    e = AffExpr.lit(draw(st.integers(-5, 5)))
    for _ in range(draw(st.integers(1, 3))):
        atom = AffExpr.var(draw(st.sampled_from(NAMES)))
        if depth and draw(st.booleans()):
            inner = draw(affine(depth=depth - 1))
            den = draw(st.integers(1, 4))
            atom = inner // den if draw(st.booleans()) else inner % den
        e = e + atom * draw(st.integers(-3, 3))
    return e


@settings(max_examples=150, deadline=None)
@given(affine())
def test_print_parse_round_trip(e: AffExpr) -> None:
    assert parse_affine(str(e)) == e


@settings(max_examples=100, deadline=None)
@given(affine(), st.tuples(*[st.integers(-6, 6)] * 3))
def test_evaluate_matches_islpy(e: AffExpr, point: tuple[int, int, int]) -> None:
    """`to_isl` means the same function as `evaluate`: the point maps to exactly one value."""
    env = dict(zip(NAMES, point, strict=True))
    m = isl.Map(f"{{ [i, j, k] -> [{e.to_isl()}] }}")
    image = m.intersect_domain(isl.Set(f"{{ [{point[0]}, {point[1]}, {point[2]}] }}")).range()
    assert image == isl.Set(f"{{ [{e.evaluate(env)}] }}")


@settings(max_examples=100, deadline=None)
@given(affine(), st.dictionaries(st.sampled_from(NAMES), st.tuples(st.integers(-5, 5), st.integers(0, 5)),
                                 min_size=3))
def test_bounds_contain_every_value(e: AffExpr, spans: dict[str, tuple[int, int]]) -> None:
    ranges = {v: (lo, lo + w) for v, (lo, w) in spans.items()}
    lo, hi = e.bounds(ranges)
    grid = np.meshgrid(*[np.arange(a, b + 1) for a, b in ranges.values()], indexing="ij")
    vals = np.asarray(e.evaluate(dict(zip(ranges, grid, strict=True))))
    assert lo <= vals.min() and vals.max() <= hi


def _canonical(e: AffExpr) -> AffExpr:
    """`e` rebuilt through the general (sorting) constructor."""
    return AffExpr._make(dict(e.terms), e.const)


@settings(max_examples=150, deadline=None)
@given(affine(), affine(), st.integers(-4, 4))
def test_fast_arithmetic_paths_stay_canonical(a: AffExpr, b: AffExpr, n: int) -> None:
    """Adding a constant, negating and scaling skip the re-sort: each result must equal the one the
    general path builds, term order included, and mean the same function."""
    env = {"i": 2, "j": -3, "k": 5}
    for got, want in ((a + n, a.evaluate(env) + n), (a - n, a.evaluate(env) - n), (-a, -a.evaluate(env)),
                      (a * n, a.evaluate(env) * n), (n + a, n + a.evaluate(env)),
                      (a - b, a.evaluate(env) - b.evaluate(env)), (AffExpr.lit(n) + a, n + a.evaluate(env))):
        assert got == _canonical(got)
        assert got.evaluate(env) == want


def test_solo_vars_are_the_variables_an_index_holds_alone():
    """`i`, `-j`, `2*k + 1` hold one variable each; `i + j`, `k // 2`, `k % 4` and a constant do not,
    and a non-affine index (a gathered value) is skipped."""
    idx = [parse_affine(t) for t in ("i", "-j", "2*k + 1", "i + j", "k // 2", "k % 4", "3")]
    assert solo_vars(idx) == {"i", "j", "k"}
    assert solo_vars(idx[3:]) == frozenset()
    assert solo_vars([parse_affine("i + j"), "gathered", parse_affine("j")]) == {"j"}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["i", "j", "2*i + 1", "-j", "i + j", "i - j", "i // 2", "j % 3", "1"]),
                min_size=1, max_size=3))
def test_solo_vars_covering_every_variable_means_injective(texts):
    """When every variable is solo in some index, isl agrees the access is injective."""
    idx = [parse_affine(t) for t in texts]
    acc = isl.Map(f"{{ [i, j] -> [{', '.join(e.to_isl() for e in idx)}] : 0 <= i < 6 and 0 <= j < 6 }}")
    if solo_vars(idx) >= {"i", "j"}:
        assert acc.is_injective()


def test_a_split_index_joined_again_is_the_index():
    """`n * (e // n) + e % n` is `e` (a view reshaped and reshaped back): without the fold the index
    nested once more at every such pair, and OPT's 24 layers made a 2^24-term expression."""
    i = AffExpr.var("i0")
    assert 256 * (i // 256) + i % 256 == i
    assert ((i % 256) + 256 * (i // 256)) // 256 == i // 256
    assert 2 * ((i + 3) % 8) + 16 * ((i + 3) // 8) == 2 * i + 6  # scaled, with a constant inside
    assert str(i % 4 + 8 * (i // 4)) == "i0 % 4 + 8*(i0 // 4)"  # not the pair: kept
    e = i
    for _ in range(30):  # stays one level deep however often it is split and joined
        e = (e % 64 + 64 * (e // 64)) // 1
    assert e == i
