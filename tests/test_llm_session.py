"""The LLM repair loop through the real litellm client against a scripted OpenAI-compatible server
on 127.0.0.1 (no network): diagnostics, the Python-injection response, cache, budgets and caps."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

pytest.importorskip("litellm")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic notes inside litellm

from llm_server import ScriptedServer  # noqa: E402

from solar_compiler.frontends.llm.check import Param, Rejected, Sample, check_response, extract  # noqa: E402
from solar_compiler.frontends.llm.config import LLMConfig, LLMError, LLMLimitError  # noqa: E402
from solar_compiler.frontends.llm.session import Session, Task  # noqa: E402

PARAMS = [Param("x", "f32", (4,), "input"), Param("y", "f32", (4,), "output")]
SAMPLE = Sample("the reference pair", {"x": np.array([1, 2, 3, 4], np.float32)},
                {"y": np.array([3, 5, 7, 9], np.float32)})

MALFORMED = """Here it is:

```loop
kernel affine(x: f32[4] input, y: f32[4] output):
    for i in range(4)
        y[i] = 2.0 * x[i] + 1.0
```
"""
WRONG = "```loop\nkernel affine(x: f32[4] input, y: f32[4] output):\n    for i in range(4):\n" \
        "        y[i] = 2.0 * x[i]\n```\n"
RIGHT = "```loop\nkernel affine(x: f32[4] input, y: f32[4] output):\n    for i in range(4):\n" \
        "        y[i] = 2.0 * x[i] + 1.0\n```\n"


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def _task(key: str = "affine at m.py:3") -> Task:
    return Task(key, "translate y = 2x + 1", f"fp-{key}", lambda r: check_response(r, PARAMS, [SAMPLE]))


def _session(server: ScriptedServer, tmp_path, model: str = "openai/local-model", **kw) -> Session:
    cfg = LLMConfig.resolve(model, api_base=server.url, transcript_dir=str(tmp_path / "t"), timeout=20, **kw)
    return Session(cfg, "m.py")


def test_repair_loop_malformed_then_wrong_then_correct(tmp_path):
    with ScriptedServer([MALFORMED, WRONG, RIGHT]) as server:
        out = _session(server, tmp_path).solve(_task())
    assert out.attempts == 3 and out.model == "openai/local-model" and not out.cached
    assert out.tokens == 3 * 1200 and out.cost is None  # a local model has no price: unknown, not an error
    assert len(server.requests) == 3
    # the second request carries the parser's line:col diagnostic, the third the first wrong element;
    # each is self-contained (a stateless model): the system text and one user message holding the
    # original task, the previous answer and the diagnostic, no conversation to continue
    for i, (previous, diagnostic) in enumerate(
            [(MALFORMED, "parse error: response:2:22: unexpected end of line, expected ':'"),
             (WRONG, "validation failed on the reference pair: y[0]: got 2, expected 3")], 1):
        msgs = server.requests[i]["messages"]
        assert [m["role"] for m in msgs] == ["system", "user"]
        assert msgs[0] == server.requests[0]["messages"][0]
        repair = msgs[1]["content"]
        assert repair.startswith(server.requests[0]["messages"][1]["content"])  # the original task
        assert "translate y = 2x + 1" in repair and f"attempt {i}) was rejected" in repair
        assert extract(previous).rstrip() in repair and f"It was rejected: {diagnostic}" in repair
    recs = [json.loads(x) for x in (tmp_path / "t" / "transcript.jsonl").read_text().splitlines()]
    assert [(r["attempt"], r["accepted"]) for r in recs] == [(1, False), (2, False), (3, True)]
    assert recs[0]["tokens"] == {"prompt": 1000, "completion": 200} and recs[2]["diagnostic"] is None
    assert "kernel matmul" in recs[0]["prompt"] and recs[0]["prompt_version"] == "2"


def test_python_in_a_response_is_a_parse_error_and_nothing_runs(tmp_path, monkeypatch):
    mark = tmp_path / "PWNED"
    called = []
    monkeypatch.setattr(os, "system", lambda cmd: called.append(cmd) or 0)
    injection = f"```loop\n__import__('os').system('touch {mark}')\n```\n"
    as_python = f"```python\nimport os\nos.system('touch {mark}')\n```\n"
    for text in (injection, as_python):
        with pytest.raises(Rejected, match=r"parse error: response:[12]:\d+: "):
            check_response(text, PARAMS, [SAMPLE])
    with ScriptedServer([injection, RIGHT]) as server:
        out = _session(server, tmp_path).solve(_task())
    assert out.attempts == 2
    assert "parse error: response:1:" in server.requests[1]["messages"][-1]["content"]
    assert not mark.exists() and called == []


def test_cache_hit_makes_no_request_and_failures_are_not_cached(tmp_path):
    with ScriptedServer([WRONG, RIGHT]) as server:
        first = _session(server, tmp_path).solve(_task())
        assert (first.attempts, len(server.requests)) == (2, 2)
        again = _session(server, tmp_path).solve(_task())
        assert len(server.requests) == 2 and again.cached and again.attempts == 2
    with ScriptedServer([WRONG]) as server:
        with pytest.raises(LLMError, match=r"no valid translation from openai/local-model after 2 attempt"):
            _session(server, tmp_path, attempts=2).solve(_task("other"))
        with pytest.raises(LLMError):
            _session(server, tmp_path, attempts=2).solve(_task("other"))
        assert len(server.requests) == 4  # the failed one was asked again: nothing was cached


def test_token_budget_stops_before_the_next_request(tmp_path):
    with ScriptedServer([WRONG, RIGHT]) as server:
        with pytest.raises(LLMLimitError, match=r"LLM token budget exhausted before a request for "
                                                r"affine at m.py:3: 1,200 of 1,000 tokens used "
                                                r"\(--llm-max-tokens\)"):
            _session(server, tmp_path, max_tokens=1000).solve(_task())
        assert len(server.requests) == 1


def test_cost_budget_uses_litellm_prices(tmp_path):
    # gpt-4o-mini is in litellm's local price map: 1000 prompt + 200 completion tokens = $0.00027
    with ScriptedServer([WRONG, RIGHT]) as server:
        with pytest.raises(LLMLimitError, match=r"LLM cost budget exhausted .*: \$0\.0003 of \$0\.0002 "
                                                r"spent \(--llm-max-cost\)"):
            _session(server, tmp_path, model="openai/gpt-4o-mini", max_cost=0.0002).solve(_task())
        assert len(server.requests) == 1
    with ScriptedServer([RIGHT]) as server:
        out = _session(server, tmp_path, model="openai/gpt-4o-mini").solve(_task("priced"))
    assert out.cost == pytest.approx(1000 * 0.15e-6 + 200 * 0.6e-6)


def test_response_size_cap(tmp_path):
    big = RIGHT + "#" * 5000
    with ScriptedServer([big]) as server:
        with pytest.raises(LLMLimitError, match=r"LLM response for affine at m.py:3 has 5,\d\d\d characters, "
                                                r"over the limit of 4,000 \(--llm-max-response\)"):
            _session(server, tmp_path, max_response=4000).solve(_task())


def test_request_timeout(tmp_path):
    with ScriptedServer([("sleep", 5)]) as server:
        cfg = LLMConfig.resolve("openai/local-model", api_base=server.url, transcript_dir=str(tmp_path),
                                timeout=1)
        with pytest.raises(LLMLimitError, match=r"timed out after 1 s \(--llm-timeout\)"):
            Session(cfg, "m.py").solve(_task())


def test_extract_and_signature_diagnostics():
    assert extract("text\n```loop\nkernel a(x: f32[1] input):\n```\nmore") == "kernel a(x: f32[1] input):\n"
    with pytest.raises(Rejected, match="no fenced ```loop code block"):
        extract("I cannot do that.")
    local = RIGHT.replace("y: f32[4] output):\n", "):\n    local y: f32[4]\n").replace(", )", ")")
    for text, msg in [
        (RIGHT.replace("y: f32[4] output", "y: f32[5] output"),
         "signature mismatch: parameter 'y: f32[5] output' must be 'y: f32[4] output'"),
        (RIGHT.replace("x: f32[4] input", "x: f32[4] input, z: f32[4] input"),
         "signature mismatch: unexpected parameter 'z: f32[4] input'"),
        (local, "signature mismatch: parameter 'y: f32[4] output' is declared local"),
        (RIGHT.replace("x[i] +", "x[i + 1] +"),
         "verifier: response:3:9: index 0 of 'x' (i + 1) leaves the range [0, 4) in the statement "
         "writing 'y'"),
    ]:
        with pytest.raises(Rejected) as e:
            check_response(text, PARAMS, [SAMPLE])
        assert msg in str(e.value)


def test_no_model_configured_says_how(monkeypatch):
    monkeypatch.delenv("SOLAR_LLM_MODEL", raising=False)
    cfg = LLMConfig.resolve("")
    with pytest.raises(LLMError, match=r"m.py:3: no template for x; an LLM can translate it, but no model "
                                       r"is configured: configure a model with --llm-model MODEL .* "
                                       r"SOLAR_LLM_MODEL") as info:
        cfg.require("m.py:3: no template for x", "unsupported op")
    assert info.value.error_class == "unsupported op"  # the class of the failure that needs a model
    monkeypatch.setenv("SOLAR_LLM_MODEL", "openai/gpt-4o-mini")
    assert LLMConfig.resolve("").model == "openai/gpt-4o-mini"
    assert LLMConfig.resolve("ollama/qwen").model == "ollama/qwen"
