"""Complex tensors as (real, imaginary) pairs: the captured program's ops on complex values rewritten
into ops on real tensors, before translation.

The loop IR has real dtypes only. A complex tensor of shape S is held in the layout of
`torch.view_as_real`: a real tensor of shape S + [2] of the component dtype (`TensorMeta.complex`),
so `view_as_real` and `view_as_complex` are the identity, and its bytes are the complex tensor's.
Each op that reads or writes a complex tensor is rewritten here:

* views and copies (`view`, `permute`, `slice`, `cat`, `constant_pad_nd`, sums, ...) keep their op,
  with shapes and dims moved past the pair dim (`permute(z, [1, 0])` -> `permute(z, [1, 0, 2])`);
* arithmetic becomes real arithmetic on the parts (`select(z, -1, 0)` is the real part): a complex
  product is 4 multiplications and 2 additions per element, the textbook count (Gauss's form needs
  3 and 5: more FLOPs); a complex matrix product is 3 real ones (`cublasCgemm3m`'s form, which needs
  fewer than 4: the bound takes the fewest a library ships);
* FFTs (`_fft_r2c`, `_fft_c2r`, `_fft_c2c`) become one `solar.dft` node per transformed dim, a
  direct DFT nest that the template marks as a stand-in: cuFFT's algorithm is another, so its
  arithmetic is not priced (no compute term, its traffic counted; docs/llm-frontend.md, "Pricing").

Every node of one rewrite carries the op it came from (`AtenNode.called`), so the unfused bound
counts one eager kernel for it. An op on complex values without a rule here is an error naming it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from solar_compiler.frontends.captured_program import (
    AtenNode,
    CapturedProgram,
    CaptureError,
    Namer,
    TensorMeta,
    TensorRef,
    tensor_refs,
)

DFT_OP = "solar.dft"
COMPLEX_DTYPES = {"c64": "f32", "c128": "f64", "c32": "f16"}

Arg = TensorRef | float | int | bool | complex


def lower_complex(prog: CapturedProgram) -> CapturedProgram:
    """`prog` with every op on complex values rewritten into ops on their (real, imaginary) pairs."""
    metas = {m.name: m for m in itertools.chain(prog.inputs, prog.weights)}
    for node in prog.nodes:
        metas.update((m.name, m) for m in (*node.outputs, *node.all_outputs) if m is not None)
    if not any(m.complex for m in metas.values()) and not any(_complex_dtype_arg(n) for n in prog.nodes):
        return prog
    lw = _Lowering(prog, metas)
    nodes: list[AtenNode] = []
    for node in prog.nodes:
        nodes.extend(lw.lower(node) if lw.touches(node) else [node])
    prog.nodes = nodes
    return prog


def _complex_dtype_arg(node: AtenNode) -> bool:
    return any(v in COMPLEX_DTYPES for v in (*node.args, *node.kwargs.values()) if isinstance(v, str))


def _packet(op: str) -> str:
    """`aten.view.default` -> `view.default`."""
    return op.split(".", 1)[1] if op.startswith("aten.") else op


def _norm(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


@dataclass
class _Emit:
    """The nodes one rewrite emits, each stamped with the op call they implement."""

    node: AtenNode
    out: list[AtenNode]

    def __call__(self, op: str, args: Sequence[object], meta: TensorMeta, **kwargs: object) -> TensorRef:
        self.out.append(AtenNode(op, tuple(args), dict(kwargs), (meta,), self.node.loc, self.node.module_path,
                                 (meta,), self.node.phase, self.node.called))
        return TensorRef(meta.name)


class _Lowering:
    def __init__(self, prog: CapturedProgram, metas: dict[str, TensorMeta]):
        self.prog = prog
        self.metas = metas
        self.namer = Namer()
        for name in metas:
            self.namer.used.add(name)

    # ---- queries ---------------------------------------------------------------------------
    def touches(self, node: AtenNode) -> bool:
        outs = [m for m in node.all_outputs or node.outputs if m is not None]
        return any(self.metas[r].complex for r in tensor_refs((node.args, node.kwargs)) if r in self.metas) \
            or any(m.complex for m in outs) or _complex_dtype_arg(node) \
            or any(isinstance(a, complex) for a in (*node.args, *node.kwargs.values()))

    def is_c(self, a: object) -> bool:
        return isinstance(a, TensorRef) and self.metas[a.name].complex

    def shape(self, a: TensorRef) -> tuple[int, ...]:
        """The shape torch sees (a complex tensor without its pair dim)."""
        m = self.metas[a.name]
        return m.shape[:-1] if m.complex else m.shape

    def meta(self, hint: str, shape: Sequence[int], dtype: str, cplx: bool = False) -> TensorMeta:
        shape = tuple(int(s) for s in shape)
        m = TensorMeta(self.namer.fresh(hint), (*shape, 2) if cplx else shape, dtype, cplx)
        self.metas[m.name] = m
        return m

    # ---- the rewrite of one node -----------------------------------------------------------------
    def lower(self, node: AtenNode) -> list[AtenNode]:
        out = node.outputs[0] if node.outputs else None
        if out is None:
            out = next((m for m in node.all_outputs if m is not None), None)
        rule = _RULES.get(_packet(node.op))
        if rule is None or out is None:
            raise CaptureError(f"{node.loc or self.prog.source}: {node.op} on complex values has no rule: "
                               "complex tensors are lowered to (real, imaginary) pairs "
                               "(frontends/torch/capture/complex_pairs.py)")
        called = node.called or (out.name, node.op)
        em = _Emit(replace(node, called=called), [])
        try:
            rule(self, em, node, out)
        except _Unsupported as e:
            raise CaptureError(f"{node.loc or self.prog.source}: {node.op} on complex values: {e}") from None
        if len(em.out) == 1 and em.out[0].op == node.op:  # the op itself, on the pair layout
            em.out[0].called = node.called
        return em.out

    # ---- building blocks (each returns the new value) ------------------------------------------
    def part(self, em: _Emit, z: TensorRef, which: int) -> TensorRef:
        m = self.metas[z.name]
        return em("aten.select.int", (z, -1, which),
                  self.meta(f"{z.name}_{'im' if which else 're'}", m.shape[:-1], m.dtype))

    def parts(self, em: _Emit, z: Arg, dtype: str) -> tuple[Arg, Arg]:
        """(real, imaginary) of a complex tensor, a real tensor (imaginary: 0) or a scalar."""
        if isinstance(z, TensorRef):
            return (self.part(em, z, 0), self.part(em, z, 1)) if self.is_c(z) else (z, 0.0)
        if isinstance(z, complex):
            return z.real, z.imag
        return z, 0.0

    def binary(self, em: _Emit, op: str, a: Arg, b: Arg, shape: Sequence[int], dtype: str,
               hint: str) -> Arg:
        """`op(a, b)` on real operands, folded when both are scalars."""
        if not isinstance(a, TensorRef) and not isinstance(b, TensorRef):
            return {"mul": a * b, "add": a + b, "sub": a - b}[op]  # type: ignore[operator]
        if op == "mul" and (a == 0.0 or b == 0.0):
            return 0.0
        if op in ("add", "sub") and b == 0.0:
            return a
        if op == "add" and a == 0.0:
            return b
        if not isinstance(a, TensorRef):
            if op == "sub":
                return em("aten.rsub.Scalar", (b, a), self.meta(hint, shape, dtype))
            a, b = b, a
        aten = {"mul": "aten.mul.Tensor", "add": "aten.add.Tensor", "sub": "aten.sub.Tensor"}[op]
        return em(aten, (a, b), self.meta(hint, shape, dtype))

    def tensor(self, em: _Emit, v: Arg, shape: Sequence[int], dtype: str, hint: str) -> TensorRef:
        """`v` as a tensor of `shape` (a scalar becomes a fill, a smaller tensor is expanded)."""
        if not isinstance(v, TensorRef):
            return em("aten.full.default", (list(shape), float(v)), self.meta(hint, shape, dtype),
                      dtype=dtype)
        if tuple(self.shape(v)) != tuple(shape):
            return em("aten.expand.default", (v, list(shape)), self.meta(hint, shape, dtype))
        return v

    def pair(self, em: _Emit, re: Arg, im: Arg, out: TensorMeta) -> TensorRef:
        """The complex value (re, im) into `out` (a pair meta)."""
        shape, dt = out.shape[:-1], out.dtype
        r = self.tensor(em, re, shape, dt, f"{out.name}_re")
        i = self.tensor(em, im, shape, dt, f"{out.name}_im")
        return em("aten.stack.default", ([r, i], -1), out)

    def as_pair(self, em: _Emit, v: Arg, dtype: str) -> Arg:
        """A real tensor as a complex one (imaginary 0); complex tensors and scalars unchanged."""
        if not isinstance(v, TensorRef) or self.is_c(v):
            return v
        shape = self.shape(v)
        real = v if self.metas[v.name].dtype == dtype else \
            em("aten._to_copy.default", (v,), self.meta(f"{v.name}_{dtype}", shape, dtype), dtype=dtype)
        col = em("aten.unsqueeze.default", (real, -1), self.meta(f"{v.name}_col", (*shape, 1), dtype))
        return em("aten.constant_pad_nd.default", (col, [0, 1], 0.0),
                  self.meta(f"{v.name}_c", shape, dtype, True))


class _Unsupported(Exception):
    pass


# ---- rules ---------------------------------------------------------------------------------------------
Rule = Callable[[_Lowering, _Emit, AtenNode, TensorMeta], None]
_RULES: dict[str, Rule] = {}


def rule(*packets: str):
    def deco(fn: Rule) -> Rule:
        for p in packets:
            _RULES[p] = fn
        return fn
    return deco


def _same(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta, args: Sequence[object] | None = None,
          **kwargs: object) -> None:
    """The op itself, on the pair layout (args and kwargs as given, dtypes mapped to the component)."""
    kw = {k: COMPLEX_DTYPES.get(v, v) if isinstance(v, str) else v
          for k, v in {**node.kwargs, **kwargs}.items()}
    em.out.append(AtenNode(node.op, tuple(node.args if args is None else args), kw, node.outputs, node.loc,
                           node.module_path, node.all_outputs, node.phase, node.called))


def _rank(lw: _Lowering, node: AtenNode) -> int:
    return len(lw.shape(node.args[0]))


@rule("clone.default", "contiguous.default", "alias.default", "alias_copy.default", "detach.default",
      "detach_copy.default", "lift_fresh_copy.default", "lift_fresh.default", "resolve_conj.default",
      "resolve_neg.default", "neg.default", "positive.default", "zeros_like.default", "empty_like.default",
      "index.Tensor", "_unsafe_index.Tensor", "view_as_real.default", "view_as_complex.default")
def _identity_layout(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    """Ops the pair layout does not change: copies, aliases, negation, leading-dim indexing."""
    if _packet(node.op) in ("view_as_real.default", "view_as_complex.default"):
        em("aten.alias.default", (node.args[0],), out)
        return
    _same(lw, em, node, out)


@rule("view.default", "_unsafe_view.default", "reshape.default", "view_copy.default", "expand.default",
      "expand_copy.default", "_reshape_copy.default")
def _shaped(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    _same(lw, em, node, out, (node.args[0], [*node.args[1], 2], *node.args[2:]))


@rule("unsqueeze.default", "unsqueeze_copy.default")
def _unsqueeze(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    _same(lw, em, node, out, (node.args[0], _norm(node.args[1], _rank(lw, node) + 1)))


@rule("squeeze.dim", "squeeze_copy.dim", "select.int", "select_copy.int", "slice.Tensor", "slice_copy.Tensor",
      "narrow.default", "index_select.default", "cumsum.default", "split.Tensor", "split_with_sizes.default",
      "unbind.int", "roll.default", "flip.default", "squeeze.dims", "squeeze_copy.dims", "sum.dim_IntList",
      "mean.dim", "transpose.int", "transpose_copy.int", "permute.default", "permute_copy.default")
def _dims(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    """Ops with dims among their arguments: dims counted from the end move past the pair dim."""
    r, p = _rank(lw, node), _packet(node.op)
    args = list(node.args)
    if p in ("transpose.int", "transpose_copy.int"):
        args[1:3] = [_norm(d, r) for d in args[1:3]]
    elif p in ("permute.default", "permute_copy.default"):
        args[1] = [_norm(d, r) for d in args[1]] + [r]
    elif p in ("squeeze.dims", "squeeze_copy.dims", "flip.default"):
        args[1] = [_norm(d, r) for d in args[1]]
    elif p in ("sum.dim_IntList", "mean.dim"):
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        args[1:2] = [list(range(r)) if not dims else [_norm(d, r) for d in dims]]
    elif p == "roll.default":
        dims = args[2] if len(args) > 2 else node.kwargs.get("dims")
        if not dims:
            raise _Unsupported("a roll of the flattened tensor")
        args[2:3] = [[_norm(d, r) for d in dims]]
    elif p == "split.Tensor" or p == "split_with_sizes.default":
        args[2:3] = [_norm(args[2] if len(args) > 2 else node.kwargs.get("dim", 0), r)]
    else:  # one dim in position 1 (slice's defaults to 0)
        d = args[1] if len(args) > 1 else node.kwargs.get("dim", 0)
        args[1:2] = [_norm(d, r)]
    _same(lw, em, node, out, args, **{k: v for k, v in node.kwargs.items() if k not in ("dim", "dims")})


@rule("sum.default", "mean.default")
def _all_sum(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    op = "aten.sum.dim_IntList" if node.op.startswith("aten.sum") else "aten.mean.dim"
    dtype = node.kwargs.get("dtype")
    em(op, (node.args[0], list(range(_rank(lw, node))), False), out,
       **({"dtype": COMPLEX_DTYPES.get(dtype, dtype)} if dtype else {}))


@rule("cat.default", "concat.default", "stack.default")
def _cat(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    """Real parts become complex ones; the dim is counted in the result's rank (without its pair dim)."""
    parts = [lw.as_pair(em, t, out.dtype) for t in node.args[0]]
    d = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    em(node.op, (parts, _norm(d, len(out.shape) - 1)), out)


@rule("constant_pad_nd.default")
def _pad(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    value = node.args[2] if len(node.args) > 2 else node.kwargs.get("value", 0)
    if value not in (0, 0.0):
        raise _Unsupported(f"padding with {value!r}")
    em(node.op, (node.args[0], [0, 0, *node.args[1]], 0.0), out)


@rule("repeat.default")
def _repeat(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    _same(lw, em, node, out, (node.args[0], [*node.args[1], 1]))


@rule("_to_copy.default", "to.dtype", "to.dtype_layout", "_to_dim_order_copy.default")
def _to(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    x = node.args[0]
    if lw.is_c(x) and out.complex:
        em("aten._to_copy.default", (x,), out, dtype=out.dtype)
    elif out.complex:  # real -> complex: imaginary 0
        v = lw.as_pair(em, x, out.dtype)
        em("aten.alias.default", (v,), out)
    else:  # complex -> real: torch keeps the real part
        re = lw.part(em, x, 0)
        em("aten._to_copy.default", (re,), out, dtype=out.dtype)


@rule("zeros.default", "empty.memory_format", "new_zeros.default", "new_empty.default")
def _zeros(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    size = node.args[1] if _packet(node.op).startswith("new_") else node.args[0]
    op = "aten.zeros.default"
    em(op, ([*size, 2],), out, dtype=out.dtype)


@rule("ones.default", "ones_like.default", "full.default", "full_like.default", "fill.Scalar")
def _fill(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    p = _packet(node.op)
    value: object = 1.0 if p.startswith("ones") else node.args[1]
    re, im = (value.real, value.imag) if isinstance(value, complex) else (value, 0.0)
    lw.pair(em, float(re), float(im), out)  # type: ignore[arg-type]


@rule("add.Tensor", "sub.Tensor", "add.Scalar", "sub.Scalar", "rsub.Scalar", "rsub.Tensor")
def _add(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    a, b = node.args[0], node.args[1]
    alpha = node.args[2] if len(node.args) > 2 else node.kwargs.get("alpha", 1)
    if _packet(node.op).startswith("rsub"):
        a, b = b, a
    op = "sub" if "sub" in _packet(node.op) else "add"
    if lw.is_c(a) and lw.is_c(b):
        em(f"aten.{op}.Tensor", (a, b), out, **({"alpha": alpha} if alpha != 1 else {}))
        return
    shape, dt = out.shape[:-1], out.dtype
    ar, ai = lw.parts(em, a, dt)
    br, bi = lw.parts(em, b, dt)
    if alpha != 1:
        bs = lw.shape(b) if isinstance(b, TensorRef) else ()
        br = lw.binary(em, "mul", br, alpha, bs, dt, f"{out.name}_b_re")
        bi = lw.binary(em, "mul", bi, alpha, bs, dt, f"{out.name}_b_im")
    re = lw.binary(em, op, ar, br, shape, dt, f"{out.name}_re")
    im = lw.binary(em, op, ai, bi, shape, dt, f"{out.name}_im")
    lw.pair(em, re, im, out)


@rule("mul.Tensor", "mul.Scalar", "div.Tensor", "div.Scalar")
def _mul(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    a, b = node.args[0], node.args[1]
    div = _packet(node.op).startswith("div")
    shape, dt = out.shape[:-1], out.dtype
    real = b if lw.is_c(a) and not lw.is_c(b) else a if lw.is_c(b) and not lw.is_c(a) else None
    if real is not None and not isinstance(real, complex) and not (div and real is a):
        # a real factor or divisor scales both parts (broadcast over the pair dim)
        z, s = (a, b) if real is b else (b, a)
        if isinstance(s, TensorRef):
            s = em("aten.unsqueeze.default", (s, -1), lw.meta(f"{s.name}_col", (*lw.shape(s), 1),
                                                               lw.metas[s.name].dtype))
        em("aten.div.Tensor" if div else "aten.mul.Tensor", (z, s), out)
        return
    ar, ai = lw.parts(em, a, dt)
    br, bi = lw.parts(em, b, dt)
    n = out.name

    def f(op: str, x: Arg, y: Arg, hint: str) -> Arg:
        return lw.binary(em, op, x, y, shape, dt, f"{n}_{hint}")

    if not div:
        re = f("sub", f("mul", ar, br, "rr"), f("mul", ai, bi, "ii"), "re")
        im = f("add", f("mul", ar, bi, "ri"), f("mul", ai, br, "ir"), "im")
        lw.pair(em, re, im, out)
        return
    den = f("add", f("mul", br, br, "bb"), f("mul", bi, bi, "cc"), "den")
    re = f("add", f("mul", ar, br, "rr"), f("mul", ai, bi, "ii"), "num_re")
    im = f("sub", f("mul", ai, br, "ir"), f("mul", ar, bi, "ri"), "num_im")
    lw.pair(em, _divide(lw, em, re, den, shape, dt, f"{n}_re"),
            _divide(lw, em, im, den, shape, dt, f"{n}_im"), out)


def _divide(lw: _Lowering, em: _Emit, a: Arg, b: Arg, shape: Sequence[int], dt: str, hint: str) -> Arg:
    if not isinstance(a, TensorRef) and not isinstance(b, TensorRef):
        return a / b  # type: ignore[operator]
    if not isinstance(a, TensorRef):
        a = lw.tensor(em, a, shape, dt, f"{hint}_num")
    return em("aten.div.Tensor", (a, b), lw.meta(hint, shape, dt))


@rule("conj.default", "_conj.default", "conj_physical.default", "_conj_physical.default")
def _conj(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    z = node.args[0]
    if not lw.is_c(z):
        em("aten.alias.default", (z,), out)
        return
    re, im = lw.parts(em, z, out.dtype)
    neg = em("aten.neg.default", (im,), lw.meta(f"{out.name}_im", out.shape[:-1], out.dtype))
    lw.pair(em, re, neg, out)


@rule("real.default", "imag.default")
def _real(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    em("aten.select.int", (node.args[0], -1, int(_packet(node.op).startswith("imag"))), out)


@rule("abs.default", "angle.default")
def _abs(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    re, im = lw.parts(em, node.args[0], out.dtype)
    if _packet(node.op).startswith("abs"):
        em("aten.hypot.default", (re, im), out)
    else:
        em("aten.atan2.default", (im, re), out)


@rule("polar.default")
def _polar(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    r, theta = node.args[0], node.args[1]
    shape, dt = out.shape[:-1], out.dtype
    cos = em("aten.cos.default", (theta,), lw.meta(f"{out.name}_cos", lw.shape(theta), dt))
    sin = em("aten.sin.default", (theta,), lw.meta(f"{out.name}_sin", lw.shape(theta), dt))
    lw.pair(em, lw.binary(em, "mul", r, cos, shape, dt, f"{out.name}_re"),
            lw.binary(em, "mul", r, sin, shape, dt, f"{out.name}_im"), out)


@rule("complex.default")
def _complex(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    lw.pair(em, node.args[0], node.args[1], out)


@rule("exp.default")
def _exp(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    shape, dt = out.shape[:-1], out.dtype
    re, im = lw.parts(em, node.args[0], dt)
    mag = em("aten.exp.default", (re,), lw.meta(f"{out.name}_mag", shape, dt))
    cos = em("aten.cos.default", (im,), lw.meta(f"{out.name}_cos", shape, dt))
    sin = em("aten.sin.default", (im,), lw.meta(f"{out.name}_sin", shape, dt))
    lw.pair(em, lw.binary(em, "mul", mag, cos, shape, dt, f"{out.name}_re"),
            lw.binary(em, "mul", mag, sin, shape, dt, f"{out.name}_im"), out)


@rule("where.self")
def _where(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    cond, a, b = node.args[:3]
    c = em("aten.unsqueeze.default", (cond, -1), lw.meta(f"{cond.name}_col", (*lw.shape(cond), 1),
                                                          lw.metas[cond.name].dtype))
    em(node.op, (c, lw.as_pair(em, a, out.dtype), lw.as_pair(em, b, out.dtype)), out)


@rule("mm.default", "bmm.default", "matmul.default")
def _matmul(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    """A complex matrix product as three real ones (the 3M method of `cublasCgemm3m`):
    t1 = ar br, t2 = ai bi, t3 = (ar + ai)(br + bi); re = t1 - t2, im = t3 - t1 - t2. With one real
    operand, two real products."""
    a, b = node.args[0], node.args[1]
    shape, dt = out.shape[:-1], out.dtype

    def mm(x: TensorRef, y: TensorRef, hint: str) -> TensorRef:
        return em(node.op, (x, y), lw.meta(f"{out.name}_{hint}", shape, dt))

    ar, ai = lw.parts(em, a, dt)
    br, bi = lw.parts(em, b, dt)
    if not lw.is_c(a) or not lw.is_c(b):
        x, (yr, yi) = (a, (br, bi)) if not lw.is_c(a) else (b, (ar, ai))
        if lw.is_c(a):
            lw.pair(em, mm(yr, x, "re"), mm(yi, x, "im"), out)
        else:
            lw.pair(em, mm(x, yr, "re"), mm(x, yi, "im"), out)
        return
    t1, t2 = mm(ar, br, "t1"), mm(ai, bi, "t2")
    sa = lw.binary(em, "add", ar, ai, lw.shape(a), dt, f"{out.name}_sa")
    sb = lw.binary(em, "add", br, bi, lw.shape(b), dt, f"{out.name}_sb")
    t3 = mm(sa, sb, "t3")
    re = lw.binary(em, "sub", t1, t2, shape, dt, f"{out.name}_re")
    im = lw.binary(em, "sub", lw.binary(em, "sub", t3, t1, shape, dt, f"{out.name}_d"), t2, shape, dt,
                   f"{out.name}_im")
    lw.pair(em, re, im, out)


# ---- FFTs ----------------------------------------------------------------------------------------------
@rule("_fft_r2c.default", "_fft_c2c.default", "_fft_c2r.default")
def _fft(lw: _Lowering, em: _Emit, node: AtenNode, out: TensorMeta) -> None:
    """One `solar.dft` per transformed dim, torch's order: `r2c` transforms the last listed dim real
    to complex (onesided: n // 2 + 1 bins) and then the others complex to complex; `c2r` transforms
    the others first, the last one complex to real (`last_dim_size` points); then the normalization
    (0: none, 1: 1/sqrt(n), 2: 1/n, n the signal size: the real side's sizes)."""
    x, dims, norm = node.args[0], list(node.args[1]), int(node.args[2])
    p = _packet(node.op)
    rank = len(lw.shape(x))
    dims = [_norm(d, rank) for d in dims]
    dt = out.dtype
    cur: TensorRef = x
    shape = list(lw.shape(x))
    steps: list[tuple[int, str, int]] = []  # (dim, kind, output length)
    if p == "_fft_r2c.default":
        onesided = bool(node.args[3]) if len(node.args) > 3 else node.kwargs.get("onesided", True)
        if not onesided:
            cur = lw.as_pair(em, x, dt)  # type: ignore[assignment]
            steps = [(d, "c2c-1", shape[d]) for d in reversed(dims)]
        else:
            steps = [(dims[-1], "r2c", shape[dims[-1]] // 2 + 1)]
            steps += [(d, "c2c-1", shape[d]) for d in reversed(dims[:-1])]
        signal = math.prod(shape[d] for d in dims)
    elif p == "_fft_c2c.default":
        forward = bool(node.args[3]) if len(node.args) > 3 else node.kwargs.get("forward", True)
        steps = [(d, "c2c-1" if forward else "c2c+1", shape[d]) for d in reversed(dims)]
        signal = math.prod(shape[d] for d in dims)
    else:
        last = int(node.args[3]) if len(node.args) > 3 else int(node.kwargs["last_dim_size"])
        steps = [(d, "c2c+1", shape[d]) for d in dims[:-1]] + [(dims[-1], "c2r", last)]
        signal = math.prod(shape[d] for d in dims[:-1]) * last
    scale = {0: 1.0, 1: 1 / math.sqrt(signal), 2: 1 / signal}[norm]
    for i, (d, kind, n) in enumerate(steps):
        shape[d] = n
        final = i == len(steps) - 1 and scale == 1.0
        meta = out if final else lw.meta(f"{out.name}_dft{d}", shape, dt, kind != "c2r")
        cur = em(DFT_OP, (cur, d, kind), meta)
    if scale != 1.0:
        em("aten.mul.Tensor", (cur, scale), out)

