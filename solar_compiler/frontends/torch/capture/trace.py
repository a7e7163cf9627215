"""`make_fx` tracing of a function that runs autograd, shared by a training step (`train.py`) and a
forward that calls autograd itself (`autograd.py`).

Export cannot take these: its decompositions re-trace the backward ops autograd leaves in the graph
(a `native_layer_norm_backward` decomposed under fake tensors segfaults in torch 2.13). `make_fx`
runs the function on fake tensors below autograd instead, so torch's own autograd formulas produce
the backward ops, and the capture's decomposition table applies to both halves, except that a
backward op the translator has a template for (`registry.lookup`) is kept whole. Each node is
tagged with its phase: autograd marks the nodes it records while running a backward function
(``autograd_backward``, with the ``seq_nr`` of the forward op whose backward it is), and nodes
traced under `phase` carry that tag. A backward node takes the module path and source line of the
forward op with its ``seq_nr``, so the module tree attributes backward work to the module whose
forward produced it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.fx.traceback as fxt
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

from solar_compiler.frontends.captured_program import CapturedProgram, CaptureError, Namer
from solar_compiler.frontends.model_file import ModelSpec

from .export import convert_nodes
from .graph import UserFile, tensor_meta
from .inputs import input_names
from .ops import is_random, packet, tables
from .train_ops import (
    BACKWARD_DECOMPOSITIONS,
    attention_backend,
    backward_table,
    dropout_as_draw,
    kept_backward,
)
from .util import quiet


def trace_table() -> dict:
    """The decompositions of a traced function: export's python table plus every backward op's,
    minus the backward ops with a template (kept whole)."""
    _, _, python = tables()
    return {op: fn for op, fn in {**backward_table(), **python, **BACKWARD_DECOMPOSITIONS}.items()
            if not kept_backward(op)}


def trace(fn: Callable, args: tuple, fake_mode, model: torch.nn.Module, user: UserFile):
    """`fn(*args)` traced by `make_fx` inside `fake_mode` (the args are its tensors), forward nodes
    tagged with their module path, then made functional (`_functional`). Without oneDNN, CPU
    recurrent layers run torch's portable per-step ops (mkldnn_rnn_layer would be one opaque op with
    no template); attention runs its math path and dropout is a plain draw (`train_ops.py`)."""
    table = trace_table()
    paths = {id(m): name for name, m in model.named_modules()}
    with fake_mode, quiet(), fxt.preserve_node_meta(), _module_stack(paths), \
            torch.backends.mkldnn.flags(enabled=False), attention_backend(), dropout_as_draw():
        gm = make_fx(fn, decomposition_table=table, record_stack_traces=True)(*args)
        return _functional(gm, user, args, table)


def _functional(gm, user: UserFile, args: tuple, table: dict):
    """`gm` without in-place updates and views of updated tensors (`nn.ReLU(inplace=True)`,
    `x += y`, train-mode batch-norm statistics): re-traced through `torch.func.functionalize` by an
    fx interpreter, each node's (module, loc, phase) carried over in ``meta["custom"]`` (fx copies
    it to every node traced while the interpreter runs a node). The function itself cannot be traced
    under `functionalize`: parameters lose their `requires_grad` there. An update of a buffer (a
    running statistic) becomes a copy into the graph input, dropped by `graph_program`."""
    annotate = _annotator(gm, user)
    for n in gm.graph.nodes:
        if n.op == "call_function":
            n.meta["custom"] = {**(n.meta.get("custom") or {}), "solar": annotate(n)}
    flat = [a for a in torch.utils._pytree.tree_leaves(args)]

    def run(*xs):
        return torch.fx.Interpreter(gm).run(*xs)

    return make_fx(torch.func.functionalize(run, remove="mutations"), decomposition_table=table)(*flat)


@contextlib.contextmanager
def phase(name: str, module: str | None = None) -> Iterator[None]:
    """Nodes traced inside are tagged `name` (``meta["custom"]``, which fx copies to each node),
    and, when given, run in `module` (an optimizer update: the module owning the parameter)."""
    saved = {k: fxt.current_meta.get(k) for k in ("custom", "nn_module_stack")}
    fxt.current_meta["custom"] = {**(saved["custom"] or {}), "solar_phase": name}
    if module is not None:
        fxt.current_meta["nn_module_stack"] = {module: (module, "")}
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                fxt.current_meta.pop(k, None)
            else:
                fxt.current_meta[k] = v


@contextlib.contextmanager
def _module_stack(paths: dict[int, str]) -> Iterator[None]:
    """Forward nodes carry ``nn_module_stack`` (the path of the innermost module running), set by
    global module hooks while the function is traced."""
    stack: list[str] = []

    def pre(mod, args):
        path = paths.get(id(mod))
        if path is not None:
            stack.append(path)
            fxt.current_meta["nn_module_stack"] = {path: (path, type(mod).__name__)}

    def post(mod, args, out):
        if paths.get(id(mod)) is not None and stack:
            stack.pop()
            if stack:
                fxt.current_meta["nn_module_stack"] = {stack[-1]: (stack[-1], "")}
            else:
                fxt.current_meta.pop("nn_module_stack", None)

    h1, h2 = register_module_forward_pre_hook(pre), register_module_forward_hook(post)
    try:
        yield
    finally:
        h1.remove()
        h2.remove()


def _annotator(gm, user: UserFile):
    """(module path, loc, phase) of each node: forward nodes from their own metadata, backward nodes
    from the forward node with their ``seq_nr``, optimizer nodes from their phase tag."""
    first_fwd: dict[int, Any] = {}
    for n in gm.graph.nodes:
        if n.op == "call_function" and not n.meta.get("autograd_backward") and "custom" not in n.meta:
            first_fwd.setdefault(n.meta.get("seq_nr"), n)

    def module_of(n) -> str | None:
        stack = n.meta.get("nn_module_stack")
        return (list(stack.values())[-1][0] or None) if stack else None

    def annotate(n):
        tag = (n.meta.get("custom") or {}).get("solar_phase")
        if n.meta.get("autograd_backward") or tag == "backward":
            fwd = first_fwd.get(n.meta.get("seq_nr")) if n.meta.get("autograd_backward") else None
            src = fwd if fwd is not None else n
            return module_of(src), user.stack_trace_loc(src.meta.get("stack_trace")), "backward"
        if tag == "optimizer":
            return module_of(n), None, "optimizer"
        return module_of(n), user.stack_trace_loc(n.meta.get("stack_trace")), "forward"

    return annotate


def graph_program(prog: CapturedProgram, spec: ModelSpec, user: UserFile, gm, sample: list,
                  sources: list[str], what: str) -> tuple[dict[Any, str], Namer, list]:
    """Fill `prog` from the traced graph `gm`, whose inputs are the weights named by `sources`
    (state-dict paths; ``optim:<state>:<param>`` for optimizer state) and then the tensors of
    `sample`: (fx node -> name, the namer, the fx values the graph returns, flattened). The caller
    names the outputs. A buffer's update (running statistics) is dropped; other random ops than
    `rand_like` and in-place updates are refused, one line each naming `what` was traced ("the
    training step")."""
    namer = Namer()
    node_name: dict[Any, str] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    tensors_in = [t for t in sample if isinstance(t, torch.Tensor)]
    if len(placeholders) != len(sources) + len(tensors_in):
        raise CaptureError(f"{spec.path}: {what} traced has {len(placeholders)} inputs, expected "
                           f"{len(sources) + len(tensors_in)}")
    for ph, src in zip(placeholders, sources, strict=False):
        name = namer.fresh(src.removeprefix("optim:").replace(":", "_"))
        prog.weights.append(tensor_meta(name, ph.meta["val"]))
        prog.weight_sources[name] = src
        node_name[ph] = name
    for ph, base in zip(placeholders[len(sources):], input_names(spec, sample), strict=True):
        name = namer.fresh(base)
        prog.inputs.append(tensor_meta(name, ph.meta["val"]))
        node_name[ph] = name
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target is torch.ops.aten.copy_.default and not n.users \
                and n.args[0].op == "placeholder":
            gm.graph.erase_node(n)  # a buffer's update (running statistics): not a result
            continue
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
            where = user.stack_trace_loc(n.meta.get("stack_trace")) or spec.path
            if is_random(n.target) and packet(n.target) != "rand_like":
                raise CaptureError(f"{where}: random op {n.target} in {what} is not supported yet")
            if packet(n.target).endswith("_") and packet(n.target) not in ("__and__", "__or__"):
                raise CaptureError(f"{where}: {what} updates a tensor in place ({n.target}); not "
                                   "supported yet")
    convert_nodes(gm.graph, node_name, namer, user, prog, set(),
                  lambda n: (n.meta.get("custom") or {}).get("solar", (None, None, None)))
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    return node_name, namer, torch.utils._pytree.tree_leaves(out_node.args[0])
