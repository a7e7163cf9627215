"""`from_pretrained` without the hub: KernelBench level-4 files as written.

Those files build their model with `AutoConfig.from_pretrained(name)` and
`AutoModelForCausalLM.from_pretrained(name, config=config)`, which download from the Hugging Face
hub; this machine has none. `offline_hub()` replaces the three entry points (AutoConfig, the Auto*
model classes, PreTrainedModel) so that a name with a shipped configuration (`configs/*.json`,
matched by repository id, name or alias) resolves to it, and a model is built from its config with
random weights (bounds depend on shapes, not values; under the capture's fake tensors it allocates
nothing). A local path is left to transformers. Any other name is an error naming the way out.
Installed by `model_file` before it executes a file that mentions `from_pretrained`.

A reduced instance of such a file (validation) needs the configuration's widths and layer count
smaller, and they are not in the file. `resolving(overrides)` applies integer overrides to every
shipped configuration resolved inside it and lists the ones resolved; `config_sites` names the
widths and layer counts of a resolved configuration as size sites (`config.hidden_size`), which
`ModelSpec.with_sizes` then sets through `resolving`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .spec import (
    IMPLICIT_COUNT,
    REPEAT_KEYS,
    WIDTH_KEYS,
    find_shipped,
    implicit_layer_count,
    shipped_names,
    with_layer_count,
    with_overrides,
)

_INSTALLED = False
CONFIG_PREFIX = "config."  # size-site keys of a resolved configuration's values
_OVERRIDES: dict[str, int] = {}  # configuration key -> value, while `resolving` is active
# inside each active `resolving`: (name, configuration object, the values it was given) per resolution
_RESOLVED: list[list[tuple[str, Any, dict[str, Any]]]] = []


@contextmanager
def resolving(overrides: dict[str, int] | None = None) -> Iterator[list[tuple[str, Any, dict[str, Any]]]]:
    """Apply `overrides` (configuration key -> int) to every shipped configuration resolved inside;
    yields the list of resolutions, filled as they happen."""
    global _OVERRIDES
    saved, resolved = _OVERRIDES, []
    _OVERRIDES = dict(overrides or {})
    _RESOLVED.append(resolved)
    try:
        yield resolved
    finally:
        _OVERRIDES = saved
        _RESOLVED.pop()


def config_sites(resolved: list[tuple[str, Any, dict[str, Any]]]) -> tuple[dict[str, int], dict[str, int]]:
    """(widths, layer counts) of the one shipped configuration `resolved` names, as size sites keyed
    `config.KEY` at their values as resolved. A value the file changed after the resolution is the
    file's own, not a site (a reduced instance setting it would be undone by the file). None when no
    configuration, or more than one, was resolved (one override would then set two models' widths)."""
    if len({name for name, _, _ in resolved}) != 1:
        return {}, {}
    given = resolved[0][2]
    kept = {k: v for k, v in given.items() if type(v) is int and (k in WIDTH_KEYS or k in REPEAT_KEYS)
            and all(getattr(obj, k, None) == v for _, obj, _ in resolved)}
    return ({CONFIG_PREFIX + k: v for k, v in kept.items() if k in WIDTH_KEYS},
            {CONFIG_PREFIX + k: v for k, v in kept.items() if k in REPEAT_KEYS})


class NoShippedConfig(RuntimeError):
    """A `from_pretrained` name with no shipped configuration (the hub is not reachable)."""


def _entry(name: Any) -> dict[str, Any]:
    entry = find_shipped(str(name))
    if entry is None:
        raise NoShippedConfig(
            f"from_pretrained({str(name)!r}): no shipped configuration and no hub here: save its config.json "
            f"and run solar-opt hf:NAME --config FILE.json (shipped: {', '.join(shipped_names())})")
    return entry


def offline_hub() -> None:
    """Patch transformers' `from_pretrained` entry points (idempotent); a no-op without transformers
    (the file's own import then says what to install)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from solar_compiler.frontends.zoo.vision_runtime import prepare_torchvision

    prepare_torchvision()  # transformers' PreTrainedModel imports torchvision when it is installed
    try:
        import transformers
        from transformers.models.auto.auto_factory import _BaseAutoModelClass
    except ModuleNotFoundError:
        return
    auto_config = transformers.AutoConfig
    original_config = auto_config.from_pretrained.__func__
    original_model = transformers.PreTrainedModel.from_pretrained.__func__

    def config_from_pretrained(cls, name, *args, **kwargs):
        if Path(str(name)).exists():
            return original_config(cls, name, *args, **kwargs)
        entry = _entry(name)
        config = dict(entry["config"])
        config.pop("architectures", None)
        config = with_overrides(config, _OVERRIDES)
        for k in ("return_unused_kwargs", "trust_remote_code", "revision", "cache_dir", "token"):
            kwargs.pop(k, None)
        given = {**config, **kwargs}
        kind = given.pop("model_type")
        made = with_layer_count(lambda c: auto_config.for_model(kind, **c), given)
        if _RESOLVED:  # a value the call passes is the file's own, not a site
            sites = {k: v for k, v in given.items() if k not in kwargs}
            count = implicit_layer_count(sites)
            if count is not None:
                sites[IMPLICIT_COUNT] = count
            _RESOLVED[-1].append((entry["name"], made, sites))
        return made

    def auto_model_from_pretrained(cls, name, *args, config=None, **kwargs):
        if Path(str(name)).exists():
            return original_model(cls, name, *args, config=config, **kwargs)
        config = config if config is not None else auto_config.from_pretrained(name)
        return cls.from_config(config, **_build_kwargs(kwargs))

    def model_from_pretrained(cls, name, *args, config=None, **kwargs):
        if Path(str(name)).exists():
            return original_model(cls, name, *args, config=config, **kwargs)
        config = config if config is not None else auto_config.from_pretrained(name)
        return cls._from_config(config, **_build_kwargs(kwargs))

    auto_config.from_pretrained = classmethod(config_from_pretrained)
    _BaseAutoModelClass.from_pretrained = classmethod(auto_model_from_pretrained)
    transformers.PreTrainedModel.from_pretrained = classmethod(model_from_pretrained)
    _INSTALLED = True


def _build_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """What `from_config` takes of `from_pretrained`'s keywords: the dtype (float32 unless the call
    names one: KernelBench's files were written for transformers 4, whose `from_pretrained` loaded
    float32 whatever the checkpoint's `torch_dtype`; `from_config` would otherwise take the config's)
    and the attention implementation."""
    import torch

    dtype = kwargs.get("dtype", kwargs.get("torch_dtype"))
    out: dict[str, Any] = {"dtype": torch.float32 if dtype in (None, "auto") else dtype}
    if "attn_implementation" in kwargs:
        out["attn_implementation"] = kwargs["attn_implementation"]
    return out
