"""What a reflection produced, described: GEPA takes whatever text its reflection LM returns (its
only check is the minibatch comparison that follows), so a small model's malformed proposals
are evaluated like any other. These flags only describe them, for the record; they gate nothing.
"""
from __future__ import annotations

FENCE = "```"
# phrases of GEPA's default reflection prompt: a reply that repeats them copied the prompt
PROMPT_ECHOES = ("I provided an assistant with the following instructions", "# Example 1",
                 "Your task is to write a new instruction", "## Feedback", "## Generated Outputs")


def flags(raw: str, proposed: str, current: str, truncated: bool = False, max_chars: int = 4000) -> list[str]:
    """Reasons a proposal is malformed (empty list: none found).

    empty: no text proposed; no_code_block: the reply had no ``` block, so GEPA took the whole
    reply; unchanged: the proposal is the current text; truncated: the reply stopped at the token
    limit; over_length: longer than max_chars; prompt_echo: it repeats the reflection prompt;
    task_copy: it holds most of a task board (a copied observation rather than an instruction).
    """
    out = []
    text = proposed.strip()
    if not text:
        out.append("empty")
    if FENCE not in raw:
        out.append("no_code_block")
    if text and text == current.strip():
        out.append("unchanged")
    if truncated:
        out.append("truncated")
    if len(text) > max_chars:
        out.append("over_length")
    if any(p in text for p in PROMPT_ECHOES):
        out.append("prompt_echo")
    if text.count("|") >= 8 or "+---" in text:
        out.append("task_copy")
    return out
