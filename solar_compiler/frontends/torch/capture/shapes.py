"""Shape-only fake-tensor implementations of the recurrent ops the capture keeps whole.

Under a `FakeTensorMode`, torch finds the result shapes of `aten.lstm.input` (and GRU, RNN) by
running their Python decomposition: one cell per layer, direction and time step, each a dozen
fake ops. A 6-layer LSTM over 512 steps took 50 s of capture that way (KernelBench L3 35-42).
The results' shapes follow from the arguments alone, so these implementations return them
directly: `aten.lstm.input(x, (h0, c0), params, has_biases, layers, dropout, train, bidirectional,
batch_first) -> (output, h_n, c_n)`, with output [T, B, D*H_out] (or [B, T, ...] when
batch_first, [T, D*H_out] unbatched) and h_n, c_n shaped like h0, c0; GRU and RNN return
(output, h_n). Registered once (`register`), for the whole process: the shapes are torch's.

Export's pre-dispatch trace reaches the same decomposition through the Python kernel torch
registers for these ops at the Autograd key (torch/_decomp/decompositions.py); `no_autograd_decomp`
removes it for the duration of a capture, so the op goes on to export's preserved-op path.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch._C import DispatchKey
from torch._decomp import meta_table
from torch._subclasses.fake_impls import register_op_impl
from torch._subclasses.fake_tensor import FakeTensor

aten = torch.ops.aten
_RNN_INPUT = (aten.lstm.input, aten.gru.input, aten.rnn_tanh.input, aten.rnn_relu.input)
_done = False


def _rnn_input(fake_mode, func, x, hx, params, has_biases, num_layers, dropout, train, bidirectional,
               batch_first):
    h0 = hx[0] if isinstance(hx, (list, tuple)) else hx
    d = 2 if bidirectional else 1
    width = d * h0.shape[-1]
    if x.dim() == 2:
        shape = (x.shape[0], width)
    elif batch_first:
        shape = (x.shape[0], x.shape[1], width)
    else:
        shape = (x.shape[0], x.shape[1], width)
    with fake_mode:
        out = torch.empty(shape, dtype=x.dtype, device=x.device)
        states = [torch.empty(t.shape, dtype=t.dtype, device=t.device)
                  for t in (hx if isinstance(hx, (list, tuple)) else [hx])]
    return (out, *states)


def register() -> None:
    """Install the implementations (idempotent). Fake-tensor dispatch consults its op
    implementations only for ops without a Python meta kernel that it would otherwise decompose,
    so each op is also marked as having one (`meta_table`, a plain dict of torch's)."""
    global _done
    if _done:
        return
    for op in _RNN_INPUT:
        register_op_impl(op)(_rnn_input)
        meta_table.setdefault(op, None)
    _done = True


_KEYS = (DispatchKey.Autograd, DispatchKey.CompositeImplicitAutograd)


@contextlib.contextmanager
def no_autograd_decomp() -> Iterator[None]:
    """The recurrent ops' Python decompositions (Autograd and CompositeImplicitAutograd keys)
    answer fake inputs with their shapes only, for the duration of a capture (module doc)."""
    saved: dict = {}
    for op in _RNN_INPUT:
        for key in _KEYS:
            k = op.py_kernels.get(key)
            if k is None:
                continue
            saved[(op, key)] = k
            op.py_kernels[key] = _shapes_or(k)
        op._dispatch_cache.clear()
    try:
        yield
    finally:
        for (op, key), k in saved.items():
            op.py_kernels[key] = k
            op._dispatch_cache.clear()


def _shapes_or(decomp):
    def kernel(x, hx, *args):
        mode = getattr(x, "fake_mode", None)
        if isinstance(x, FakeTensor) and mode is not None:
            return _rnn_input(mode, None, x, hx, *args)
        return decomp(x, hx, *args)

    return kernel
