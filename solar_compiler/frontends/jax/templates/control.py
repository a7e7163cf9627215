"""Control flow: `scan` (and `fori_loop`, which JAX lowers to it), `while` with a static trip count,
`cond` with a constant predicate.

A loop is one sequential loop dimension (`for s in scan(0, L)`), never a copy of the body per step:
the body's primitives are translated once, inside it. A carry that is a counter (a literal start,
`+ step` in the body) is the affine value `start + step*s`, so a slice at the counter is an affine
access. Any other carry lives in a local with one row per step, `C[L + 1, ...]`: row 0 is the
initial value, the body reads row `s` and writes row `s + 1`, the final carry is row `L`. A stacked
output `ys` is a local `Y[L, ...]` written at step `t` (`L - 1 - s` for a reverse scan).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from solar_compiler.frontends.builder.exprs import cast, index_value, settle
from solar_compiler.frontends.builder.values import Loop, Val, generator, ivars, loops, stored, view
from solar_compiler.frontends.captured_program import AtenNode, TensorMeta, TensorRef
from solar_compiler.loopir.affine import AffExpr
from solar_compiler.loopir.ast import Const, TensorDecl
from solar_compiler.loopir.rewrite import retarget

from ..operands import scalar
from ..program import Operand, SubProgram
from ..registry import template
from ..translator import JaxTranslator


@dataclass(frozen=True)
class LoopCounter:
    start: int
    step: int


def _step_of(body: SubProgram, res: Operand, k: int, start: int, first: int = 0) -> LoopCounter | None:
    """Carry `k` (body parameter `first + k`) as a counter: the body's result `res` for it is
    `carry + literal`."""
    carry = body.invars[first + k].name
    for node in body.nodes:
        if node.op != "jax.add" or not any(m is not None and TensorRef(m.name) == res for m in node.outputs):
            continue
        a, b = node.args
        if a == TensorRef(carry) and isinstance(b, int) and not isinstance(b, bool):
            return LoopCounter(start, b)
        if b == TensorRef(carry) and isinstance(a, int) and not isinstance(a, bool):
            return LoopCounter(start, a)
    return None


def _step_var(tr: JaxTranslator) -> str:
    k = 0
    while (name := "s" if k == 0 else f"s{k}") in tr.ranges:
        k += 1
    return name


def _bind(tr: JaxTranslator, metas: Sequence[TensorMeta], vals: Sequence[Val | Operand]) -> None:
    for meta, v in zip(metas, vals, strict=True):
        tr.env[meta.name] = v if isinstance(v, Val) else scalar(tr, v, meta.dtype)


def _result(tr: JaxTranslator, o: Operand, dtype: str) -> Val:
    return tr.val(o) if isinstance(o, TensorRef) else scalar(tr, o, dtype)


def sequential_loop(tr: JaxTranslator, body: SubProgram, length: int, consts: Sequence[Operand],
                    init: Sequence[Operand], xs: Sequence[Operand], reverse: bool, n_ys: int,
                    body_first: int) -> list[Val | None]:
    """Translate `body` (invars: consts, carries, x slices from `body_first`; outvars: carries, y
    slices) inside one sequential loop of `length` steps; the final carries, then the stacked ys."""
    nc, ncar = len(consts), len(init)
    carry_metas = body.invars[body_first + nc:body_first + nc + ncar]
    counters = [_step_of(body, body.outvars[k], nc + k, int(init[k]), body_first)
                if not isinstance(init[k], TensorRef | bool) and float(init[k]).is_integer() else None
                for k in range(ncar)]
    buffers: list[TensorDecl | None] = []
    for k, meta in enumerate(carry_metas):
        if counters[k] is not None:
            buffers.append(None)
            continue
        decl = tr.declare(f"{meta.name}_carry", (length + 1, *meta.shape), meta.dtype)
        lps = loops("i", meta.shape)
        idx = ivars(lps)
        v0 = _result(tr, init[k], meta.dtype)
        tr.emit(decl, [AffExpr.lit(0), *idx], "=", cast(v0.read(idx), decl.dtype), lps)
        buffers.append(decl)
    y_metas = [_y_meta(tr, i) for i in range(ncar, ncar + n_ys)]
    ys = [tr.declare(m.name, m.shape, m.dtype) if m is not None else None for m in y_metas]
    y_views: dict[int, Val] = {}
    sname = _step_var(tr)
    with tr.inside(Loop(sname, 0, length, sequential=True)) as s:
        t = AffExpr.lit(length - 1) - s if reverse else s
        vals: list[Val | Operand] = [*consts]
        for k, meta in enumerate(carry_metas):
            cnt, buf = counters[k], buffers[k]
            if cnt is not None:
                vals.append(_counter_val(s * cnt.step + cnt.start, meta.dtype))
            else:
                assert buf is not None
                vals.append(view(stored(buf), meta.shape, lambda idx: [s, *idx]))
        for x in xs:
            xv = tr.val(x) if isinstance(x, TensorRef) else scalar(tr, x, "f32")
            vals.append(view(xv, xv.shape[1:], lambda idx, xv=xv: [t, *idx]))
        _bind(tr, body.invars[body_first:], vals)
        n_before = len(tr.tensors)
        tr.translate_nodes(body.nodes)
        fresh = {d.name for d in tr.tensors[n_before:]}
        outs = [tr.val(o) if isinstance(o, TensorRef) else None for o in body.outvars]
        carry_uses = Counter(v.stored for k, v in enumerate(outs[:ncar]) if v is not None and buffers[k])
        uses = Counter(v.stored for v in outs if v is not None)
        into: dict[str, TensorDecl] = {}  # step local -> the carry buffer it now lives in
        for k, meta in enumerate(carry_metas):
            buf = buffers[k]
            if buf is not None:
                v = _result(tr, body.outvars[k], meta.dtype)
                if _write_row(tr, buf, [s + 1], v, fresh, carry_uses) and v.stored is not None:
                    into[v.stored] = buf
        for j, decl in enumerate(ys):
            if decl is None:
                continue
            v = _result(tr, body.outvars[ncar + j], decl.dtype)
            if v.stored in into and into[v.stored].dtype == decl.dtype:
                # the stacked output is the carry buffer's rows 1..L: no copy
                tr.tensors = [d for d in tr.tensors if d.name != decl.name]
                y_views[j] = view(stored(into[v.stored]), decl.shape,
                                  lambda idx, L=length: [AffExpr.lit(L) - idx[0] if reverse else idx[0] + 1,
                                                         *idx[1:]])
            else:
                _write_row(tr, decl, [t], v, fresh, uses)
    results: list[Val | None] = []
    for k, meta in enumerate(carry_metas):
        cnt, buf = counters[k], buffers[k]
        if cnt is not None:
            final = cnt.start + cnt.step * length
            results.append(_counter_val(AffExpr.lit(final), meta.dtype))
        else:
            assert buf is not None
            results.append(view(stored(buf), meta.shape, lambda idx: [AffExpr.lit(length), *idx]))
    results += [y_views.get(j) or (stored(d) if d is not None else None) for j, d in enumerate(ys)]
    return results


def _write_row(tr: JaxTranslator, buf: TensorDecl, lead: list[AffExpr], v: Val, fresh: set[str],
               uses: Counter) -> bool:
    """Row `lead` of `buf` = the step's value `v`: a local the step computed (and nothing else
    returns) is written there directly (`retarget`: True), anything else is copied."""
    if v.stored in fresh and uses[v.stored] == 1 and v.dtype == buf.dtype:
        body = tr.current_body
        body[:] = retarget(body, v.stored, buf.name, lead)
        tr.tensors = [d for d in tr.tensors if d.name != v.stored]
        return True
    lps = loops("i", buf.shape[len(lead):])
    idx = ivars(lps)
    tr.emit(buf, [*lead, *idx], "=", cast(v.read(idx), buf.dtype), lps)
    return False


def _counter_val(e: AffExpr, dtype: str) -> Val:
    return generator((), dtype, lambda idx: index_value(e, dtype))


def _y_meta(tr: JaxTranslator, i: int) -> TensorMeta | None:
    return tr.out_meta(i) if tr.used(i) else None


@template("jax.scan")
def _scan(tr: JaxTranslator, node: AtenNode) -> tuple[Val | None, ...]:
    p = node.kwargs
    body: SubProgram = p["bodies"]["jaxpr"]
    nc, ncar = int(p["num_consts"]), int(p["num_carry"])
    args = list(node.args)
    n_ys = len(node.outputs) - ncar
    return tuple(sequential_loop(tr, body, int(p["length"]), args[:nc], args[nc:nc + ncar], args[nc + ncar:],
                                 bool(p.get("reverse", False)), n_ys, 0))


_TRIPS = {"lt": lambda a, b, s: math.ceil((b - a) / s), "le": lambda a, b, s: (b - a) // s + 1,
          "gt": lambda a, b, s: math.ceil((a - b) / -s), "ge": lambda a, b, s: (a - b) // -s + 1,
          "ne": lambda a, b, s: (b - a) // s if (b - a) % s == 0 else -1}


@template("jax.while")
def _while(tr: JaxTranslator, node: AtenNode) -> tuple[Val | None, ...]:
    """A while loop whose condition compares a counter carry with a literal: its trip count is
    static, and it runs as a sequential loop of that many steps."""
    p = node.kwargs
    cond: SubProgram = p["bodies"]["cond_jaxpr"]
    body: SubProgram = p["bodies"]["body_jaxpr"]
    cn, bn = int(p["cond_nconsts"]), int(p["body_nconsts"])
    args = list(node.args)
    init = args[cn + bn:]
    trips = _trip_count(cond, body, cn, bn, init)
    if trips is None:
        raise tr.error("a while loop without a static trip count (a counter compared with a literal) "
                       "has no loop-IR template")
    body_metas = body.invars
    sub = SubProgram(body_metas, body.nodes, body.outvars)
    return tuple(sequential_loop(tr, sub, max(trips, 0), args[cn:cn + bn], init, [], False, 0, 0))


def _trip_count(cond: SubProgram, body: SubProgram, cn: int, bn: int, init: Sequence[Operand]) -> int | None:
    if len(cond.nodes) != 1 or not isinstance(cond.outvars[0], TensorRef):
        return None
    (cmp_node,) = cond.nodes
    pred = cmp_node.op.removeprefix("jax.")
    if pred not in _TRIPS:
        return None
    a, b = cmp_node.args
    flip = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "ne": "ne"}
    if isinstance(a, TensorRef) and isinstance(b, int | float) and not isinstance(b, bool):
        var, bound = a, b
    elif isinstance(b, TensorRef) and isinstance(a, int | float) and not isinstance(a, bool):
        var, bound, pred = b, a, flip[pred]
    else:
        return None
    names = [m.name for m in cond.invars[cn:]]
    if var.name not in names:
        return None
    k = names.index(var.name)
    start = init[k]
    if isinstance(start, TensorRef | bool) or not float(start).is_integer():
        return None
    cnt = _step_of(body, body.outvars[k], k, int(start), bn)
    if cnt is None or cnt.step == 0:
        return None
    n = _TRIPS[pred](cnt.start, float(bound), cnt.step)
    return None if n < 0 and pred == "ne" else int(n)


@template("jax.cond")
def _cond(tr: JaxTranslator, node: AtenNode) -> tuple[Val | None, ...] | Val:
    """cond(index, *operands) with an index known at translation time: the chosen branch, inlined."""
    index = node.args[0]
    if isinstance(index, TensorRef):
        e = settle(tr.val(index).read([]), tr.ranges)
        if not isinstance(e, Const):
            raise tr.error("cond on a data-dependent predicate has no loop-IR template")
        index = e.value
    branches: list[SubProgram] = node.kwargs["bodies"]["branches"]
    branch = branches[min(max(int(index), 0), len(branches) - 1)]
    _bind(tr, branch.invars, node.args[1:])
    tr.translate_nodes(branch.nodes)
    outs = [_result(tr, o, m.dtype if m is not None else "f32") for o, m in zip(branch.outvars, node.outputs,
                                                                                strict=True)]
    return tuple(outs) if len(outs) > 1 else outs[0]
