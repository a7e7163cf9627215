"""The roofline pass counts each program once (the `perf` task): the default model's deduplicated
costs (`distinct.py`) derive from the costs as written instead of a second count, and both models'
figures stay exact. A loop kernel with one entry of each kind: a symmetric product (x @ x.T), a
broadcast operand (x @ w repeated over b) and a duplicated node (x @ x.T again).

Hand counts (a MAC is 2 FLOPs): x @ x.T is 2 x 64 x 64 x 32 = 262,144 as written and
ceil(262,144 x 65 / 128) = 133,120 as the symmetric half; the broadcast product is 2 x 8 x 64 x 32 x 32
= 1,048,576 as written and 2 x 64 x 32 x 32 = 131,072 distinct; the duplicate needs 0.
"""

from __future__ import annotations

import pytest
from xdsl.context import Context

from solar_compiler.analysis import costs
from solar_compiler.analysis.summary import module_report
from solar_compiler.dialects.convert import kernels_to_module
from solar_compiler.passes import all_passes
from solar_compiler.text.parser import parse_kernel

TEXT = """kernel k(x: f32[64, 32] input, w: f32[32, 32] weight, y: f32[64, 64] output,
         z: f32[8, 64, 32] output, u: f32[64, 64] output):
    for i in range(64):
        for j in range(64):
            y[i, j] = 0.0
            for k in range(32):
                y[i, j] += x[i, k] * x[j, k]
    for b in range(8):
        for i in range(64):
            for j in range(32):
                z[b, i, j] = 0.0
                for k in range(32):
                    z[b, i, j] += x[i, k] * w[k, j]
    for i in range(64):
        for j in range(64):
            u[i, j] = 0.0
            for k in range(32):
                u[i, j] += x[i, k] * x[j, k]
"""


def _roofline(monkeypatch: pytest.MonkeyPatch, algorithms: str) -> tuple[dict, int]:
    counted = []
    real = costs._program_costs

    def counting(p, indirect):  # noqa: ANN001, ANN202
        counted.append(p.kernel_name)
        return real(p, indirect)

    monkeypatch.setattr(costs, "_program_costs", counting)
    module = kernels_to_module([parse_kernel(TEXT.replace(",\n        ", ", "), "t.loop")])
    passes = all_passes()
    passes["lift-einsum"]()().apply(Context(), module)
    passes["roofline"]()(fidelity="all", hw="H100_SXM", algorithms=algorithms).apply(Context(), module)
    report = module_report(module)
    assert report is not None
    return report, len(counted)


def test_the_default_model_counts_the_program_once(monkeypatch: pytest.MonkeyPatch) -> None:
    report, counts = _roofline(monkeypatch, "default")
    assert counts == 1  # before: 2 (the costs as written, then the distinct costs counted afresh)
    assert [(o["name"], o["flops_matrix"]) for o in report["ops"]] == [("S1", 133_120), ("S3", 131_072),
                                                                        ("S5", 0)]
    assert [(r["kind"], r["what"]) for r in report["rewrites"]] == [
        ("symmetric product", "S1"), ("distinct products", "S3"), ("common subexpression", "S5")]
    assert report["classical"]["totals"]["flops_matrix"] == 262_144 + 1_048_576 + 262_144
    # the entries lower FLOPs only: the traffic (and so every byte figure) is the one as written
    assert report["totals"]["bytes_unfused"] == report["classical"]["totals"]["bytes_unfused"]
    assert report["totals"]["bytes_fused"] == report["classical"]["totals"]["bytes_fused"]


def test_the_classical_model_counts_the_program_once(monkeypatch: pytest.MonkeyPatch) -> None:
    report, counts = _roofline(monkeypatch, "classical")
    assert counts == 1
    assert report["rewrites"] == []
    assert [o["flops_matrix"] for o in report["ops"]] == [262_144, 1_048_576, 262_144]


def test_distinct_costs_refuse_costs_of_another_program() -> None:
    from solar_compiler.dialects.graph_convert import lift_kernel
    from solar_compiler.transforms.kernels import kernel_costs

    p = lift_kernel(parse_kernel(TEXT.replace(",\n        ", ", "), "t.loop"))
    other = kernel_costs(parse_kernel("kernel m(a: f32[4] input, b: f32[4] output):\n"
                                      "    for i in range(4):\n        b[i] = a[i] * 2.0\n", "m.loop"))
    with pytest.raises(costs.LoopIRError, match="do not belong to program k"):
        costs.distinct_costs(p, other)
