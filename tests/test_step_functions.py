"""Step functions of one value (analysis/step_functions.py): a comparison cascade that assigns codes
by thresholds costs one vector operation per element under the default model, its literal count
under `classical`.

Shapes 64 x 256 = 16,384 elements; B200's f32 vector rate is 80 TFLOP/s, DRAM 8 TB/s.
"""

from __future__ import annotations

from solar_compiler.analysis.costs import distinct_costs
from solar_compiler.analysis.step_functions import STEP
from solar_compiler.dialects.graph_convert import lift_kernel
from solar_compiler.text.parser import parse_kernel
from solar_compiler.transforms.kernels import kernel_costs

E = 64 * 256

# The harness's e2m1 encoder, four codes: each code assigned under a mask of two comparisons.
CASCADE = """kernel q(X: f32[64, 256] input, C: f32[64, 256] output):
    local G: bool[64, 256]
    local L: bool[64, 256]
    local M: bool[64, 256]
    local H: bool[64, 256]
    for i in range(64):
        for j in range(256):
            G[i, j] = X[i, j] > 0.25
    for i in range(64):
        for j in range(256):
            L[i, j] = X[i, j] < 0.75
    for i in range(64):
        for j in range(256):
            M[i, j] = G[i, j] and L[i, j]
    for i in range(64):
        for j in range(256):
            C[i, j] = 1.0 if M[i, j] else 0.0
    for i in range(64):
        for j in range(256):
            H[i, j] = X[i, j] >= 0.75
    for i in range(64):
        for j in range(256):
            C[i, j] = 2.0 if H[i, j] else C[i, j]
"""


def _costs(text: str):
    k = parse_kernel(text, "t.loop")
    g = lift_kernel(k)
    written = kernel_costs(k)
    return written, distinct_costs(g, written)


def test_cascade_costs_one_operation_per_element():
    written, default = _costs(CASCADE)
    # as written: G, L, M (and), C (select), H, C (select): 6 operations per element
    assert sum(o.flops_vector for o in written.ops) == 6 * E
    # one operation per element, at the node whose value is needed: the last write of the output C
    assert sum(o.flops_vector for o in default.ops) == E
    assert [o.flops_vector for o in default.ops] == [0, 0, 0, 0, 0, E]
    assert default.ops[-1].algorithm == STEP
    assert all(o.algorithm == f"{STEP} (into S5)" for o in default.ops[:-1])


def test_a_code_read_elsewhere_is_an_exit():
    # M is also stored into the output D: the region needs M's value and C's, one operation each
    text = CASCADE.replace("C: f32[64, 256] output)", "C: f32[64, 256] output, D: f32[64, 256] output)") + \
        """    for i in range(64):
        for j in range(256):
            D[i, j] = f32(M[i, j]) * X[i, j]
"""
    _, default = _costs(text)
    assert [o.flops_vector for o in default.ops[:6]] == [0, 0, E, 0, 0, E]


def test_arithmetic_breaks_the_region():
    # X * 2 > 0.5 compares a computed value, not the element itself: no step region, as written
    text = CASCADE.replace("G[i, j] = X[i, j] > 0.25", "G[i, j] = X[i, j] * 2.0 > 0.25")
    written, default = _costs(text)
    # G's node is out (7 operations with its product); L, M, C, H, C stay a region of 5 nodes
    assert sum(o.flops_vector for o in written.ops) == 7 * E
    assert default.ops[0].algorithm is None and default.ops[0].flops_vector == 2 * E


def test_two_elements_are_two_sources():
    # comparing X[i, j] and X[i, 255 - j] in one cascade: a function of two elements, no region
    text = CASCADE.replace("L[i, j] = X[i, j] < 0.75", "L[i, j] = X[i, 255 - j] < 0.75")
    written, default = _costs(text)
    assert default.ops[2].algorithm is None and default.ops[2].flops_vector == E
