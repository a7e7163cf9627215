"""The whole-program LLM path (`--frontend=llm`): the prompt documents every construct of the loop-IR
grammar (derived from the Lark grammar itself) and carries the checking rules and a reference pair;
validation is the deterministic path's (full, sampled, reduced), never a full-size run that does not
fit; a rerun is a translation-cache hit; and the three KernelBench programs of issue 25 replay from
their recorded transcripts at their KernelBench sizes, with the deterministic path's FLOPs."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from solar_compiler.frontends.llm.prompt import render, sections

KERNELBENCH = Path(__file__).resolve().parent.parent / "examples" / "llm" / "kernelbench"

# the grammar's regular-expression terminals, by the example the prompt must show of each (a new
# terminal fails the test until the prompt documents it and this table names it)
REGEX_TERMINALS = {"NAME": None, "INT": "`1`", "NUMBER": "`1e-05`", "STRING": '`@ "file:line"`',
                   "COMMENT": "`#`", "_NL": None, "__IGNORE_0": None, "__IGNORE_1": "`\\`"}


def _grammar_literals() -> dict[str, list[str]]:
    """Every literal token of loop.lark, by terminal, read from the Lark parser the tool uses: a
    string terminal's text, or the alternatives of a terminal that is a choice of strings."""
    from solar_compiler.text.parser import _lark

    out: dict[str, list[str]] = {}
    for t in _lark().terminals:
        v = t.pattern.value
        if t.pattern.type == "str":
            out[t.name] = [v]
        elif (m := re.fullmatch(r"\(\?:(.*)\)", v)) and not re.search(r"[\[\]]", v):
            out[t.name] = [re.sub(r"\\(.)", r"\1", a) for a in m.group(1).split("|")]
        else:
            assert t.name in REGEX_TERMINALS, f"grammar terminal {t.name} ({v!r}) is not documented"
    return out


def _code_spans(text: str) -> list[str]:
    fenced = re.findall(r"```[a-z]*\n(.*?)```", text, re.DOTALL)
    inline = re.findall(r"`([^`]+)`", re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.DOTALL))
    return fenced + inline


def test_prompt_documents_every_grammar_construct():
    grammar = sections()["grammar"]
    spans = _code_spans(grammar)
    words = {w for s in spans for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", s)}
    literals = _grammar_literals()
    assert {"AT", "COLON", "AUGOP", "DTYPE", "MUL_OP"} <= set(literals)
    missing = []
    for name, alts in literals.items():
        for lit in alts:
            found = lit in words if lit.isidentifier() else any(lit in s for s in spans)
            if not found:
                missing.append(f"{name} {lit!r}")
    assert missing == []
    for name, example in REGEX_TERMINALS.items():
        assert example is None or example in grammar, name
    # the closed set of calls the parser accepts (parser.call: unary, binary, casts, select)
    from solar_compiler.loopir.ast import DTYPES
    from solar_compiler.loopir.rules import UNARY_FNS
    from solar_compiler.text.parser import CALL_BINARY

    calls = set(UNARY_FNS) | set(CALL_BINARY) | set(DTYPES) | {"select"}
    assert sorted(c for c in calls if c not in words) == []
    # what the grammar does not have is said too: slices and matrix products
    assert "`x[0:4]`" in grammar and "`@` matrix products" in grammar


def test_program_prompt_states_tolerances_and_literal_typing():
    text = render("program", path="m.py", mode="eval", source="", kernel="k", params="", outputs="",
                  reference="REF", tolerance="f32 0.0001")
    assert "relative norm error" in text and "f32 0.0001" in text and "REF" in text
    grammar = sections()["grammar"]
    assert "A literal takes the dtype of the other operand" in grammar
    assert "A float literal where an integer or bool is expected is an error" in grammar


torch = pytest.importorskip("torch")

from solar_compiler.driver import main  # noqa: E402

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
ADD_KERNEL = ("```loop\nkernel add(x: f32[4, 8] input, y: f32[4, 8] input, scale: f32[8] weight, "
              "out: f32[4, 8] output):\n    for i in range(4):\n        for j in range(8):\n"
              "            out[i, j] = x[i, j] * scale[j] + y[i, j]\n```\n")


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("SOLAR_LLM_MODEL", raising=False)
    monkeypatch.chdir(tmp_path)


def _json_report(capsys, *args: str) -> dict:
    rc = main([*args, "--roofline=fused", "--hw", "H100_SXM", "--format", "json"])
    assert rc == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_whole_program_prompt_carries_the_reference_pair(tmp_path, capsys):
    src = tmp_path / "add.py"
    src.write_text(ADD)
    assert main([str(src), "--translate", "--frontend=llm", "--llm-model=manual", "--llm-transcript-dir",
                 "d", "-t", "loop"]) == 3
    capsys.readouterr()
    prompt = (tmp_path / "d" / "001.prompt.md").read_text()
    # the program's own values: weights under seed 0, get_inputs() after them, out = x * scale + y
    from solar_compiler.frontends.model_file import load_model_file

    spec = load_model_file(str(src))
    torch.manual_seed(0)
    model = spec.build_model()
    x, y = spec.sample_inputs()
    out = (x * model.scale + y).detach().numpy()
    assert "(the program's outputs on get_inputs(), weights initialised under torch.manual_seed(0))" in prompt
    assert "x (input, f32[4, 8]) =" in prompt and "out (output, f32[4, 8]) =" in prompt
    block = prompt.split("out (output, f32[4, 8]) =\n```\n")[1].split("```")[0]
    shown = [float(v) for v in re.findall(r"-?\d+\.\d+(?:e[-+]\d+)?", block)]
    assert len(shown) == 32 and max(abs(a - b) for a, b in zip(shown, out.ravel(), strict=True)) < 1e-4
    assert "f32 0.0001" in prompt and "A literal takes the dtype of the other operand" in prompt


BIG = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=1)


    def get_inputs():
        return [torch.rand(4096, 393216)]


    def get_init_inputs():
        return []
''')
BIG_KERNEL = """```loop
kernel big(x: f32[4096, 393216] input, out: f32[4096, 393216] output):
    local m: f32[4096]
    local s: f32[4096]
    for b in range(4096):
        m[b] = -inf
        for j in range(393216):
            m[b] max= x[b, j]
        s[b] = 0.0
        for j in range(393216):
            out[b, j] = exp(x[b, j] - m[b])
            s[b] += out[b, j]
        for j in range(393216):
            out[b, j] = out[b, j] / s[b]
```
"""


def test_too_large_to_validate_without_size_constants_says_what_to_do(tmp_path, capsys):
    """13 GB of input and output, sizes written inline: nothing full-size is allocated (the sandbox's
    8 GB limit is not what stops it) and the one-line error says what to change."""
    src = tmp_path / "big.py"
    src.write_text(BIG)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "001.response.md").write_text(BIG_KERNEL)
    assert main([str(src), "--translate", "--frontend=llm", "--llm-model=manual", "--llm-transcript-dir",
                 "d", "-t", "loop"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"solar-opt: error: {src}:1: the LLM's kernel is too large to validate at full "
                             "size (whole execution estimated ")
    assert "the file has no module-level size to scale down: define the sizes get_inputs() and Model use " \
           "as module-level integer constants (`N = 4096`)" in err[0]
    assert "memory limit" not in err[0]
    prompt = (tmp_path / "d" / "001.prompt.md").read_text()
    assert "(none: the program is too large to run here and has no module-level size to scale down)" in prompt


def test_rerun_is_a_translation_cache_hit_with_no_request_and_no_validation(tmp_path, capsys, monkeypatch):
    from solar_compiler.frontends import sandbox

    src = tmp_path / "add.py"
    src.write_text(ADD)
    (tmp_path / "d").mkdir()
    answer = tmp_path / "d" / "001.response.md"
    answer.write_text(ADD_KERNEL)
    children = []
    real = sandbox.run_in_child

    def counted(fn, *args, **kw):  # the provider and the validator run only in the child
        children.append(fn)
        return real(fn, *args, **kw)

    monkeypatch.setattr(sandbox, "run_in_child", counted)
    monkeypatch.setattr(sandbox, "run_in_process", None)
    args = [str(src), "--translate", "--frontend=llm", "--llm-model=manual", "--llm-transcript-dir", "d"]
    first = _json_report(capsys, *args)
    assert len(children) == 1 and first["validation"]["validated"] is True
    transcript = (tmp_path / "d" / "transcript.jsonl").read_text()
    second = _json_report(capsys, *args)
    assert len(children) == 1, "the rerun started the translation job again"
    assert second["validation"].pop("notes") == ["translation cache hit"]
    assert second["validation"] == first["validation"] and second["totals"] == first["totals"]
    assert (tmp_path / "d" / "transcript.jsonl").read_text() == transcript  # no request was made
    # another answer is another translation: not a hit
    answer.write_text(ADD_KERNEL.replace("x[i, j] * scale[j] + y[i, j]", "y[i, j] + x[i, j] * scale[j]"))
    _json_report(capsys, *args)
    assert len(children) == 2


# per program: (validation method, sizes reduced to, matrix FLOPs, vector FLOPs, fused bytes), derived by
# hand and equal to the deterministic frontend's for the same file (the vector FLOPs as the LLM wrote
# them: not priced)
KB = {
    # 5 vector FLOPs an element: max, subtract, exp, add, divide; x and out once
    "23_Softmax": ("reduced", "batch_size=512 (of 4096), dim=49152 (of 393216)", 0, 5 * 4096 * 393216,
                   2 * 4096 * 393216 * 4),
    # 2 FLOPs per MAC, 16 x 128 x 1022 x 1022 outputs of 16 x 3 x 3 MACs; x, the weight and out once
    "63_conv_standard_2D__square_input__square_kernel": (
        "reduced", "batch_size=8 (of 16), in_channels=8 (of 16), out_channels=64 (of 128), width=512 (of "
        "1024), height=512 (of 1024)", 2 * 16 * 128 * 1022 * 1022 * 16 * 9, 0,
        4 * (16 * 16 * 1024 * 1024 + 128 * 16 * 9 + 16 * 128 * 1022 * 1022)),
    # three GEMMs (2 x 128 x (16384 x 16384 x 2 + 8192 x 16384)) and two ReLUs (128 x 16384 each; the
    # bias is the accumulator's initial value); every input, weight, bias and the output once
    "1_MLP": ("full", "full", 2 * 128 * (16384 * 16384 * 2 + 8192 * 16384), 2 * 128 * 16384,
              4 * (128 * 16384 + 2 * 16384 * 16384 + 8192 * 16384 + 2 * 16384 + 8192 + 128 * 8192)),
}


@pytest.mark.parametrize("name", sorted(KB))
def test_kernelbench_program_replays_and_validates_at_its_sizes(name, capsys):
    method, sizes, matrix, vector, fused_bytes = KB[name]
    r = _json_report(capsys, str(KERNELBENCH / f"{name}.py"), "--translate", "--frontend=llm",
                     "--llm-replay", str(KERNELBENCH / f"{name}.transcript.jsonl"))
    v = r["validation"]
    assert v["validated"] is True and v["frontend"] == "llm" and v["method"] == method
    assert v["sizes"] == (sizes if method == "full" else f"reduced: {sizes}")
    assert [(t["op"], t["by"]) for t in v["translated_by"]] == [("the whole program", "llm")]
    as_written = r["classical"]["totals"]  # the products as written (--algorithms classical)
    # the LLM's nest is one algorithm: only its plain contractions' products are priced, no vector work
    # (docs/llm-frontend.md, "Pricing"); the nest as written counts both
    assert (as_written["flops_matrix"], as_written["flops_vector"]) == (matrix, 0)
    assert [(o["op"], o["flops_written"]) for o in r["llm_ops"]] == [("the whole program", matrix + vector)]
    assert r["totals"]["bytes_fused"] == fused_bytes
    if name.startswith("63_conv"):  # the default model prices the 3 x 3 stride-1 f32 conv at cuDNN's
        # FFT_TILING (the 1024 map is over FFT's 256): 32 x 32 transforms of 30 x 30 outputs; per axis
        # 1022 = 34 x 30 + 2, so 34^2 full tiles of 1,534 products (fewer than their 8,100 taps), 2 x 34
        # edge tiles of 90 x 6 = 540 taps and a corner of 36 (cheaper direct), per (image, in, out
        # channel); Winograd F(4x4,3x3) would need 256^2 x 36 = 2,359,296 there
        per_pair = 34 * 34 * 1534 + 2 * 34 * 540 + 36
        assert r["totals"]["flops_matrix"] == 2 * 16 * 16 * 128 * per_pair == 118_624_092_160
    else:
        assert r["totals"]["flops_matrix"] == matrix
