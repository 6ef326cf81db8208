"""Grading a WebArena config (sites already filled in) against the answer and a live browser.

``string_match``
    The answer against ``reference_answers`` (:mod:`scoring`); ``fuzzy_match``
    items ask the judge, one question per item (all must pass); a
    ``fuzzy_match`` of ``"N/A"`` passes an answer of N/A, else asks the judge
    whether the answer gives the reason in ``eval.string_note``.
``url_match``
    The agent's page URL against ``reference_url`` under ``eval.url_note``
    (WebArena's ``GOLD in PRED`` when absent; :func:`scoring.url_matches`).
``program_html``
    For each ``{url, locator, required_contents}``: ``url`` ``last`` reads the
    agent's own page; any other URL (``func:reddit_get_post_url('__last_url__')``
    computed here) is opened in a separate browser context that gets a copy of
    the episode's cookies and storage, so grading never moves the agent's page.
    The locator, a ``document...`` JavaScript expression, is evaluated there
    (empty: the page's HTML); a failing expression reads as empty text. The
    text is checked like an answer; ``fuzzy_match`` asks the judge about the
    references joined by commas.
"""
from __future__ import annotations

from urllib.parse import urlsplit

from .judge import Judge, JudgeError
from .scoring import Outcome, check_contents, normalise, url_matches

GRADING_TIMEOUT_MS = 30_000


def check_text(text: str, required: dict, question: str, judge: Judge | None, joined: bool = False,
               note: str = "") -> bool:
    """``required`` (exact_match / must_include / fuzzy_match) against ``text``; see the module docstring."""
    plain = {k: v for k, v in required.items() if k != "fuzzy_match"}
    if plain and not check_contents(text, plain):
        return False
    if "fuzzy_match" not in required:
        return True
    if judge is None:
        raise JudgeError("fuzzy_match needs an LLM judge: set env.options.web.judge (docs/web.md)")
    fuzzy = required["fuzzy_match"]
    if fuzzy == "N/A":
        return normalise(text) == "n/a" or judge.same_reason(question, note, text)
    if joined:
        return judge.same_answer(question, ", ".join(fuzzy), text)
    return all(judge.same_answer(question, ref, text) for ref in fuzzy)


def post_url(url: str) -> str:
    """A Postmill (WebArena's reddit) post or comment URL cut to its post: ``.../f/<forum>/<id>/``."""
    parts = urlsplit(url)
    segments = parts.path.split("/")
    if len(segments) < 4 or segments[1] != "f":
        return url
    return f"{parts.scheme}://{parts.netloc}/f/{segments[2]}/{segments[3]}/"


def target_url(url: str, last_url: str) -> str:
    """The page a ``program_html`` item reads: ``last``, a URL, or a supported ``func:`` URL."""
    if url == "last":
        return last_url
    if url.startswith("func:reddit_get_post_url("):
        return post_url(last_url)
    if url.startswith("func:"):
        raise ValueError(f"program_html url {url!r} calls a WebArena helper esopt does not run")
    return url


def read_locator(page, locator: str) -> str:
    if not locator.strip():
        return page.content()
    try:
        value = page.evaluate(f"() => {locator}")
    except Exception:  # noqa: BLE001 - WebArena: an expression failing on the page means empty text
        return ""
    return "" if value is None else str(value)


def read_pages(page, items: list[dict], hosts: tuple[str, ...]) -> list[str]:
    """The text each ``program_html`` item reads, in order (see the module docstring)."""
    texts: list[str] = []
    context = None
    try:
        for item in items:
            url = target_url(item["url"], page.url)
            if item["url"] == "last":
                texts.append(read_locator(page, item["locator"]))
                continue
            if context is None:
                context = _grading_context(page, hosts)
            other = context.new_page()
            try:
                other.goto(url, wait_until="load", timeout=GRADING_TIMEOUT_MS)
                texts.append(read_locator(other, item["locator"]))
            except Exception:  # noqa: BLE001 - an unreachable page reads as empty text, as in WebArena
                texts.append("")
            finally:
                other.close()
    finally:
        if context is not None:
            context.close()
    return texts


def _grading_context(page, hosts: tuple[str, ...]):
    """A fresh context in the agent's browser with the episode's cookies and storage, reaching only ``hosts``."""
    context = page.context.browser.new_context(storage_state=page.context.storage_state())
    allowed = {h.lower() for h in hosts}

    def guard(route) -> None:
        parts = urlsplit(route.request.url)
        if parts.scheme in ("http", "https") and (parts.hostname or "").lower() in allowed:
            route.continue_()
        else:
            route.abort("blockedbyclient")

    context.route("**/*", guard)
    return context


def grade(config: dict, *, answer: str | None, page, judge: Judge | None, hosts: tuple[str, ...],
          types=None) -> Outcome:
    """Score ``config`` on eval ``types`` (default: all of its own); ``answer`` None fails string_match."""
    spec = config["eval"]
    question = config["intent"]
    checks: dict[str, bool] = {}
    for kind in types or spec["eval_types"]:
        if kind == "string_match":
            checks[kind] = answer is not None and check_text(answer, spec["reference_answers"], question, judge,
                                                             note=spec.get("string_note", ""))
        elif kind == "url_match":
            checks[kind] = url_matches(page.url, spec["reference_url"], spec.get("url_note") or "GOLD in PRED")
        elif kind == "program_html":
            items = spec["program_html"]
            texts = read_pages(page, items, hosts)
            checks[kind] = all(check_text(text, item["required_contents"], question, judge, joined=True)
                               for text, item in zip(texts, items))
        else:
            raise ValueError(f"task {config.get('task_id')}: unknown eval type {kind!r}")
    return Outcome(1.0 if checks and all(checks.values()) else 0.0, checks)
