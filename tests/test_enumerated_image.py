"""Image counts of quasi-affine accesses by enumeration agree with isl's (`analysis/enumerated_image.py`)."""

from __future__ import annotations

import islpy as isl
import pytest
from xdsl.ir.affine import AffineExpr

from solar_compiler.analysis.enumerated_image import enumerated_image
from solar_compiler.analysis.structured import Constraint, _box, _image, isl_expr

d0, d1, d2 = (AffineExpr.dimension(i) for i in range(3))

# a window partition with a shift (SwinMLP's: padded 7x7 windows over a 28x28 grid), a roll, a
# strided read, a ceil-div, and results that repeat elements (a broadcast, a pooling window)
CASES = [
    ((4, 784, 64), [25 * d0 + ((d1 % 28) + 4) // 7 + 5 * ((d1 // 28 + 4) // 7),
                    ((d1 % 28) + 4) % 7 + 7 * ((d1 // 28 + 4) % 7) + 49 * (d2 // 32), d2 % 32]),
    ((8, 16, 5), [(d1 + 3) % 16, d0 * 2 + 1]),
    ((8, 16, 5), [d1 // 4, d2]),
    ((8, 16, 5), [d1.ceil_div(3) + d2, d0]),
    ((8, 16, 5), [d0 + d1, d2 * 0 + 7]),
    ((8, 16, 5), []),
]


def _isl_count(extents, results) -> int:
    body = " and ".join(f"0 <= d{i} < {n}" for i, n in enumerate(extents))
    dims = ", ".join(f"d{i}" for i in range(len(extents)))
    m = isl.Map(f"{{ S[{dims}] -> T[{', '.join(isl_expr(r) for r in results)}] : {body} }}")
    return m.range().count_val().to_python()


@pytest.mark.parametrize("extents, results", CASES)
def test_an_enumerated_image_count_is_isls(extents, results):
    n = len(extents)
    got = enumerated_image([0] * n, [e - 1 for e in extents], list(range(n)), results)
    assert got == _isl_count(extents, results)
    cons = tuple(Constraint(t, frozenset({i}))
                 for i, e in enumerate(extents) for t in (f"d{i} >= 0", f"d{i} < {e}"))
    assert _image(tuple(range(n)), cons, tuple(results)) == got


def test_only_small_boxes_are_enumerated():
    """A triangle is no box, and a box over MAX_POINTS is left to isl."""
    tri = (Constraint("d0 >= 0", frozenset({0})), Constraint("d1 >= 0", frozenset({1})),
           Constraint("d1 <= d0", frozenset({0, 1})), Constraint("d0 < 100", frozenset({0})))
    assert _box((0, 1), tri) is None
    big = tuple(Constraint(t, frozenset({i})) for i in range(2) for t in (f"d{i} >= 0", f"d{i} < 4096"))
    assert _box((0, 1), big) is None
    assert enumerated_image([0, 0], [4095, 4095], [0, 1], [d0, d1]) is None
    band = (Constraint("d1 >= 3", frozenset({1})), Constraint("d1 < 9", frozenset({1})))
    assert _box((0, 1), big[:2] + band) == ([0, 3], [4095, 8])
