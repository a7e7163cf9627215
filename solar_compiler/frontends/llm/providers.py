"""Where responses come from: litellm (any hosted or local model), a person (`manual`), or a
recorded transcript (`--llm-replay`). Every provider returns the response text as data.

litellm is imported only here, only when a request is made, with `LITELLM_LOCAL_MODEL_COST_MAP`
set first: without it the import fetches a price map from the network (seconds of waiting on a
machine without internet).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .config import MANUAL, LLMConfig, LLMError, LLMLimitError, LLMNeedsResponse


@dataclass(frozen=True)
class Reply:
    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None        # USD as litellm reports it; None when unknown
    seconds: float = 0.0

    @property
    def tokens(self) -> int:
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)


class Provider(Protocol):
    label: str       # the model name reports give
    cacheable: bool  # whether validated answers go to (and come from) the translation cache

    def complete(self, task: str, attempt: int, messages: list[dict[str, str]], max_tokens: int) -> Reply: ...


def make_provider(cfg: LLMConfig, transcript_dir: Path) -> Provider:
    if cfg.replay is not None:
        return ReplayProvider(Path(cfg.replay))
    if cfg.model == MANUAL:
        return ManualProvider(transcript_dir)
    assert cfg.model is not None
    return LiteLLMProvider(cfg)


class LiteLLMProvider:
    cacheable = True

    def __init__(self, cfg: LLMConfig):
        self.cfg = cfg
        self.label = cfg.model or "?"

    def complete(self, task: str, attempt: int, messages: list[dict[str, str]], max_tokens: int) -> Reply:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.suppress_debug_info = True   # no "Provider List" banners on stdout
        kw: dict = {"model": self.cfg.model, "messages": messages, "timeout": self.cfg.timeout,
                    "num_retries": 0, "max_tokens": max_tokens}
        if self.cfg.api_base:
            kw["api_base"] = self.cfg.api_base
            kw["api_key"] = os.environ.get("SOLAR_LLM_API_KEY") or "none"
        t0 = time.perf_counter()
        try:
            r = litellm.completion(**kw)
        except litellm.exceptions.Timeout:
            raise LLMLimitError(f"LLM request for {task} timed out after {self.cfg.timeout:g} s "
                                "(--llm-timeout)") from None
        except Exception as e:  # noqa: BLE001 - any provider failure is one line
            first = (str(e).strip().splitlines() or [""])[0][:300]
            raise LLMError(f"LLM provider error for {task} (model {self.label}): "
                           f"{type(e).__name__}: {first}") from None
        seconds = time.perf_counter() - t0
        text = r.choices[0].message.content or ""
        usage = getattr(r, "usage", None)
        try:
            cost = float(litellm.completion_cost(completion_response=r))
        except Exception:  # noqa: BLE001 - a model absent from the price map: cost unknown, not an error
            cost = None
        return Reply(text, getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None),
                     cost, seconds)


class ManualProvider:
    """A person answers: prompt N is written to DIR/NNN.prompt.md; its answer is read from
    DIR/NNN.response.md when the same command runs again (the numbering is the run's request order,
    which is deterministic, so a rerun meets the same prompts in the same order)."""

    label = MANUAL
    cacheable = False

    def __init__(self, folder: Path):
        self.dir = folder
        self.n = 0

    def complete(self, task: str, attempt: int, messages: list[dict[str, str]], max_tokens: int) -> Reply:
        self.n += 1
        prompt = self.dir / f"{self.n:03d}.prompt.md"
        response = self.dir / f"{self.n:03d}.response.md"
        self.dir.mkdir(parents=True, exist_ok=True)
        text = "\n\n".join(m["content"] for m in messages)   # self-contained, a repair too
        if not prompt.exists() or prompt.read_text() != text + "\n":
            prompt.write_text(text + "\n")
        if not response.exists():
            raise LLMNeedsResponse(f"{prompt}: prompt for {task} written; put the model's answer in "
                                   f"{response} and rerun the same command")
        return Reply(response.read_text())


class ReplayProvider:
    """Responses of a recorded JSON-lines transcript, by (task, attempt); no provider at all."""

    cacheable = False

    def __init__(self, path: Path):
        self.path = path
        try:
            lines = path.read_text().splitlines()
        except OSError as e:
            raise LLMError(f"{path}:1: cannot read the replay transcript: {e.strerror}") from None
        self.records: dict[tuple[str, int], dict] = {}
        models = []
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                key = (str(rec["task"]), int(rec["attempt"]))
                str(rec["response"])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                raise LLMError(f"{path}:{i}: not a transcript record (JSON with task, attempt, "
                               "response)") from None
            self.records[key] = rec
            models.append(str(rec.get("model", "?")))
        self.label = f"{models[0] if models else '?'} (replayed from {path.name})"

    def complete(self, task: str, attempt: int, messages: list[dict[str, str]], max_tokens: int) -> Reply:
        rec = self.records.get((task, attempt))
        if rec is None:
            raise LLMError(f"{self.path}: the replayed transcript has no response for {task}, "
                           f"attempt {attempt}")
        tokens = rec.get("tokens") or {}
        return Reply(str(rec["response"]), tokens.get("prompt"), tokens.get("completion"), rec.get("cost"),
                     0.0)
