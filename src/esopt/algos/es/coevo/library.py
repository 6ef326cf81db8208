"""The skill library: what a context is assembled from.

Skills are named snippets, each in a member's context or not; slots are named
choices with alternatives, one alternative per member. Slot `system_prompt`
replaces the agent's system prompt (strings), slot `examples` replaces its
few-shot messages (lists of {role, content}), any other slot adds one text
section (strings; an empty string means "nothing here").

Sources, in this order: coevo.skills / coevo.slots inline, then coevo.library,
a YAML file {skills: [{name, text}], slots: {name: [alternatives]}} or a
Markdown file (SKILL.md) whose `## ` sections become skills (the heading is
the name, the section's body the text; front matter and text before the first
`## ` are not skills). A relative path is read from the working directory.
Every problem is a ConfigError of one line naming the skill, slot or file.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from ....config import ConfigError

ROLES = ("system", "user", "assistant")
SPECIAL_SLOTS = ("system_prompt", "examples")


@dataclass(frozen=True)
class Skill:
    name: str
    text: str


@dataclass(frozen=True)
class Slot:
    name: str
    alternatives: tuple  # strings, or (for `examples`) tuples of message dicts

    @property
    def kind(self) -> str:
        return self.name if self.name in SPECIAL_SLOTS else "section"


@dataclass(frozen=True)
class SkillLibrary:
    skills: tuple[Skill, ...]
    slots: tuple[Slot, ...]

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.skills] + [s.name for s in self.slots]

    def to_json(self) -> dict:
        return {"skills": [{"name": s.name, "text": s.text} for s in self.skills],
                "slots": {s.name: [list(a) if isinstance(a, tuple) else a for a in s.alternatives] for s in self.slots}}

    def with_skill(self, skill: Skill) -> "SkillLibrary":
        """This library plus one skill at the end of the skills (its name must be new)."""
        if skill.name in self.names:
            raise ValueError(f"the skill library already has a skill or slot named {skill.name!r}")
        return SkillLibrary(self.skills + (skill,), self.slots)

    @property
    def digest(self) -> str:
        """sha256 of the library's content (names, texts, alternatives, order)."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()

    @classmethod
    def from_json(cls, data: dict, where: str = "the library") -> "SkillLibrary":
        return build_library(data.get("skills") or [], data.get("slots") or {}, where)


def parse_skill_md(text: str, where: str) -> list[dict]:
    """The `## ` sections of a Markdown file as [{name, text}]; headings inside ``` fences don't count."""
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":  # YAML front matter
        end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
        if end is None:
            raise ConfigError(f"{where}: front matter opened with --- on line 1 is never closed")
        lines = lines[end + 1 :]
    skills, current, fenced = [], None, False
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            current = {"name": line[3:].strip(), "text": []}
            skills.append(current)
        elif current is not None:
            current["text"].append(line)
    if not skills:
        raise ConfigError(f"{where} has no '## ' sections: each section of a SKILL.md file becomes one skill")
    return [{"name": s["name"], "text": "\n".join(s["text"]).strip()} for s in skills]


def read_library_file(path: str | Path) -> tuple[list, dict]:
    """(skills, slots) of a library file: YAML, or Markdown (.md) sections."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"coevo.library: {path} does not exist (relative paths are read from {Path.cwd()})")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".md", ".markdown"):
        return parse_skill_md(text, f"coevo.library {path}"), {}
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"coevo.library {path} is not valid YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict) or set(data) - {"skills", "slots"}:
        extra = sorted(set(data) - {"skills", "slots"}) if isinstance(data, dict) else []
        raise ConfigError(f"coevo.library {path} must hold a mapping with 'skills' and/or 'slots'"
                          + (f"; unknown key(s): {', '.join(map(str, extra))}" if extra else ""))
    skills, slots = data.get("skills") or [], data.get("slots") or {}
    if not isinstance(skills, list) or not isinstance(slots, dict):
        raise ConfigError(f"coevo.library {path}: 'skills' must be a list of {{name, text}} and 'slots' a mapping "
                          "of slot name to a list of alternatives")
    return skills, slots


def _messages(alt, where: str) -> tuple:
    if not isinstance(alt, (list, tuple)):
        raise ConfigError(f"{where}: an alternative of slot 'examples' must be a list of {{role, content}} "
                          f"messages (possibly empty), got {type(alt).__name__}")
    out = []
    for m in alt:
        if not isinstance(m, dict) or set(m) != {"role", "content"} or m["role"] not in ROLES \
                or not isinstance(m["content"], str):
            raise ConfigError(f"{where}: slot 'examples' has a message {m!r}; each must be "
                              f"{{role: {'|'.join(ROLES)}, content: text}}")
        out.append({"role": m["role"], "content": m["content"]})
    return tuple(out)


def build_library(skills: list, slots: dict, where: str) -> SkillLibrary:
    """Validate and freeze skills [{name, text}] and slots {name: [alternatives]}."""
    seen: dict[str, str] = {}

    def claim(name, what: str) -> str:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{where}: a {what} has an empty or missing name")
        name = name.strip()
        if name in seen:
            raise ConfigError(f"{where}: the name {name!r} is used twice ({seen[name]} and {what}); names must be unique")
        seen[name] = what
        return name

    out_skills = []
    for s in skills:
        if hasattr(s, "model_dump"):
            s = s.model_dump()
        if not isinstance(s, dict) or set(s) != {"name", "text"}:
            raise ConfigError(f"{where}: a skill must be {{name, text}}, got {s!r}")
        name = claim(s["name"], "skill")
        if not isinstance(s["text"], str) or not s["text"].strip():
            raise ConfigError(f"{where}: skill {name!r} has empty text")
        out_skills.append(Skill(name, s["text"].strip()))
    out_slots = []
    for name, alts in slots.items():
        name = claim(name, "slot")
        if not isinstance(alts, list) or not alts:
            raise ConfigError(f"{where}: slot {name!r} needs a non-empty list of alternatives")
        if name == "examples":
            frozen = tuple(_messages(a, f"{where}, slot 'examples'") for a in alts)
        else:
            bad = [a for a in alts if not isinstance(a, str)]
            if bad:
                raise ConfigError(f"{where}: slot {name!r} holds {bad[0]!r}; its alternatives must be strings "
                                  "(only slot 'examples' takes message lists)")
            frozen = tuple(a.strip() for a in alts)
        if len({json.dumps(a, sort_keys=True) for a in frozen}) != len(frozen):
            raise ConfigError(f"{where}: slot {name!r} lists the same alternative twice")
        out_slots.append(Slot(name, frozen))
    return SkillLibrary(tuple(out_skills), tuple(out_slots))


def load_library(coevo_cfg) -> SkillLibrary:
    """The library of a coevo config: inline skills and slots, then the file's (names unique across both)."""
    skills = [s.model_dump() if hasattr(s, "model_dump") else s for s in coevo_cfg.skills]
    slots = dict(coevo_cfg.slots)
    where = "coevo"
    if coevo_cfg.library:
        file_skills, file_slots = read_library_file(coevo_cfg.library)
        clash = sorted(set(file_slots) & set(slots))
        if clash:
            raise ConfigError(f"coevo: slot {clash[0]!r} is defined both inline and in {coevo_cfg.library}")
        skills, slots = skills + list(file_skills), {**slots, **file_slots}
        where = f"coevo (with {coevo_cfg.library})"
    lib = build_library(skills, slots, where)
    grows = bool(getattr(getattr(coevo_cfg, "grow", None), "every", 0))
    if not lib.skills and not lib.slots and not grows:
        raise ConfigError(f"{where}: the skill library is empty (no skills, no slots)")
    return lib
