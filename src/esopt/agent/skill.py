"""An agent's context as a SKILL.md file (front matter, the system prompt, one ## section per
part): what exports of context runs (ES with co-evolution) and GEPA runs write beside the weights."""
from __future__ import annotations


def skill_md(name: str, description: str, prompt: str, parts: list[tuple[str, str]]) -> str:
    head = f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n"
    body = f"\n{prompt}\n" if prompt else ""
    return head + body + "".join(f"\n## {title}\n{text}\n" for title, text in parts)
