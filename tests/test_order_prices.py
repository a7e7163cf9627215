"""Association orders are priced once per shape (`analysis/order_prices.py`): trees that differ only
in their tensors' and loops' names share their orders' exact costs, which equal each tree's own
pricing; a shape that differs (an extent, a dtype, a repeated operand) is priced apart."""

from __future__ import annotations

import re
import textwrap

import pytest
from test_reorder_chains import CHAIN as THREE_MATRICES

from solar_compiler.analysis import chain_order, order_prices
from solar_compiler.analysis.chain_order import plan_program
from solar_compiler.analysis.costs import program_costs
from solar_compiler.dialects.graph_convert import lift_kernel
from solar_compiler.text.parser import parse_kernels

# the three-matrix chain of test_reorder_chains.py, its name and dtype free
CHAIN = THREE_MATRICES.replace("kernel chain(", "kernel NAME(").replace("f32", "DT")


def chain(name: str = "chain", dtype: str = "f32", renamed: dict[str, str] | None = None) -> str:
    text = CHAIN.replace("NAME", name).replace("DT", dtype)
    for old, new in (renamed or {}).items():
        text = re.sub(rf"\b{old}\b", new, text)
    return text


def plans(text: str):
    (k,) = parse_kernels(textwrap.dedent(text), "t.loop")
    g = lift_kernel(k)
    return plan_program(g, program_costs(g))


@pytest.fixture
def priced_shapes(monkeypatch):
    """The shapes actually priced (the graph costed), with the shared table emptied first."""
    monkeypatch.setattr(order_prices, "_PRICES", {})
    seen: list[int] = []
    real = chain_order._graph_costs
    monkeypatch.setattr(chain_order, "_graph_costs", lambda g: seen.append(1) or real(g))
    return seen


def test_a_renamed_tree_shares_its_orders_prices_and_gets_the_same_plan(priced_shapes):
    (first,) = plans(chain())
    n = len(priced_shapes)
    assert n >= 1  # (A * (B * C)): the candidates' equal nests are one program
    (second,) = plans(chain("layer1", renamed={"A": "q", "B": "wk", "C": "v", "T": "s", "i": "a", "k": "r"}))
    assert len(priced_shapes) == n  # every order of the renamed tree was a shared price
    assert second.best.cost == first.best.cost and second.best.path == first.best.path
    assert second.best.cost.flops == 2 * 32 * 256 * 16 + 2 * 256 * 32 * 16  # (A * (B * C)), by hand
    assert second.best.words == "(q * (wk * v))" and second.best.new_tensors != ()
    # the graph is the renamed tree's own (built on demand), not the first tree's
    assert {t for t in second.best.graph.tensor_ops()} >= {"q", "wk", "v", "Y"}


def test_another_dtype_or_extent_is_priced_apart(priced_shapes):
    plans(chain())
    n = len(priced_shapes)
    (bf16,) = plans(chain(dtype="bf16"))
    assert len(priced_shapes) > n
    m = len(priced_shapes)
    (wider,) = plans(chain().replace("C: f32[256, 16]", "C: f32[256, 24]").replace("[256, 16] output",
                                                                                    "[256, 24] output")
                     .replace("range(16)", "range(24)"))
    assert len(priced_shapes) > m
    assert wider.best.cost.flops == 2 * 32 * 256 * 24 + 2 * 256 * 32 * 24
    assert bf16.best.cost.bytes * 2 == plans(chain())[0].best.cost.bytes  # half the bytes per element


def test_the_key_names_tensors_by_position_and_loops_by_first_use():
    from solar_compiler.analysis.chains import Factor
    from solar_compiler.dialects.einsum_build import ProductNest
    from solar_compiler.loopir.affine import AffExpr

    def nest(out: str, a: str, b: str, i: str, k: str) -> ProductNest:
        return ProductNest(out, (AffExpr.var(i),), "+=", (Factor(a, (AffExpr.var(i), AffExpr.var(k))),
                                                          Factor(b, (AffExpr.var(k),))),
                           ((i, 0, 4), (k, 0, 8)), loc="m.py:3")

    def decls(x: str, y: str, o: str) -> tuple:
        return (x, (4, 8), "f32", "input"), (y, (8,), "f32", "input"), (o, (4,), "f32", "output")

    key = order_prices.shape_key(decls("x", "w", "y"), [nest("y", "x", "w", "i", "k")])
    assert key == order_prices.shape_key(decls("x2", "w_1", "out"), [nest("out", "x2", "w_1", "j", "r")])
    # the same tensor read twice is another program than two tensors
    assert key != order_prices.shape_key(decls("x", "w", "y"), [nest("y", "x", "x", "i", "k")])
