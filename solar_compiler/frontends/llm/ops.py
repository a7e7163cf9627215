"""Per-op fill-in: an ATen (or custom) op without a template, translated by the LLM inside the
deterministic torch translation.

The prompt gives the op's call and schema, its Python source where it has one (a `torch.library`
custom op's function, a decomposition), the parameter list the kernel must have and one reference
input/output pair: the op's inputs as the program computes them on `get_inputs()` (the kernel
translated so far, run by the executor), and the op run by torch on them. An answer is accepted
when it reproduces that pair (same executor and tolerances as whole-program validation); it is
then spliced into the program (tensor renaming, `splice.py`), and the whole program is validated
as usual afterwards.
"""

from __future__ import annotations

import inspect
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from solar_compiler.loopir.ast import Kernel, TensorDecl

from .check import Param, Sample, check_response
from .prompt import render
from .session import Session, Task, fingerprint
from .splice import rename_nodes

SHOWN = 256          # arrays up to this many elements are printed in full in the prompt


@dataclass(frozen=True)
class Filled:
    """One op the LLM translated: where its statements are and who wrote them."""

    op: str
    loc: str
    first: int
    count: int
    model: str
    attempts: int
    cached: bool
    tokens: int
    cost: float | None


class TorchOpFiller:
    """The `OpFiller` the torch translator calls where an op has no template."""

    def __init__(self, spec, program, options, session: Session | None = None):
        self.spec, self.program, self.options = spec, program, options
        self.cfg = options.llm
        self.session = session or Session(self.cfg, spec.path)
        self.filled: list[Filled] = []
        self._reference: dict[str, np.ndarray] | None = None
        self._keys: dict[str, int] = {}

    # ---- the OpFiller interface --------------------------------------------------------------------
    def sends(self, op: str) -> bool:
        return self.cfg.sends(op)

    def fill(self, tr, node, why):
        from solar_compiler.frontends.builder.values import stored

        self.cfg.require(str(why), why.error_class)
        start = tr.n_statements  # the op's statements: materialised views, then the spliced kernel
        op = _resolve(node.op)
        schema = op._schema
        ins, call_args, call_kwargs = self._inputs(tr, node, schema)
        outs = [(i, m) for i, m in enumerate(node.outputs) if m is not None]
        out_names = _output_names(schema, len(node.outputs))
        params = [Param(p, decl.dtype, decl.shape, "input") for p, decl in ins] + \
            [Param(out_names[i], m.dtype, tuple(m.shape), "output") for i, m in outs]
        feed, note = self._input_values(tr, [decl for _, decl in ins])
        feed = {p: feed[decl.name] for p, decl in ins}
        dtypes = {p: decl.dtype for p, decl in ins}
        expected = _run_op(op, schema, call_args, call_kwargs, feed, dtypes, outs, out_names)
        kernel_name = _kernel_name(node.op)
        call = _call_text(node.op, schema, call_args, call_kwargs, dtypes, ins, outs, out_names)
        key = self._task_key(node.op, tr.loc)
        reason = "is to be written as a new kernel" if self.cfg.sends(node.op) else "has no loop-IR template"
        text = render("op", path=self.spec.path, loc=tr.loc, reason=reason, call=call, schema=str(schema),
                      op_source=_op_source(node.op), kernel=kernel_name,
                      params="\n".join(f"- `{p.text()}`" for p in params),
                      outputs=", ".join(f"`{out_names[i]}`" for i, _ in outs),
                      reference=reference_text(params, feed, expected, note))
        sample = Sample("the reference pair", feed, expected)
        task = Task(key, text, fingerprint("op", text), lambda r: check_response(r, params, [sample]))
        outcome = self.session.solve(task)
        # splice: parameters -> program tensors, locals -> fresh program locals
        names = {p: decl.name for p, decl in ins}
        results: list[Any] = [None] * len(node.outputs)
        for i, _ in outs:
            decl = tr.result(i)
            names[out_names[i]] = decl.name
            results[i] = stored(decl)
        for t in outcome.kernel.tensors:
            if t.role == "local":
                names[t.name] = tr.declare(f"{kernel_name}_{t.name}", t.shape, t.dtype).name
        tr.append(rename_nodes(outcome.kernel.body, names, tr.loc))
        self.filled.append(Filled(node.op, tr.loc, start, tr.n_statements - start, outcome.model,
                                  outcome.attempts, outcome.cached, outcome.tokens, outcome.cost))
        return tuple(results) if len(results) > 1 else results[0]

    # ---- records ------------------------------------------------------------------------------------
    def attribution(self, source_ops: list[dict]) -> list[dict]:
        """Per source op: which path produced it (template, or LLM with model and attempts)."""
        by_first = {f.first: f for f in self.filled}
        out = []
        for o in source_ops:
            f = by_first.get(o["first"])
            if f is not None and f.op == o["op"]:
                out.append({"op": o["op"], "loc": o["loc"], "by": "llm", "model": f.model,
                            "attempts": f.attempts, "cached": f.cached, "tokens": f.tokens, "cost": f.cost})
            else:
                out.append({"op": o["op"], "loc": o["loc"], "by": "template"})
        return out

    # ---- inputs of the op -------------------------------------------------------------------------
    def _task_key(self, op: str, loc: str) -> str:
        base = f"{op} at {Path(loc).name}"  # the file's name only: a replay works from any folder
        n = self._keys[base] = self._keys.get(base, 0) + 1
        return base if n == 1 else f"{base} #{n}"

    def _inputs(self, tr, node, schema):
        """[(parameter name, program tensor)] for every tensor argument (a view or generator is
        materialised into a local first), and the call's args/kwargs with parameter names in place
        of the tensors."""
        from solar_compiler.frontends.torch.capture import TensorRef

        ins: list[tuple[str, TensorDecl]] = []
        taken: set[str] = set()

        def param(ref: TensorRef, hint: str) -> str:
            v = tr.val(ref)
            decl = next((t for t in tr.tensors if t.name == v.stored), None) if v.stored else None
            if decl is None:
                decl = tr.materialize(v, ref.name)
            name, k = hint, 1
            while name in taken or name in _reserved():
                name, k = f"{hint}_{k}", k + 1
            taken.add(name)
            ins.append((name, decl))
            return name

        def conv(value: Any, hint: str) -> Any:
            if isinstance(value, TensorRef):
                return _Param(param(value, hint))
            if isinstance(value, (list, tuple)):
                return type(value)(conv(x, f"{hint}_{j}") for j, x in enumerate(value))
            return value

        names = [a.name for a in schema.arguments]
        args = tuple(conv(a, names[i] if i < len(names) else f"arg{i}") for i, a in enumerate(node.args))
        kwargs = {k: conv(v, k) for k, v in node.kwargs.items()}
        return ins, args, kwargs

    def _input_values(self, tr, decls: list[TensorDecl]) -> tuple[dict[str, np.ndarray], str]:
        """Values of `decls` on get_inputs(): the kernel so far, executed; random values when that
        would exceed the validation budget (the note says which)."""
        from solar_compiler.executor import execute
        from solar_compiler.frontends.torch.translate import TorchTranslation
        from solar_compiler.frontends.validation import as_array, estimate

        wanted = {d.name for d in decls}
        tensors = [TensorDecl(t.name, t.shape, t.dtype, "output") if t.name in wanted and t.role == "local"
                   else t for t in tr.tensors]
        partial = TorchTranslation(Kernel(tr.kernel_name, tensors, tr.body), tr.inputs, [], tr.random)
        kernel = partial.validation_kernel()
        cost = estimate(kernel)
        secs, nbytes = cost.seconds, cost.kernel_bytes
        if secs > self.options.time_budget or nbytes > self.options.memory_budget_gb * 2**30:
            rng = np.random.default_rng(0)
            return {d.name: _random(rng, d) for d in decls}, "random inputs (the program is too large to run)"
        ref = self._reference_run()
        feed = {tr.inputs[n]: a for n, a in ref["inputs"].items()}
        feed.update({tr.random[n]: a for n, a in ref["random"].items() if n in tr.random})
        feed = {k: as_array(a, kernel.tensor(k)) for k, a in feed.items()}
        got = execute(kernel, feed)
        return {d.name: feed[d.name] if d.name in feed else got[d.name] for d in decls}, \
            "the op's inputs as the program computes them on get_inputs()"

    def _reference_run(self) -> dict[str, dict[str, np.ndarray]]:
        if self._reference is None:
            from solar_compiler.frontends.torch.capture import run_reference

            ins, ws, _, rnd = run_reference(self.spec, self.options.mode, seed=0, program=self.program)
            self._reference = {"inputs": {**ins, **ws}, "random": rnd}
        return self._reference


# ---- helpers ------------------------------------------------------------------------------------------
def _reserved() -> frozenset[str]:
    from solar_compiler.frontends.builder.translator import RESERVED

    return RESERVED


@dataclass(frozen=True)
class _Param:
    """A tensor argument of the call, by its kernel parameter name."""

    name: str

    def __repr__(self) -> str:
        return self.name


def _resolve(op_name: str):
    """The torch OpOverload named `ns.op.overload` (a name from the capture, never from the LLM)."""
    import torch

    parts = op_name.split(".")
    ns, name, overload = parts[0], parts[1], parts[2] if len(parts) > 2 else "default"
    return getattr(getattr(getattr(torch.ops, ns), name), overload)


def _output_names(schema, n: int) -> list[str]:
    names = [r.name or "" for r in schema.returns]
    out, seen = [], set()
    for i in range(n):
        base = names[i] if i < len(names) and names[i] and names[i] not in _reserved() else \
            ("out" if n == 1 else f"out{i}")
        while base in seen:
            base += "_"
        seen.add(base)
        out.append(base)
    return out


def _kernel_name(op: str) -> str:
    parts = op.split(".")
    return "_".join(p for p in parts[1:2] if p) or "op"


def _call_text(op: str, schema, args, kwargs, dtypes, ins, outs, out_names) -> str:
    """`aten.sort.default(self=x: f32[8, 16], dim=-1) -> (values: f32[8, 16])`."""
    shapes = {p: d.shape for p, d in ins}

    def fmt(v: Any) -> str:
        if isinstance(v, _Param):
            return f"{v.name}: {dtypes[v.name]}[{', '.join(map(str, shapes[v.name]))}]"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(fmt(x) for x in v) + "]"
        return repr(v)

    names = [a.name for a in schema.arguments]
    parts = [f"{names[i] if i < len(names) else f'arg{i}'}={fmt(a)}" for i, a in enumerate(args)]
    parts += [f"{k}={fmt(v)}" for k, v in kwargs.items()]
    res = ", ".join(f"{out_names[i]}: {m.dtype}[{', '.join(map(str, m.shape))}]" for i, m in outs)
    n_results = len(schema.returns)
    tail = f"  (the other {n_results - len(outs)} result(s) are unused: do not compute them)" \
        if n_results > len(outs) else ""
    return f"{op}({', '.join(parts)}) -> ({res}){tail}"


def _op_source(op_name: str) -> str:
    """The 'Its Python source' section: a custom op's own function, or a registered decomposition."""
    code = None
    try:
        from torch._library.custom_ops import OPDEFS

        ns, name = op_name.split(".")[:2]
        d = OPDEFS.get(f"{ns}::{name}")
        if d is not None:
            code = inspect.getsource(d._init_fn)
    except (ImportError, OSError, TypeError, ValueError, AttributeError):
        code = None
    if code is None:
        try:
            from torch._decomp import decomposition_table

            fn = decomposition_table.get(_resolve(op_name))
            code = inspect.getsource(fn) if fn is not None else None
        except (ImportError, OSError, TypeError, AttributeError):
            code = None
    if not code:
        return ""
    return render("op_source", code=textwrap.dedent(code).strip())


def _to_torch(value: Any, feed: dict[str, np.ndarray], dtypes: dict[str, str], schema_type: str):
    import torch

    from solar_compiler.frontends.torch.capture import torch_dtype

    if isinstance(value, _Param):  # in the dtype the op saw (bf16/f8 values travel as float32)
        return torch.from_numpy(np.array(feed[value.name])).to(torch_dtype(dtypes[value.name]))
    if isinstance(value, (list, tuple)):
        return type(value)(_to_torch(x, feed, dtypes, schema_type) for x in value)
    if isinstance(value, str) and "ScalarType" in schema_type:
        return torch_dtype(value)
    return value


def _run_op(op, schema, args, kwargs, feed, dtypes, outs, out_names) -> dict[str, np.ndarray]:
    """The op's outputs, run by torch on the fed inputs."""
    import torch

    from solar_compiler.executor.numeric import USER

    types = [str(a.type) for a in schema.arguments]
    by_name = {a.name: str(a.type) for a in schema.arguments}
    targs = [_to_torch(a, feed, dtypes, types[i] if i < len(types) else "") for i, a in enumerate(args)]
    tkw = {k: _to_torch(v, feed, dtypes, by_name.get(k, "")) for k, v in kwargs.items()}
    with torch.no_grad():
        res = op(*targs, **tkw)
    res = res if isinstance(res, (tuple, list)) else (res,)
    out = {}
    for i, m in outs:
        t = res[i].detach()
        if t.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
            t = t.float()
        out[out_names[i]] = np.array(t.numpy(), dtype=USER[m.dtype], order="C")  # a 0-d result stays 0-d
    return out


def _random(rng: np.random.Generator, d: TensorDecl) -> np.ndarray:
    from solar_compiler.executor.numeric import USER

    if d.dtype == "bool":
        return rng.random(d.shape) < 0.5
    if d.dtype.startswith("i"):
        return rng.integers(0, 2, d.shape).astype(USER[d.dtype])
    return rng.standard_normal(d.shape).astype(USER[d.dtype])


def reference_text(params: list[Param], feed: dict, expected: dict, note: str) -> str:
    lines = [f"({note})", ""]
    for p in params:
        a = feed[p.name] if p.role != "output" else expected[p.name]
        lines.append(f"{p.name} ({p.role}, {p.dtype}[{', '.join(map(str, p.shape))}]) =")
        lines.append(_array_text(a))
    return "\n".join(lines)


def _array_text(a: np.ndarray) -> str:
    # corners of at most about SHOWN elements whatever the rank (4 a side in 2-d, 2 in 4-d): a
    # KernelBench convolution's input would otherwise put 4096 numbers in the prompt
    edge = min(4, max(1, int(SHOWN ** (1 / max(1, a.ndim)) / 2)))
    with np.printoptions(precision=5, suppress=False, threshold=SHOWN, edgeitems=edge, linewidth=100):
        text = np.array2string(np.asarray(a), separator=", ")
    if a.size > SHOWN:
        text += f"\n(showing the corners of {math.prod(a.shape)} elements)"
    return "```\n" + text + "\n```"
