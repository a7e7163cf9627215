"""The dispatch recorder: a ``TorchDispatchMode`` that records the ATen ops forward executes as
functional `AtenNode`s (see `DispatchRecorder`); `dispatch.py` runs it."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from solar_compiler.frontends.captured_program import (
    AtenNode,
    CapturedProgram,
    CaptureError,
    Namer,
    TensorMeta,
    TensorRef,
)

from .graph import UserFile, convert, convert_args, has_bool_index, tensor_meta
from .ops import (
    IDENTITY_OPS,
    PRESERVE_CIA,
    aten,
    dropout_decomp,
    functional_name,
    has_cia_kernel,
    mutated_arg_indices,
    packet,
    view_results,
)
from .util import real_value
from .value_reads import MAX_VALUE_READS, ValueReads

__all__ = ["MAX_VALUE_READS", "DispatchRecorder", "ViewStep"]


@dataclass
class ViewStep:
    """One view op applied to a tensor: ``op(x, *args, **kwargs)[index]``."""

    op: Any
    args: tuple
    kwargs: dict
    index: int | None  # which result of a multi-result view (split, unbind, ...)
    out: TensorMeta  # shape/dtype of the result (name unused)
    n_out: int = 1  # number of results of the op


def _forget(recorder: weakref.ref, key: int) -> None:
    rec = recorder()
    if rec is not None:
        rec.forget(key)


def _native_batch_norm_as_legit(inp, weight, bias, running_mean, running_var, training, momentum, eps):
    """``native_batch_norm`` as the ``_native_batch_norm_legit*`` ops export produces."""
    if running_mean is None or running_var is None:
        return aten._native_batch_norm_legit.no_stats(inp, weight, bias, training, momentum, eps)
    if training:
        return aten._native_batch_norm_legit.default(
            inp, weight, bias, running_mean, running_var, training, momentum, eps
        )
    return aten._native_batch_norm_legit_no_training.default(
        inp, weight, bias, running_mean, running_var, momentum, eps
    )


_NATIVE_BN_FUNCTIONAL = {
    "aten.native_batch_norm.default": "aten._native_batch_norm_legit_functional.default",
}


class DispatchRecorder(TorchDispatchMode):
    """Records executed ATen ops as functional AtenNodes.

    Tensors are tracked by identity; a tensor's entries are forgotten when it is freed (so a
    reused id is a new tensor), rather than keeping every tensor alive: a capture on real
    tensors (the fallback for data-dependent code) would otherwise hold every intermediate of
    the forward pass at once (Reformer at KernelBench's sizes: over 8 GB).  Views are nodes of
    their own op and remember their chain from the base tensor; an in-place op becomes its
    functional counterpart producing a new version of the mutated tensor; a mutation
    through a view is written back to the base with ``*_scatter`` / ``view`` nodes, and
    views of a mutated base are regenerated on their next use.
    """

    def __init__(
        self, user: UserFile, prog: CapturedProgram, namer: Namer, cia, python_table, module_stack
    ):
        super().__init__()
        self.user = user
        self.prog = prog
        self.namer = namer
        self.cia = cia
        self.preserve = PRESERVE_CIA
        self.table = dict(python_table)
        self.table[aten.native_batch_norm.default] = _native_batch_norm_as_legit
        self.module_stack = module_stack
        self.names: dict[int, str] = {}
        self.metas: dict[int, TensorMeta] = {}
        self._finalizers: list[weakref.finalize] = []
        self.view_of: dict[int, tuple[torch.Tensor, list[ViewStep]]] = {}
        self.version: dict[int, int] = {}  # id(base) -> number of mutations
        self.seen: dict[int, int] = {}  # id(view) -> base version its name reflects
        self.globals_by_id: dict[int, str] = {}
        self.const_count = 0
        self.bool_index: set[int] = set()
        self.value_reads = ValueReads()  # tensor values read by Python (`_value_read`)
        self.read_locs: set[str] = set()

    # ---- names -------------------------------------------------------------------------
    def register(self, t: torch.Tensor, name: str, meta: TensorMeta | None = None) -> None:
        self.names[id(t)] = name
        self.metas[id(t)] = meta or tensor_meta(name, t)
        self._finalizers.append(weakref.finalize(t, _forget, weakref.ref(self), id(t)))

    def release(self) -> None:
        """Stop watching the tensors still alive (the model's weights outlive the capture)."""
        for f in self._finalizers:
            f.detach()
        self._finalizers.clear()

    def forget(self, key: int) -> None:
        for table in (self.names, self.metas, self.view_of, self.version, self.seen):
            table.pop(key, None)

    def _new_leaf(self, v: torch.Tensor) -> str:
        gname = self.globals_by_id.get(id(v))
        if gname is not None:
            name = self.namer.fresh(gname)
            self.prog.weights.append(tensor_meta(name, v))
            self.prog.weight_sources[name] = f"global:{gname}"
        else:
            real = real_value(v)
            if real is None:
                raise CaptureError(f"{self.user.display}: forward uses a tensor of unknown origin")
            name = self.namer.fresh(f"lifted_tensor_{self.const_count}")
            self.const_count += 1
            self.prog.weights.append(tensor_meta(name, v))
            self.prog.weight_sources[name] = f"const:{name}"
            self.prog.constants[name] = real
        self.register(v, name)
        return name

    def name_of(self, v) -> str | None:
        """Current name of tensor ``v`` (regenerating a view whose base was mutated)."""
        if not isinstance(v, torch.Tensor):
            return None
        key = id(v)
        if key not in self.names:
            return self._new_leaf(v)
        if key in self.view_of:
            base, chain = self.view_of[key]
            version = self.version.get(id(base), 0)
            if self.seen.get(key) != version:
                names = self._replay(base, chain)
                self.names[key] = names[-1]
                self.seen[key] = version
        return self.names[key]

    def _emit(self, op: str, args: tuple, kwargs: dict, outs: tuple) -> None:
        self.prog.nodes.append(
            AtenNode(
                op=op,
                args=args,
                kwargs=kwargs,
                outputs=outs,
                loc=self.user.frame_loc(),
                module_path=(self.module_stack[-1] or None) if self.module_stack else None,
            )
        )

    def _fresh_meta(self, base: str, like: TensorMeta) -> TensorMeta:
        return replace(like, name=self.namer.fresh(base))

    def _replay(self, base: torch.Tensor, chain: list[ViewStep]) -> list[str]:
        """Emit the view chain on the current version of ``base``; names of every step."""
        cur = self.name_of(base)
        names = [cur]
        for step in chain:
            if packet(step.op) in IDENTITY_OPS:
                names.append(cur)
                continue
            args, kwargs = convert_args(step.args, step.kwargs, self.name_of)
            meta = self._fresh_meta(packet(step.op).strip("_"), step.out)
            if step.index is not None:
                # a multi-result view (split/unbind): only the result used here is named
                outs = tuple(meta if i == step.index else None for i in range(step.n_out))
            else:
                outs = (meta,)
            self._emit(str(step.op), (TensorRef(cur),) + args, kwargs, outs)
            cur = meta.name
            names.append(cur)
        return names

    # ---- mutation ----------------------------------------------------------------------
    def _write_back(self, t: torch.Tensor, new_name: str) -> None:
        """``t`` now holds the value ``new_name``: give it and its base new versions."""
        key = id(t)
        if key not in self.view_of:
            self.names[key] = new_name
            self.version[key] = self.version.get(key, 0) + 1
            return
        base, chain = self.view_of[key]
        inter = self._replay(base, chain)  # names of base, x1, ..., xk (current values)
        metas = [self.metas[id(base)]] + [s.out for s in chain]
        src = new_name
        for i in range(len(chain) - 1, -1, -1):
            src = self._scatter(chain[i], inter[i], metas[i], src)
        self.names[id(base)] = src
        self.version[id(base)] = self.version.get(id(base), 0) + 1
        self.names[key] = new_name
        self.seen[key] = self.version[id(base)]

    def _scatter(self, step: ViewStep, x: str, x_meta: TensorMeta, src: str) -> str:
        """Name of ``x`` with the view ``step`` of it replaced by ``src``."""
        pk = packet(step.op)
        a = list(step.args)
        if pk in IDENTITY_OPS:
            return src
        out = self._fresh_meta(f"{pk}_scatter", x_meta)
        xs, ss = TensorRef(x), TensorRef(src)
        rank = len(x_meta.shape)
        if pk == "slice":
            dim, start, end, st = (a + [0, None, None, 1][len(a) :])[:4]
            op, args = "aten.slice_scatter.default", (xs, ss, dim, start, end, st)
        elif pk == "select":
            op, args = "aten.select_scatter.default", (xs, ss, a[0], a[1])
        elif pk == "diagonal":
            off, d1, d2 = (a + [0, 0, 1][len(a) :])[:3]
            op, args = "aten.diagonal_scatter.default", (xs, ss, off, d1, d2)
        elif pk == "as_strided":
            op, args = (
                "aten.as_strided_scatter.default",
                (xs, ss, *[convert(v, self.name_of) for v in a]),
            )
        elif pk in ("split", "split_with_sizes", "unbind") and step.index is not None:
            dim = a[1] if len(a) > 1 else 0
            if pk == "unbind":
                dim = a[0] if a else 0
                op, args = "aten.select_scatter.default", (xs, ss, dim, step.index)
            else:
                d = dim % rank
                size = x_meta.shape[d]
                if pk == "split":
                    sizes = [min(a[0], size - k) for k in range(0, size, a[0])]
                else:
                    sizes = list(a[0])
                start = sum(sizes[: step.index])
                op, args = (
                    "aten.slice_scatter.default",
                    (xs, ss, dim, start, start + sizes[step.index], 1),
                )
        elif pk == "permute":
            dims = [d % rank for d in a[0]]
            inv = [dims.index(i) for i in range(rank)]
            op, args = "aten.permute.default", (ss, inv)
        elif pk in ("transpose", "t"):
            d0, d1 = (a[0], a[1]) if pk == "transpose" else (0, 1)
            op, args = "aten.transpose.int", (ss, d0, d1)
        elif pk in (
            "view",
            "_unsafe_view",
            "reshape",
            "_reshape_alias",
            "squeeze",
            "unsqueeze",
            "flatten",
            "unflatten",
            "view_as",
        ):
            op, args = "aten.view.default", (ss, list(x_meta.shape))
        else:
            raise CaptureError(
                f"{self.user.display}: in-place update through a {pk} view is not supported"
            )
        self._emit(op, args, {}, (out,))
        return out.name

    # ---- values read by Python -----------------------------------------------------------
    def _value_read(self, func) -> None:
        """A tensor value went to Python (`.item()`, `float(t)`, `if t > 0:`): noted once per source
        line. Past `MAX_VALUE_READS` reads with little tensor work between them (`value_reads.py`)
        the computation is running in Python, outside the graph (a loop of `.item()`), and whatever
        it returns would be baked in as the traced sample's constant: the capture stops there, at
        once, rather than recording thousands of reads."""
        loc = self.user.frame_loc() or "?"
        why = self.value_reads.read()
        if why is not None:
            raise CaptureError(
                f"{loc}: forward reads tensor values into Python {why} ({func}, from .item(), float() "
                "or control flow on values, e.g. in a Python loop): that computation runs outside the "
                "captured graph and its result would be a constant of the traced sample; express it "
                "with tensor ops"
            )
        if loc not in self.read_locs:
            self.read_locs.add(loc)
            self.prog.value_dependent.append(
                f"{func} at {loc}: a tensor value read by Python (control flow or sizes)"
            )

    # ---- dispatch ----------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is aten.dropout.default:
            with self:
                return dropout_decomp(*args, **kwargs)
        if func in self.table:
            with self:
                r = self.table[func](*args, **kwargs)
            if r is not NotImplemented:
                return r
        if self.cia.get(func) is not self.preserve and has_cia_kernel(func):
            # a composite op reaching the mode (inside a decomposition): decompose it as
            # autograd would have
            with self:
                r = func.decompose(*args, **kwargs)
            if r is not NotImplemented:
                return r
        out = func(*args, **kwargs)
        flat_out = list(out) if isinstance(out, (tuple, list)) else [out]
        if not any(isinstance(o, torch.Tensor) for o in flat_out):
            if torch.Tag.data_dependent_output in func.tags:
                self._value_read(func)
            return out
        pk = packet(func)
        if view_results(func) and args and isinstance(args[0], torch.Tensor):
            return self._record_view(func, args, kwargs, out, flat_out)
        mutated = [j for j in mutated_arg_indices(func) if isinstance(args[j], torch.Tensor)]
        cargs, ckw = convert_args(args, kwargs, self.name_of)
        op_name = str(func)
        if mutated:
            op_name = _NATIVE_BN_FUNCTIONAL.get(op_name) or functional_name(func)
        base = op_name.split(".")[1].strip("_") or "t"
        results = [
            o for o in flat_out if isinstance(o, torch.Tensor) and not any(o is args[j] for j in mutated)
        ]
        multi = len(results) + len(mutated) > 1
        outs: list[TensorMeta | None] = []
        pairs: list[tuple[torch.Tensor, TensorMeta]] = []
        for o in flat_out:
            if not isinstance(o, torch.Tensor):
                outs.append(None)
            elif not any(o is args[j] for j in mutated):
                meta = tensor_meta(self.namer.fresh(f"{base}_out{len(outs)}" if multi else base), o)
                outs.append(meta)
                pairs.append((o, meta))
        new_versions = []
        for j in mutated:
            meta = tensor_meta(self.namer.fresh(f"{base}_out{len(outs)}" if multi else base), args[j])
            outs.append(meta)
            new_versions.append((args[j], meta))
        node = AtenNode(
            op=op_name,
            args=cargs,
            kwargs=ckw,
            outputs=tuple(outs),
            loc=self.user.frame_loc(),
            module_path=(self.module_stack[-1] or None) if self.module_stack else None,
        )
        if pk in ("index", "index_put", "index_put_", "_index_put_impl_"):
            if has_bool_index(args, lambda a: a):
                self.bool_index.add(id(node))
        self.prog.nodes.append(node)
        self.value_reads.op()
        for t, meta in pairs:
            self.register(t, meta.name, meta)
        for t, meta in new_versions:
            self._write_back(t, meta.name)
        return out

    def _record_view(self, func, args, kwargs, out, flat_out):
        src = args[0]
        src_name = self.name_of(src)
        pk = packet(func)
        if pk in IDENTITY_OPS:
            for o in flat_out:
                if isinstance(o, torch.Tensor):
                    self._register_view(
                        o, src, ViewStep(func, (), {}, None, self.metas[id(src)]), src_name
                    )
            return out
        cargs, ckw = convert_args(args, kwargs, self.name_of)
        base = pk.strip("_") or "view"
        multi = isinstance(out, (tuple, list))
        outs = []
        for i, o in enumerate(flat_out):
            if isinstance(o, torch.Tensor):
                outs.append(tensor_meta(self.namer.fresh(f"{base}_out{i}" if multi else base), o))
            else:
                outs.append(None)
        self._emit(str(func), cargs, ckw, tuple(outs))
        rest = tuple(args[1:])
        for i, (o, meta) in enumerate(zip(flat_out, outs, strict=True)):
            if meta is not None:
                step = ViewStep(func, rest, dict(kwargs), i if multi else None, meta, len(flat_out))
                self._register_view(o, src, step, meta.name)
        return out

    def _register_view(self, o: torch.Tensor, src: torch.Tensor, step: ViewStep, name: str) -> None:
        if id(src) in self.view_of:
            base, chain = self.view_of[id(src)]
            chain = chain + [step]
        else:
            base, chain = src, [step]
        self.register(o, name, replace(step.out, name=name))
        self.view_of[id(o)] = (base, chain)
        self.seen[id(o)] = self.version.get(id(base), 0)
