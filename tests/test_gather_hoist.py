"""Gathers of a local that several readers gather (`transforms/gather_hoist.py`, the catalogue entry
"gathered elements computed alone", docs/bounds.md section 0): each reader computes its gathered
elements alone from the producer's inputs, and the producer goes when nothing else reads it.

The bug: FlashInfer's MLA decode casts its whole latent cache to f32 and then gathers each
request's pages in a Python loop; with two readers or more nothing was hoisted, so the whole cache
counted as compulsory traffic (B = 16 on B200: 4.797 us against the 2.44 us its pages need).

The byte counts below are the compulsory bytes (`costs.program_costs`), derived by hand: x is bf16
(2 B), idx i64 (8 B), the outputs f32 (4 B). The traces are taken as the frontends take them: the
executor runs the kernel with an `IndirectTrace` on chosen indices, and `stamp_traced` puts the
records on the statements.
"""

from __future__ import annotations

import io
import textwrap

import numpy as np
import pytest
from translated import roofline_json, translated_programs
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer

from solar_compiler.analysis.costs import program_costs
from solar_compiler.analysis.graphs import module_graphs
from solar_compiler.dialects.convert import kernels_to_module
from solar_compiler.dialects.einsum import Einsum
from solar_compiler.dialects.graph_convert import graph_to_kernel
from solar_compiler.dialects.loop import Loop
from solar_compiler.executor import execute
from solar_compiler.executor.trace import IndirectTrace
from solar_compiler.frontends.validation import traced_records
from solar_compiler.passes.lift_einsum import LiftEinsumPass
from solar_compiler.passes.translate import stamp_traced
from solar_compiler.records import ProgramInfo
from solar_compiler.text.parser import parse_kernels
from solar_compiler.transforms.catalogue import catalogue_module
from solar_compiler.transforms.gather_hoist import HOISTED

CTX = Context()

# x cast whole to f32, then two readers gather 8 rows each: Y1 the rows idx[0:8], Y2 idx[8:16]
TWO = """\
    kernel k(x: bf16[64, 32] input, idx: i64[16] input, Y1: f32[8, 32] output, Y2: f32[8, 32] output):
        local T: f32[64, 32]
        for i in range(64):
            for j in range(32):
                T[i, j] = f32(x[i, j])
        for a in range(8):
            for j in range(32):
                Y1[a, j] = T[idx[a], j] * 2.0
        for a in range(8):
            for j in range(32):
                Y2[a, j] = T[idx[a + 8], j] * 3.0
    """
OUT = 2 * 8 * 32 * 4   # Y1 and Y2: 2,048 B
IDX = 16 * 8           # idx: 128 B
ROW = 32 * 2           # one row of x: 64 B


def traced_module(text: str, idx: list[int]) -> ModuleOp:
    """The kernel lifted, its statements carrying what their gathers touched with `idx` as the keys."""
    (k,) = parse_kernels(textwrap.dedent(text), "t.loop")
    rng = np.random.default_rng(0)
    feed = {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in k.tensors
            if t.role == "input" and t.name != "idx"}
    feed["idx"] = np.array(idx, dtype=np.int64)
    trace = IndirectTrace()
    execute(k, feed, trace=trace)
    stamp_traced([k], traced_records(k, trace))
    m = kernels_to_module([k])
    ProgramInfo("t.loop", "loop-text").store(m)
    LiftEinsumPass().apply(CTX, m)
    return m


def priced(m: ModuleOp, indirect: str = "traced"):
    """(rewrites, compulsory bytes as written, compulsory bytes as the default model prices it)."""
    new, rewrites = catalogue_module(m)
    (before,), (after,) = module_graphs(m), module_graphs(new)
    return (rewrites, program_costs(before, indirect).compulsory_bytes,
            program_costs(after, indirect).compulsory_bytes)


def same_values(m: ModuleOp) -> None:
    """The rewritten program computes what the program as written does, bit for bit."""
    new, _ = catalogue_module(m)
    kb, ka = graph_to_kernel(module_graphs(m)[0])[0], graph_to_kernel(module_graphs(new)[0])[0]
    rng = np.random.default_rng(1)
    for _ in range(3):
        feed = {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in kb.tensors
                if t.role == "input" and t.name != "idx"}
        feed["idx"] = rng.integers(0, 64, 16)
        want, got = execute(kb, feed), execute(ka, feed)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])


def test_two_gathers_of_distinct_rows_read_those_rows_alone():
    m = traced_module(TWO, list(range(16)))  # rows 0..7, then 8..15: 16 distinct rows
    rewrites, written, after = priced(m)
    assert [(r.kind, r.what) for r in rewrites] == [
        (HOISTED, "T_rows[a, j] = f32(x[idx[a], j])"),
        (HOISTED, "T_rows_1[a, j] = f32(x[idx[a + 8], j])")]
    assert written == 64 * ROW + IDX + OUT == 6_272    # the whole cast: all 64 rows of x
    assert after == 16 * ROW + IDX + OUT == 3_200       # the union the two gathers touched
    (g,) = module_graphs(catalogue_module(m)[0])
    locals_ = {d.sym_name.data for d in g.tensor_ops().values() if d.role.data == "local"}
    assert locals_ == {"T_rows", "T_rows_1"}  # the cast of the whole table is gone
    same_values(m)


def test_overlapping_rows_count_once():
    # rows 0..7 and 4..11: 12 distinct rows together (each gather alone touched 8)
    _, written, after = priced(traced_module(TWO, [*range(8), *range(4, 12)]))
    assert (written, after) == (6_272, 12 * ROW + IDX + OUT) == (6_272, 2_944)
    # the same 8 rows twice: 8
    _, _, after = priced(traced_module(TWO, [*range(8), *range(8)]))
    assert after == 8 * ROW + IDX + OUT == 2_688


def test_without_a_trace_each_gather_counts_its_fewest_rows():
    # --indirect min: a gather touches at least one row per loaded index (all keys may be equal)
    _, written, after = priced(traced_module(TWO, list(range(16))), "min")
    assert (written, after) == (6_272, 1 * ROW + IDX + OUT) == (6_272, 2_240)


def test_a_reader_of_the_whole_local_keeps_the_producer():
    # mixed readers: Y1 gathers rows, Y2 reads T directly: the cast stays, and so does every figure
    text = TWO.replace("Y2[a, j] = T[idx[a + 8], j] * 3.0", "Y2[a, j] = T[a, j] * 3.0")
    rewrites, written, after = priced(traced_module(text, list(range(16))))
    assert rewrites == []
    assert written == after == 64 * ROW + 8 * 8 + OUT == 6_208  # Y2 reads no idx


def test_a_reader_that_no_producer_of_its_rows_can_serve_keeps_the_producer():
    # Y2 reads T inside a scan: its rows cannot be computed in loops of their own, so neither reader's are
    text = TWO.replace("for a in range(8):\n            for j in range(32):\n                Y2",
                       "for a in scan(8):\n            for j in range(32):\n                Y2")
    assert "scan(8)" in text
    rewrites, written, after = priced(traced_module(text, list(range(16))))
    assert rewrites == [] and written == after == 6_272


def test_two_gathers_in_one_reader_each_get_their_rows():
    # one node gathers T twice: two readers. Its trace counted both gathers together, which no
    # single P' reads, so each counts its fewest rows (the bound errs low)
    text = """\
        kernel k(x: bf16[64, 32] input, idx: i64[16] input, Y: f32[8, 32] output):
            local T: f32[64, 32]
            for i in range(64):
                for j in range(32):
                    T[i, j] = f32(x[i, j])
            for a in range(8):
                for j in range(32):
                    Y[a, j] = T[idx[a], j] + T[idx[a + 8], j]
        """
    m = traced_module(text, list(range(16)))
    rewrites, written, after = priced(m)
    assert [r.what for r in rewrites] == ["T_rows[a, j] = f32(x[idx[a], j])",
                                          "T_rows_1[a, j] = f32(x[idx[a + 8], j])"]
    assert (written, after) == (64 * ROW + IDX + 8 * 32 * 4, ROW + IDX + 8 * 32 * 4)


RELU = """\
    kernel k(x: f32[16, 32] input, idx: i64[24] input, Y1: f32[12, 32] output, Y2: f32[12, 32] output):
        local T: f32[16, 32]
        for i in range(16):
            for j in range(32):
                T[i, j] = OP
        for a in range(12):
            for j in range(32):
                Y1[a, j] = T[idx[a], j]
        for a in range(12):
            for j in range(32):
                Y2[a, j] = T[idx[a + 12], j]
    """


def test_gathers_of_more_elements_than_the_local_in_all_are_hoisted_only_without_arithmetic():
    # 12 + 12 gathered rows of 16: relu computed per reader would be 24 rows of max, more than 16
    relu = RELU.replace("OP", "max(x[i, j], 0.0)")
    assert catalogue_module(traced_module(relu, [*range(12), *range(4, 16)]))[1] == []
    # a copy computes nothing: per reader it costs no more, and reads only the rows gathered
    copy = RELU.replace("OP", "x[i, j]")
    m = traced_module(copy, [*range(12), *range(12)])
    rewrites, written, after = priced(m)
    assert [r.kind for r in rewrites] == [HOISTED, HOISTED]
    out, keys = 2 * 12 * 32 * 4, 24 * 8
    assert (written, after) == (16 * 32 * 4 + keys + out, 12 * 32 * 4 + keys + out)  # rows 0..11 twice


def test_the_unions_record_survives_printing():
    # the IR form of a traced union, printed and parsed back: `union "T" N member i of n`
    m = traced_module(TWO, list(range(16)))
    out = io.StringIO()
    Printer(stream=out).print_op(m)
    text = out.getvalue()
    assert '#loop.traced<"T", read, 256, 256, 1, union "T" 512 member 0 of 2>' in text
    assert '#loop.traced<"T", read, 256, 256, 1, union "T" 512 member 1 of 2>' in text
    ctx = Context()
    for d in (Builtin, Loop, Einsum):
        ctx.load_dialect(d)
    again = io.StringIO()
    Printer(stream=again).print_op(Parser(ctx, text).parse_module())
    assert again.getvalue() == text


# ---- the repro, through the torch frontend (its trace at full size) -------------------------------------
CAST_THEN_GATHER = """import torch
N, D, M = 4096, 64, 512
class Model(torch.nn.Module):
    def forward(self, x, idx):
        xf = x.to(torch.float32)          # the whole table cast first (FlashInfer's traces do this)
        a = xf[idx[:M // 2].long()].sum(0)  # then two gathers of its rows
        b = xf[idx[M // 2:].long()].sum(0)
        return torch.stack([a, b]).to(torch.bfloat16)
def get_inputs():
    return [torch.randn(N, D, dtype=torch.bfloat16), IDX]
def get_init_inputs():
    return []
"""
PROGRAMS = {
    "distinct": CAST_THEN_GATHER.replace("IDX", "torch.randperm(N)[:M].to(torch.int32)"),
    "overlap": CAST_THEN_GATHER.replace(
        "IDX", "torch.cat([torch.arange(0, 256), torch.arange(128, 384)]).to(torch.int32)"),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    with translated_programs(tmp_path_factory.mktemp("ghoist"), PROGRAMS) as paths:
        yield paths


@pytest.mark.parametrize(("name", "rows"), [("distinct", 512), ("overlap", 384)])
def test_the_repro_reads_the_gathered_rows_alone(capsys, files, name, rows):
    r = roofline_json(capsys, files[name])
    out = 2 * 64 * 2                   # the stacked sums, bf16
    idx = 512 * 4                      # the keys, int32 (their .long() casts are locals)
    assert r["classical"]["totals"]["bytes_fused"] == 4096 * 64 * 2 + idx + out == 526_592
    assert r["totals"]["bytes_fused"] == rows * 64 * 2 + idx + out
    assert [w["kind"] for w in r["rewrites"]] == [HOISTED, HOISTED]
    assert r["rewrites"][0]["what"].startswith("_to_copy_rows[i0, i1] = f32(x[")
    # eager casts the whole table in its own kernel: the unfused bound keeps it
    c = roofline_json(capsys, files[name], "--algorithms", "classical")
    assert r["bounds"]["H100_SXM"]["unfused_s"] == c["bounds"]["H100_SXM"]["unfused_s"]


def test_traced_union_of_narrowed_members_counts_their_dropped_points():
    """A union of gathers by two statements (500 elements together, traced on 100 points each,
    one gather a point). Narrowing cut member 1 into pieces of 40 and 50 points: the 10 points
    dropped took at most 10 elements away, so 490 are counted (the GQA paged decode whose last
    partly filled page is sliced: 1.000 -> 4.188 us on B200, its KV rows read once). Pieces with
    more points than the trace's are copies: no union; a member missing: no union."""
    from solar_compiler.analysis.costs import Site, traced_union

    def site(member: int, node: int, points: int) -> Site:
        return Site((), (), (None,), None, 0, union=("T", 500, 2, member, node, points, 100, 1))

    assert traced_union([site(0, 1, 100), site(1, 2, 100)]) == 500
    assert traced_union([site(0, 1, 100), site(1, 5, 40), site(1, 6, 50)]) == 490
    assert traced_union([site(0, 1, 100), site(1, 5, 60), site(1, 6, 60)]) == 0
    assert traced_union([site(0, 1, 100)]) == 0
