"""After `lift-einsum` the analyses see only einsum ops (issue 20).

The lift replaces each kernel by its graph, and every analysis the roofline runs reads the graph
through the structured interface (`analysis/graphs.py`). So with the graph -> loop-AST conversion
deleted from the pipeline (`graph_to_kernel` raising, wherever a module imported it), the report of
every fidelity, both models, is the report of the ordinary run, key for key. The programs cover what
reads a node's body: a contraction chain the catalogue reorders, a symmetric product, a duplicated
contraction, a select, a 3x3 convolution, masked attention, a scan (cumsum), a scatter and a layernorm.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from solar_compiler.driver import main

ROOT = Path(__file__).resolve().parent.parent

CHAIN = """\
kernel chain(A: f32[64, 64] input, B: f32[64, 64] weight, V: f32[64, 1] weight, Y: f32[64, 1] output):
    local T: f32[64, 64]
    for i in range(64):
        for j in range(64):
            T[i, j] = 0.0
            for k in range(64):
                T[i, j] += A[i, k] * B[k, j]
    for i in range(64):
        for j in range(1):
            Y[i, j] = 0.0
            for k in range(64):
                Y[i, j] += T[i, k] * V[k, j]
"""

SYMMETRIC_AND_DUPLICATE = """\
kernel symdup(X: f32[32, 16] input, W: f32[16, 8] weight, S: f32[32, 32] output, D: f32[32, 8] output):
    local P: f32[32, 8]
    local Q: f32[32, 8]
    for i in range(32):
        for j in range(32):
            S[i, j] = 0.0
            for k in range(16):
                S[i, j] += X[i, k] * X[j, k]
    for i in range(32):
        for j in range(8):
            P[i, j] = 0.0
            for k in range(16):
                P[i, j] += X[i, k] * W[k, j]
    for i in range(32):
        for j in range(8):
            Q[i, j] = 0.0
            for k in range(16):
                Q[i, j] += X[i, k] * W[k, j]
    for i in range(32):
        for j in range(8):
            D[i, j] = select(P[i, j] > 0.0, P[i, j], 0.0) + Q[i, j]
"""

CASES = {"chain.loop": CHAIN, "symdup.loop": SYMMETRIC_AND_DUPLICATE}
EXAMPLES = ["conv2d.loop", "causal_attention.loop", "cumsum.loop", "scatter_add.loop", "layernorm.loop"]


def _report(path: Path, out: Path, extra: list[str]) -> dict:
    rc = main([str(path), "--lift-einsum", "--roofline=all", "--hw", "H100_SXM,B200", "--format", "json",
               "-o", str(out), *extra])
    assert rc == 0
    report = json.loads(out.read_text())
    for hw in report["hw"].values():
        hw.pop("path", None)
    return report


@pytest.mark.parametrize("algorithms", ["default", "classical"])
def test_the_report_needs_no_loop_ast_after_the_lift(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     algorithms: str) -> None:
    paths = [ROOT / "examples" / "loop" / name for name in EXAMPLES]
    for name, text in CASES.items():
        (tmp_path / name).write_text(text)
        paths.append(tmp_path / name)
    extra = [f"--algorithms={algorithms}"]
    before = {p.name: _report(p, tmp_path / f"{p.stem}.before.json", extra) for p in paths}

    def deleted(graph: object) -> None:
        raise AssertionError("an analysis converted an einsum graph back to the loop AST after the lift")

    holders = [m for name, m in list(sys.modules.items())
               if name.startswith("solar_compiler") and hasattr(m, "graph_to_kernel")]
    assert any(m.__name__ == "solar_compiler.dialects.graph_convert" for m in holders)
    for m in holders:
        monkeypatch.setattr(m, "graph_to_kernel", deleted)
    for p in paths:
        assert _report(p, tmp_path / f"{p.stem}.after.json", extra) == before[p.name], p.name
    # the cases exercise what they are meant to: the catalogue's rewrites in the default model
    if algorithms == "default":
        kinds = {r["kind"] for r in before["chain.loop"]["rewrites"] + before["symdup.loop"]["rewrites"]}
        assert {"reassociated", "symmetric product", "common subexpression"} <= kinds, kinds
