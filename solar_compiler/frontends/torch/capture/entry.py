"""The capture entry point: export, falling back to the dispatch recorder; a forward that calls
autograd is traced by `make_fx` (`autograd.py`)."""

from __future__ import annotations

from pathlib import Path

from solar_compiler.frontends.captured_program import CapturedProgram, CaptureError
from solar_compiler.frontends.model_file import ModelFileError, ModelSpec, exception_summary

from .autograd import UsesAutograd, autograd_probe, capture_autograd
from .dispatch import capture_dispatch
from .export import capture_export
from .graph import NeedsFallback, SymbolicShape, UserFile
from .shapes import register as register_fast_shapes
from .train import capture_train
from .util import forward_error, load_spec

register_fast_shapes()


def capture(
    path: str | Path | ModelSpec,
    mode: str = "eval",
    fake: bool = True,
    size_overrides: dict[str, int] | None = None,
    method: str = "auto",
    step: str = "forward",
    optimizer: str | None = None,
) -> CapturedProgram:
    """Capture the model file as an ATen graph (see the package docstring).

    ``method`` is "auto" (export, falling back to dispatch recording), "export" (no fallback)
    or "dispatch" (skip export). A forward that calls autograd itself is recognised while either
    runs and traced by `make_fx` instead, whatever the method (`autograd.py`).
    ``step="train"`` captures one training step instead (the loss, its parameter gradients and
    the `optimizer`'s update: `train.py`, docs/training.md).
    Raises :class:`ModelFileError` or :class:`CaptureError`.
    """
    if mode not in ("eval", "train"):
        raise ValueError(f"mode must be 'eval' or 'train', not {mode!r}")
    if method not in ("auto", "export", "dispatch"):
        raise ValueError(f"method must be 'auto', 'export' or 'dispatch', not {method!r}")
    if step not in ("forward", "train"):
        raise ValueError(f"step must be 'forward' or 'train', not {step!r}")
    spec = load_spec(path, size_overrides)
    user = _user_file(spec)
    if step == "train":
        return capture_train(spec, mode, user, optimizer)
    try:
        with autograd_probe(user):
            return _capture_forward(spec, mode, fake, user, method)
    except UsesAutograd as use:  # export's decompositions would crash on its backward ops
        return capture_autograd(spec, mode, user, use.args[0])


def _capture_forward(spec: ModelSpec, mode: str, fake: bool, user: UserFile, method: str) -> CapturedProgram:
    """Export, falling back to the dispatch recorder (`method` as for `capture`)."""
    reason = None
    if method in ("auto", "export"):
        try:
            return capture_export(spec, mode, fake, user)
        except (ModelFileError, CaptureError):
            raise
        except Exception as exc:  # noqa: BLE001 - any export failure triggers the fallback
            reason = (
                exc.args[0] if isinstance(exc, (NeedsFallback, SymbolicShape)) else exception_summary(exc)
            )
            if isinstance(exc, SymbolicShape):
                reason = f"data-dependent shapes in the exported graph ({reason})"
            if method == "export":
                raise CaptureError(f"{spec.path}: torch.export failed: {reason}") from exc
    try:
        return capture_dispatch(spec, mode, fake, user, reason)
    except (ModelFileError, CaptureError):
        raise
    except Exception as exc:  # noqa: BLE001
        raise forward_error(spec, exc) from exc


def _user_file(spec: ModelSpec) -> UserFile:
    """The file statements are located in: the model file, or the file a generated model file names
    as its source (`__solar_source__`: a SOL-ExecBench problem's reference.py, which the generated
    file runs under its own name)."""
    source = getattr(spec.module, "__solar_source__", None)
    if isinstance(source, str) and Path(source).is_file():
        return UserFile(source, str(Path(source).resolve()))
    return UserFile(spec.path, spec.abspath)
