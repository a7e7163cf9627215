"""CTC loss (`templates/ctc.py`): torch's alpha recursion in a `scan` over time, every batch element at
its own input and target length (read from the length tensors, never traced), checked against torch
by validation on fresh samples for each reduction, with repeated labels (the s-2 skip rule), a blank
other than 0, empty targets, infeasible rows zeroed by `zero_infinity`, and its operation counts by
hand; a mutant that ignores the skip rule is rejected."""

from __future__ import annotations

from dataclasses import replace

import pytest
from translated import roofline_json, translated_programs

CTC = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x, t, il, tl):
        return F.ctc_loss(x.log_softmax(-1), t, il, tl{args})


def get_inputs():
{inputs}


def get_init_inputs():
    return []
"""

# labels 1 and 2 only: repeated labels in most rows; every length drawn, every row feasible (il >= 2S+1)
MEAN = CTC.format(args="", inputs="""\
    return [torch.randn(12, 3, 5), torch.randint(1, 3, (3, 4)), torch.randint(9, 13, (3,)),
            torch.randint(1, 5, (3,))]""")

# blank 4 (the last class), label 0 a label; row 0 infeasible (1 frame, at least 2 labels): its
# infinite loss is zeroed; the other rows' input lengths from 1 to 10 (some infeasible too)
SUM = CTC.format(args=", blank=4, reduction='sum', zero_infinity=True", inputs="""\
    il = torch.randint(1, 11, (3,))
    il[0] = 1
    return [torch.randn(10, 3, 5), torch.randint(0, 2, (3, 5)) * 3, il, torch.randint(2, 6, (3,))]""")

# blank 2 between the labels 1 and 4; row 0's target empty, the others' lengths drawn from 0 to 5
NONE = CTC.format(args=", blank=2, reduction='none'", inputs="""\
    tl = torch.randint(0, 6, (3,))
    tl[0] = 0
    return [torch.randn(20, 3, 6), torch.randint(0, 2, (3, 5)) * 3 + 1, torch.randint(11, 21, (3,)), tl]""")

# the loss of one row, no log_softmax: T = 3, N = 1, C = 3, S = 2, the target [1, 1] (a repeat)
TINY = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, lp, t, il, tl):
        return F.ctc_loss(lp, t, il, tl, reduction="none")


def get_inputs():
    lp = torch.randn(3, 1, 3).log_softmax(-1)
    return [lp, torch.tensor([[1, 1]]), torch.tensor([3]), torch.tensor([2])]


def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    programs = {"mean": MEAN, "sum": SUM, "none": NONE, "tiny": TINY}
    with translated_programs(tmp_path_factory.mktemp("ctc"), programs) as paths:
        yield paths


@pytest.mark.parametrize("name", ["mean", "sum", "none"])
def test_ctc_loss_agrees_with_torch_on_fresh_lengths_and_labels(capsys, files, name):
    v = roofline_json(capsys, files[name])["validation"]
    assert v["validated"] and v["samples"] == 3 and v["max_rel_err"] < 1e-5, v


def test_ctc_loss_is_a_stand_in_that_writes_the_recursion_and_moves_its_operands(capsys, files):
    # T = 3, N = 1, S = 2: states s < 5; alpha rows 0 (before the input) and 1 (t = 0) are copies
    # and fills. Labels: `j < tl ? t : blank` 2 x (compare, select) = 4; the repeat flag of label 1:
    # 1 compare. Steps t = 1, 2 (2 steps), per step:
    #   blanks s = 0, 2, 4 (3 states): stabiliser max(max(a, b), lowest) 2, then
    #     log(exp(a - m) + exp(b - m)) + m + lp: 2 sub, 2 exp, add, log, 2 add = 8; 3 x 10 = 30
    #   labels s = 1, 3 (2 states): the s-2 term a select 1, stabiliser 3 max, then 3 sub, 3 exp,
    #     2 add, log, 2 add and the select again = 12; 2 x 16 = 32
    # 2 x (30 + 32) = 124. The loss: index 2 * tl (1 mul) + 1 (1 add), stabiliser 2 max, then 2 sub,
    # 2 exp, add, log, add, neg = 8: 12. In all 4 + 1 + 124 + 12 = 141, written, not priced: the
    # padded nest runs steps a shorter row does not (its lengths are values), so no compute term.
    # Bytes: lp's blank column at t = 0, 1, 2 (the label reads are gathers, counted as the fewest
    # elements they may touch: no more than the direct reads) 3 x 4 = 12, targets 2 x 8, input and
    # target length 8 each, the loss 4: 48.
    r = roofline_json(capsys, files["tiny"])
    assert r["validation"]["validated"] and r["validation"]["samples"] == 3
    assert (r["totals"]["flops"], r["totals"]["bytes_fused"]) == (0, 48)
    assert [(o["op"], o["by"], o["flops_written"]) for o in r["llm_ops"]] == [("_ctc_loss", "stand-in", 141)]


def _skip_always(kernel):
    """The translation with every repeat flag False: the s-2 transition taken between equal labels."""
    from solar_compiler.loopir.ast import Assign, Cmp, Const, For, If, Kernel

    hit = []

    def go(nodes):
        out = []
        for n in nodes:
            if isinstance(n, Assign) and n.target.endswith("_repeat") and isinstance(n.value, Cmp):
                hit.append(n)
                n = replace(n, value=Const(False, "bool"))
            elif isinstance(n, For | If):
                n = replace(n, body=go(n.body))
            out.append(n)
        return out

    body = go(kernel.body)
    assert hit, "no repeat flag to mutate"
    return Kernel(kernel.name, list(kernel.tensors), body)


def test_ignoring_the_skip_rule_fails_validation(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from solar_compiler.errors import SolarError
    from solar_compiler.frontends import FrontendOptions
    from solar_compiler.frontends.torch import frontend as fe
    from solar_compiler.frontends.torch import translate as translate_mod

    real = translate_mod.translate_program

    def wrong(program, kernel_name="forward", **kwargs):
        tt = real(program, kernel_name, **kwargs)
        tt.kernel = _skip_always(tt.kernel)
        return tt

    monkeypatch.setattr(translate_mod, "translate_program", wrong)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    p = tmp_path / "tiny.py"
    p.write_text(TINY)
    with pytest.raises(SolarError, match=r"validation failed on get_inputs\(\)"):
        fe.translate_job(str(p), FrontendOptions())
