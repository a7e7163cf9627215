"""In-place updates of program inputs beyond an overwriting `index_put` (issue 21's in-place entry):
accumulating scatters (`index_add_`, `index_put_(accumulate=True)`, `scatter_add_`) and an update
through a view (`buf[:, :8] += x`, which export writes back into the base through a second
`slice_scatter` of the slice into itself). Eager reads and writes only the addressed elements of the
caller's buffer; before, each was priced as a copy of the whole buffer (an audit of stop 44:
`index_add_` of 64 rows into a 65,536 x 1,024 bf16 buffer was 80.17 us on H100_SXM, `buf[:, :64] +=
x` 82.63 us; both are now their written rows). The outputs are still validated whole: the copy of
the rest runs in the validation kernel only. Figures on H100_SXM, DRAM 3.35 TB/s."""

from __future__ import annotations

import pytest
from translated import forward_program, roofline_json, translated_programs

BW = 3.35e12

SCATTERS = forward_program(
    "a, b, c, idx, src, sidx",
    """a.index_add_(0, idx, src)
b.index_put_((idx,), src, accumulate=True)
c.scatter_add_(0, sidx, src)
return a, b, c""",
    "torch.randn(4096, 128), torch.randn(4096, 128), torch.randn(4096, 128), torch.arange(100, 116), "
    "torch.randn(16, 128), torch.arange(100, 116)[:, None].expand(16, 128).contiguous()")

SLICE_ADD = forward_program(
    "buf, x", "buf[:, :8] += x\nreturn buf",
    "torch.randn(4096, 128, dtype=torch.bfloat16), torch.randn(4096, 8, dtype=torch.bfloat16)")

SELECTS = forward_program(
    "a, b, y", "a[0] = y\nb[:, 0] = 0\nreturn a, b",
    "torch.randn(4096, 128, dtype=torch.bfloat16), torch.randn(4096, 128, dtype=torch.bfloat16), "
    "torch.randn(128, dtype=torch.bfloat16)")

MASKED = forward_program(
    "a, b, m", "a.masked_fill_(m, 0.0)\nb[m] = 1.0\nreturn a, b",
    "torch.randn(512, 128, dtype=torch.bfloat16), torch.randn(512, 128, dtype=torch.bfloat16), "
    "torch.arange(512 * 128).reshape(512, 128) % 3 == 0")

TRIU_FILL = forward_program(
    "x", "x.masked_fill_(torch.ones(128, 128, dtype=torch.bool).triu(1), 0.0)\nreturn x",
    "torch.randn(128, 128, dtype=torch.bfloat16)")

NOT_RETURNED = forward_program(
    "buf, idx, src", "buf.index_add_(0, idx, src)\nreturn buf * 2",
    "torch.randn(4096, 128), torch.arange(100, 116), torch.randn(16, 128)")


# a KV-cache row written in place, the cache's first 1024 rows returned as a view (not the cache)
VIEW_RETURNED = forward_program(
    "cache, k, pos", "cache.index_copy_(2, pos, k)\nreturn cache[:, :, :1024]",
    "torch.randn(1, 8, 16384, 64, dtype=torch.bfloat16), torch.randn(1, 8, 1, 64, dtype=torch.bfloat16), "
    "torch.tensor([1023])")


DIAGONALS = forward_program(
    "a, b", "a.fill_diagonal_(0.0)\nb.diagonal(1).add_(1.0)\nreturn a, b",
    "torch.randn(128, 128, dtype=torch.bfloat16), torch.randn(128, 128, dtype=torch.bfloat16)")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    pytest.importorskip("torch")
    programs = {"diagonals": DIAGONALS,
                "scatters": SCATTERS, "slice_add": SLICE_ADD, "selects": SELECTS, "masked": MASKED,
                "triu_fill": TRIU_FILL, "not_returned": NOT_RETURNED, "view_returned": VIEW_RETURNED}
    with translated_programs(tmp_path_factory.mktemp("in_place"), programs) as paths:
        yield paths


def test_accumulating_scatters_into_inputs_move_only_the_addressed_rows(capsys, files):
    # 16 rows of 128 f32 added into each of three 4096 x 128 f32 inputs: src read once (8,192 B),
    # idx (16 int64) and sidx (16 x 128 int64) read, 16 rows written into each buffer. The old
    # values of the rows are read from the buffers being written: not counted (errs low by 24,576 B).
    # Before: each buffer read and written whole, 3 x 2 x 2 MiB.
    r = roofline_json(capsys, files["scatters"])
    rows = 16 * 128 * 4
    assert r["totals"]["bytes_fused"] == rows + 16 * 8 + 16 * 128 * 8 + 3 * rows == 49_280
    assert r["bounds"]["H100_SXM"]["fused_terms_s"]["memory"] == pytest.approx(49_280 / BW)
    assert r["validation"]["validated"]
    notes = [n.split(": ", 1)[1] for n in r["validation"]["notes"] if "in place" in n]
    # export decomposes index_add into an accumulating index_put
    assert notes == [f"aten.{op} updates input '{x}' in place: only the written elements move"
                     for op, x in (("index_put.default", "a"), ("index_put.default", "b"),
                                   ("scatter_add.default", "c"))]


def test_an_update_through_a_slice_writes_back_only_the_slice(capsys, files):
    # buf[:, :8] += x on a 4096 x 128 bf16 buffer: the 4096 x 8 slice read and written, x read, 32,768
    # additions. Before: the write-back of the slice into itself copied the whole buffer twice (the
    # second scatter was not seen to change nothing), 2,228,224 B.
    r = roofline_json(capsys, files["slice_add"])
    part = 4096 * 8 * 2
    assert r["totals"]["bytes_fused"] == 3 * part == 196_608
    assert r["totals"]["flops"] == 4096 * 8
    assert r["validation"]["validated"]
    assert any("updates input 'buf' in place" in n for n in r["validation"]["notes"])


def test_an_update_through_a_select_writes_only_the_selected_elements(capsys, files):
    # a[0] = y and b[:, 0] = 0 on 4096 x 128 bf16 inputs: y read (256 B), row 0 of a written (256 B),
    # column 0 of b written (8,192 B). Before: export's decomposition of select_scatter, a `where`
    # over every element, read and wrote both buffers whole (4 MiB; 80.13 us at 65,536 x 1,024).
    r = roofline_json(capsys, files["selects"])
    assert r["totals"]["bytes_fused"] == 128 * 2 + 128 * 2 + 4096 * 2 == 8_704
    assert r["totals"]["flops"] == 0
    assert r["validation"]["validated"]
    notes = [n for n in r["validation"]["notes"] if "in place" in n]
    assert [n.split("input ")[1].split(" ")[0] for n in notes] == ["'a'", "'b'"]


def test_a_masked_update_writes_only_the_elements_its_mask_selects(capsys, files):
    # a.masked_fill_(m, 0) and b[m] = 1 on 512 x 128 bf16 inputs, m true at every third element
    # (21,846 of 65,536): the mask read once (65,536 B), and the selected elements written into each
    # buffer, counted on the traced sample (2 x 21,846 x 2 B); the elements the mask leaves are neither
    # read nor written. Before: both buffers read and written whole, 4 x 131,072 B more. A mask of
    # other values selects other elements: the count is the traced sample's (`--indirect min`: none).
    selected = len(range(0, 512 * 128, 3))
    r = roofline_json(capsys, files["masked"])
    assert r["totals"]["bytes_fused"] == 512 * 128 + 2 * selected * 2
    assert r["validation"]["validated"] and r["validation"]["samples"] > 1
    notes = [n for n in r["validation"]["notes"] if "in place" in n]
    assert [n.split("input ")[1].split(" ")[0] for n in notes] == ["'a'", "'b'"]
    low = roofline_json(capsys, files["masked"], "--indirect", "min")
    assert low["totals"]["bytes_fused"] == 512 * 128


def test_a_masked_update_by_an_index_mask_writes_its_region_exactly(capsys, files):
    # x.masked_fill_(ones.triu(1), 0) on a 128 x 128 bf16 input: the mask is built from indices, so
    # narrowing splits the conditional store into the zeros above the diagonal and the element's own
    # value below it, a store of nothing, which goes: 128 x 127 / 2 elements written, nothing read.
    # Before: every element written (32,768 B).
    r = roofline_json(capsys, files["triu_fill"])
    assert r["totals"]["bytes_fused"] == 128 * 127 // 2 * 2
    assert r["totals"]["flops"] == 0
    assert r["validation"]["validated"]


def test_an_update_a_later_op_reads_is_not_in_place(capsys, files):
    # buf.index_add_(...) then buf * 2 returned: the updated buffer is read whole by the product, so it
    # is materialised (read whole, 16 rows added) and the product's 4096 x 128 result written
    r = roofline_json(capsys, files["not_returned"])
    whole = 4096 * 128 * 4
    assert r["totals"]["bytes_fused"] == whole + 16 * 8 + 16 * 128 * 4 + whole
    assert not any("in place" in n for n in r["validation"].get("notes", []))


def test_a_view_of_an_input_updated_in_place_is_returned_as_a_view(capsys, files):
    # eager writes the row into the caller's cache and returns a view of it: the row written (8 x 64
    # bf16, 1,024 B), k read (1,024 B) and pos (8 B). Before, the view was copied out of a local: its
    # 1024 rows read and written, 2 x 1,048,576 B (an audit's 1 x 8 x 65,536 x 128 cache returning
    # [:, :, :4096] on H100: 5.01 us, now the latency floor)
    r = roofline_json(capsys, files["view_returned"])
    assert r["validation"]["validated"]
    assert r["totals"]["bytes_fused"] == 1_024 + 1_024 + 8 == 2_056
    assert [(a["output"], a["role"], a["how"]) for a in r["aliases"]] == [("slice_2", "output", "a view")]


def test_diagonal_updates_of_inputs_write_the_diagonal_only(capsys, files):
    # fill_diagonal_ (export: as_strided_scatter, stride 129) writes 128 bf16 (256 B); the first
    # superdiagonal += 1 (diagonal_scatter) reads and writes its 127 elements (2 x 254 B). Before:
    # no template for either
    r = roofline_json(capsys, files["diagonals"])
    assert r["validation"]["validated"]
    assert r["totals"]["bytes_fused"] == 256 + 2 * 254
    assert r["totals"]["flops"] == 127
