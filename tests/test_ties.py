"""Index outputs whose tie order torch leaves unspecified (executor/ties.py, frontends/torch/ties.py):
a MoE router's top-k over softmax scores that tie (exact zeros of an underflowed softmax, equal bf16
scores) validates, while wrong programs (indices off by one, the smallest instead of the largest,
a wrongly computed op input, outputs a different tie choice changes) still fail; the rule itself
is checked exactly on small arrays."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from solar_compiler.executor.compare import compare
from solar_compiler.executor.ties import Tie, check, check_rows, input_points, tied_values

DATA = Path(__file__).resolve().parent / "data" / "solexec"


# ---- the rule on small arrays ------------------------------------------------------------------------
def test_values_tie_when_equal_on_either_side_or_when_their_intervals_meet():
    ag, bg = np.array([1.0, 1.0, 1.0, np.nan, 2.0, 1.0]), np.array([1.0, 2.0, 2.0, np.nan, 1.0, 3.0])
    ar, br = np.array([5.0, 3.0, 2.5, 0.0, 1.5, 1.0]), np.array([6.0, 3.0, 2.4, 1.0, 1.6, 2.9])
    # equal in ours; equal in the reference's; [1, 2.5] meets [2, 2.4]; NaN with NaN; [1.5, 2]
    # meets [1, 1.6]; [1, 1] and [2.9, 3] are apart
    assert tied_values(ag, bg, ar, br, near=True).tolist() == [True, True, True, True, True, False]
    # exact only (mode): the near ones are no ties
    assert tied_values(ag, bg, ar, br, near=False).tolist() == [True, True, False, True, False, False]
    # a number and NaN never tie, however wide the other interval
    assert not tied_values(np.array([np.nan]), np.array([0.0]), np.array([-np.inf]), np.array([0.0]),
                           near=True)[0]


def _rows(*rows):
    return np.array(rows, dtype=np.float64)


X = _rows([0.5, 0.0, 0.25, 0.0, 0.25, 0.0],   # ties: 0.25 at 2 and 4, 0.0 at 1, 3 and 5
          [3.0, 2.0, 1.0, 0.0, -1.0, -2.0])   # no ties


def _check(ref, got, x_ref=X, x_got=X, distinct=True, near=True):
    ref, got = np.array(ref), np.array(got)
    row = np.repeat(np.arange(ref.shape[0]), ref.shape[1])
    slot = np.tile(np.arange(ref.shape[1]), ref.shape[0])
    return check_rows(x_ref, x_got, row, slot, ref.reshape(-1), got.reshape(-1), distinct=distinct, near=near)


def test_top3_differing_only_among_tied_values_passes():
    assert _check([[0, 2, 4], [0, 1, 2]], [[0, 4, 2], [0, 1, 2]]) == (None, "")
    assert _check([[0, 2, 4], [0, 1, 2]], [[0, 2, 4], [0, 1, 2]]) == (None, "")


def test_an_index_off_by_one_fails_where_it_selects_another_value():
    first, why = _check([[0, 2, 4], [0, 1, 2]], [[1, 3, 5], [1, 2, 3]])
    assert first == 0 and why.startswith("no tie: the op's input holds 0 at 1 and 0.5 at 0 in ours")


def test_the_smallest_instead_of_the_largest_fails():
    first, _ = _check([[0, 2, 4], [0, 1, 2]], [[0, 2, 4], [5, 4, 3]])
    assert first == 3


def test_a_repeated_index_fails_even_where_each_slot_ties():
    # slot 2 holds 2 again: its value ties with the reference's 4, but the row's indices must differ
    first, why = _check([[0, 2, 4]], [[0, 2, 2]], x_ref=X[:1], x_got=X[:1])
    assert first == 2 and why == "index 2 repeated in its row (at slot 1 too)"
    # an order statistic selects one element: no such condition
    assert _check([[2], [0]], [[4], [0]], distinct=False) == (None, "")


def test_an_index_out_of_range_fails():
    assert _check([[0, 2, 4]], [[0, 2, 6]], x_ref=X[:1], x_got=X[:1])[1] == "index 6 out of range [0, 6)"


def test_a_tie_in_the_reference_input_alone_counts():
    ours = X.copy()
    ours[0, 4] = 0.2500001  # rounding moved one element: no tie in ours, one in the reference's
    assert _check([[0, 2, 4]], [[0, 4, 2]], x_ref=X[:1], x_got=ours[:1]) == (None, "")
    ours[0, 4] = 0.3  # ours ranks 4 above 2; torch's has them equal: its order is as valid
    assert _check([[0, 2, 4]], [[0, 4, 2]], x_ref=X[:1], x_got=ours[:1]) == (None, "")


def test_a_near_tie_counts_only_for_order_statistics():
    ours, theirs = X[:1].copy(), X[:1].copy()
    ours[0, 2], ours[0, 4] = 0.26, 0.25      # ours: 2 above 4
    theirs[0, 2], theirs[0, 4] = 0.25, 0.26  # the reference's: 4 above 2
    assert _check([[0, 4, 2]], [[0, 2, 4]], x_ref=theirs, x_got=ours) == (None, "")
    assert _check([[0, 4, 2]], [[0, 2, 4]], x_ref=theirs, x_got=ours, near=False)[0] == 1
    ours[0, 4] = 0.24  # element 4 anywhere in [0.24, 0.26], element 2 in [0.25, 0.26]: they meet
    assert _check([[0, 4, 2]], [[0, 2, 4]], x_ref=theirs, x_got=ours) == (None, "")
    ours[0, 2], theirs[0, 2] = 0.27, 0.28  # element 2 in [0.27, 0.28], element 4 in [0.24, 0.26]: apart
    assert _check([[0, 4, 2]], [[0, 2, 4]], x_ref=theirs, x_got=ours)[0] == 1


TOPK = Tie("x", (2, 3), (2, 6), 1, (2, 3), True, True, True, "topk at m.py:1")


def test_check_maps_output_positions_to_rows_of_the_op_input():
    ref, got = np.array([[0, 2, 4], [0, 1, 2]]), np.array([[0, 4, 2], [0, 1, 2]])
    v = check(TOPK, ref, got, X, X)
    assert (v.differ, v.first) == (2, None)
    # the op along dim 0 of the transposed input: the same rows
    t = replace(TOPK, input_shape=(6, 2), dim=0, index_shape=(3, 2), shape=(3, 2))
    assert check(t, ref.T, got.T, X.T, X.T).first is None
    assert check(t, ref.T, got.T[:, ::-1], X.T, X.T).first is not None
    # an output that is a flattened int32 copy of the indices
    flat = replace(TOPK, shape=(6,))
    assert check(flat, ref.reshape(-1).astype(np.int32), got.reshape(-1).astype(np.int32), X, X).first is None


def test_sampled_positions_need_whole_rows_of_the_input():
    ref, got = np.array([[0, 2, 4], [0, 1, 2]]), np.array([[0, 4, 2], [0, 1, 2]])
    pos = np.array([[0, 1], [0, 2], [1, 0]])            # three sampled index elements
    xpos = input_points(TOPK, pos, cap=100)              # rows 0 and 1, whole
    assert sorted(map(tuple, xpos)) == [(r, c) for r in range(2) for c in range(6)]
    sample = tuple(pos.T)
    xs = X[tuple(xpos.T)]
    assert check(TOPK, ref[sample], got[sample], xs, xs, pos, xpos).first is None
    # a row not sampled whole shows no tie: a differing index there fails
    part = xpos[xpos[:, 0] == 1]
    xs = X[tuple(part.T)]
    v = check(TOPK, ref[sample], got[sample], xs, xs, pos, part)
    assert v.first == 0 and "not available" in v.why
    assert input_points(TOPK, pos, cap=11) is None


def test_compare_checks_the_input_and_names_the_tie_choice_for_other_outputs():
    ref, got = np.array([[0, 2, 4], [0, 1, 2]]), np.array([[0, 4, 2], [0, 1, 2]])
    dtypes = {"i": "i64", "x": "f64", "y": "f64"}
    c = compare({"i": ref, "x": X}, {"i": got, "x": X}, dtypes, ties={"i": TOPK})
    assert c.ok and c.tie_choices == {"i": 2}
    # without the rule (or without the input on both sides) the indices are compared exactly
    assert not compare({"i": ref}, {"i": got, "x": X}, dtypes, ties={"i": TOPK}).ok
    # a wrong input fails as an output of its own, whatever the indices
    bad = compare({"i": ref, "x": X}, {"i": ref, "x": X * 1.01}, dtypes, ties={"i": TOPK})
    assert not bad.ok and bad.first_mismatch.startswith("x[")
    # an output computed from the other choice (the weights of other experts) still fails, and says why
    y_ref, y_got = np.array([1.0, 2.0]), np.array([1.0, 2.5])
    c = compare({"y": y_ref, "i": ref, "x": X}, {"y": y_got, "i": got, "x": X}, dtypes, ties={"i": TOPK})
    assert not c.ok and c.first_mismatch.startswith("y[1]") and \
        "topk at m.py:1 chose other indices than the reference among tied values at 2 position(s) of i" \
        in c.first_mismatch


# ---- programs ----------------------------------------------------------------------------------------
pytest.importorskip("torch")

from solar_compiler.errors import SolarError  # noqa: E402
from solar_compiler.frontends import FrontendOptions  # noqa: E402
from solar_compiler.frontends.model_file import load_model_file  # noqa: E402
from solar_compiler.frontends.torch import frontend as fe  # noqa: E402
from solar_compiler.frontends.torch import translate as translate_mod  # noqa: E402
from solar_compiler.frontends.torch.capture import capture  # noqa: E402
from solar_compiler.frontends.torch.ties import tie_sites  # noqa: E402
from solar_compiler.frontends.torch.validation import estimate, run_sampled  # noqa: E402
from solar_compiler.loopir.affine import AffExpr  # noqa: E402
from solar_compiler.loopir.ast import Assign, Const, For, Kernel  # noqa: E402

ROUTER = """import torch
import torch.nn as nn

T, H, E, K = {T}, 4096, 128, 8


class Model(nn.Module):
    def forward(self, x, w):
        p = torch.softmax(x @ w.t(), -1{softmax})
        v, i = torch.topk(p, K, -1)
        {ret}


def get_inputs():
    return [torch.randn(T, H{dtype}), torch.randn(E, H{dtype}){scale}]


def get_init_inputs():
    return []
"""


def router(tmp_path, name="router.py", T=512, softmax=", dtype=torch.float", dtype="", scale="",
           ret="return v / v.sum(-1, keepdim=True), i") -> str:
    """The MoE router of the issue: N(0, 1) inputs make logits of std 64, so softmax underflows to
    exact zeros and a row's top 8 ties among them; `dtype`, `scale` and `softmax` make the bf16
    variants."""
    p = tmp_path / name
    p.write_text(ROUTER.format(T=T, softmax=softmax, dtype=dtype, scale=scale, ret=ret))
    return str(p)


def validation(path: str, options: FrontendOptions | None = None) -> dict:
    return fe.translate_job(path, options or FrontendOptions()).validation


def test_the_f32_router_validates_where_topk_chose_among_exact_zeros(tmp_path):
    v = validation(router(tmp_path))
    assert v["validated"] and v["method"] == "full" and v["samples"] == 3, v
    assert v["tie_choices"]["getitem_1"] > 0 and v["max_rel_err"] < 1e-4
    assert v["elements_checked"] == 2 * 512 * 8  # the copy of topk's input is no output of the program


def test_the_bf16_router_validates_where_top_scores_tie(tmp_path):
    # router weights of std 0.02 (as initialised): logits of std 1.3 in bf16, no underflow, and
    # equal bf16 probabilities among a row's top 8 in about a third of the rows
    v = validation(router(tmp_path, softmax="", dtype=", dtype=torch.bfloat16", scale=" * 0.02"))
    assert v["validated"] and v["tie_choices"]["getitem_1"] > 0, v


def test_the_router_problem_folder_validates_its_int32_expert_ids(tmp_path, monkeypatch):
    from solar_compiler.driver import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    out = tmp_path / "stdout"
    with open(out, "w") as f, contextlib.redirect_stdout(f):
        rc = main([str(DATA / "moe_router_topk"), "--roofline", "unfused", "--hw", "B200", "--format", "json",
                   "--quiet"])
    v = json.loads(out.read_text())["validation"]
    assert rc == 0 and v["validated"] and v["tie_choices"]["_to_copy"] > 0, v  # ids.to(torch.int32)


def _with_kernel(monkeypatch, change):
    real = translate_mod.translate_program

    def wrong(program, kernel_name="forward", **kwargs):
        tt = real(program, kernel_name, **kwargs)
        tt.kernel = change(tt)
        return tt

    monkeypatch.setattr(translate_mod, "translate_program", wrong)


def _off_by_one(tt) -> Kernel:
    """Every index of the topk output plus one, after it is computed."""
    name = tt.outputs[-1]
    shape = tt.kernel.tensor(name).shape
    body: list = [Assign(name, (AffExpr.var("m0"), AffExpr.var("m1")), "+=", Const(1, "i64"))]
    for d in reversed(range(2)):
        body = [For(f"m{d}", AffExpr.lit(0), AffExpr.lit(shape[d]), 1, False, body)]
    return Kernel(tt.kernel.name, list(tt.kernel.tensors), [*tt.kernel.body, *body])


def _scores_doubled(tt) -> Kernel:
    """topk's input doubled once computed: a wrong input whose order is the right one, so topk picks
    what it picked before, ties included (it ranks values, and doubling keeps ties)."""
    from solar_compiler.frontends.builder.exprs import c, mul
    from solar_compiler.loopir.ast import Read, statements

    copy = statements(Kernel("_", [], tt.tie_copies[0][1]))[0].stmt
    x = copy.value.tensor
    decl = tt.kernel.tensor(x)
    idx = (AffExpr.var("m0"), AffExpr.var("m1"))
    body: list = [Assign(x, idx, "=", mul(Read(x, idx, decl.dtype), c(2.0, decl.dtype)))]
    for d in reversed(range(2)):
        body = [For(f"m{d}", AffExpr.lit(0), AffExpr.lit(decl.shape[d]), 1, False, body)]
    writes = [i for i, n in enumerate(tt.kernel.body)
              if any(ctx.stmt.target == x for ctx in statements(Kernel("_", [], [n])))]
    at = writes[-1] + 1
    old = tt.kernel.body
    return Kernel(tt.kernel.name, list(tt.kernel.tensors), [*old[:at], *body, *old[at:]])


def test_indices_off_by_one_fail(tmp_path, monkeypatch):
    _with_kernel(monkeypatch, _off_by_one)
    with pytest.raises(SolarError, match=r"validation failed on get_inputs\(\): getitem_1\[0, 0\]: got \d+, "
                                         r"expected \d+ \(topk at .*: no tie"):
        validation(router(tmp_path, T=64))


def test_the_smallest_instead_of_the_largest_fail(tmp_path, monkeypatch):
    real = translate_mod.translate_program

    def ascending(program, kernel_name="forward", **kwargs):
        for n in program.nodes:
            if n.op == "aten.topk.default":
                n.kwargs = {**n.kwargs, "largest": False}
        return real(program, kernel_name, **kwargs)

    monkeypatch.setattr(translate_mod, "translate_program", ascending)
    # indices alone: the values would fail first
    with pytest.raises(SolarError, match=r"getitem_1\[0, 0\]: got \d+, expected \d+ \(topk at .*: no tie"):
        validation(router(tmp_path, T=64, ret="return i"))


def test_a_wrong_input_to_topk_fails_though_its_indices_are_a_tie_choice_of_it(tmp_path, monkeypatch):
    # the indices alone are returned: they are those of the right program, but among ties only the
    # comparison of the op's input shows that it is right
    _with_kernel(monkeypatch, _scores_doubled)
    with pytest.raises(SolarError, match=r"get_inputs\(\): getitem_1_tie_input\[\d+, \d+\]: got .*relative "
                                         r"norm error .* \(after topk at .* chose other indices than the "
                                         r"reference among tied values at \d+ position\(s\) of getitem_1"):
        validation(router(tmp_path, T=64, ret="return i"))


def test_values_gathered_at_tied_indices_are_the_same_function(tmp_path):
    v = validation(router(tmp_path, T=64, ret="return p.gather(-1, i), i"))
    assert v["validated"] and v["tie_choices"]["getitem_1"] > 0, v


def test_rows_routed_by_another_tie_choice_fail_and_say_why(tmp_path):
    # each token sums the weight rows of its experts: an expert chosen among tied (zero) scores other
    # than torch's adds another row; the indices are a valid choice, the output is not torch's
    with pytest.raises(SolarError, match=r"sum\w*\[\d+, \d+\]: got .*\(after topk at .* chose other "
                                         r"indices than the reference among tied values at \d+ position\(s\) "
                                         r"of getitem_1"):
        validation(router(tmp_path, T=64, ret="return w[i].sum(1), i"))


def test_sampled_validation_checks_ties_on_whole_rows(tmp_path):
    path = router(tmp_path, T=64)
    spec = load_model_file(path)
    prog = capture(spec)
    tt = translate_mod.translate_program(prog)
    v = run_sampled(spec, prog, tt, FrontendOptions(), estimate(tt.validation_kernel()))
    assert v["validated"] and v["tie_choices"]["getitem_1"] > 0, v
    assert v["elements_checked"] < 2 * 64 * 8  # samples of the two outputs; the input's rows not counted


def test_sampled_validation_rejects_indices_off_by_one(tmp_path, monkeypatch):
    _with_kernel(monkeypatch, _off_by_one)
    path = router(tmp_path, T=64)
    spec = load_model_file(path)
    prog = capture(spec)
    tt = translate_mod.translate_program(prog)
    with pytest.raises(SolarError, match=r"getitem_1\[0, 0\]: got \d+, expected \d+ \(topk at .*: no tie"):
        run_sampled(spec, prog, tt, FrontendOptions(), estimate(tt.validation_kernel()))


PROBE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, e):
        return (torch.topk(x, 3)[1].to(torch.int32).flatten(), torch.sort(x, descending=True)[1],
                torch.argsort(x), torch.kthvalue(x, 2)[1], torch.mode(e)[1], torch.median(x, -1)[1],
                torch.nanmedian(x, 0, keepdim=True)[1], torch.max(x, -1)[1], torch.argmax(x, -1),
                torch.sort(x, stable=True)[1], torch.msort(x), torch.topk(x, 2)[1].float())


def get_inputs():
    return [torch.randn(4, 16), torch.randint(0, 3, (4, 16))]


def get_init_inputs():
    return []
"""


def test_the_ops_whose_tie_order_is_unspecified_and_the_documented_first_occurrences(tmp_path):
    p = tmp_path / "probe.py"
    p.write_text(PROBE)
    prog = capture(str(p))
    sites = {s.outputs: (s.op, s.dim, s.slots, s.distinct, s.near) for s in tie_sites(prog)}
    assert sites == {
        (0,): ("aten.topk.default", 1, True, True, True),    # through a cast to int32 and a flatten
        (1,): ("aten.sort.default", 1, True, True, True),
        (2,): ("aten.sort.default", 1, True, True, True),    # argsort
        (3,): ("aten.kthvalue.default", 1, False, False, True),
        (4,): ("aten.mode.default", 1, False, False, False),  # equal values only
        (5,): ("aten.median.dim", 1, False, False, True),
        (6,): ("aten.nanmedian.dim", 0, True, False, True),
    }  # max/argmax: the first occurrence (documented); a stable sort; msort's values; a float copy
    v = validation(str(p))
    assert v["validated"], v


VIEWS = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        i = torch.topk(torch.relu(x - 1.5), 3)[1]  # most rows' top 3 include zeros
        return i.view(-1), i.unsqueeze(0)


def get_inputs():
    return [torch.randn(64, 16)]


def get_init_inputs():
    return []
"""


def test_views_of_the_indices_are_checked_by_the_rule_materialised_or_aliased(tmp_path):
    p = tmp_path / "views.py"
    p.write_text(VIEWS)
    v = validation(str(p))
    # `view` is a copy of the indices; `unsqueeze` views the index result, which becomes an output
    # itself, and is checked through its alias copy
    assert v["validated"] and set(v["tie_choices"]) == {"view", "unsqueeze_alias"}, v
