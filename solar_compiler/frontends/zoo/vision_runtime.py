"""What a generated model file of a vision spec (`torchvision:NAME`, `timm:NAME`) runs: the library's
image classifier built with random weights, and its image batch.

Imported by the generated file (inside the capture's sandboxed child) and by `vision.py` when it
checks a name; torchvision and timm are imported here, lazily, never by the driver. The model is
built in whatever tensor mode the caller has entered: under the capture's `FakeTensorMode` it
allocates no weight, and the reference run of a reduced instance builds it for real.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import torch

from solar_compiler.errors import SolarError

__all__ = ["DTYPES", "LIBRARIES", "VisionModel", "build", "load_library", "prepare_torchvision",
           "vision_inputs"]

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
LIBRARIES = ("torchvision", "timm")
# the keyword each library's fixed-resolution models take for the image size (ViT: the number of
# patches, hence its position embedding, follows it); resolution-agnostic networks reject it
SIZE_KWARGS = {"torchvision": ("image_size", "input_size"), "timm": ("img_size",)}
# torchvision's C++ ops whose fake registration `torchvision/_meta_registrations.py` makes without
# checking that its extension loaded (the other ops' registrations check): their schemas, as the
# extension declares them
_UNGUARDED_OPS = ("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
                  "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_DECLARED: list[Any] = []  # the torch.library.Library that declares them, kept alive


def _missing(package: str) -> SolarError:
    return SolarError(f"model specs {package}:NAME need the Python package '{package}', which is not "
                      f"installed: pip install 'solar-opt[vision]'", error_class="input")


def _import_torchvision():
    """torchvision, importable beside a CPU-only torch. PyPI's torchvision wheel is built for CUDA:
    beside torch 2.13.0+cpu its C++ extension (detection ops: nms, roi_align) cannot load, which
    torchvision tolerates except for two fake-op registrations that then fail the import. Those two
    ops are declared here without a kernel (calling one is torch's 'Could not run' error, not a wrong
    result), and torchvision is imported again; classifiers use none of them."""
    try:
        import torchvision
    except ModuleNotFoundError as e:
        if e.name != "torchvision":
            raise
        raise _missing("torchvision") from None
    except RuntimeError as e:
        if "torchvision::" not in str(e) or _DECLARED:
            raise
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]  # the partial import
        lib = torch.library.Library("torchvision", "FRAGMENT")
        for schema in _UNGUARDED_OPS:
            lib.define(schema)
        _DECLARED.append(lib)
        import torchvision
    return torchvision


def prepare_torchvision() -> None:
    """Import torchvision as `_import_torchvision` does when it is installed and not yet imported.
    Whatever imports it later then gets the working module: transformers imports it inside its
    model classes (Llama's modeling module fails to import otherwise), and a model file may import
    it directly. Nothing happens where torchvision is not installed."""
    if "torchvision" not in sys.modules and importlib.util.find_spec("torchvision") is not None:
        _import_torchvision()


def load_library(library: str):
    """The module of `library` ('torchvision' or 'timm'; timm imports torchvision, so that comes
    first); a missing package is one line naming the pip install."""
    tv = _import_torchvision()
    if library == "torchvision":
        return tv
    try:
        import timm
    except ModuleNotFoundError as e:
        if e.name != "timm":
            raise
        raise _missing("timm") from None
    return timm


def _construct(library: str, name: str, kwargs: dict[str, Any]):
    lib = load_library(library)
    if library == "torchvision":
        return lib.models.get_model(name, weights=None, **kwargs)
    return lib.create_model(name, pretrained=False, **kwargs)


def _size_value(key: str, image_size: int) -> Any:
    return (image_size, image_size) if key == "input_size" else image_size


def build(library: str, name: str, image_size: int, kwargs: dict[str, Any]):
    """The model with random weights. A fixed-resolution model (ViT, MaxViT) is given the image size
    through its library's keyword (`SIZE_KWARGS`), so its position embedding and patch grid match the
    input; a model whose constructor rejects every such keyword is resolution-agnostic (a CNN) and is
    built without one."""
    for key in SIZE_KWARGS[library]:
        if key in kwargs:
            return _construct(library, name, kwargs)
        try:
            return _construct(library, name, {**kwargs, key: _size_value(key, image_size)})
        except TypeError as e:
            if f"unexpected keyword argument '{key}'" not in str(e):
                raise
    return _construct(library, name, kwargs)


def redraw_zero_weights(model: torch.nn.Module, std: float = 0.02) -> int:
    """Redraw every weight matrix a library initialises to zero (torchvision's ViT head) from
    N(0, std^2), seeded, so the outputs depend on the inputs: with a zero head every logit is its
    bias and a validation that compares outputs checks nothing. Fake or meta parameters (a capture
    of shapes) hold no values and are left alone. Returns how many were redrawn."""
    gen = torch.Generator().manual_seed(0)
    done = 0
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() < 2 or p.is_meta or type(p.data) is not torch.Tensor or p.count_nonzero() != 0:
                continue
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float32).to(p.dtype) * std)
            done += 1
    return done


class VisionModel(torch.nn.Module):
    """The classifier of a spec; parameters are created at the spec's dtype (no conversion captured)."""

    def __init__(self, library: str, name: str, dtype: str, image_size: int, kwargs: dict[str, Any]):
        super().__init__()
        previous = torch.get_default_dtype()
        torch.set_default_dtype(DTYPES[dtype])
        try:
            self.model = build(library, name, image_size, kwargs)
        finally:
            torch.set_default_dtype(previous)
        redraw_zero_weights(self.model)
        self.model.eval()  # inference: batch norm reads its running statistics, dropout is identity

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        out = self.model(images)
        return out if isinstance(out, torch.Tensor) else out[0]  # (logits, aux logits) of Inception


def vision_inputs(dtype: str, batch: int, channels: int, image_size: int) -> list[torch.Tensor]:
    """One batch of images `[batch, channels, S, S]` at the spec's dtype, standard normal (the
    scale of normalised pixels)."""
    return [torch.randn(batch, channels, image_size, image_size, dtype=DTYPES[dtype])]
