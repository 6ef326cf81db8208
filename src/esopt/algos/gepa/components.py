"""The agent's context as GEPA's candidate: a dict of named texts, and back.

Components: `system_prompt`, and one `example_<i>_<role>` per few-shot message of
agent.examples (the worked example's user turn and assistant reply, for instance). A
candidate replaces the texts it names; everything else of the AgentContext (history,
window, the messages' roles and order) stays the configured one.
"""
from __future__ import annotations

import dataclasses
import re

from ...agent.rollout import AgentContext
from ...config import ConfigError

_EXAMPLE = re.compile(r"example_(\d+)_([a-z]+)")


def component_names(base: AgentContext) -> list[str]:
    return ["system_prompt"] + [f"example_{i}_{m.get('role', 'user')}" for i, m in enumerate(base.examples)]


def choose(base: AgentContext, wanted: list[str] | None, name: str = "--components") -> list[str]:
    """The components to optimise: `wanted` (checked against what the context has), default all.
    name: how the caller spells the option in an error."""
    names = component_names(base)
    if not wanted:
        return names
    unknown = [w for w in wanted if w not in names]
    if unknown:
        raise ConfigError(f"{name}: {', '.join(unknown)} not in this config's context; "
                          f"available: {', '.join(names)}")
    return [n for n in names if n in wanted]


def seed_candidate(base: AgentContext, names: list[str]) -> dict[str, str]:
    """The configured context's texts of `names`."""
    out = {}
    for name in names:
        if name == "system_prompt":
            out[name] = base.system_prompt
        else:
            out[name] = str(base.examples[_index(name)].get("content", ""))
    return out


def apply(base: AgentContext, candidate: dict[str, str]) -> AgentContext:
    """The context with `candidate`'s texts in place of the configured ones."""
    prompt = candidate.get("system_prompt", base.system_prompt)
    examples = [dict(m) for m in base.examples]
    for name, text in candidate.items():
        if name != "system_prompt":
            examples[_index(name)]["content"] = text
    return dataclasses.replace(base, system_prompt=prompt, examples=tuple(examples))


def _index(name: str) -> int:
    m = _EXAMPLE.fullmatch(name)
    if m is None:
        raise KeyError(f"unknown context component {name!r}")
    return int(m.group(1))
