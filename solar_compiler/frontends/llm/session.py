"""One run's use of the LLM: the repair loop, the budget, the JSON-lines transcript, the cache.

`Session.solve(task)` asks for a kernel; every rejected response goes back to the model with its
specific diagnostic (parse `line:col`, verifier, signature, first mismatching element) until a
response is accepted or `attempts` are used. Every attempt is one transcript record (prompt,
response, diagnostic, tokens, cost, seconds), written as it happens, so a stopped run (the manual
provider's exit 3, a budget hit) leaves its transcript. Only accepted translations are cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solar_compiler.loopir.ast import Kernel

from .check import Rejected
from .config import LLMConfig, LLMError, LLMLimitError, transcript_dir
from .prompt import PROMPT_VERSION, messages
from .providers import Provider, Reply, make_provider

MAX_COMPLETION_TOKENS = 16_384   # per request, within what remains of the run's token budget


@dataclass
class Task:
    """One translation asked of the model. `key` names it in transcripts and replays
    ("aten.sort.default at m.py:11", "program m.py"); `fingerprint` is what its answer depends on
    (for the cache); `check` accepts a response (returns the kernel and the largest relative
    error) or raises `Rejected`."""

    key: str
    text: str
    fingerprint: str
    check: Callable[[str], tuple[Kernel, float]]


@dataclass
class Outcome:
    kernel: Kernel
    max_rel_err: float
    model: str
    attempts: int
    cached: bool
    tokens: int
    cost: float | None


@dataclass
class Session:
    cfg: LLMConfig
    source_path: str
    records: list[dict[str, Any]] = field(default_factory=list)
    tokens: int = 0
    cost: float = 0.0
    _provider: Provider | None = None

    @property
    def folder(self) -> Path:
        return transcript_dir(self.cfg, self.source_path)

    @property
    def provider(self) -> Provider:
        if self._provider is None:
            self._provider = make_provider(self.cfg, self.folder)
        return self._provider

    @property
    def transcript_path(self) -> Path:
        return self.folder / "transcript.jsonl"

    # ---- the repair loop -------------------------------------------------------------------------
    def solve(self, task: Task) -> Outcome:
        hit = self._cached(task)
        if hit is not None:
            return hit
        msgs = messages(task.text)
        last = ""
        spent_tokens, spent_cost, cost_known = 0, 0.0, True
        for attempt in range(1, self.cfg.attempts + 1):
            self._check_budget(task.key)
            reply = self.provider.complete(task.key, attempt, msgs, self._completion_cap())
            spent_tokens += reply.tokens
            spent_cost += reply.cost or 0.0
            cost_known = cost_known and reply.cost is not None
            self._charge(reply)
            if len(reply.text) > self.cfg.max_response:
                self._record(task, attempt, msgs, reply, "response over the size limit", False)
                raise LLMLimitError(f"LLM response for {task.key} has {len(reply.text):,} characters, over "
                                    f"the limit of {self.cfg.max_response:,} (--llm-max-response)")
            try:
                kernel, err = task.check(reply.text)
            except Rejected as r:
                last = str(r)
                self._record(task, attempt, msgs, reply, last, False)
                msgs = messages(task.text, (attempt, reply.text, last))
                continue
            self._record(task, attempt, msgs, reply, None, True)
            self._store(task, reply.text, attempt)
            return Outcome(kernel, err, self.provider.label, attempt, False, spent_tokens,
                           spent_cost if cost_known else None)
        raise LLMError(f"{task.key}: no valid translation from {self.provider.label} after "
                       f"{self.cfg.attempts} attempt(s) (--llm-attempts); last diagnostic: {last}; "
                       f"transcript: {self.transcript_path}")

    # ---- limits ----------------------------------------------------------------------------------
    def _check_budget(self, task: str) -> None:
        if self.tokens >= self.cfg.max_tokens:
            raise LLMLimitError(f"LLM token budget exhausted before a request for {task}: {self.tokens:,} of "
                                f"{self.cfg.max_tokens:,} tokens used (--llm-max-tokens)")
        if self.cost >= self.cfg.max_cost:
            raise LLMLimitError(f"LLM cost budget exhausted before a request for {task}: ${self.cost:.4f} "
                                f"of ${self.cfg.max_cost:g} spent (--llm-max-cost)")

    def _completion_cap(self) -> int:
        return max(1, min(MAX_COMPLETION_TOKENS, self.cfg.max_tokens - self.tokens))

    def _charge(self, reply: Reply) -> None:
        self.tokens += reply.tokens
        self.cost += reply.cost or 0.0

    # ---- transcript --------------------------------------------------------------------------------
    def _record(self, task: Task, attempt: int, msgs: list[dict[str, str]], reply: Reply,
                diagnostic: str | None, accepted: bool) -> None:
        rec = {"task": task.key, "attempt": attempt, "model": self.provider.label,
               "prompt_version": PROMPT_VERSION,
               "prompt": "\n\n".join(m["content"] for m in msgs),
               "response": reply.text[:self.cfg.max_response], "diagnostic": diagnostic, "accepted": accepted,
               "tokens": {"prompt": reply.prompt_tokens, "completion": reply.completion_tokens},
               "cost": reply.cost, "seconds": round(reply.seconds, 3)}
        self.records.append(rec)
        self._write_transcript()

    def _write_transcript(self) -> None:
        folder = self.folder
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                for r in self.records:
                    f.write(json.dumps(r) + "\n")
            os.replace(tmp, self.transcript_path)
        except OSError as e:
            raise LLMError(f"{folder}: cannot write the LLM transcript: {e.strerror}") from None

    # ---- cache of accepted translations ---------------------------------------------------------------
    def _cache_file(self, task: Task) -> Path:
        key = hashlib.sha256(repr((task.fingerprint, self.cfg.model, self.cfg.api_base,
                                   PROMPT_VERSION)).encode()).hexdigest()
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "solar-opt" / "llm" / f"{key}.json"

    def _cached(self, task: Task) -> Outcome | None:
        if not (self.cfg.use_cache and self.provider.cacheable):
            return None
        try:
            entry = json.loads(self._cache_file(task).read_text())
            text, attempts = str(entry["response"]), int(entry["attempts"])
        except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError):
            return None
        try:
            kernel, err = task.check(text)   # re-checked against today's references; no request
        except Rejected:
            return None
        return Outcome(kernel, err, self.provider.label, attempts, True, 0, 0.0)

    def _store(self, task: Task, response: str, attempts: int) -> None:
        if not (self.cfg.use_cache and self.provider.cacheable):
            return
        p = self._cache_file(task)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump({"response": response, "attempts": attempts, "model": self.cfg.model,
                           "prompt_version": PROMPT_VERSION, "stored": time.time()}, f)
            os.replace(tmp, p)
        except OSError:
            pass  # a cache that cannot be written only costs a request next time


def fingerprint(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(hashlib.sha256(p.encode()).digest())
    return h.hexdigest()
