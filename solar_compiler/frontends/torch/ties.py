"""Index outputs of ops whose order among tied values torch leaves unspecified, for validation.

torch documents no tie order for `topk`, `sort(stable=False)` (and `argsort`, which is one),
`kthvalue`, `median` / `nanmedian` along a dim ("not necessarily the first occurrence") and `mode`;
CPU and CUDA differ, and our templates (templates/select.py, sort.py) pick one order of their own.
`max` / `min` along a dim and `argmax` / `argmin` are documented to return the first maximal
(minimal) index, a stable sort the original order, and `msort`, `unique` and `cummax` return
values or indices that are functions of the values: those are compared exactly, as before.

A program output is an index output of such an op when it is the op's index result or a copy that
keeps its row-major element order (a cast to a wide enough integer, a reshape, a squeeze): output
element p is then element p of the op's indices. The translation copies the op's input, where
the op runs, into a tensor that only the validation kernel has (`TieSite.input`, like the alias
copies); the reference run records the op's input and indices (`capture/reference.py`,
`TieRecorder`); validation compares the two inputs like any output and checks the indices with
`executor/ties.py`, whose module doc says why that cannot accept a wrong program.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from solar_compiler.executor.ties import Tie, input_points
from solar_compiler.frontends.captured_program import AtenNode, CapturedProgram, TensorRef

# op -> (the indices of a row are distinct, a near tie counts, argument position of `dim`, of
# `keepdim`: None where the indices keep the dim)
TIE_OPS = {
    "aten.topk.default": (True, True, 2, None),
    "aten.sort.default": (True, True, 1, None),
    "aten.sort.stable": (True, True, None, None),   # only with stable=False (`_ties`)
    "aten.kthvalue.default": (False, True, 2, 3),
    "aten.median.dim": (False, True, 1, 2),
    "aten.nanmedian.dim": (False, True, 1, 2),
    "aten.mode.default": (False, False, 1, 2),      # counts equal values: only equal values tie
}
# ops whose result is their first argument's elements in the same row-major order
_SAME_ORDER = {"aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
               "aten.clone.default", "aten.alias.default", "aten.flatten.using_ints",
               "aten.unsqueeze.default", "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default",
               "aten._to_copy.default", "aten.contiguous.default", "aten.lift_fresh_copy.default"}
_INDEX_DTYPES = {"i64": 2**63, "i32": 2**31}   # a cast that holds every index exactly
INPUT_POINTS_CAP = 1 << 20   # input elements sampled validation computes per index output, at most


@dataclass(frozen=True)
class TieSite:
    """One op whose index result reaches program outputs (`outputs`, positions in `program.outputs`)."""

    node: int                       # position in program.nodes
    op: str
    occurrence: int                 # among the program's nodes of the same op (the eager call order)
    outputs: tuple[int, ...]
    input_shape: tuple[int, ...]
    index_shape: tuple[int, ...]
    dim: int
    slots: bool                     # the index result keeps `dim` (topk, sort, keepdim)
    distinct: bool
    near: bool
    what: str                       # "topk at m.py:13", for messages


def tie_sites(program: CapturedProgram) -> list[TieSite]:
    """The ops of `program` with an unspecified tie order whose indices reach a program output."""
    if program.step != "forward":
        return []
    copies: dict[str, int] = {}   # tensor -> node of the op whose indices it holds in the same order
    seen: Counter[str] = Counter()
    found: dict[int, tuple[AtenNode, int]] = {}
    for i, node in enumerate(program.nodes):
        nth = seen[node.op]
        seen[node.op] += 1
        src = node.args[0] if node.args else None
        if not isinstance(src, TensorRef):
            continue
        if _ties(node) and len(node.outputs) > 1 and node.outputs[1] is not None and _rank(program, src.name):
            copies[node.outputs[1].name] = i
            found[i] = (node, nth)
        elif src.name in copies and node.outputs and _same_order(node, program):
            copies[node.outputs[0].name] = copies[src.name]  # type: ignore[union-attr]
    sites = []
    for i, (node, nth) in found.items():
        outs = tuple(p for p, name in enumerate(program.outputs) if copies.get(name) == i)
        if outs:
            sites.append(_site(program, i, node, nth, outs))
    return sites


def _rank(program: CapturedProgram, name: str) -> int:
    """The rank of tensor `name` (0 for one the program does not list: a random draw)."""
    try:
        return len(program.tensor(name).shape)
    except KeyError:
        return 0


def _ties(node: AtenNode) -> bool:
    if node.op == "aten.sort.stable":
        return node.kwargs.get("stable") is not True
    return node.op in TIE_OPS


def _same_order(node: AtenNode, program: CapturedProgram) -> bool:
    if node.op not in _SAME_ORDER or node.outputs[0] is None:
        return False
    if node.op != "aten._to_copy.default":
        return True
    out = node.outputs[0]
    n = max(program.tensor(node.args[0].name).shape, default=1)  # type: ignore[union-attr]
    return out is not None and n < _INDEX_DTYPES.get(out.dtype, 0) and \
        set(node.kwargs) <= {"dtype", "layout", "device", "memory_format", "non_blocking", "pin_memory"}


def _site(program: CapturedProgram, i: int, node: AtenNode, nth: int, outs: tuple[int, ...]) -> TieSite:
    shape = program.tensor(node.args[0].name).shape  # type: ignore[union-attr]
    distinct, near, at_dim, at_keep = TIE_OPS[node.op]
    dim = _arg(node, at_dim, "dim", -1)
    keep = True if at_keep is None else bool(_arg(node, at_keep, "keepdim", False))
    short = node.op.removesuffix(".default").removeprefix("aten.")
    return TieSite(i, node.op, nth, outs, tuple(shape), tuple(node.outputs[1].shape),  # type: ignore[union-attr]
                   int(dim) % len(shape), keep, distinct, near, f"{short} at {node.loc or program.source}")


def _arg(node: AtenNode, at: int | None, name: str, default: object) -> object:
    return node.args[at] if at is not None and at < len(node.args) else node.kwargs.get(name, default)


def input_name(site: TieSite, program: CapturedProgram) -> str:
    """The validation kernel's name hint for the copy of the op's input."""
    return f"{program.nodes[site.node].outputs[1].name}_tie_input"  # type: ignore[union-attr]


def rules(tt) -> dict[str, Tie]:
    """The tie rule of each index output of translation `tt`, by kernel output name."""
    out: dict[str, Tie] = {}
    shapes = {t.name: t.shape for t in (*tt.kernel.tensors, *tt.alias_tensors)}  # an alias: its copy
    for site, copy in zip(tt.ties, tt.tie_inputs, strict=True):
        for p in site.outputs:
            name = tt.outputs[p]
            out[name] = Tie(copy, tuple(shapes[name]), site.input_shape, site.dim, site.index_shape,
                            site.slots, site.distinct, site.near, site.what)
    return out


def recorded_inputs(tt, recorded: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]],
                    ref: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The reference's op inputs, by the names of their copies, for the sites whose op the reference
    run recorded with the same shapes and whose recorded indices are the reference's outputs (a
    check that the eager call is the captured node). A site left out has its outputs compared
    exactly, as without this module (`compare` needs both sides of `Tie.input`)."""
    out: dict[str, np.ndarray] = {}
    for site, copy in zip(tt.ties, tt.tie_inputs, strict=True):
        got = recorded.get((site.op, site.occurrence))
        if got is None or got[0].shape != site.input_shape or got[1].shape != site.index_shape:
            continue
        if all(np.array_equal(np.ravel(ref[tt.outputs[p]]), np.ravel(got[1])) for p in site.outputs):
            out[copy] = got[0]
    return out


def sampled_inputs(rules: dict[str, Tie], samples: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Sampled validation's points of each op input copy: whole rows of the op for the sampled
    points of its index outputs (`executor.ties.input_points`); an input whose rows are too many
    keeps its own random sample (its differing indices then fail, as without ties)."""
    out: dict[str, np.ndarray] = {}
    for name, tie in rules.items():
        pts = [input_points(tie, samples[name], INPUT_POINTS_CAP)]
        if tie.input in out:
            pts.append(out[tie.input])
        if any(p is None for p in pts):
            continue
        both = np.concatenate(pts)  # type: ignore[arg-type]
        flat = np.unique(np.ravel_multi_index(tuple(both.T), tie.input_shape))
        out[tie.input] = np.stack(np.unravel_index(flat, tie.input_shape), axis=1).astype(np.int64)
    return out
