"""In-place updates of program inputs: an op whose result is an input's final version, which no later
op reads, writes into the caller's buffer, so only the elements it writes move. The copy of the
rest exists in the validation kernel only (`Translator.validation_prologue`), run first there, so
the output is still checked whole (docs/bounds.md section 0.5)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.captured_program import AtenNode, CapturedProgram, TensorRef, tensor_refs
from solar_compiler.loopir.ast import Assign


def updated_input(tr: Translator, node: AtenNode, ref: object = None) -> str | None:
    """The input whose final version `node` writes, when forward updates it in place and no later op
    reads that version, other than views that are returned (`returned_views`: eager returns a view of
    the caller's buffer, `cache[:, :, :L]`); else None. The final version may hold `node`'s values
    through scatters that only copy (`copied_from`: the write-back of `buf[:, :8] += x` into
    itself). `ref`: the operand that is the updated base (default: the first)."""
    ref = node.args[0] if ref is None else ref
    if not isinstance(ref, TensorRef):
        return None
    base = tr.val(ref).stored
    mine = tr.out_meta().name
    prog = tr.program
    for name, final in prog.mutated_inputs.items():
        if tr.inputs.get(name) != base:
            continue
        names, copies = _same_values(prog, final)
        if mine not in names:
            return None
        here = next(i for i, n in enumerate(prog.nodes) if n is node)
        later = [n for n in prog.nodes[here + 1:] if id(n) not in copies]
        views = returned_views(prog, set(names), later)
        if any(set(names) & set(tensor_refs((n.args, n.kwargs))) for n in later if id(n) not in views):
            return None
        return name
    return None


#: ops whose result views their first operand (no copy, as eager runs them)
VIEW_OPS = frozenset(f"aten.{op}" for op in (
    "slice.Tensor", "select.int", "view.default", "_unsafe_view.default", "transpose.int", "permute.default",
    "t.default", "unsqueeze.default", "squeeze.dim", "squeeze.dims", "squeeze.default", "expand.default",
    "alias.default", "narrow.default", "diagonal.default", "unfold.default"))


def returned_views(prog: CapturedProgram, names: set[str], later: list[AtenNode]) -> set[int]:
    """The ids of the nodes of `later` that view one of `names` (or such a view) and whose results
    only program outputs and other such views take: eager returns them as views of the base."""
    views: dict[int, AtenNode] = {}
    seen = set(names)
    for n in later:
        base = n.args[0] if n.args else None
        if n.op in VIEW_OPS and isinstance(base, TensorRef) and base.name in seen:
            views[id(n)] = n
            seen |= {o.name for o in n.outputs if o is not None}
    made = {o.name for n in views.values() for o in n.outputs if o is not None}
    for n in later:
        if id(n) not in views and made & set(tensor_refs((n.args, n.kwargs))):
            return set()  # a view some other op reads: not only returned
    return set(views)


def _assigns(nodes: list) -> Iterator:
    """The assignments inside loop-AST statements (through their loops and guards)."""
    for n in nodes:
        if isinstance(n, Assign):
            yield n
        else:
            yield from _assigns(getattr(n, "body", []))


def _same_values(prog: CapturedProgram, name: str) -> tuple[list[str], set[int]]:
    """`name` and the values it equals back through `slice_scatter`s that change no value
    (`copied_from`), and the ids of the nodes those make up."""
    producer = {o.name: n for n in prog.nodes for o in n.outputs if o is not None}
    names, nodes = [name], set()
    node = producer.get(name)
    while node is not None:
        got = copied_from(prog, node, producer)
        if got is None:
            break
        names.append(got[0])
        nodes |= got[1]
        node = producer.get(names[-1])
    return names, nodes


def copied_from(prog: CapturedProgram, node: AtenNode, producer: dict[str, AtenNode] | None = None) \
        -> tuple[str, set[int]] | None:
    """(the tensor whose values `node`'s result holds, the ids of the nodes that make it up) when
    `node` is a `slice_scatter` that only copies: of a source with the base's shape (every element
    overwritten: the source), or of the base's own slice at the same place (`buf[:, :8] += x`
    writes the updated slice back into itself: the base). Else None."""
    if node.op != "aten.slice_scatter.default" or not node.outputs or node.outputs[0] is None:
        return None
    base, src = node.args[0], node.args[1]
    if not isinstance(base, TensorRef) or not isinstance(src, TensorRef):
        return None
    meta, out = prog.tensor(src.name), node.outputs[0]
    if tuple(meta.shape) == tuple(out.shape) and meta.dtype == out.dtype and not meta.complex:
        return src.name, {id(node)}
    if producer is None:
        producer = {o.name: n for n in prog.nodes for o in n.outputs if o is not None}
    made = {id(node)}
    via = producer.get(src.name)
    if via is not None and via.op == "aten.copy.default" and isinstance(via.args[1], TensorRef) \
            and prog.tensor(via.args[1].name).dtype == meta.dtype:
        made.add(id(via))
        made |= _shape_only(prog, producer, via, base)
        via = producer.get(via.args[1].name)
    if via is None or via.op != "aten.slice.Tensor" or via.args[0] != base:
        return None
    made.add(id(via))
    ndim = len(out.shape)
    n = out.shape[_dim(node.args, 2, ndim)]
    if _slice(via.args, 1, n, ndim) != _slice(node.args, 2, n, ndim):
        return None
    return base.name, made


def _shape_only(prog: CapturedProgram, producer: dict[str, AtenNode], copy: AtenNode, base: TensorRef) \
        -> set[int]:
    """The id of the slice of `base` that `copy` (`aten.copy(dst, src)`) takes as its `dst`, which
    it reads for its shape only, when nothing else reads that slice."""
    dst = copy.args[0]
    view = producer.get(dst.name) if isinstance(dst, TensorRef) else None
    if view is None or view.op != "aten.slice.Tensor" or view.args[0] != base or dst.name in prog.outputs:
        return set()
    readers = [n for n in prog.nodes if dst.name in tensor_refs((n.args, n.kwargs))]
    return {id(view)} if len(readers) == 1 and readers[0] is copy else set()


def _dim(args: tuple, at: int, ndim: int) -> int:
    d = int(args[at]) if len(args) > at and args[at] is not None else 0
    return d % ndim if ndim else 0


def _slice(args: tuple, at: int, n: int, ndim: int) -> tuple[int, int, int, int]:
    """(dim, start, stop, step) of a slice's arguments from position `at` (dim, start, end, step),
    normalised as Python slices are over an extent of `n`."""
    rest = [args[i] if len(args) > i else None for i in range(at + 1, at + 4)]
    start, stop, step = slice(*rest).indices(n)
    return _dim(args, at, ndim), start, stop, step


@contextmanager
def validation_only(tr: Translator, node: AtenNode, updated: str) -> Iterator[None]:
    """The statements emitted inside go to the validation kernel only, run first there: the copy of
    what an in-place update of input `updated` leaves unchanged, which eager never moves."""
    first, count = len(tr.body), tr.n_statements
    yield
    tr.validation_prologue.extend(tr.body[first:])
    tr.in_place_locals |= {a.target for a in _assigns(tr.body[first:])}
    del tr.body[first:]
    tr.n_statements = count
    tr.notes.append(f"{tr.loc}: {node.op} updates input '{updated}' in place: only the written "
                    "elements move")
