"""From a draw to what the agent sees: an AgentContext, and the chosen skills as a SKILL.md.

The system prompt is the `system_prompt` slot's alternative (or the agent's own prompt), then,
when the draw includes any, a `# Skills` section holding one `## name` subsection per included
skill (library order) and per non-empty alternative of the other text slots (slot order). The
`examples` slot's alternative replaces the agent's few-shot messages. A draw with no skills and
no text-slot sections leaves the prompt exactly as the chosen (or configured) one.
"""
from __future__ import annotations

import dataclasses

from ....agent.rollout import AgentContext
from ....agent.skill import skill_md as skill_file
from .genome import Draw
from .library import SkillLibrary

SKILLS_HEADING = "# Skills"


def sections(lib: SkillLibrary, draw: Draw) -> list[tuple[str, str]]:
    """(name, text) of every included skill, then every text slot's non-empty choice."""
    out = [(s.name, s.text) for s, x in zip(lib.skills, draw.skills) if x]
    out += [(s.name, s.alternatives[i]) for s, i in zip(lib.slots, draw.slots)
            if s.kind == "section" and s.alternatives[i]]
    return out


def render_sections(parts: list[tuple[str, str]]) -> str:
    return "\n\n".join(f"## {name}\n{text}" for name, text in parts)


def chosen(base: AgentContext, lib: SkillLibrary, draw: Draw) -> tuple[str, tuple]:
    """(system prompt, examples) after the `system_prompt` and `examples` slots, before skills."""
    prompt, examples = base.system_prompt, base.examples
    for slot, i in zip(lib.slots, draw.slots):
        if slot.kind == "system_prompt":
            prompt = slot.alternatives[i]
        elif slot.kind == "examples":
            examples = tuple(dict(m) for m in slot.alternatives[i])
    return prompt, examples


def assemble(base: AgentContext, lib: SkillLibrary, draw: Draw) -> AgentContext:
    prompt, examples = chosen(base, lib, draw)
    parts = sections(lib, draw)
    if parts:
        block = f"{SKILLS_HEADING}\n\n{render_sections(parts)}"
        prompt = f"{prompt}\n\n{block}" if prompt else block
    return dataclasses.replace(base, system_prompt=prompt, examples=tuple(examples))


def skill_md(lib: SkillLibrary, draw: Draw, base: AgentContext, name: str, description: str) -> str:
    """The draw as a SKILL.md file: front matter, the chosen system prompt, one ## section per part."""
    prompt, _ = chosen(base, lib, draw)
    return skill_file(name, description, prompt, sections(lib, draw))
