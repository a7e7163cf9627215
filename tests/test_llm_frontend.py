"""The LLM frontend end to end through `solar-opt`: the recorded examples in examples/llm/ replayed
(per-op fill-in and whole program), the manual provider's prompt / exit 3 / rerun cycle,
`--frontend=llm` against the deterministic path, and the errors when no model is configured."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

from solar_compiler.driver import main  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "llm"

# per example: (the ops the LLM wrote with their attempts, total FLOPs priced, and the FLOPs of the
# LLM's loop nests as written, derived by hand). An LLM's nest is one algorithm among many: only the
# products of its plain contractions are priced (docs/llm-frontend.md, "Pricing"), none here.
# kthvalue_rows: rank[i, j] += i64(x[i,k] < x[i,j] or x[i,k] == x[i,j] and k < j): 8*16*16 = 2048
#   points of 2 comparisons, and, or and the += (5 vector FLOPs, the cast is free) = 10,240, and k < j
#   once per (j, k): 256 (analysis/vector_work.py); the picks of rank 3, per (i, j) one comparison
#   shared by both, a select and a max, a select and a min: 128 x 5 = 640; all unpriced (an O(N^2)
#   rank count: a radix select does no arithmetic); priced: values * 2.0, 8
# scatter_mean: 128 sums + 128 counts + per bucket element (32) a division, a comparison and a select
# running_max (the whole program by the LLM): 15 scan steps of max + 16 additions
# softsign: linear 4x32x32 (8,192 matrix; the bias is the accumulator's initial value, no FLOP) and
#   * 3.0 (128) priced; the LLM's abs, +, / per element (384) not
RECORDED = {
    "kthvalue_rows": ([("aten.kthvalue.default", 2)], 8, 11_136),
    "mask_assign": ([("aten.index.Tensor", 2), ("aten.index_put.default", 1)], None, None),
    "scatter_mean": ([("aten.scatter_reduce.two", 2)], 0, 352),
    "running_max": ([("the whole program", 2)], 0, 31),
    "softsign_custom_op": ([("solar_examples.softsign.default", 2)], 8_192 + 128, 384),
}
# kthvalue has a template (a stand-in rank count); the example sends it to the LLM by name
SENT = {"kthvalue_rows": ("--llm-ops=kthvalue",)}


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("SOLAR_LLM_MODEL", raising=False)
    monkeypatch.chdir(tmp_path)


def _json_report(capsys, *args: str) -> dict:
    rc = main([*args, "--roofline=fused", "--hw", "H100_SXM", "--format", "json"])
    assert rc == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_example_replays_validates_and_reports(name, capsys):
    llm_ops, flops, written = RECORDED[name]
    r = _json_report(capsys, str(EXAMPLES / f"{name}.py"), "--translate", *SENT.get(name, ()),
                     "--llm-replay", str(EXAMPLES / f"{name}.transcript.jsonl"))
    v = r["validation"]
    if name == "mask_assign":  # a boolean mask's count is a size: each fresh sample needs the LLM again
        assert v["validated"] is False and v["samples"] == 1 and v["max_rel_err"] == 0.0
        assert v["reason"].startswith("value-dependent program: no fresh sample traces it again")
    else:
        assert v["validated"] is True
    by_llm = [(t["op"], t["attempts"]) for t in v["translated_by"] if t["by"] == "llm"]
    assert by_llm == llm_ops
    assert all(t["model"] == f"manual (replayed from {name}.transcript.jsonl)"
               for t in v["translated_by"] if t["by"] == "llm")
    if flops is not None:
        assert r["totals"]["flops"] == flops
        assert sum(o["flops_written"] for o in r["llm_ops"]) == written
    # every recorded transcript has a wrong first attempt that the repair loop corrected
    recs = [json.loads(x) for x in (EXAMPLES / f"{name}.transcript.jsonl").read_text().splitlines()]
    assert any(not x["accepted"] and x["diagnostic"] for x in recs)
    assert recs[-1]["accepted"]


def test_text_report_names_the_path_of_each_op(capsys):
    assert main([str(EXAMPLES / "scatter_mean.py"), "--translate", "--roofline=fused", "--hw", "H100_SXM",
                 "--llm-replay", str(EXAMPLES / "scatter_mean.transcript.jsonl")]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the header wraps at the report width
    where = str(EXAMPLES / "scatter_mean.py")
    assert (f"translated: aten.scatter_reduce.two ({where}:14) by LLM manual "
            "(replayed from scatter_mean.transcript.jsonl), 2 attempt(s)") in out


def test_deterministic_path_rejects_the_examples(capsys):
    assert main([str(EXAMPLES / "kthvalue_rows.py"), "--translate", "--llm-ops=kthvalue"]) == 1
    err = capsys.readouterr().err.strip()  # sent to the LLM by name, and no model configured
    assert "kthvalue_rows.py:11: aten.kthvalue.default (%x, 4) is sent to the LLM (--llm-ops); an LLM can " \
           "translate it, but no model is configured" in err and len(err.splitlines()) == 1
    kth = str(EXAMPLES / "kthvalue_rows.py")
    assert main([kth, "--translate", "--frontend=torch", "--llm-ops=kthvalue"]) == 1
    assert capsys.readouterr().err.strip().endswith("llm-ops sends ops to the LLM inside the deterministic "
                                                    "translation: it needs frontend auto, not 'torch'")
    jax = str(EXAMPLES.parent / "jax" / "batched_matmul.py")
    assert main([jax, "--translate", "--llm-ops=kthvalue"]) == 1
    assert capsys.readouterr().err.strip().endswith("the jax frontend has no per-op fill-in")
    assert main([str(EXAMPLES / "scatter_mean.py"), "--translate"]) == 1  # auto, no model configured
    err = capsys.readouterr().err.strip()
    assert "scatter_mean.py:14: no loop-IR template for scatter reduction 'mean'" in err
    assert "an LLM can translate it, but no model is configured: configure a model with --llm-model" in err
    assert len(err.splitlines()) == 1


MODEL = textwrap.dedent('''
    import torch
    import torch.nn as nn

    N = 8


    class Model(nn.Module):
        def forward(self, x):
            return torch.kthvalue(x, 3).values + 1.0


    def get_inputs():
        return [torch.randn(2, N)]


    def get_init_inputs():
        return []
''')
SORT = """```loop
kernel kthvalue(self: f32[2, 8] input, values: f32[2] output):
    local rank: i64[2, 8]
    for i in range(2):
        for j in range(8):
            rank[i, j] = 0
            for k in range(8):
                rank[i, j] += i64(self[i, k] < self[i, j] or (self[i, k] == self[i, j] and k < j))
        values[i] = -inf
        for j in range(8):
            values[i] max= self[i, j] if rank[i, j] == 2 else -inf
```
"""


def test_manual_provider_prompt_exit_3_then_rerun_finishes(tmp_path, capsys):
    src = tmp_path / "m.py"
    src.write_text(MODEL)
    args = [str(src), "--translate", "--llm-model=manual", "--llm-ops=aten.kthvalue.default",
            "--llm-transcript-dir", "dialog", "-t", "loop"]
    assert main(args) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["solar-opt: error: dialog/001.prompt.md: prompt for aten.kthvalue.default at m.py:10 "
                   "written; put the model's answer in dialog/001.response.md and rerun the same command"]
    prompt = (tmp_path / "dialog" / "001.prompt.md").read_text()
    assert "aten.kthvalue.default(self=self: f32[2, 8], k=3) -> (values: f32[2])" in prompt
    assert "m.py:10) is to be written as a new kernel. Write a kernel for this one call" in prompt
    assert "- `self: f32[2, 8] input`\n- `values: f32[2] output`" in prompt
    descending = SORT.replace("self[i, k] < self[i, j]", "self[i, k] > self[i, j]")
    (tmp_path / "dialog" / "001.response.md").write_text(descending)
    assert main(args) == 3  # wrong: the repair prompt says where
    capsys.readouterr()
    repair = (tmp_path / "dialog" / "002.prompt.md").read_text()
    assert "It was rejected: validation failed on the reference pair: values[0]: got" in repair
    # self-contained: the original task and the rejected answer, nothing to continue
    assert repair.startswith((tmp_path / "dialog" / "001.prompt.md").read_text().rstrip())
    assert "self[i, k] > self[i, j]" in repair and "continue the conversation" not in repair
    (tmp_path / "dialog" / "002.response.md").write_text(SORT)
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "values[i] max= x[i, j] if kthvalue_rank[i, j] == 2 else -inf" in out.replace("getitem", "values")
    recs = [json.loads(x) for x in (tmp_path / "dialog" / "transcript.jsonl").read_text().splitlines()]
    assert [(r["task"], r["attempt"], r["accepted"]) for r in recs] == \
        [("aten.kthvalue.default at m.py:10", 1, False), ("aten.kthvalue.default at m.py:10", 2, True)]


def test_a_zero_dim_result_is_checked_against_a_zero_dim_reference(tmp_path, capsys):
    """The reference pair of an op returning a 0-d tensor keeps its shape (it once became (1,), and a
    correct kernel's `values[]` was rejected for its shape)."""
    src = tmp_path / "m.py"
    src.write_text(MODEL.replace("torch.randn(2, N)", "torch.randn(N)"))
    args = [str(src), "--translate", "--llm-model=manual", "--llm-ops=aten.kthvalue.default",
            "--llm-transcript-dir", "dialog", "-t", "loop"]
    assert main(args) == 3
    one_row = SORT.replace("self: f32[2, 8] input, values: f32[2] output",
                           "self: f32[8] input, values: f32[] output")
    one_row = one_row.replace("rank: i64[2, 8]", "rank: i64[8]").replace("    for i in range(2):\n", "")
    one_row = "\n".join(line[4:] if line.startswith("        ") else line for line in one_row.splitlines())
    (tmp_path / "dialog" / "001.response.md").write_text(one_row.replace("[i, ", "[").replace("[i]", "[]"))
    capsys.readouterr()
    assert main(args) == 0, capsys.readouterr().err
    assert "max= x[j] if kthvalue_rank[j] == 2 else -inf" in capsys.readouterr().out


ADD = textwrap.dedent('''
    import torch
    import torch.nn as nn

    N = 8


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.randn(N))

        def forward(self, x, y):
            return x * self.scale + y


    def get_inputs():
        return [torch.randn(4, N), torch.randn(4, N)]


    def get_init_inputs():
        return []
''')


def test_whole_program_llm_mode_matches_the_deterministic_flops(tmp_path, capsys):
    src = tmp_path / "add.py"
    src.write_text(ADD)
    args = [str(src), "--translate", "--frontend=llm", "--llm-model=manual", "--llm-transcript-dir", "d"]
    assert main([*args, "-t", "loop"]) == 3
    capsys.readouterr()
    prompt = (tmp_path / "d" / "001.prompt.md").read_text()
    params = ("- `x: f32[4, 8] input`\n- `y: f32[4, 8] input`\n- `scale: f32[8] weight`\n"
              "- `out: f32[4, 8] output`")
    assert params in prompt and "return x * self.scale + y" in prompt
    (tmp_path / "d" / "001.response.md").write_text(
        "```loop\nkernel add(x: f32[4, 8] input, y: f32[4, 8] input, scale: f32[8] weight, "
        "out: f32[4, 8] output):\n    for i in range(4):\n        for j in range(8):\n"
        "            out[i, j] = x[i, j] * scale[j] + y[i, j]\n```\n")
    llm = _json_report(capsys, *args)
    torch_ = _json_report(capsys, str(src), "--translate", "--frontend=torch")
    assert llm["validation"]["frontend"] == "llm" and llm["validation"]["samples"] == 3
    # the LLM's loop nest has the deterministic translation's FLOPs, but an LLM's nest is not priced
    # (no plain contraction here): its bound has no compute term
    assert [(o["flops_written"], o["flops_priced"]) for o in llm["llm_ops"]] == [(2 * 32, 0)]
    assert torch_["totals"]["flops"] == 2 * 32 and llm["totals"]["flops"] == 0
    assert llm["totals"]["bytes_fused"] == torch_["totals"]["bytes_fused"] == 4 * (32 + 32 + 8 + 32)


def test_whole_program_without_a_model_is_one_line(tmp_path, capsys):
    src = tmp_path / "add.py"
    src.write_text(ADD)
    assert main([str(src), "--translate", "--frontend=llm"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"solar-opt: error: {src}:1: the whole program is to be translated by an LLM; "
                          "an LLM can translate it, but no model is configured")


def test_accuracy_benchmark_with_the_manual_provider(tmp_path):
    import subprocess
    import sys

    models = tmp_path / "models"
    models.mkdir()
    (models / "add.py").write_text(ADD)
    answer = tmp_path / "tr" / "add" / "001.response.md"
    answer.parent.mkdir(parents=True)
    answer.write_text("```loop\nkernel add(x: f32[4, 8] input, y: f32[4, 8] input, scale: f32[8] weight, "
                      "out: f32[4, 8] output):\n    for i in range(4):\n        for j in range(8):\n"
                      "            out[i, j] = x[i, j] * scale[j] + y[i, j]\n```\n")
    bench = Path(__file__).resolve().parent.parent / "benchmarks" / "llm_accuracy.py"
    p = subprocess.run([sys.executable, str(bench), str(models), "--llm-model", "manual", "--transcripts",
                        str(tmp_path / "tr"), "--json", str(tmp_path / "rows.json")],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert [(r["validated"], r["attempts"], r["flops_llm"], r["flops_deterministic"], r["flops_equal"])
            for r in rows] == [(True, 1, 64, 64, True)]
    assert "validated 1/1; FLOPs equal to the deterministic path's 1/1 comparable" in p.stdout
