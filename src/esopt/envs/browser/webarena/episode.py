"""What a WebArena-format task reads off an episode: the agent's answer and pages that left the sites.

Shared by the local shop (esopt.envs.browser.webshop.task) and WebArena-format tasks
(:mod:`esopt.envs.browser.webarena.task`). Needs no browser package: a page is
anything with ``url``, ``goto``, ``close`` and ``context.pages``.
"""
from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

HARMLESS = ("about:blank", "chrome-error://chromewebdata/")  # pages an aborted or new-tab navigation shows


def final_answer(chat_messages, infeasible: str | None = None) -> str | None:
    """The agent's last message to the user after the goal was given, or None.

    With ``infeasible`` set, a ``report_infeasible`` message (role
    ``infeasible``) counts as that answer (WebArena reads it as ``N/A``).
    """
    seen_goal, answer = False, None
    for message in chat_messages:
        role = message.get("role")
        if role == "user":
            seen_goal = True
        elif role == "assistant" and seen_goal:
            answer = message.get("message", "")
        elif role == "infeasible" and seen_goal and infeasible is not None:
            answer = infeasible
    return answer


def http_on(netlocs) -> Callable[[str], bool]:
    """A URL test: http(s) on one of ``netlocs`` (host:port as in the URL); any http(s) URL if None."""
    wanted = None if netlocs is None else {n.lower() for n in netlocs}

    def allowed(url: str) -> bool:
        parts = urlsplit(url)
        return parts.scheme in ("http", "https") and (wanted is None or parts.netloc.lower() in wanted)

    return allowed


def leave_foreign_pages(page, allowed: Callable[[str], bool]) -> list[str]:
    """URLs of the context's open pages that are neither ``allowed`` nor harmless; each is blanked (or closed).

    Requests the route guard aborts end on Chromium's error page, which is
    harmless; what routing cannot stop (``data:``, ``chrome:`` pages) is caught here.
    """
    left = []
    for other in page.context.pages:
        if allowed(other.url) or other.url in HARMLESS:
            continue
        left.append(other.url[:200])
        try:
            other.goto("about:blank")
        except Exception:  # noqa: BLE001 - a page that cannot navigate is closed instead
            other.close()
    return left
