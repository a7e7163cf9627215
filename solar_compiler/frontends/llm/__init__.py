"""The LLM frontend: source programs (or single ops) translated into loop IR by a language model,
through litellm, and accepted only when the translation is proven by execution.

- `frontend.py`: the whole program through the LLM (`--frontend=llm`, and `auto` when capture fails)
- `ops.py`: per-op fill-in inside the torch translation, where an op has no template
- `session.py`: the repair loop, budgets, JSON-lines transcript, cache of validated translations
- `check.py`: a response -> parsed, verified, signature-checked, executed and compared kernel
- `providers.py`: litellm, `manual` (prompt files, exit 3), `--llm-replay`
- `prompt_v2.md`, `prompt.py`: the versioned prompt template

LLM output is data: it is only ever parsed by the loop-IR grammar, verified, and run by the NumPy
executor. Nothing in this package imports litellm at import time.
"""
