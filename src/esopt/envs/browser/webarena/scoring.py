"""The text and URL checks of WebArena's task format, shared by the local shop and WebArena-format tasks.

Pure functions, no browser, no network:

``normalise``
    Unicode NFKC, case-folded, whitespace collapsed, surrounding quotes and a
    final full stop dropped.
``check_contents(text, required)``
    A ``reference_answers`` / ``required_contents`` dict: ``exact_match`` (one
    string, equal after normalisation) and/or ``must_include`` (a list: each
    item occurs in ``text`` as a whole word or number, so ``7`` does not match
    ``17`` or ``7.5``; an item ``"a |OR| b"`` passes when either does; a bare
    string counts as one item).
    ``fuzzy_match`` needs an LLM judge and is not handled here
    (:mod:`esopt.envs.browser.webarena.judge`).
``url_matches(url, reference, rule)``
    ``rule="exact"`` (the shop's): same scheme, host, port and path, the same
    non-empty query parameters in any order. ``rule="GOLD in PRED"``
    (WebArena's ``url_note`` and its default): the reference's host and path
    (trailing ``/`` dropped) occur in the URL's, and every query parameter of
    the reference has one of its values in the URL's (extra parameters are
    allowed). A reference ``"u1 |OR| u2"`` passes when either does.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from urllib.parse import parse_qs, parse_qsl, urlsplit

OR = " |OR| "
URL_RULES = ("exact", "GOLD in PRED")


def normalise(text: str) -> str:
    text = " ".join(unicodedata.normalize("NFKC", str(text)).casefold().split())
    previous = None
    while text != previous:  # 'answer'. and "answer." both become answer
        previous = text
        text = text.strip("\"'\u201c\u201d\u2018\u2019` ")
        if text.endswith("."):
            text = text[:-1]
    return text


def includes(text: str, item: str) -> bool:
    """``item`` occurs in ``text`` (both normalised) not glued to a letter, digit or decimal part."""
    item, text = normalise(item), normalise(text)
    if not item:
        return True
    pattern = r"(?<![\w])(?<!\d[.,])" + re.escape(item) + r"(?![\w])(?![.,]\d)"
    return re.search(pattern, text) is not None


def check_contents(text: str, required: dict) -> bool:
    """``exact_match`` and/or ``must_include`` of a ``reference_answers``/``required_contents`` dict."""
    unknown = set(required) - {"exact_match", "must_include"}
    if unknown or not required:
        raise ValueError(f"reference keys must be exact_match and/or must_include, got {sorted(required)}")
    ok = True
    if "exact_match" in required:
        ok = ok and normalise(text) == normalise(required["exact_match"])
    if "must_include" in required:
        items = required["must_include"]
        items = [items] if isinstance(items, str) else items  # a bare string is one item (WebArena task 349)
        if not isinstance(items, list):
            raise ValueError(f"must_include must be a list of strings, got {items!r}")
        ok = ok and all(any(includes(text, alt) for alt in str(item).split(OR)) for item in items)
    return ok


def url_matches(url: str, reference: str, rule: str = "exact") -> bool:
    """Whether the page URL ``url`` matches ``reference`` under ``rule`` (see the module docstring)."""
    if rule not in URL_RULES:
        raise ValueError(f"unknown url_note {rule!r}; known: {', '.join(URL_RULES)}")
    match = _exact if rule == "exact" else _gold_in_pred
    return any(match(url, ref) for ref in reference.split(OR))


def _exact(url: str, reference: str) -> bool:
    got, want = urlsplit(url), urlsplit(reference)
    if (got.scheme, got.netloc) != (want.scheme, want.netloc):
        return False
    if (got.path or "/") != (want.path or "/"):
        return False

    def params(query: str) -> set[tuple[str, str]]:
        return {(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if v != ""}

    return params(got.query) == params(want.query)


def _gold_in_pred(url: str, reference: str) -> bool:
    got, want = urlsplit(url.strip().rstrip("/")), urlsplit(reference.strip().rstrip("/"))
    if (want.netloc + want.path) not in (got.netloc + got.path):
        return False
    have = parse_qs(got.query)
    return all(any(v in have.get(k, []) for v in values) for k, values in parse_qs(want.query).items())


@dataclass
class Outcome:
    """The score of one evaluation: 1.0 when every eval type passed, else 0.0; ``checks`` by type."""

    reward: float
    checks: dict[str, bool] = field(default_factory=dict)
