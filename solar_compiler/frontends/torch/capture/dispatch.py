"""The fallback capture method: the ATen ops executed on the sample inputs, recorded by the
`DispatchRecorder` with the same decomposition table and the same composite ops kept as export
(the Python dispatcher with export's composite-op overrides).

It runs on fake tensors; when fake tensors cannot run the program (a value is read by Python, a
shape depends on values) it is repeated on real tensors, only for programs whose inputs and weights
are below `REAL_RUN_LIMIT_BYTES`.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator

import torch
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
    UnsupportedOperatorException,
)
from torch.export.exported_program import _override_composite_implicit_decomp
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

from solar_compiler.frontends.captured_program import CapturedProgram, CaptureError, Namer
from solar_compiler.frontends.model_file import ModelFileError, ModelSpec, exception_summary

from .graph import UserFile, finish, tensor_meta
from .inputs import input_names
from .ops import tables
from .recorder import DispatchRecorder
from .util import REAL_RUN_LIMIT_BYTES, WideMatrixProducts, build_model, forward_error, nbytes, quiet


def capture_dispatch(spec: ModelSpec, mode: str, fake: bool, user: UserFile,
                     reason: str | None) -> CapturedProgram:
    """Record forward on fake tensors, or on real ones when fake tensors cannot run it (see the
    module doc); `reason` is why export was not used."""
    if fake:
        try:
            return _dispatch_once(spec, mode, FakeTensorMode(allow_non_fake_inputs=True), user, reason)
        except (CaptureError, ModelFileError):
            raise
        except Exception as exc:  # noqa: BLE001 - fake tensors cannot run value-dependent code
            fake_exc = exc
        # estimate the real size before running for real
        model, sample = build_model(spec, mode, FakeTensorMode())
        size = nbytes(sample) + nbytes(model.parameters()) + nbytes(model.buffers())
        del model, sample
        if size > REAL_RUN_LIMIT_BYTES:
            if not _needs_values(fake_exc):
                raise forward_error(spec, fake_exc) from fake_exc
            raise CaptureError(
                f"{spec.path}: needs real tensor values to capture ({exception_summary(fake_exc)}) but "
                f"its inputs and weights take {size / 2**30:.1f} GB; capture a size-reduced instance"
            )
        reason = reason or exception_summary(fake_exc)
    torch.manual_seed(0)
    return _dispatch_once(spec, mode, None, user, reason)


def _needs_values(exc: BaseException) -> bool:
    """Whether a failure on fake tensors is one real values would avoid."""
    names = {"GuardOnDataDependentSymNode", "UnsupportedFakeTensorException"}
    return isinstance(
        exc, (DataDependentOutputException, DynamicOutputShapeException, UnsupportedOperatorException)
    ) or any(t.__name__ in names for t in type(exc).__mro__)


def _dispatch_once(spec: ModelSpec, mode: str, fake_mode, user: UserFile,
                   reason: str | None) -> CapturedProgram:
    model, sample = build_model(spec, mode, fake_mode)
    names_in = input_names(spec, sample)
    prog = CapturedProgram(
        source=spec.path,
        mode=mode,
        method="dispatch",
        fallback_reason=reason,
        size_constants={**spec.size_constants, **spec.repeat_counts},
    )
    namer = Namer()
    _, cia, python = tables()
    stack: list[str] = []
    rec = DispatchRecorder(user, prog, namer, cia, python, stack)
    tensors = [t for t in sample if isinstance(t, torch.Tensor)]
    for name, t in zip(names_in, tensors, strict=True):
        if id(t) in rec.names:
            continue  # the same tensor passed twice
        n = namer.fresh(name)
        prog.inputs.append(tensor_meta(n, t))
        rec.register(t, n)
    for fqn, t in itertools.chain(model.named_parameters(), model.named_buffers()):
        if id(t) in rec.names:
            continue
        n = namer.fresh(fqn)
        prog.weights.append(tensor_meta(n, t))
        prog.weight_sources[n] = fqn
        rec.register(t, n)
    for gname, gval in vars(spec.module).items():
        if isinstance(gval, torch.Tensor):
            rec.globals_by_id[id(gval)] = gname

    ctx = fake_mode if fake_mode is not None else WideMatrixProducts()
    try:
        with (
            ctx,
            torch.no_grad(),
            quiet(),
            enable_python_dispatcher(),
            _override_composite_implicit_decomp(cia),
            _module_tracker(model, stack),
        ):
            with rec:
                out = model(*sample)
            flat, _ = torch.utils._pytree.tree_flatten(out)
            for o in flat:
                if isinstance(o, torch.Tensor):
                    prog.outputs.append(rec.name_of(o))
    finally:
        rec.release()
    return finish(prog, rec.bool_index)


@contextlib.contextmanager
def _module_tracker(model: torch.nn.Module, stack: list[str]) -> Iterator[None]:
    """Keep `stack` at the path of the module whose forward is running (for `module_path`)."""
    names = {id(m): n for n, m in model.named_modules()}

    def pre(mod, args):
        n = names.get(id(mod))
        if n is not None:
            stack.append(n or "")

    def post(mod, args, out):
        if id(mod) in names and stack:
            stack.pop()

    h1 = register_module_forward_pre_hook(pre)
    h2 = register_module_forward_hook(post)
    try:
        yield
    finally:
        h1.remove()
        h2.remove()
