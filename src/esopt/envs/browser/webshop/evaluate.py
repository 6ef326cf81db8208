"""Scoring a WebArena-format task against the agent's answer, the page URL, page HTML and the database.

Eval types (``eval.eval_types``; a task passes only if every listed type passes):

``string_match``
    The agent's answer (its last message to the user) against
    ``reference_answers``: ``exact_match`` (one string: equal after
    normalisation) and/or ``must_include`` (a list: each item occurs in the
    answer after normalisation, as a whole word or number, so ``7`` does not
    match ``17`` or ``7.5``). Normalisation: Unicode NFKC, case-folded,
    whitespace collapsed, surrounding quotes and a final full stop dropped.
``url_match``
    The page's URL against ``reference_url`` (``__SHOP__`` is the site's base
    URL): same host and port, same path, and the same query parameters
    ignoring order and parameters with empty values.
``program_html``
    For each ``{url, locator, required_contents}`` in ``program_html``: fetch
    ``url`` (``last`` = the page's current URL) from the site, take the text of
    the elements matching the CSS ``locator`` (:mod:`htmlquery`; empty = the
    whole body), joined by newlines, and check ``required_contents``
    (``exact_match`` or ``must_include``, as for string_match).
``db_match`` (esopt's own)
    For each ``{sql, params, expected}`` in ``eval.db_match``: the rows of the
    read-only query must equal ``expected`` (a list of rows, in order); text
    values are compared after normalisation, numbers as numbers (JSON
    ``true``/``false`` count as 1/0, as SQLite stores them); a number never
    equals a text.

The text and URL checks (``normalise``, ``includes``, ``check_contents``,
``url_matches``) live in :mod:`esopt.envs.browser.webarena.scoring`, shared with
WebArena-format tasks on sites you host; the shop uses ``url_match``'s
``exact`` rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from esopt.envs.browser.webarena.scoring import Outcome, check_contents, includes, normalise, url_matches
from esopt.envs.browser.webshop.htmlquery import select_texts

__all__ = ["EVAL_TYPES", "Outcome", "PLACEHOLDER", "STATE_TYPES", "check_contents", "evaluate", "fill_url",
           "includes", "normalise", "rows_match", "url_matches"]

PLACEHOLDER = "__SHOP__"
EVAL_TYPES = ("string_match", "url_match", "program_html", "db_match")
STATE_TYPES = ("url_match", "program_html", "db_match")  # judged from the site, not from the answer


def fill_url(url: str, base_url: str) -> str:
    return url.replace(PLACEHOLDER, base_url.rstrip("/"))


def _same_value(got, want) -> bool:
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return abs(got - want) < 1e-9
    if isinstance(want, str) and isinstance(got, str):
        return normalise(got) == normalise(want)
    return got == want


def rows_match(rows: Sequence[Sequence], expected: Sequence[Sequence]) -> bool:
    if len(rows) != len(expected):
        return False
    return all(len(r) == len(e) and all(_same_value(g, w) for g, w in zip(r, e)) for r, e in zip(rows, expected))


def evaluate(task: dict, *, answer: str | None, url: str, base_url: str,
             fetch: Callable[[str], str], db_query: Callable[[str, Sequence], list[tuple]],
             types: Sequence[str] | None = None) -> Outcome:
    """Score ``task`` (a task dict); ``types`` limits the check to some of its eval types.

    ``answer`` is the agent's final message (None: no answer, so string_match
    fails), ``url`` the page's current URL, ``fetch(url) -> html`` reads a site
    page, ``db_query(sql, params) -> rows`` reads the database.
    """
    spec = task["eval"]
    checks: dict[str, bool] = {}
    for kind in types or spec["eval_types"]:
        if kind == "string_match":
            checks[kind] = answer is not None and check_contents(answer, spec["reference_answers"])
        elif kind == "url_match":
            checks[kind] = url_matches(url, fill_url(spec["reference_url"], base_url), rule="exact")
        elif kind == "program_html":
            ok = True
            for item in spec["program_html"]:
                target = url if item["url"] == "last" else fill_url(item["url"], base_url)
                text = "\n".join(select_texts(fetch(target), item.get("locator", "")))
                ok = ok and check_contents(text, item["required_contents"])
            checks[kind] = ok
        elif kind == "db_match":
            checks[kind] = all(rows_match(db_query(item["sql"], item.get("params", [])), item["expected"])
                               for item in spec["db_match"])
        else:
            raise ValueError(f"task {task.get('task_id')}: unknown eval type {kind!r}; known: {', '.join(EVAL_TYPES)}")
    return Outcome(1.0 if checks and all(checks.values()) else 0.0, checks)
