"""Run-report view of a recorded web episode, turn by turn: the page the agent
saw (an excerpt: URL and the start of the accessibility tree), its reply, the
action that reached the browser (or none, when the reply was not an action),
and the error or feedback that came back.

Registered for ``browsergym`` in ``esopt.envs``. The page a turn saw is the
episode's first observation for turn 1 and the page recorded by the turn before
(``page``, esopt.envs.browser.env.excerpt) after that; a reply that was not an
action leaves the page as it was.
"""
from __future__ import annotations

from html import escape

MAX_CHARS = 600

CSS = """
.web-turns{border-collapse:collapse;font-size:13px;width:100%}
.web-turns td,.web-turns th{border-top:1px solid #ddd;padding:.3em;vertical-align:top;text-align:left}
.web-turns pre{white-space:pre-wrap;margin:0;max-height:14em;overflow:auto;background:#f8f8f8;padding:.2em}
.web-turns .none{color:#c22}.web-turns .err{color:#c22}
"""


def _clip(text, limit: int = MAX_CHARS) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[:limit] + " ..."


def render_web_episode(episode: dict) -> str:
    from .env import excerpt

    page = excerpt(str(episode.get("observation0") or ""))
    rows = []
    for k, turn in enumerate(episode.get("turns") or [], 1):
        action = turn.get("action")
        shown = (f"<code>{escape(str(action))}</code>" if action
                 else '<span class="none">none (not an action)</span>')
        feedback = turn.get("feedback")
        rows.append(f"<tr><td>{k}</td><td><pre>{escape(_clip(page))}</pre></td>"
                    f"<td><pre>{escape(_clip(turn.get('response'), 300))}</pre></td><td>{shown}</td>"
                    f"<td class=\"err\">{escape(_clip(feedback, 300)) if feedback else ''}</td>"
                    f"<td>{escape(str(turn.get('reward')))}</td></tr>")
        if action and turn.get("page") is not None:
            page = turn["page"]
    if not rows:
        return "<p>No turn was played.</p>"
    return ('<table class="web-turns"><tr><th>turn</th><th>page seen (excerpt)</th><th>reply</th><th>action</th>'
            "<th>error / feedback</th><th>reward</th></tr>" + "".join(rows) + "</table>")


render_web_episode.css = CSS
