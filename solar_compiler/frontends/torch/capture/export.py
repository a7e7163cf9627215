"""The preferred capture method: ``torch.export.export(model, inputs, strict=False)`` under
``no_grad``, then ``run_decompositions`` with the capture's table (`ops.tables`).

Raises `NeedsFallback` or `SymbolicShape` when the exported graph cannot be used as it is
(forward mutates module state, data-dependent shapes, unsupported graph inputs): the caller then
records the program with the dispatch recorder instead.
"""

from __future__ import annotations

import contextlib
import operator
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.export.graph_signature import InputKind, OutputKind, TensorArgument

from solar_compiler.frontends.captured_program import AtenNode, CapturedProgram, Namer, TensorMeta
from solar_compiler.frontends.model_file import ModelSpec

from .graph import NeedsFallback, SymbolicShape, UserFile, convert_args, finish, has_bool_index, tensor_meta
from .inputs import input_names
from .ops import IDENTITY_OPS, decompose, packet
from .shapes import no_autograd_decomp
from .util import build_model, quiet, real_value, resolve_attr
from .value_reads import MAX_VALUE_READS


@contextlib.contextmanager
def _few_value_reads():
    """Export turns each tensor value read by Python (`.item()`, `if t > 0:`) into an unbacked
    symbol; a Python loop of thousands of reads took minutes to export (issue 21). Past
    `MAX_VALUE_READS` symbols export gives up, and the dispatch recorder names the line."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    count = [0]
    saved = {m: getattr(ShapeEnv, m) for m in
             ("create_unbacked_symint", "create_unbacked_symfloat", "create_unbacked_symbool")}

    def counted(orig):
        def wrapper(self, *args, **kwargs):
            count[0] += 1
            if count[0] > MAX_VALUE_READS:
                raise NeedsFallback(f"more than {MAX_VALUE_READS} tensor values read by Python")
            return orig(self, *args, **kwargs)
        return wrapper

    for m, f in saved.items():
        setattr(ShapeEnv, m, counted(f))
    try:
        yield
    finally:
        for m, f in saved.items():
            setattr(ShapeEnv, m, f)


def capture_export(spec: ModelSpec, mode: str, fake: bool, user: UserFile) -> CapturedProgram:
    fake_mode = FakeTensorMode() if fake else None
    model, sample = build_model(spec, mode, fake_mode)
    names_in = input_names(spec, sample)
    changes: list[str] = []
    snaps: list[dict] = []
    h_pre = model.register_forward_pre_hook(lambda mod, args: snaps.append(_state_snapshot(mod)))
    h_post = model.register_forward_hook(
        lambda mod, args, out: changes.extend(_state_changes(snaps.pop(), _state_snapshot(mod)))
    )
    ctx = fake_mode if fake_mode is not None else contextlib.nullcontext()
    with ctx, torch.no_grad(), quiet(), no_autograd_decomp(), _few_value_reads():
        try:
            ep = torch.export.export(model, tuple(sample), strict=False)
        finally:
            h_pre.remove()
            h_post.remove()
        if changes:
            raise NeedsFallback(f"forward mutates module state ({', '.join(sorted(set(changes))[:4])})")
        ep = decompose(ep)  # ep.run_decompositions(tables()[0]), with the table split once

    namer = Namer()
    bool_index: set[int] = set()
    node_name: dict[Any, str] = {}  # fx node -> our name
    prog = CapturedProgram(
        source=spec.path,
        mode=mode,
        method="export",
        size_constants={**spec.size_constants, **spec.repeat_counts},
    )
    sig = ep.graph_signature
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    user_iter = iter(names_in)
    for ispec in sig.input_specs:
        arg = ispec.arg
        if not isinstance(arg, TensorArgument):
            if ispec.kind == InputKind.USER_INPUT:
                continue
            raise NeedsFallback(f"unsupported graph input {ispec.kind.name}")
        ph = placeholders[arg.name]
        val = ph.meta.get("val")
        if ispec.kind == InputKind.USER_INPUT:
            name = namer.fresh(next(user_iter, arg.name))
            prog.inputs.append(tensor_meta(name, val))
        elif ispec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            name = namer.fresh(ispec.target)
            prog.weights.append(tensor_meta(name, val))
            prog.weight_sources[name] = ispec.target
        elif ispec.kind == InputKind.CONSTANT_TENSOR:
            value = ep.constants.get(ispec.target)
            name = namer.fresh(ispec.target)
            prog.weights.append(tensor_meta(name, val if val is not None else value))
            if resolve_attr(model, ispec.target) is not None:
                prog.weight_sources[name] = ispec.target
            else:
                real = real_value(value)
                if real is None:
                    raise NeedsFallback(f"constant {ispec.target} has no known value")
                prog.weight_sources[name] = f"const:{name}"
                prog.constants[name] = real
        else:
            raise NeedsFallback(f"unsupported graph input {ispec.kind.name}")
        node_name[ph] = name

    convert_nodes(ep.graph, node_name, namer, user, prog, bool_index)

    for ospec in sig.output_specs:
        if ospec.kind == OutputKind.USER_INPUT_MUTATION and isinstance(ospec.arg, TensorArgument) \
                and ospec.target in placeholders:
            node = next(n for n in ep.graph.nodes if n.name == ospec.arg.name)
            if node in node_name:
                prog.mutated_inputs[node_name[placeholders[ospec.target]]] = node_name[node]
        if ospec.kind != OutputKind.USER_OUTPUT:
            continue  # buffer/input mutations are side outputs
        if isinstance(ospec.arg, TensorArgument):
            node = next(n for n in ep.graph.nodes if n.name == ospec.arg.name)
            prog.outputs.append(node_name[node])
    return finish(prog, bool_index)


def convert_nodes(graph, node_name: dict, namer: Namer, user: UserFile, prog: CapturedProgram,
                  bool_index: set[int], annotate=None) -> None:
    """Append the ATen nodes of the functional fx `graph` to `prog.nodes`, naming their results
    (`node_name`: fx node -> our name, placeholders already bound). `annotate(fx node)` gives the
    (module path, loc, phase) of a node when the graph's own metadata does not (the train step's
    backward nodes take their forward node's, `train.py`); by default they come from
    `nn_module_stack` and `stack_trace`."""
    # name the results of multi-output nodes after their getitem users
    getitems: dict[Any, dict[int, Any]] = {}
    for n in graph.nodes:
        if n.op == "call_function" and n.target is operator.getitem:
            getitems.setdefault(n.args[0], {})[n.args[1]] = n

    def tensor_name(v):
        if isinstance(v, torch.fx.Node):
            if v not in node_name:
                raise NeedsFallback(f"graph value {v.name} is not a tensor")
            return node_name[v]
        if isinstance(v, torch.Tensor):
            raise NeedsFallback("tensor literal in graph")
        return None

    for n in graph.nodes:
        if n.op in ("placeholder", "output"):
            continue
        if n.op != "call_function":
            raise NeedsFallback(f"unsupported graph node {n.op} {n.target}")
        if n.target is operator.getitem:
            continue  # named with its base node
        if not isinstance(n.target, torch._ops.OpOverload):
            raise SymbolicShape(f"non-ATen graph node {n.target}")
        if packet(n.target) in IDENTITY_OPS and n.args and n.args[0] in node_name:
            node_name[n] = node_name[n.args[0]]  # aliases are the same value: no node
            continue
        val = n.meta.get("val")
        outs: list[TensorMeta | None] = []
        every: list[TensorMeta | None] = []
        if isinstance(val, torch.Tensor):
            name = namer.fresh(n.name)
            node_name[n] = name
            outs.append(tensor_meta(name, val))
        elif isinstance(val, (list, tuple)):
            users = getitems.get(n, {})
            for i, v in enumerate(val):
                if isinstance(v, torch.Tensor) and i in users:
                    name = namer.fresh(users[i].name)
                    node_name[users[i]] = name
                    outs.append(tensor_meta(name, v))
                else:
                    outs.append(None)
                every.append(outs[-1] if outs[-1] is not None or not isinstance(v, torch.Tensor)
                             else tensor_meta(namer.fresh(f"{n.name}_out{i}"), v))
        elif val is None:
            outs = []
        else:
            raise SymbolicShape(f"{n.target} returns {type(val).__name__}")
        args, kwargs = convert_args(n.args, n.kwargs, tensor_name)
        module_path, loc, phase = annotate(n) if annotate is not None else \
            (_module_path(n), user.stack_trace_loc(n.meta.get("stack_trace")), None)
        node = AtenNode(
            op=str(n.target),
            args=args,
            kwargs=kwargs,
            outputs=tuple(outs),
            loc=loc,
            module_path=module_path,
            all_outputs=tuple(every) if every else tuple(outs),
            phase=phase,
            called=_called(n) if annotate is None else None,
        )
        if packet(n.target) in ("index", "index_put", "_index_put_impl"):
            if has_bool_index(n.args, lambda a: a.meta.get("val")):
                bool_index.add(id(node))
        prog.nodes.append(node)


def _called(n) -> tuple[str, str] | None:
    """The op call that export traced and then decomposed into `n` and its siblings (export's
    provenance, `from_node`, followed back to the traced graph): (its node name, its op), or None
    when `n` is that call itself or no provenance is recorded."""
    src = n.meta.get("from_node")
    if not src:
        return None
    root = src[0]
    while getattr(root, "from_node", None):
        root = root.from_node[0]
    name, op = getattr(root, "name", None), str(getattr(root, "target", ""))
    if name is None or op == str(n.target):
        return None
    return name, op


def _module_path(n) -> str | None:
    """The innermost `nn_module_stack` path of an export node (None at the top level)."""
    stack = n.meta.get("nn_module_stack")
    return (list(stack.values())[-1][0] or None) if stack else None


# ---- does forward assign module state? ------------------------------------------------------------------
def _module_internal_names() -> frozenset[str]:
    return frozenset(vars(torch.nn.Module()).keys()) | {"_flat_weights", "_flat_weight_refs"}


def _ident(v: Any):
    if isinstance(v, (list, tuple)):
        return (type(v), tuple(id(x) for x in v))
    if isinstance(v, dict):
        return (dict, tuple((k, id(x)) for k, x in v.items()))
    return id(v)


def _state_snapshot(model: torch.nn.Module) -> dict:
    """Identity of every module attribute (private attributes of torch.nn's own modules excluded)."""
    internal = _module_internal_names()
    snap = {}
    for mname, mod in model.named_modules():
        torch_owned = type(mod).__module__.startswith("torch.")
        for k, v in vars(mod).items():
            if k in internal or (torch_owned and k.startswith("_")):
                continue
            snap[(mname, k)] = _ident(v)
        for k, v in mod._buffers.items():
            snap[(mname, k)] = id(v)
        for k, v in mod._parameters.items():
            snap[(mname, k)] = id(v)
        for k, v in mod._modules.items():
            snap[(mname, k)] = id(v)
    return snap


def _state_changes(before: dict, after: dict) -> list[str]:
    changed = [k for k in after if before.get(k, None) != after[k]]
    changed += [k for k in before if k not in after]
    out = []
    for mname, attr in changed:
        out.append(f"self.{mname + '.' if mname else ''}{attr}")
    return sorted(set(out))
