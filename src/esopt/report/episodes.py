"""The trajectory viewer: the best and the worst episode of each generation
(training and held-out), drawn turn by turn by the environment's renderer
(``esopt.envs.register_renderer``), or as a plain turn table without one.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from html import escape

from ..envs import renderer_for
from .load import RunData, read_jsonl

MAX_VIEWS = 40  # generations offered in the viewer (evenly spaced beyond that: the page stays small)
MAX_TEXT = 600

FALLBACK_CSS = """
.turns{border-collapse:collapse;font-size:13px}.turns td,.turns th{border:1px solid #ccc;padding:.2em .4em;
vertical-align:top;text-align:left}.turns pre{white-space:pre-wrap;margin:0;max-width:40em}
"""


@dataclass
class Viewer:
    html: str
    css: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _clip(text, limit: int = MAX_TEXT) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[:limit] + f" ... ({len(text) - limit} more characters)"


def pick(episodes: list[dict]) -> list[tuple[str, dict]]:
    """[("best", ep), ("worst", ep)]: the first highest and the last lowest reward (one entry if one episode)."""
    scored = [e for e in episodes if _num(e.get("reward"))]
    if not scored:
        return [("unscored", episodes[0])] if episodes else []
    best = max(scored, key=lambda e: e["reward"])
    worst = min(reversed(scored), key=lambda e: e["reward"])
    return [("only", best)] if best is worst else [("best", best), ("worst", worst)]


def turns_of(episode: dict) -> list[dict]:
    """The episode's turns as dicts, whatever a damaged record holds (a turn that is not an
    object is shown as its text)."""
    turns = episode.get("turns")
    if not isinstance(turns, list):
        return []
    return [t if isinstance(t, dict) else {"response": t} for t in turns]


def turn_table(episode: dict) -> str:
    """Fallback view: one table row per turn (reply, parsed action, feedback, reward); a tool turn shows its
    calls as the action and their results (or errors) as the feedback."""
    rows = []
    for k, t in enumerate(turns_of(episode), 1):
        action, feedback = t.get("action"), t.get("feedback")
        calls = t.get("tool_calls") if isinstance(t.get("tool_calls"), list) else None
        if calls:
            action = [f"{c.get('name')}({json.dumps(c.get('arguments'))})" for c in calls if isinstance(c, dict)]
            feedback = "\n".join(str(c.get("result", f"error: {c.get('error')}")) for c in calls if isinstance(c, dict))
        rows.append(f"<tr><td>{k}</td><td><pre>{escape(_clip(t.get('response')))}</pre></td>"
                    f"<td>{escape('none' if action is None else json.dumps(action))}</td>"
                    f"<td><pre>{escape(_clip(feedback))}</pre></td><td>{escape(str(t.get('reward')))}</td></tr>")
    if not rows:
        return "<p>No turn was played.</p>"
    return ('<table class="turns"><tr><th>turn</th><th>reply</th><th>action</th><th>feedback</th><th>reward</th></tr>'
            + "".join(rows) + "</table>")


def render_episode(env_id: str, role: str, episode: dict, notes: list[str]) -> str:
    reward = episode.get("reward")
    head = [f"<b>{escape(role)}</b>", f"reward {reward:.3g}" if _num(reward) else f"reward {escape(str(reward))}",
            f"solved {'yes' if episode.get('solved') else 'no'}", f"{len(turns_of(episode))} turn(s)"]
    for k in ("member", "group"):
        if k in episode:
            head.append(f"{k} {escape(str(episode[k]))}")
    head.append(f"task <code>{escape(_clip(episode.get('task'), 100))}</code>")
    body = None
    renderer = renderer_for(env_id)
    if renderer is not None:
        try:
            body = renderer(episode)
        except Exception as err:  # a renderer bug must not lose the page: fall back, say so
            msg = f"the {env_id} renderer failed ({type(err).__name__}: {err}); plain turn table shown"
            if msg not in notes:
                notes.append(msg)
    if body is None:
        body = turn_table(episode)
    parts = [f'<div class="episode"><div class="ep-head">{" · ".join(head)}</div>',
             f"<details><summary>first observation</summary><pre>{escape(_clip(episode.get('observation0'), 4000))}"
             "</pre></details>", body]
    if episode.get("error"):
        parts.append(f'<details open><summary class="bad">error</summary><pre>{escape(_clip(episode["error"], 4000))}'
                     "</pre></details>")
    parts.append("</div>")
    return "".join(parts)


def _spread(items: list, limit: int) -> list:
    if len(items) <= limit:
        return items
    idx = sorted({round(i * (len(items) - 1) / (limit - 1)) for i in range(limit)})
    return [items[i] for i in idx]


def viewer(run: RunData) -> Viewer:
    notes: list[str] = []
    entries = [(g, 0, p) for g, p in run.eval_traj.items()] + [(g, 1, p) for g, p in run.train_traj.items()]
    entries.sort(key=lambda e: (e[0], e[1]))
    if not entries:
        return Viewer('<p class="missing">No recorded episodes (no trajectories/*.jsonl file).</p>')
    shown = _spread(entries, MAX_VIEWS)
    if len(shown) < len(entries):
        notes.append(f"the trajectory viewer offers {len(shown)} of {len(entries)} episode files, evenly spaced "
                     "(first and last included)")
    options, views = [], []
    for g, is_train, path in shown:
        key = f"{'train' if is_train else 'eval'}-{g}"
        # training files are numbered from 0 (gen0000.jsonl: the first generation), shown from 1 as on the plots
        label = f"generation {g + 1} (training)" if is_train else f"held-out, after {g} generation(s)"
        episodes, bad = read_jsonl(path)
        chosen = pick(episodes)
        inner = [f"<p>{len(episodes)} episode(s) in <code>trajectories/{escape(path.name)}</code>"
                 + (f"; {bad} unreadable line(s) skipped" if bad else "") + "</p>"]
        if not chosen:
            inner.append('<p class="missing">No readable episode in this file.</p>')
        elif len({repr(e.get("reward")) for e in episodes}) == 1 and len(episodes) > 1:
            inner.append(f"<p>All {len(episodes)} episodes have reward {escape(str(episodes[0].get('reward')))}.</p>")
        inner += [render_episode(run.env_id, role, ep, notes) for role, ep in chosen]
        options.append(f'<option value="{key}">{escape(label)}</option>')
        views.append(f'<div class="traj-view" data-key="{key}"><h3>{escape(label)}</h3>{"".join(inner)}</div>')
    options[-1] = options[-1].replace("<option ", "<option selected ", 1)
    html = ('<label for="traj-select">Episodes of </label><select id="traj-select">' + "".join(options)
            + "</select>" + "".join(views))
    renderer = renderer_for(run.env_id)
    css = [FALLBACK_CSS] + ([getattr(renderer, "css")] if isinstance(getattr(renderer, "css", None), str) else [])
    return Viewer(html, css, notes)
