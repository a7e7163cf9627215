"""Captured ATen graph (`CapturedProgram`) -> one loop-IR `Kernel`.

Every ATen node is translated by its template (`registry.lookup`, templates in `templates/`, built
with the shared `frontends/builder/`). Values live in an environment of `Val`s: a stored value reads
its own kernel tensor; a view is an index map composed into its consumers' reads; constant fills and
`arange` are generators with no tensor at all. A value that is a graph output is materialised into an
`output` tensor (a copy when it is a view).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache
from typing import Protocol

from solar_compiler.frontends.builder.constants import narrow_constants
from solar_compiler.frontends.builder.inplace import VIEW_OPS
from solar_compiler.frontends.builder.translator import NoTemplate, TranslateError, Translator, _loc_of
from solar_compiler.frontends.builder.values import Val
from solar_compiler.frontends.captured_program import (
    AtenNode,
    CapturedProgram,
    TensorRef,
    sanitize,
    tensor_refs,
)
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import LLM_NEST, Kernel, Node, Read, TensorDecl
from solar_compiler.loopir.rewrite import writes_as_inputs

from .buffer_tables import AffineValues, TableBuffer, bind_table
from .hadamard import HadamardBuffer
from .masks import OneHotBuffer, affine_masks, bind_selection
from .registry import Template, lookup
from .ties import TieSite, input_name, tie_sites


class OpFiller(Protocol):
    """Translates an op that has no template, or one the user sends to it (the LLM frontend's per-op
    fill-in): emits its statements through the translator (`declare`, `append`, ...) and returns one
    value per output."""

    def fill(self, tr: Translator, node: AtenNode, why: NoTemplate) -> Val | tuple[Val | None, ...]: ...

    def sends(self, op: str) -> bool:
        """Whether `op` is filled in though it has a template (`--llm-ops`)."""
        ...


@dataclass
class TorchTranslation:
    """The kernel and how its tensors relate to the captured program (for validation)."""

    kernel: Kernel
    inputs: dict[str, str]        # capture input/weight name -> kernel tensor name
    outputs: list[str]            # kernel output tensor per program output position
    random: dict[str, str]        # capture random-tensor name -> kernel tensor written by the draw
    notes: list[str] = field(default_factory=list)
    # the ATen op each run of statements comes from, in program order:
    # {"op": "aten.softmax.int", "loc": "m.py:12", "first": 3, "count": 5, "module": "attn"}
    source_ops: list[dict] = field(default_factory=list)
    # outputs that alias an input, a weight or another output (`Alias.record`); their copies and
    # tensors exist only in the validation kernel
    aliases: list[dict] = field(default_factory=list)
    alias_tensors: list[TensorDecl] = field(default_factory=list)
    alias_nodes: list[Node] = field(default_factory=list)
    # the statements that copy the elements an in-place update of an input leaves unchanged (run
    # first, in the validation kernel only: `Translator.validation_prologue`)
    prologue: list[Node] = field(default_factory=list)
    # weights of the priced kernel that the validation kernel computes in its prologue from tensors it
    # is fed (a selection buffer's keys, masks.py), so they are locals there
    computed_weights: list[str] = field(default_factory=list)
    # ops whose tie order is unspecified and whose indices are outputs (ties.py), and per site the
    # validation-only output that copies the op's input where the op runs (inserted after top-level
    # node `tie_copies[i][0]` of the body), so validation can tell tied indices apart
    ties: list[TieSite] = field(default_factory=list)
    tie_inputs: list[str] = field(default_factory=list)
    tie_copies: list[tuple[int, list[Node]]] = field(default_factory=list)
    tie_tensors: list[TensorDecl] = field(default_factory=list)

    def validation_kernel(self) -> Kernel:
        """The kernel with every random draw replaced by an input tensor of the same name, to be
        fed with the values torch drew (the drawing statements compute different values), the
        copies of what in-place updates of inputs leave unchanged and the computed weights prepended,
        and the copies that check the alias outputs appended; the copies of the inputs of ops whose
        tie order is unspecified are inserted where those ops run."""
        k = self.kernel
        if self.alias_nodes or self.prologue or self.tie_copies:
            tensors = [TensorDecl(t.name, t.shape, t.dtype, "local") if t.name in self.computed_weights else t
                       for t in k.tensors]
            body = list(k.body)
            for at, nodes in reversed(self.tie_copies):
                body[at:at] = nodes
            k = Kernel(k.name, [*tensors, *self.alias_tensors, *self.tie_tensors],
                       [*self.prologue, *body, *self.alias_nodes])
        return writes_as_inputs(k, set(self.random.values()))


# ---- the translation driver ---------------------------------------------------------------------
def translate_program(program: CapturedProgram, kernel_name: str = "forward",
                      filler: OpFiller | None = None) -> TorchTranslation:
    """The kernel of `program`: each node translated by its template, in program order; an op without
    a template goes to `filler` when one is given."""
    tr = Translator(program, kernel_name)
    for meta in program.inputs:
        tr.bind_param(meta, "input")
    for meta in program.weights:
        tr.bind_param(meta, "weight")
    narrow_constants(tr, program)
    tables, transforms = _bind_masks(tr, program)
    last_loc: str | None = None
    joined: tuple[str, str] | None = None  # the decomposed op call whose group is the last record
    sites = {s.node: s for s in tie_sites(program)}
    tie = _ValidationOnly()
    tie_at: list[tuple[int, list[Node]]] = []
    for i, node in enumerate(program.nodes):
        tr.node = node
        tr.loc = node.loc or last_loc or f"{program.source}:1"
        last_loc = tr.loc
        first, declared = tr.n_statements, len(tr.tensors)
        tr.stand_in = None
        try:
            if filler is not None and filler.sends(node.op):
                raise NoTemplate(f"{tr.loc}: {node.op} ({_describe(node)}) is sent to the LLM (--llm-ops)")
            result = _template_for(tr, node)(tr, node)
        except NoTemplate as e:
            if filler is None or tr.n_statements != first:
                raise
            del tr.tensors[declared:]  # what the template declared before giving up
            result, tr.stand_in = filler.fill(tr, node, e), LLM_NEST
        _fast_transform(tr, node, transforms)
        by = tr.stand_in
        if node.called is not None and node.called == joined and tr.source_ops \
                and tr.source_ops[-1]["first"] + tr.source_ops[-1]["count"] == first:
            # one eager kernel: one group, named after the call (a lone node keeps its own op's name)
            tr.source_ops[-1]["count"] += tr.n_statements - first
            tr.source_ops[-1]["op"] = node.called[1]
            if by:  # the group's arithmetic is then not priced as written, all of it (errs low)
                tr.source_ops[-1]["by"] = by
        else:
            grouped = len(tr.source_ops)
            # a lone node keeps its own op's name, unless it is not an ATen op (`solar.dft`)
            op = node.called[1] if node.called and not node.op.startswith("aten.") else node.op
            _record_group(tr, op, first, node.module_path, node.phase, by)
            joined = node.called if len(tr.source_ops) > grouped else None
        tr.bind_results(node, result)
        if i in sites:  # the op's input as the op sees it, for validation only
            at, before = len(tr.body), len(tie.nodes)
            tie.copy(tr, tr.val(node.args[0]), input_name(sites[i], program))
            tie_at.append((at, tie.nodes[before:]))
    tr.node = None
    first = tr.n_statements
    check = _ValidationOnly()
    outputs, aliases = _bind_outputs(tr, program, check)
    _record_group(tr, "output copy", first)
    kernel = Kernel(sanitize(kernel_name), tr.tensors, tr.body)
    return TorchTranslation(kernel, tr.inputs, outputs, tr.random, tr.notes, tr.source_ops,
                            [a.record() for a in aliases], check.tensors, check.nodes, tr.validation_prologue,
                            tables, list(sites.values()), [t.name for t in tie.tensors], tie_at, tie.tensors)


def _template_for(tr: Translator, node: AtenNode) -> Template:
    """The template of `node`'s op; an op without one is an error naming it (`file:line`), which a
    per-op filler may take over (`NoTemplate`)."""
    fn = lookup(node.op)
    if fn is None:
        raise NoTemplate(f"{tr.loc}: no loop-IR template for {node.op} ({_describe(node)})")
    return fn


def _record_group(tr: Translator, op: str, first: int, module: str | None = None,
                  phase: str | None = None, by: str | None = None) -> None:
    """One run of statements of one source op, with the nn.Module path it ran in (None at the top
    level), in a training step its phase, and who wrote a nest that stands in for its algorithm ("llm",
    "stand-in": `Origin.by`): `passes/translate.py` stamps them on the statements (`Assign.origin`)."""
    if tr.n_statements > first:
        rec = {"op": op, "loc": tr.loc, "first": first, "count": tr.n_statements - first, "module": module}
        if phase is not None:
            rec["phase"] = phase
        if by:
            rec["by"] = by
        tr.source_ops.append(rec)


_PRODUCTS = ("aten.mm.", "aten.bmm.", "aten.matmul.", "aten.linear.", "aten.addmm.", "aten.baddbmm.",
             "aten.einsum.", "aten.mv.", "aten.dot.")
_PASS_THROUGH = ("aten._to_copy.", "aten.clone.", "aten.contiguous.", "aten.to.")


def _fast_transform(tr: Translator, node: AtenNode, transforms: set[str]) -> None:
    """A product with a Hadamard buffer (or a view or copy of one: `transforms`, grown here) is a fast
    Walsh-Hadamard transform: a stand-in (hadamard.py)."""
    if not transforms & set(tensor_refs((node.args, node.kwargs))):
        return
    if node.op in VIEW_OPS or node.op.startswith(_PASS_THROUGH):
        transforms |= {o.name for o in node.outputs if o is not None}
    elif node.op.startswith(_PRODUCTS):
        tr.mark_stand_in()


def _bind_masks(tr: Translator, program: CapturedProgram) -> tuple[list[str], set[str]]:
    """Constant mask buffers that are affine regions are read as comparisons of their indices,
    selection matrices as comparisons with a table of keys (masks.py), Hadamard matrices from their
    indices' bits (hadamard.py), and buffers that are tables of fewer dimensions through their
    tables (buffer_tables.py); the weight stays declared (validation feeds it) but is no longer read.
    Returns the tables, which the validation kernel computes from their buffers, and the Hadamard
    buffers."""
    tables = []
    transforms: set[str] = set()
    for m in affine_masks(program):
        if isinstance(m, HadamardBuffer):
            tr.env[m.weight] = Val(m.shape, m.dtype, m.read_with(tr.env[m.weight].read))
            tr.notes.append(m.note())
            transforms.add(m.weight)
            continue
        if isinstance(m, AffineValues):
            tr.env[m.weight] = Val(m.shape, m.dtype, m.read_with(tr.env[m.weight].read))
            tr.notes.append(m.note())
            continue
        if isinstance(m, TableBuffer):
            buffer = tr.env[m.weight].read
            table = bind_table(tr, m, buffer)
            tables.append(table)
            tr.env[m.weight] = Val(m.shape, m.dtype, m.read_with(table, buffer))
            tr.notes.append(m.note(table))
            continue
        if isinstance(m, OneHotBuffer):
            table = bind_selection(tr, m, tr.inputs[m.weight])
            tables.append(table)
            tr.env[m.weight] = Val(m.shape, m.dtype, m.read_with(table))
            tr.notes.append(m.note(table))
            continue
        mask = replace(m, weight=tr.inputs[m.weight])
        tr.env[m.weight] = Val(mask.shape, mask.dtype, mask.read)
        tr.notes.append(mask.note())
    return tables, transforms


@dataclass
class _ValidationOnly:
    """Tensors and statements that only the validation kernel has (the alias outputs' copies)."""

    tensors: list[TensorDecl] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)

    def copy(self, tr: Translator, v: Val, hint: str) -> str:
        """An output tensor holding `v`, written by a copy the priced kernel does not contain."""
        nbody, ntensors, nstmts = len(tr.body), len(tr.tensors), tr.n_statements
        decl = tr.materialize(v, hint, role="output")
        self.nodes.extend(tr.body[nbody:])
        self.tensors.extend(tr.tensors[ntensors:])
        del tr.body[nbody:], tr.tensors[ntensors:]
        tr.n_statements = nstmts
        return decl.name


def _bind_outputs(tr: Translator, program: CapturedProgram, check: _ValidationOnly) \
        -> tuple[list[str], list[Alias]]:
    """The kernel tensor of every program output, and the outputs that alias another tensor.

    A computed value becomes an output tensor in place. An output that only views (reshapes,
    transposes, slices, or returns as is) an input, a weight or another output is an alias: eager
    PyTorch runs no kernel for it, so the priced kernel has no statement for it; the copy that
    checks its values goes to the validation kernel only (`TorchTranslation.validation_kernel`). An
    output returned twice is the same tensor both times. A view that reads every element of an
    intermediate (a permute, or an `expand` whose stride-0 dimensions repeat each element) is the
    same: eager returns the view, and only its base is ever written, so the intermediate becomes an
    output and the view an alias of it. Anything else (a part of an intermediate, a generator, a
    random draw) is materialised by a copy."""
    roles = {t.name: t.role for t in tr.tensors}
    fresh = _unwritten_fresh(program, tr, roles)
    bound: dict[int, str] = {}
    aliases: list[Alias] = []
    taken: set[str] = set()
    drawn = set(tr.random.values())
    vals: list[Val] = []
    for name in program.outputs:
        v = tr.env.get(name)
        if v is None:
            raise TranslateError(f"{program.source}: graph output '{name}' is never computed")
        vals.append(v)
    for pos, v in enumerate(vals):  # computed values first: an alias may view any of them
        if v.stored is not None and roles.get(v.stored) == "local" and v.stored not in drawn \
                and v.stored not in taken:
            tr.set_role(v.stored, "output")
            taken.add(v.stored)
            bound[pos] = v.stored
    for pos, (name, v) in enumerate(zip(program.outputs, vals, strict=True)):
        if pos in bound:
            continue
        tr.loc = _loc_of(program, name) or f"{program.source}:1"
        src = _view_source(v)
        if src is not None and src in taken and v.stored == src:  # returned twice
            bound[pos] = src
            aliases.append(Alias(pos, name, src, "output", "returned again"))
            continue
        if src is not None and src in tr.in_place_locals and roles.get(src) == "local" and src not in fresh:
            tr.set_role(src, "output")  # the caller's buffer, updated in place: its written elements
            roles[src] = "output"
            taken.add(src)
        role = "output" if src in taken else roles.get(src or "")
        if src is not None and role in ("input", "weight", "output") and src not in drawn \
                and name not in fresh:
            bound[pos] = check.copy(tr, v, f"{name}_alias")
            aliases.append(Alias(pos, name, src, role, "a view"))
            continue
        if src is not None and role == "local" and src not in drawn and name not in fresh \
                and _covers_all(tr, v, src):
            # eager returns the view; only its base is written (a broadcast writes each element once)
            tr.set_role(src, "output")
            taken.add(src)
            bound[pos] = check.copy(tr, v, f"{name}_alias")
            aliases.append(Alias(pos, name, src, "intermediate", "a view"))
            continue
        # a generator, a random draw, or a part of an intermediate: copy it
        decl = tr.materialize(v, f"{name}_out" if v.stored else name, role="output")
        taken.add(decl.name)
        bound[pos] = decl.name
    return [bound[i] for i in range(len(vals))], aliases


def _unwritten_fresh(program: CapturedProgram, tr: Translator, roles: dict[str, str]) -> set[str]:
    """The tensors eager PyTorch allocates and writes that the loop IR reads as an index map of
    another tensor instead (a `repeat` reads `x[i % n]`, a `cat` of one tensor k times too), and the
    views of those: the results of ops whose schema result has no alias annotation whose value has
    no storage of its own here. Eager writes them, so an output that holds one is materialised,
    never an alias of the tensor the loop IR reads."""
    out: set[str] = set()
    for node in program.nodes:
        view = _returns_alias(node.op)
        if view is None:
            continue  # an op without a schema, or an in-place one: as before
        first = next((a.name for a in node.args if isinstance(a, TensorRef)), None)
        for m in node.outputs:
            if m is None:
                continue
            v = tr.env.get(m.name)
            own = v is not None and v.stored is not None and roles.get(v.stored) == "local"
            if (not view and not own) or (view and first in out):
                out.add(m.name)
    return out


@cache
def _returns_alias(op: str) -> bool | None:
    """Whether the aten op's first result aliases an input without writing it (a view: True), is a
    new tensor (False), or neither is known (None: no schema, or an in-place or out= op)."""
    import torch

    ns, _, rest = op.partition(".")
    name, _, overload = rest.partition(".")
    try:
        schema = getattr(getattr(getattr(torch.ops, ns), name), overload or "default")._schema
    except (AttributeError, RuntimeError):
        return None
    if not schema.returns:
        return None
    info = schema.returns[0].alias_info
    if info is None:
        return False
    return None if info.is_write else True


@dataclass(frozen=True)
class Alias:
    """Program output `position` (`name`) holds the elements of kernel tensor `of` (an input, a
    weight or another output: `role`), as `how` says; it costs nothing."""

    position: int
    name: str
    of: str
    role: str
    how: str

    def record(self) -> dict:
        return {"position": self.position, "output": self.name, "of": self.of, "role": self.role,
                "how": self.how}


def _covers_all(tr: Translator, v: Val, src: str) -> bool:
    """Whether `v` reads every element of tensor `src` (each index a distinct view variable over the
    tensor's whole extent, or 0 on a dimension of extent 1: a permutation, with broadcast dimensions
    the index does not name)."""
    decl = next(t for t in tr.tensors if t.name == src)
    idx = tuple(AffExpr.var(f"_alias{d}") for d in range(v.ndim))
    e = v.read(idx)
    assert isinstance(e, Read)
    dims: list[int] = []
    for ix, extent in zip(e.indices, decl.shape, strict=True):
        if isinstance(ix, AffExpr) and extent == 1 and not ix.terms and ix.const == 0:
            continue  # a size-1 dimension (a `keepdim` reduction's) read at its one index
        if not isinstance(ix, AffExpr) or ix.const != 0 or len(ix.terms) != 1 or ix.terms[0][1] != 1:
            return False
        name = ix.terms[0][0]
        if not isinstance(name, str) or not name.startswith("_alias"):
            return False
        d = int(name.removeprefix("_alias"))
        if d in dims or v.shape[d] != extent:
            return False
        dims.append(d)
    return True


def _view_source(v: Val) -> str | None:
    """The tensor `v` views when each of its elements is one element of a kernel tensor (an affine
    index map: reshape, permute, slice, expand, identity), else None."""
    idx = tuple(AffExpr.var(f"_alias{d}") for d in range(v.ndim))
    e = v.read(idx)
    if isinstance(e, Read) and not e.indirect and e.dtype == v.dtype:
        return e.tensor
    return None


def _describe(node: AtenNode) -> str:
    parts = []
    for a in node.args:
        if isinstance(a, TensorRef):
            parts.append(f"%{a.name}")
        elif isinstance(a, (list, tuple)):
            items = (f"%{x.name}" if isinstance(x, TensorRef) else repr(x) for x in a)
            parts.append("[" + ", ".join(items) + "]")
        else:
            parts.append(repr(a))
    text = ", ".join(parts)
    return text if len(text) < 120 else text[:117] + "..."
