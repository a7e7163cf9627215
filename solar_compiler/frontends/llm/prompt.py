"""The prompt: a versioned template file (`prompt_v<N>.md`) with named sections and `{{field}}`s.

The text lives in one file so that a change of wording is a change of version: the cache key of a
translation includes `PROMPT_VERSION`, and transcripts record it. Rendering is plain substitution
(no format strings, no evaluation).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

PROMPT_VERSION = "2"
_FILE = f"prompt_v{PROMPT_VERSION}.md"
_SECTION = re.compile(r"^<<<section (\w+)>>>\n", re.MULTILINE)
_FIELD = re.compile(r"\{\{(\w+)\}\}")


@cache
def sections() -> dict[str, str]:
    text = resources.files("solar_compiler.frontends.llm").joinpath(_FILE).read_text()
    parts = _SECTION.split(text)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def render(section: str, **fields: str) -> str:
    """The section with every `{{name}}` replaced; a missing field is a programming error."""
    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in fields:
            raise KeyError(f"prompt section '{section}' needs field '{m.group(1)}'")
        return fields[m.group(1)]

    return _FIELD.sub(sub, sections()[section])


def messages(task_text: str, rejected: tuple[int, str, str] | None = None) -> list[dict[str, str]]:
    """The request of one attempt: the system text, then the grammar, examples and the task, and
    for a repair `rejected` = (attempt, previous response, diagnostic) after them. Every request is
    self-contained: a stateless model (or a person pasting it into a fresh chat) sees the original
    task, its previous answer and why it was rejected, with no conversation to continue."""
    user = render("grammar") + "\n" + task_text.strip()
    if rejected is not None:
        user += "\n\n" + repair_message(*rejected)
    return [{"role": "system", "content": render("system").strip()}, {"role": "user", "content": user}]


def repair_message(attempt: int, response: str, diagnostic: str) -> str:
    """The rejected answer (its loop block, else the whole response with its fences defused) and
    the diagnostic."""
    from .check import Rejected, extract

    try:
        answer = extract(response).rstrip()
    except Rejected:
        answer = response.strip().replace("`", "'")
    return render("repair", attempt=str(attempt), answer=answer, diagnostic=diagnostic).strip()
