"""What a generated model file of a model spec (`hf:NAME`) runs: the model built from its
configuration, and its inputs for the requested phase.

Imported by the generated file, inside the capture's sandboxed child (`frontends/zoo/spec.py`
writes the file). The model is built in whatever tensor mode the caller has entered: under the
capture's `FakeTensorMode` an 8-billion-parameter model allocates no weight, and the reference run of a
reduced instance builds it for real. transformers is imported here, lazily, never by the driver.

Phases of a causal language model (`PHASES`):
* `prefill`: the prompt of `seq` tokens with the causal mask; the outputs are the logits and the K/V
  rows the prompt writes into the cache (one pair per layer), as a serving engine keeps them.
* `decode`: `seq` (one) new token at position `kv_len`, attending to a KV cache of `kv_len` tokens per
  layer. The cache is an input at the model's dtype (read once); the new K/V rows are outputs. The
  concatenation of cache and new rows that transformers builds for attention is an intermediate.
* `forward` (any model): `model(input_ids).logits` (or the last hidden state), no cache.
"""

from __future__ import annotations

from typing import Any

import torch

from solar_compiler.frontends.zoo.spec import with_layer_count

__all__ = ["DTYPES", "PHASES", "SpecModel", "fixed", "repeated", "spec_inputs", "transformers_module"]

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
PHASES = ("forward", "prefill", "decode")
MOE_KEYS = ("num_local_experts", "n_routed_experts", "num_experts")


def fixed(value: Any) -> Any:
    """Marks a configuration value that a size-reduced instance keeps (layer, head and expert counts):
    the reduced instance must be the same program, statement for statement, as the full-size one. A
    call is not a literal, so `model_file.find_size_sites` does not offer it for scaling."""
    return value


def repeated(count: int) -> int:
    """Marks a number of identical layers: a size-reduced instance may run fewer (3), provided its
    kernel is checked to be the full-size one with fewer copies of the layer block
    (`loopir/repetition.py`; `model_file.find_size_sites` records the count as a repeat site)."""
    return count


def transformers_module():
    from solar_compiler.frontends.zoo.vision_runtime import prepare_torchvision

    prepare_torchvision()  # transformers' model classes import torchvision when it is installed
    try:
        import transformers
    except ModuleNotFoundError:
        from solar_compiler.errors import SolarError

        raise SolarError("model specs hf:NAME need the Python package 'transformers', which is not "
                         "installed: pip install 'solar-opt[zoo]'", error_class="input") from None
    return transformers


def build_config(architecture: str, config: dict[str, Any]):
    """The transformers configuration object of `architecture` (a class name such as
    LlamaForCausalLM) with the values of `config` (a config.json's contents)."""
    tf = transformers_module()
    model_cls = getattr(tf, architecture, None)
    if model_cls is None:
        from solar_compiler.errors import SolarError

        raise SolarError(f"transformers {tf.__version__} has no model class {architecture}",
                         error_class="input")
    cfg = with_layer_count(lambda c: model_cls.config_class(**c),
                           {k: v for k, v in config.items() if k not in ("architectures",)})
    impl = "sdpa" if getattr(model_cls, "_supports_sdpa", False) else "eager"
    cfg._attn_implementation = impl
    if any(k in config for k in MOE_KEYS):
        # Mixture of experts: transformers' eager experts loop over the experts the batch hit (a
        # data-dependent loop and shapes, which fake tensors cannot trace); `batched_mm` gathers each
        # (token, slot) pair's expert weights by index and multiplies: one static program whose
        # indirect reads are the routed experts.
        cfg._experts_implementation = "batched_mm"
    return model_cls, cfg


def _rows_cache(cls):
    """A DynamicCache that keeps the K/V rows written into it after `seal()` (the new rows of this
    call) so that forward can return them: they are what the phase writes to the cache."""

    class RowsCache(cls):
        def __init__(self) -> None:
            super().__init__()
            self.sealed = False
            self.rows: list[torch.Tensor] = []

        def seal(self) -> None:
            self.sealed = True

        def update(self, key_states, value_states, layer_idx, *args, **kwargs):
            if self.sealed:
                self.rows += [key_states, value_states]
            return super().update(key_states, value_states, layer_idx, *args, **kwargs)

    return RowsCache


class SpecModel(torch.nn.Module):
    """The transformers model of a spec, called for one phase."""

    def __init__(self, architecture: str, config: dict[str, Any], dtype: str, phase: str, kv_len: int):
        super().__init__()
        model_cls, cfg = build_config(architecture, config)
        previous = torch.get_default_dtype()
        torch.set_default_dtype(DTYPES[dtype])  # parameters are created at the dtype: no .to() copy
        try:
            self.model = model_cls(cfg)
        finally:
            torch.set_default_dtype(previous)
        self.phase = phase
        self.kv_len = kv_len

    def run(self, input_ids: torch.Tensor, kv: tuple[torch.Tensor, ...]):
        if self.phase == "forward":
            out = self.model(input_ids=input_ids, use_cache=False)
            return _main_output(out)
        from transformers.cache_utils import DynamicCache

        cache = _rows_cache(DynamicCache)()
        for i in range(len(kv) // 2):
            cache.update(kv[2 * i], kv[2 * i + 1], i)
        cache.seal()
        seq = input_ids.shape[1]
        start = self.kv_len if self.phase == "decode" else 0
        pos = torch.arange(start, start + seq).unsqueeze(0).expand(input_ids.shape[0], seq)
        out = self.model(input_ids=input_ids, cache=cache, position_ids=pos, use_cache=True)
        return (_main_output(out), *cache.rows)


def _main_output(out):
    for name in ("logits", "last_hidden_state"):
        value = getattr(out, name, None)
        if value is not None:
            return value
    return out[0]


def cache_shapes(architecture: str, config: dict[str, Any], batch: int) -> list[tuple[tuple[int, ...], ...]]:
    """Per layer, the shapes of one token's key and value rows, found by running one token through
    the model on the meta device (no memory, no arithmetic): whatever the attention variant (GQA,
    MLA with its own key and value widths), the cache holds what the model writes."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    model_cls, cfg = build_config(architecture, config)
    with unset_fake_temporarily(), torch.device("meta"):  # the capture's fake mode, if any, set aside
        model = model_cls(cfg)
        from transformers.cache_utils import DynamicCache

        cache = _rows_cache(DynamicCache)()
        cache.seal()
        ids = torch.zeros(batch, 1, dtype=torch.long)
        with torch.no_grad():
            model(input_ids=ids, cache=cache, use_cache=True)
    rows = cache.rows
    return [(tuple(rows[i].shape), tuple(rows[i + 1].shape)) for i in range(0, len(rows), 2)]


def spec_inputs(architecture: str, config: dict[str, Any], dtype: str, phase: str, batch: int, seq: int,
                kv_len: int) -> list[torch.Tensor]:
    """Token ids `[batch, seq]` (uniform over the vocabulary), then for decode the KV cache: per
    layer a key and a value tensor of `kv_len` rows at the model's dtype."""
    vocab = build_config(architecture, config)[1].vocab_size  # the class default when config omits it
    ids = torch.randint(0, vocab, (batch, seq))
    if phase != "decode":
        return [ids]
    kv: list[torch.Tensor] = []
    for k_shape, v_shape in cache_shapes(architecture, config, batch):
        for shape in (k_shape, v_shape):
            kv.append(torch.randn(*shape[:-2], kv_len, shape[-1], dtype=DTYPES[dtype]))
    return [ids, *kv]
