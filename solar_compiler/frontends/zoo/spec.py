"""Model specs (`hf:NAME`, and `torchvision:NAME` / `timm:NAME` via vision.py) as input: resolve the
configuration, write the model file.

`solar-opt hf:llama-2-7b --phase decode --kv-len 4096 --dtype fp16 ...` names a model instead of a
file. The spec resolves to a configuration (a shipped `configs/NAME.json`, a user's `--config
FILE.json`, and `KEY=VAL` overrides on top), and this module writes a KernelBench-style model file
(`class Model`, `get_inputs`, module-level sizes) that the torch frontend then loads like any other
file: capture with fake tensors, the reduced instance for validation, the translation cache (keyed
on the file's bytes, which hold the whole configuration), reports and solar-bench are unchanged.

Why a generated file and not a second loader: `ModelSpec.with_sizes` scales the file's literal sizes
for the reduced instance, so the widths (hidden, intermediate, head and vocabulary sizes, the
sequence and cache lengths) are written as module-level literals, the layer counts as `repeated(N)`
(a reduced instance may run fewer layers: `loopir/repetition.py` checks that the full-size kernel is
the reduced one with more copies of the layer block), and the other counts that make the program's
statement list (heads, experts) as `fixed(...)` calls, which are no size sites.

This module imports no framework; the generated file imports `frontends/zoo/runtime.py`. Vision
specs share the parsing and the file writing here; `vision.py` (imported when one is used) writes
their source.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solar_compiler.errors import SolarError
from solar_compiler.frontends.zoo.policy import POLICIES, POLICY_OPTIONS
from solar_compiler.frontends.zoo.policy import model_source as policy_source
from solar_compiler.frontends.zoo.template import entry_points


class InputError(SolarError):
    """A spec, its flags or its configuration is wrong (one line)."""

    error_class = "input"

__all__ = ["PREFIX", "PREFIXES", "SPEC_FLAGS", "ZooRequest", "expand_argv", "is_spec", "model_source",
           "parse_request", "resolve_config", "shipped_names", "spec_source"]

PREFIX = "hf:"
VISION_PREFIXES = ("torchvision:", "timm:")
PREFIXES = (PREFIX, *VISION_PREFIXES)
CONFIG_DIR = Path(__file__).parent / "configs"
GENERATOR_VERSION = "zoo-2"
# flags that shape a spec's program (value-taking); they are removed before solar-opt parses the rest
SPEC_FLAGS = ("--batch", "--seq", "--dtype", "--phase", "--kv-len", "--config", "--image-size")
DTYPES = ("fp32", "fp16", "bf16")
# Configuration keys that are widths: scaled together for the reduced instance (a program of the same
# statements). Every other integer is a count or an id and is kept (`fixed`).
WIDTH_KEYS = frozenset({
    "hidden_size", "intermediate_size", "head_dim", "vocab_size", "n_embd", "n_inner", "ffn_dim", "d_model",
    "encoder_ffn_dim", "decoder_ffn_dim", "moe_intermediate_size", "kv_lora_rank", "q_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "word_embed_proj_dim", "embedding_size",
    "feed_forward_size",
})
# Configuration keys that count identical layers: written `repeated(N)`, so that a reduced instance may
# run fewer of them when its kernel is checked to be the full one with fewer copies of its layer block
# (`loopir/repetition.py`).
REPEAT_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "encoder_layers", "decoder_layers")


def with_layer_count(make: Callable[[dict[str, Any]], Any], config: dict[str, Any]) -> Any:
    """`make(config)`; when the configuration class rejects it and the configuration lists a kind
    per layer for more layers than its count (a reduced instance's fewer layers), `make` of the
    configuration with those lists cut to the count (`fit_layer_lists`)."""
    try:
        return make(config)
    except Exception:  # noqa: BLE001 - ValueError, or huggingface_hub's strict-dataclass error
        count = next((v for k, v in config.items() if k in REPEAT_KEYS and type(v) is int), None)
        fitted = config if count is None else fit_layer_lists(config, count)
        if fitted == config:
            raise
        return make(fitted)


def _layer_kinds(v: Any) -> list[str] | None:
    """The kind of each layer, when `v` is a per-layer list: a list of kind names (`layer_types`,
    Reformer's `attn_layers`), or GPT-Neo's `[[kinds, repeats], ...]`."""
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return v
    if isinstance(v, list) and v and all(isinstance(x, list) and len(x) == 2 and isinstance(x[1], int)
                                         and _layer_kinds(x[0]) is not None for x in v):
        return [k for ks, n in v for _ in range(n) for k in ks]
    return None


def fit_layer_lists(config: dict[str, Any], count: int) -> dict[str, Any]:
    """`config` with every per-layer list cut to its first `count` layers: a list of layer kinds
    (`layer_types`), or GPT-Neo's `attention_types` (`[[["global", "local"], 16]]`, kinds and
    repeats), written out as `[[kinds, 1]]`."""
    out = dict(config)
    for key, v in config.items():
        layers = _layer_kinds(v)
        if layers is not None and len(layers) > count:
            out[key] = layers[:count] if all(isinstance(x, str) for x in v) else [[layers[:count], 1]]
    return out


# The layer-count site of a configuration that states its count only as the length of its per-layer
# lists (Reformer's `attn_layers`; transformers derives `num_hidden_layers` from it).
IMPLICIT_COUNT = "num_hidden_layers"


def implicit_layer_count(config: dict[str, Any]) -> int | None:
    """The layer count of a configuration with per-layer lists (all of one length) and no count key."""
    if any(type(config.get(k)) is int for k in REPEAT_KEYS):
        return None
    lengths = {len(kinds) for v in config.values() if (kinds := _layer_kinds(v)) is not None}
    return lengths.pop() if len(lengths) == 1 else None


def with_overrides(config: dict[str, Any], overrides: dict[str, int]) -> dict[str, Any]:
    """`config` with the integer `overrides` (a reduced instance's widths and layer counts) applied.
    A width's parts scale with it: an integer list summing to the width (Reformer's
    `axial_pos_embds_dim`, which the model checks against `hidden_size`) is scaled by the same
    factor when every part stays whole. An implicit layer count (`IMPLICIT_COUNT`) cuts the lists."""
    out = dict(config)
    for key, value in overrides.items():
        old = config.get(key)
        if type(old) is not int:
            continue
        out[key] = value
        if key not in WIDTH_KEYS or old == value:
            continue
        for k, v in config.items():
            if (isinstance(v, list) and len(v) > 1 and all(type(x) is int for x in v) and sum(v) == old
                    and all(x * value % old == 0 for x in v)):
                out[k] = [x * value // old for x in v]
    count = overrides.get(IMPLICIT_COUNT)
    if count is not None and implicit_layer_count(config) is not None:
        out = fit_layer_lists(out, count)
    return out


# keys naming the number of learned positions: a spec may not run past them
POSITION_KEYS = ("n_positions", "max_position_embeddings")
DEFAULT_SEQ = 2048
SPEC_TIMEOUT = 900  # seconds for capture + translation + validation of a spec (`with_timeout`)


@dataclass
class ZooRequest:
    """One spec on the command line, before resolution."""

    spec: str                                   # as given: hf:NAME (torchvision:NAME, timm:NAME)
    name: str                                   # NAME
    prefix: str = PREFIX                        # hf:, torchvision: or timm:
    config_file: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    batch: int = 1
    seq: int | None = None
    dtype: str = "fp32"
    phase: str | None = None
    kv_len: int | None = None
    image_size: int | None = None               # vision specs: None is the weights' own size

    @property
    def library(self) -> str:
        """'hf', 'torchvision' or 'timm'."""
        return self.prefix[:-1]

    @property
    def is_vision(self) -> bool:
        return self.prefix in VISION_PREFIXES


def is_spec(arg: str) -> bool:
    return arg.startswith(PREFIXES)


def shipped_names() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.glob("*.json"))


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9.]", "", name.lower())


def find_shipped(name: str) -> dict[str, Any] | None:
    """The shipped entry whose name, repository id (`meta-llama/Llama-2-7b-hf`) or alias is `name`
    (case, '-' and '_' ignored), or None."""
    want = _norm(name)
    for path in sorted(CONFIG_DIR.glob("*.json")):
        entry = json.loads(path.read_text())
        names = [entry["name"], entry["repo"], entry["repo"].split("/")[-1], *entry.get("aliases", [])]
        if want in {_norm(n) for n in names}:
            return {**entry, "file": str(path)}
    return None


def _load_config_file(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except OSError as e:
        raise InputError(f"{path}: cannot read the configuration: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}: not JSON: {e.msg}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}:1: a configuration is a JSON object (a config.json)")
    return data["config"] if isinstance(data.get("config"), dict) and "repo" in data else data


def resolve_config(req: ZooRequest) -> tuple[str, dict[str, Any], str]:
    """(architecture class name, configuration, where it came from) of a request. NAME is a shipped
    model, or with `--config` any name (the file decides), or an architecture class name
    (`hf:LlamaForCausalLM`) whose defaults `KEY=VAL` overrides complete."""
    source = ""
    if req.config_file is not None:
        config = _load_config_file(req.config_file)
        source = req.config_file
    else:
        entry = find_shipped(req.name)
        if entry is not None:
            config, source = dict(entry["config"]), f"{entry['source']} (shipped: {Path(entry['file']).name})"
        elif re.fullmatch(r"[A-Z][A-Za-z0-9]*", req.name):
            config, source = {"architectures": [req.name]}, "transformers defaults"
        else:
            raise InputError(f"{req.spec}: no shipped configuration named '{req.name}' (shipped: "
                             f"{', '.join(shipped_names())}); give --config FILE.json (a config.json) or an "
                             f"architecture class name (hf:LlamaForCausalLM KEY=VAL ...)")
    config = {**config, **req.overrides}
    archs = config.get("architectures")
    arch = req.name if re.fullmatch(r"[A-Z][A-Za-z0-9]*", req.name) else (archs[0] if archs else None)
    if not isinstance(arch, str):
        raise InputError(f"{source or req.spec}:1: the configuration names no architecture ('architectures': "
                         f"[\"LlamaForCausalLM\"])")
    return arch, config, source


def is_causal(architecture: str) -> bool:
    return architecture.endswith(("ForCausalLM", "LMHeadModel"))


def _uses_rope(config: dict[str, Any]) -> bool:
    return any("rope" in k or "rotary" in k for k in config)


def plan(req: ZooRequest, arch: str, config: dict[str, Any]) -> tuple[str, int, int]:
    """(phase, seq, kv_len) after checking the request against the model; errors are one line."""
    causal = is_causal(arch)
    phase = req.phase or ("prefill" if causal else "forward")
    if phase in ("prefill", "decode") and not causal:
        raise InputError(f"{req.spec}: --phase {phase} applies to causal language models; {arch} is not one",
                         error_class="input")
    if phase == "decode":
        if req.kv_len is None:
            raise InputError(f"{req.spec}: --phase decode needs --kv-len L (the cached tokens per layer)")
        if req.seq not in (None, 1):
            raise InputError(f"{req.spec}: decode runs one new token; --seq {req.seq} is for --phase prefill")
        seq, kv_len = 1, req.kv_len
    else:
        if req.kv_len is not None:
            raise InputError(f"{req.spec}: --kv-len applies to --phase decode")
        seq, kv_len = req.seq or DEFAULT_SEQ, 0
    limit = next((config[k] for k in POSITION_KEYS if isinstance(config.get(k), int)), None)
    if limit is not None and not _uses_rope(config):
        if req.seq is None and phase != "decode":
            seq = min(seq, limit)
        if seq + kv_len > limit:
            raise InputError(f"{req.spec}: {seq + kv_len} positions, but {arch} has {limit} learned position "
                             f"embeddings")
    for what, v in (("--batch", req.batch), ("--seq", seq), ("--kv-len", kv_len if phase == "decode" else 1)):
        if v < 1:
            raise InputError(f"{req.spec}: {what} must be at least 1")
    return phase, seq, kv_len


def _ident(key: str) -> str:
    return key if key.isidentifier() and not key.isupper() else f"cfg_{re.sub(r'[^A-Za-z0-9_]', '_', key)}"


def model_source(req: ZooRequest) -> str:
    """The model file of a request (see the module docstring)."""
    arch, config, source = resolve_config(req)
    if arch in POLICIES:
        return policy_source(req, arch, config, source, GENERATOR_VERSION)
    phase, seq, kv_len = plan(req, arch, config)
    runtime = (Path(__file__).parent / "runtime.py").read_bytes()
    widths = {k: v for k, v in config.items() if k in WIDTH_KEYS and type(v) is int}
    counts = {k: v for k, v in config.items() if k in REPEAT_KEYS and type(v) is int}
    rest = {k: v for k, v in config.items() if k not in widths and k not in counts}
    lines = [
        f'"""{req.spec}: {arch} from {source}; generated by solar-opt ({GENERATOR_VERSION}, runtime '
        f'{hashlib.sha256(runtime).hexdigest()[:12]}).',
        "",
        "Widths are module-level literals (a reduced instance scales them); layer counts are repeated(...)",
        "(a reduced instance may run fewer identical layers); other counts are fixed(...).",
        '"""',
        "from solar_compiler.frontends.zoo.runtime import SpecModel, fixed, repeated, spec_inputs",
        "",
        f"ARCHITECTURE = {arch!r}",
        f"PHASE = {phase!r}",
        f"DTYPE = {req.dtype!r}",
        f"BATCH = {req.batch}",
        f"SEQ = {seq}",
        f"KV_LEN = {kv_len}",
    ]
    lines += [f"{_ident(k)} = {v!r}" for k, v in widths.items()]
    lines += [f"{_ident(k)} = repeated({v!r})" for k, v in counts.items()]
    lines += [f"FIXED = fixed({dict(sorted(rest.items()))!r})"]
    lines += [
        "",
        "",
        "def config():",
        "    return {**FIXED, " + ", ".join(f"{k!r}: {_ident(k)}" for k in (*widths, *counts)) + "}",
    ]
    lines += entry_points("SpecModel", "ARCHITECTURE, config(), DTYPE, PHASE, KV_LEN",
                          "spec_inputs(ARCHITECTURE, config(), DTYPE, PHASE, BATCH, SEQ, KV_LEN)",
                          forward=("self, input_ids, *kv_cache", "self.run(input_ids, kv_cache)"))
    return "\n".join(lines)


def file_name(req: ZooRequest, source: str) -> str:
    """A readable, unique name: the spec, its phase and sizes, and a hash of the whole source."""
    stem = re.sub(r"[^A-Za-z0-9.]+", "_", req.name).strip("_")
    digest = hashlib.sha256(source.encode()).hexdigest()[:10]
    parts = [req.library if req.is_vision else "", stem, req.phase or "", f"b{req.batch}",
             f"s{req.seq}" if req.seq else "", f"kv{req.kv_len}" if req.kv_len else "",
             f"i{req.image_size}" if req.image_size else "", req.dtype]
    return "_".join(p for p in parts if p) + f"_{digest}.py"


def generated_dir() -> Path:
    """Where generated model files live: beside the translation cache (`$XDG_CACHE_HOME/solar-opt`)."""
    from solar_compiler.frontends.cache import cache_dir

    return cache_dir().parent / "zoo"


def spec_source(req: ZooRequest) -> str:
    """The generated model file of any spec: `hf:` here, a vision spec by `vision.py`."""
    if req.is_vision:
        from solar_compiler.frontends.zoo.vision import model_source as vision_source

        return vision_source(req)
    return model_source(req)


def write_model_file(req: ZooRequest, directory: Path | None = None) -> Path:
    source = spec_source(req)
    directory = directory or generated_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / file_name(req, source)
    if not path.exists() or path.read_text() != source:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(source)
        tmp.replace(path)
    return path


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _int(flag: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(f"{flag} takes an integer, not '{text}'") from None


def parse_request(argv: list[str]) -> tuple[ZooRequest | None, list[str]]:
    """(the spec's request, the remaining arguments with the spec in place) from a command line; the
    spec flags and the `KEY=VAL` words right after the spec are consumed. A spec flag without a spec, or a
    second spec, is an error."""
    rest: list[str] = []
    flags: dict[str, str] = {}
    overrides: dict[str, Any] = {}
    spec_at = None
    i = 0
    while i < len(argv):
        a = argv[i]
        name, eq, val = a.partition("=")
        if name in SPEC_FLAGS:
            if not eq:
                if i + 1 >= len(argv):
                    raise InputError(f"{name} needs a value")
                val = argv[i + 1]
                i += 1
            flags[name] = val
        elif is_spec(a):
            if spec_at is not None:
                raise InputError(f"one model spec at a time (got {rest[spec_at]} and {a})")
            spec_at = len(rest)
            rest.append(a)
        elif spec_at == len(rest) - 1 and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", a):
            overrides[name] = _value(val)  # KEY=VAL words right after the spec (not an option's value)
        else:
            rest.append(a)
        i += 1
    if spec_at is None:
        if flags:
            raise InputError(f"{', '.join(flags)}: options of a model spec (hf:NAME, torchvision:NAME, "
                             f"timm:NAME); the input is a file")
        return None, argv
    spec = rest[spec_at]
    prefix = next(p for p in PREFIXES if spec.startswith(p))
    req = ZooRequest(spec=spec, name=spec[len(prefix):], prefix=prefix, config_file=flags.get("--config"),
                     overrides=overrides)
    if not req.name:
        example = "hf:llama-2-7b) or an architecture (hf:LlamaForCausalLM" if prefix == PREFIX else \
            {"torchvision:": "torchvision:resnet50", "timm:": "timm:vit_base_patch16_224"}[prefix]
        raise InputError(f"{spec}: name a model ({example})", error_class="input")
    if "--image-size" in flags:
        if not req.is_vision:
            raise InputError(f"{spec}: --image-size applies to torchvision: and timm: specs")
        req.image_size = _int("--image-size", flags["--image-size"])
    if "--batch" in flags:
        req.batch = _int("--batch", flags["--batch"])
    if "--seq" in flags:
        req.seq = _int("--seq", flags["--seq"])
    if "--kv-len" in flags:
        req.kv_len = _int("--kv-len", flags["--kv-len"])
    if "--dtype" in flags:
        if flags["--dtype"] not in DTYPES:
            raise InputError(f"--dtype is one of {', '.join(DTYPES)}, not '{flags['--dtype']}'")
        req.dtype = flags["--dtype"]
    if "--phase" in flags:
        if flags["--phase"] not in ("prefill", "decode"):
            raise InputError(f"--phase is prefill or decode, not '{flags['--phase']}'")
        req.phase = flags["--phase"]
    return req, rest


def expand_argv(argv: list[str]) -> list[str] | None:
    """A command line naming a spec -> the same command line with the spec replaced by its generated
    model file (and `--translate` added: a spec is source to translate); None when there is no spec."""
    req, rest = parse_request(argv)
    if req is None:
        return None
    path = write_model_file(req)
    args = [str(path) if a == req.spec else a for a in rest]
    if "--translate" not in args:
        args.append("--translate")
    policy = not req.is_vision and resolve_config(req)[0] in POLICIES
    return with_timeout(args, POLICY_OPTIONS if policy else None)


def with_timeout(args: list[str], defaults: dict[str, str] | None = None) -> list[str]:
    """`timeout=SPEC_TIMEOUT` (and any other translate option of `defaults`) added to the translate
    options unless the command line sets it: a full-size LLM is ~2000 ATen ops to capture, and its
    reduced instance (every layer, narrower) is captured and executed again, which can outlast the
    frontend's default of 120 s on a loaded 2-core machine."""
    wanted = {"timeout": str(SPEC_TIMEOUT), **(defaults or {})}
    for i, a in enumerate(args):
        if a.startswith("--frontend-options"):
            value = a.partition("=")[2] if "=" in a else (args[i + 1] if i + 1 < len(args) else "")
            more = " ".join(f"{k}={v}" for k, v in wanted.items() if f"{k}=" not in value)
            if not more:
                return args
            if "=" in a:
                return [*args[:i], f"{a} {more}", *args[i + 1:]]
            return [*args[:i + 1], f"{value} {more}", *args[i + 2:]]
    return [*args, "--frontend-options", " ".join(f"{k}={v}" for k, v in wanted.items())]
