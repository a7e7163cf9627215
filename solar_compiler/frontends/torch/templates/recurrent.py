"""RNN (tanh/relu), LSTM and GRU: one template each, multi-layer, bidirectional, batch_first.

Per layer and direction: the input projection of all time steps is one parallel contraction
`Gx[t, b, j] = bias[j] + sum_k X[t, b, k] * W_ih[j, k]` (as cuDNN does); then a `scan` time loop
adds the recurrent projection of the previous hidden state and applies the cell. The first step
reads h0 (statement guarded `s == 0`, dropped when h0 is zero), later steps read the previous
output (guarded `s >= 1`). W_hh is read at every step in the IR; compulsory traffic counts each
weight once all the same (distinct elements). LSTM cell state is a rolling [B, H] local.

    LSTM:  c = sig(f) * c + sig(i) * tanh(g);   h = sig(o) * tanh(c)      gates (i, f, g, o)
    GRU:   r = sig(gx_r + gh_r); z = sig(gx_z + gh_z); n = tanh(gx_n + r * gh_n)
           h = (1 - z) * n + z * h_prev                                   gates (r, z, n)
    RNN:   h = tanh(gx + gh) (or relu)
"""

from __future__ import annotations

from collections.abc import Callable

from solar_compiler.frontends.builder.exprs import add, c, cast, maximum, mul, sub, un
from solar_compiler.frontends.builder.translator import Translator
from solar_compiler.frontends.builder.values import Loop, Val, stored, view
from solar_compiler.frontends.captured_program import AtenNode
from solar_compiler.loopir.affine import AffCond, AffExpr
from solar_compiler.loopir.ast import Const, Read, SExpr, TensorDecl

from ..registry import template

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def _sig(x: SExpr) -> SExpr:
    return un("sigmoid", x)


class _Seq:
    """A [T, B, F] sequence stored in some layout: reads and writes by (t, b, f)."""

    def __init__(self, decl: TensorDecl | None, val: Val | None, batch_first: bool):
        self.decl, self.val, self.bf = decl, val, batch_first

    def idx(self, t: AffExpr, b: AffExpr, f: AffExpr) -> list[AffExpr]:
        return [b, t, f] if self.bf else [t, b, f]

    def read(self, t: AffExpr, b: AffExpr, f: AffExpr, dt: str) -> SExpr:
        if self.val is not None:
            return cast(self.val.read(self.idx(t, b, f)), dt)
        assert self.decl is not None
        return Read(self.decl.name, tuple(self.idx(t, b, f)), self.decl.dtype)


def _state(tr: Translator, kind: str, arg: object) -> tuple[Val, Val | None]:
    """(h, c) of the state argument: a pair for LSTM, h alone otherwise."""
    if kind == "lstm":
        return tr.val(arg[0]), tr.val(arg[1])  # type: ignore[index]
    return tr.val(arg), None


def _is_zero(v: Val, idx: list[AffExpr]) -> bool:
    e = v.read(idx)
    return isinstance(e, Const) and e.value == 0


def _layer(tr: Translator, kind: str, x: _Seq, in_size: int, T: int, B: int, H: int, D: int, dd: int,
           w_ih: Val, w_hh: Val, b_ih: Val | None, b_hh: Val | None, h0: Val | None, c0: Val | None,
           hidx: int, y: _Seq, dt: str, hint: str) -> TensorDecl | None:
    """One direction of one layer; writes y[t, b, dd*H + j]. Returns the final cell state (LSTM)."""
    G = GATES[kind]
    t, b, j, k = (AffExpr.var(n) for n in ("t", "b", "j", "k"))
    T_l, B_l, J_l = Loop("t", 0, T), Loop("b", 0, B), Loop("j", 0, G * H)
    K_l, H_l = Loop("k", 0, in_size), Loop("k", 0, H)
    gx = tr.declare(f"{hint}_gx", (T, B, G * H), dt)
    bias: SExpr = c(0, dt)
    if b_ih is not None:
        bias = cast(b_ih.read([j]), dt)
        if b_hh is not None and kind != "gru":
            bias = add(bias, cast(b_hh.read([j]), dt))
    tr.emit(gx, [t, b, j], "=", bias, [T_l, B_l, J_l])
    tr.emit(gx, [t, b, j], "+=", mul(x.read(t, b, k, dt), cast(w_ih.read([j, k]), dt)), [T_l, B_l, J_l, K_l])
    gh = tr.declare(f"{hint}_gh", (B, G * H), dt) if kind == "gru" else None
    cell = tr.declare(f"{hint}_c", (B, H), dt) if kind == "lstm" else None
    s = AffExpr.var("s")
    tt = s if dd == 0 else AffExpr.lit(T - 1) - s
    tprev = tt - 1 if dd == 0 else tt + 1
    first, later = [AffCond.compare(s, "==", AffExpr.lit(0))], [AffCond.compare(s, ">=", AffExpr.lit(1))]
    off = dd * H
    h0_zero = h0 is None or _is_zero(h0, [AffExpr.lit(hidx), b, k])

    def h_prev(step_first: bool, at: AffExpr) -> SExpr:
        if step_first:
            return c(0, dt) if h0 is None else cast(h0.read([AffExpr.lit(hidx), b, at]), dt)
        return y.read(tprev, b, at + off, dt)

    with tr.inside(Loop("s", 0, T, sequential=True)):
        # recurrent projection: into gx[t] (LSTM/RNN) or a separate gh (GRU, r multiplies it)
        if gh is not None:
            tr.emit(gh, [b, j], "=", cast(b_hh.read([j]), dt) if b_hh is not None else c(0, dt), [B_l, J_l])
        tgt, tidx = (gh, [b, j]) if gh is not None else (gx, [tt, b, j])
        for step_first, g in ((True, first), (False, later)):
            if step_first and h0_zero:
                continue
            tr.emit(tgt, tidx, "+=", mul(h_prev(step_first, k), cast(w_hh.read([j, k]), dt)),
                    [B_l, J_l, H_l], g)
        hb = [Loop("b", 0, B), Loop("j", 0, H)]
        gxr = lambda q: Read(gx.name, (tt, b, j + q * H), dt)  # noqa: E731
        yidx = y.idx(tt, b, j + off)
        assert y.decl is not None
        if kind == "lstm":
            assert cell is not None
            for step_first, g in ((True, first), (False, later)):
                cprev = (cast(c0.read([AffExpr.lit(hidx), b, j]), dt) if c0 is not None else c(0, dt)) \
                    if step_first else Read(cell.name, (b, j), dt)
                if step_first and isinstance(cprev, Const) and cprev.value == 0:
                    value = mul(_sig(gxr(0)), un("tanh", gxr(2)))
                else:
                    value = add(mul(_sig(gxr(1)), cprev), mul(_sig(gxr(0)), un("tanh", gxr(2))))
                tr.emit(cell, [b, j], "=", value, hb, g)
            tr.emit(y.decl, yidx, "=", mul(_sig(gxr(3)), un("tanh", Read(cell.name, (b, j), dt))), hb)
        elif kind == "gru":
            assert gh is not None
            ghr = lambda q: Read(gh.name, (b, j + q * H), dt)  # noqa: E731
            r = _sig(add(gxr(0), ghr(0)))
            z = _sig(add(gxr(1), ghr(1)))
            n = un("tanh", add(gxr(2), mul(r, ghr(2))))
            for step_first, g in ((True, first), (False, later)):
                hp = h_prev(step_first, j)
                tr.emit(y.decl, yidx, "=", add(mul(sub(c(1, dt), z), n), mul(z, hp)), hb, g)
        else:
            act = un("tanh", gxr(0)) if kind == "rnn_tanh" else maximum(gxr(0), c(0, dt))
            tr.emit(y.decl, yidx, "=", act, hb)
    return cell


@template("aten.lstm.input", kind="lstm")
@template("aten.gru.input", kind="gru")
@template("aten.rnn_tanh.input", kind="rnn_tanh")
@template("aten.rnn_relu.input", kind="rnn_relu")
def _rnn(tr: Translator, node: AtenNode, kind: str):
    a = list(node.args)
    x_in = tr.val(a[0])
    h0, c0 = _state(tr, kind, a[1])
    params = [tr.val(p) for p in a[2]]
    has_b, L, dropout, train, bidir, bf = bool(a[3]), int(a[4]), float(a[5]), bool(a[6]), bool(a[7]), \
        bool(a[8])
    if x_in.ndim != 3:
        raise tr.error(f"no loop-IR template for an unbatched {kind}")
    if dropout > 0 and train and L > 1:
        raise tr.error(f"no loop-IR template for dropout between {kind} layers in training mode")
    D = 2 if bidir else 1
    per = 4 if has_b else 2
    if len(params) != L * D * per:
        raise tr.error(f"{kind} with projections (proj_size) has no template")
    T, B = (x_in.shape[1], x_in.shape[0]) if bf else (x_in.shape[0], x_in.shape[1])
    H = h0.shape[-1]
    out0 = tr.out_meta(0) if tr.used(0) else None
    dt = (out0 or tr.out_meta(1)).dtype
    seq = _Seq(None, x_in, bf)
    in_size = x_in.shape[2]
    cells: list[TensorDecl | None] = []
    ys: list[_Seq] = []
    for layer in range(L):
        last = layer == L - 1
        if last and out0 is not None:
            y = _Seq(tr.result(0), None, bf)
        else:
            y = _Seq(tr.declare(f"{kind}_l{layer}_out", (T, B, D * H), dt), None, False)
        for dd in range(D):
            p = params[(layer * D + dd) * per:(layer * D + dd + 1) * per]
            w_ih, w_hh = p[0], p[1]
            b_ih, b_hh = (p[2], p[3]) if has_b else (None, None)
            hint = f"{kind}_l{layer}{'_rev' if dd else ''}"
            cells.append(_layer(tr, kind, seq, in_size, T, B, H, D, dd, w_ih, w_hh, b_ih, b_hh, h0, c0,
                                layer * D + dd, y, dt, hint))
        ys.append(y)
        seq, in_size = y, D * H
    results: list[Val | None] = [stored(ys[-1].decl) if out0 is not None else None]
    results.append(_final(tr, 1, ys, T, H, D, dt, lambda li, dd, bj: ys[li].read(
        AffExpr.lit(T - 1 if dd == 0 else 0), bj[0], bj[1] + dd * H, dt)))
    if kind == "lstm":
        results.append(_final(tr, 2, ys, T, H, D, dt, lambda li, dd, bj: Read(
            cells[li * D + dd].name, tuple(bj), dt)))
    return tuple(results)


def _final(tr: Translator, out: int, ys: list[_Seq], T: int, H: int, D: int, dt: str,
           value: Callable[[int, int, list[AffExpr]], SExpr]) -> Val | None:
    """h_n / c_n [L*D, B, H]: one copy statement per layer and direction."""
    if not tr.used(out):
        return None
    decl = tr.result(out)
    B = decl.shape[1]
    b, j = AffExpr.var("b"), AffExpr.var("j")
    for li in range(len(ys)):
        for dd in range(D):
            tr.emit(decl, [AffExpr.lit(li * D + dd), b, j], "=", value(li, dd, [b, j]),
                    [Loop("b", 0, B), Loop("j", 0, H)])
    return stored(decl)


# ---- single cells --------------------------------------------------------------------------------
@template("aten.lstm_cell.default", kind="lstm")
@template("aten.gru_cell.default", kind="gru")
@template("aten.rnn_tanh_cell.default", kind="rnn_tanh")
@template("aten.rnn_relu_cell.default", kind="rnn_relu")
def _cell(tr: Translator, node: AtenNode, kind: str):
    """lstm_cell / gru_cell / rnn_*_cell (input [B, I], hx [B, H]) via the layer template with T = 1."""
    a = list(node.args)
    x = tr.val(a[0])
    hx, cx = _state(tr, kind, a[1])
    w_ih, w_hh = tr.val(a[2]), tr.val(a[3])
    b_ih = tr.opt_val(a[4]) if len(a) > 4 else None
    b_hh = tr.opt_val(a[5]) if len(a) > 5 else None
    B, H = hx.shape
    dt = tr.out_meta(0).dtype
    x3 = view(x, (1, B, x.shape[1]), lambda idx: [idx[1], idx[2]])
    h3 = view(hx, (1, B, H), lambda idx: [idx[1], idx[2]])
    c3 = view(cx, (1, B, H), lambda idx: [idx[1], idx[2]]) if cx is not None else None
    h_out = tr.result(0)
    y = _Seq(tr.declare(f"{h_out.name}_seq", (1, B, H), dt), None, False)
    cell = _layer(tr, kind, _Seq(None, x3, False), x.shape[1], 1, B, H, 1, 0, w_ih, w_hh, b_ih, b_hh,
                  h3, c3, 0, y, dt, h_out.name)
    b, j = AffExpr.var("b"), AffExpr.var("j")
    lp = [Loop("b", 0, B), Loop("j", 0, H)]
    tr.emit(h_out, [b, j], "=", y.read(AffExpr.lit(0), b, j, dt), lp)
    if kind != "lstm":
        return stored(h_out)
    results: list[Val | None] = [stored(h_out), None]
    if tr.used(1):
        c_out = tr.result(1)
        assert cell is not None
        tr.emit(c_out, [b, j], "=", Read(cell.name, (b, j), dt), lp)
        results[1] = stored(c_out)
    return tuple(results)

