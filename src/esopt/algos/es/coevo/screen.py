"""Screening a proposer's reply before the gate: a reply becomes a candidate skill only if it is
well formed and new. Each rejection names its reason (the first that applies, in this order):

    empty           nothing but whitespace
    truncated       the proposer hit its token limit (the skill may be cut mid-sentence)
    reasoning       a reasoning trace ("<think>", "Let me think", "I need to", ...) instead of a skill
    format          no `NAME:` line followed by a `SKILL:` line (algos/es/coevo/proposal.py FORMAT), or either empty
    over length     the skill text is longer than coevo.grow.max_chars, or the name longer than NAME_CHARS
    copies the task most of the skill is text the agent already sees: an episode's observation, the
                    agent's system prompt or examples, or the prompt's format example
    duplicate       nearly the same text as a skill already in the library (or admitted earlier)

Text overlap is measured on normalised text (lower case, runs of whitespace as one space):
`covered` is the share of the skill's characters inside blocks of at least COPY_BLOCK characters
that also appear, in order, in the other text (difflib's matching blocks). A skill is a copy
when covered >= COPY_SHARE, a duplicate of a skill when covered >= DUPLICATE_SHARE in either
direction or their similarity ratio is >= DUPLICATE_SHARE.
"""
from __future__ import annotations

import re
from difflib import SequenceMatcher

NAME_CHARS = 48
COPY_BLOCK = 12  # shorter common runs are ordinary words and phrases, not copying
COPY_SHARE = 0.6  # more than this share of the skill is found verbatim in text the agent already sees
DUPLICATE_SHARE = 0.8

REASONING = re.compile(
    r"<\s*/?\s*think\s*>|\blet me\b|\blet's (?:think|see|analy[sz]e|break|figure|look)\b|\bi(?: think| need to| will|"
    r" should| must| am going to|'ll|'m going to)\b|\bhmm+\b|^\s*(?:okay|ok|wait|so|alright)\b[,.!]|\bfirst, i\b|"
    r"\bthinking process\b", re.IGNORECASE | re.MULTILINE)
_KEY = re.compile(r"^[\s>*#_`-]*(name|skill)[\s*_`]*:[\s*_`]*(.*)$", re.IGNORECASE)


def normalise(text: str) -> str:
    return " ".join(str(text).lower().split())


def covered(part: str, whole: str) -> float:
    """Share of `part`'s characters in blocks of >= COPY_BLOCK characters that `whole` also holds, in order."""
    a, b = normalise(part), normalise(whole)
    if not a or not b:
        return 0.0
    blocks = SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()
    return sum(m.size for m in blocks if m.size >= COPY_BLOCK) / len(a)


def similarity(a: str, b: str) -> float:
    return SequenceMatcher(None, normalise(a), normalise(b), autojunk=False).ratio()


def parse(text: str) -> tuple[str, str] | None:
    """(name, skill text) of a reply in the NAME / SKILL format; None if it is not in it. Text before
    the NAME line is ignored; the skill runs from its SKILL line to the next blank or NAME/SKILL line."""
    name, skill, in_skill = None, None, False
    for line in text.splitlines():
        m = _KEY.match(line)
        if m and m.group(1).lower() == "name" and name is None:
            name = m.group(2).strip(" *_`\"'#.")
            in_skill = False
        elif m and m.group(1).lower() == "skill" and name is not None and skill is None:
            skill = [m.group(2).strip(" *_`")]
            in_skill = True
        elif in_skill:
            if not line.strip() or m:
                in_skill = False
            else:
                skill.append(line.strip())
    if not name or skill is None or not " ".join(skill).strip():
        return None
    return name, " ".join(s for s in skill if s).strip()


def screen(reply, known_texts: list[str], skills: list[tuple[str, str]], max_chars: int,
           reference: list[str] = ()) -> tuple[tuple[str, str] | None, str]:
    """((name, text), "ok") for a well-formed new skill, else (None, reason).

    known_texts: what the agent already sees (observations shown to the proposer, system prompt,
    examples); skills: (name, text) of the library's skills and those admitted earlier in this
    step; reference: other texts the proposer was shown that a skill must not copy (the format
    example)."""
    text = reply.text
    if not text.strip():
        return None, "empty: the proposer replied with nothing"
    if reply.truncated:
        return None, "truncated: the proposer hit its token limit (coevo.grow.max_new_tokens)"
    m = REASONING.search(text)
    if m:
        return None, f"reasoning: a reasoning trace ({m.group(0).strip()!r}) instead of a skill"
    parsed = parse(text)
    if parsed is None:
        return None, "format: no 'NAME: ...' line followed by a 'SKILL: ...' line"
    name, body = parsed
    if len(body) > max_chars:
        return None, f"over length: the skill has {len(body)} characters (coevo.grow.max_chars={max_chars})"
    if len(name) > NAME_CHARS:
        return None, f"over length: the name has {len(name)} characters (at most {NAME_CHARS})"
    for where, other in [("the task", t) for t in known_texts] + [("the prompt's example", t) for t in reference]:
        share = covered(body, other)
        if share >= COPY_SHARE:
            return None, f"copies {where}: {share:.0%} of the skill is verbatim text the agent already sees"
    for other_name, other in skills:
        sim = max(similarity(body, other), covered(body, other), covered(other, body))
        if sim >= DUPLICATE_SHARE:
            return None, f"duplicate: {sim:.0%} like skill {other_name!r}"
    return (name, body), "ok"
