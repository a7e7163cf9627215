"""What the LLM path is allowed to do: the model, where transcripts go, and the limits of one run.

`LLMConfig` is plain data (it travels pickled into the sandboxed child with the frontend options);
nothing here imports litellm. Errors of the LLM path are `SolarError`s with one-line messages;
`LLMNeedsResponse` (the `manual` provider waiting for a person) exits with status 3.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path

from solar_compiler.errors import SolarError

MODEL_ENV = "SOLAR_LLM_MODEL"
MANUAL = "manual"
CONFIGURE_HINT = ("configure a model with --llm-model MODEL (any litellm model string, e.g. "
                  "openai/gpt-4o-mini; --llm-api-base URL for a local OpenAI-compatible server), or "
                  f"{MODEL_ENV}=MODEL, or --llm-model=manual to answer the prompts yourself")


class LLMError(SolarError):
    """A failure of the LLM path (provider error, exhausted repair attempts): one line."""


class LLMLimitError(LLMError):
    """A limit of the run was hit (response size, request timeout, token or cost budget)."""


class LLMNeedsResponse(LLMError):
    """The `manual` provider wrote a prompt and waits for its response: exit status 3."""

    exit_code = 3


@dataclass(frozen=True)
class LLMConfig:
    """Options of the LLM path (the `translate` pass's `llm-*` options, resolved).

    `model` is None when no model is configured (an LLM needed is then an error saying how to
    configure one). `replay` names a recorded JSON-lines transcript whose responses are used
    instead of any provider."""

    model: str | None = None
    api_base: str | None = None
    attempts: int = 4
    transcript_dir: str | None = None   # default: .solar-llm/<source hash>/
    replay: str | None = None
    timeout: float = 120.0              # seconds per request
    max_tokens: int = 200_000           # total tokens (prompt + completion) per run
    max_cost: float = 2.0               # total cost per run, in USD as litellm reports it
    max_response: int = 64_000          # characters of one response
    use_cache: bool = True
    # ops the LLM writes even where a template exists (`--llm-ops`): full names
    # ("aten.kthvalue.default") or an ATen op's name without its overload ("kthvalue")
    ops: tuple[str, ...] = ()

    @staticmethod
    def resolve(model: str = "", **kw) -> LLMConfig:
        """The config with the model taken from `model`, else from $SOLAR_LLM_MODEL, else None."""
        chosen = model.strip() or os.environ.get(MODEL_ENV, "").strip() or None
        cfg = LLMConfig(model=chosen, **kw)
        if cfg.attempts < 1:
            raise SolarError(f"llm-attempts must be at least 1, got {cfg.attempts}")
        for name in ("timeout", "max_tokens", "max_cost", "max_response"):
            if getattr(cfg, name) <= 0:
                raise SolarError(f"llm-{name.replace('_', '-')} must be positive, got {getattr(cfg, name)}")
        return cfg

    def sends(self, op: str) -> bool:
        """Whether `op` goes to the LLM though it has a template (named in `ops`)."""
        parts = op.split(".")
        return op in self.ops or (len(parts) == 3 and parts[0] == "aten" and parts[1] in self.ops)

    @property
    def available(self) -> bool:
        return self.model is not None or self.replay is not None

    @property
    def model_label(self) -> str:
        if self.replay is not None:
            return f"replay of {self.replay}"
        return self.model or "none"

    def require(self, what: str, error_class: str) -> None:
        """Raise the one-line 'no model configured' error for `what` (an op or a file) that needs one,
        of the `error_class` of the failure that needs it (an op without a template: "unsupported op")."""
        if not self.available:
            raise LLMError(f"{what}; an LLM can translate it, but no model is configured: {CONFIGURE_HINT}",
                           error_class=error_class)

    def in_subfolder(self, source_path: str, name: str) -> LLMConfig:
        """The same config with transcripts (and manual prompts) in a subfolder of its folder."""
        return replace(self, transcript_dir=str(transcript_dir(self, source_path) / name))

    def cache_tag(self) -> str:
        """What a cached translation made with this config depends on (model or replayed transcript)."""
        h = hashlib.sha256(repr((self.model, self.api_base) + ((self.ops,) if self.ops else ())).encode())
        if self.replay is not None:
            try:
                h.update(Path(self.replay).read_bytes())
            except OSError:
                h.update(b"missing")
        return h.hexdigest()[:16]


def source_hash(path: str) -> str:
    """First 16 hex digits of the SHA-256 of the file's bytes (names the default transcript folder)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError as e:
        raise SolarError(f"{path}:1: cannot read file: {e.strerror}", error_class="input") from None


def transcript_dir(cfg: LLMConfig, source_path: str) -> Path:
    return Path(cfg.transcript_dir) if cfg.transcript_dir else Path(".solar-llm") / source_hash(source_path)
