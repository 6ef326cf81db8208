"""The run report's view of a context search (coevo.mode context or both): how the
skill library's inclusion probabilities and slot choices moved over the generations,
where each skill came from, and what the best member of each generation played.

Everything is read from history.json: its meta holds the library and the initial
logits, every generation record the members' draws and the logits after the update.
"""
from __future__ import annotations

import math
from html import escape

import numpy as np

from .load import RunData
from .plots import Plot, _figure, _int_ticks, _png


def _probs(logits: dict) -> dict[str, float]:
    """Skill name -> inclusion probability; 'slot = alternative k' -> its choice probability."""
    out = {name: 1.0 / (1.0 + math.exp(-x)) for name, x in (logits.get("skills") or {}).items()}
    for slot, xs in (logits.get("slots") or {}).items():
        e = np.exp(np.asarray(xs, dtype=float) - max(xs))
        for k, p in enumerate(e / e.sum()):
            out[f"{slot} = alternative {k}"] = float(p)
    return out


def trajectory(run: RunData) -> list[tuple[int, dict[str, float]]]:
    """(generations done, probabilities) from the initial logits through every recorded update."""
    ctx = run.meta.get("context") if isinstance(run.meta, dict) else None
    if not isinstance(ctx, dict) or "initial_logits" not in ctx:
        return []
    points = [(0, _probs(ctx["initial_logits"]))]
    for rec in run.records:
        logits = (rec.get("context") or {}).get("logits")
        if isinstance(logits, dict):
            points.append((int(rec.get("generation", len(points) - 1)) + 1, _probs(logits)))
    return points


def context_plot(run: RunData) -> Plot | None:
    """Inclusion / choice probabilities over generations; None for a run without a context search."""
    points = trajectory(run)
    if not points:
        return None
    title = "Context search: skill inclusion and slot choice probabilities"
    if len(points) == 1:
        return Plot("context", title, None, "no generation recorded yet")
    fig, (ax,) = _figure(width=8.5)
    for name in points[0][1]:
        ax.plot([g for g, _ in points], [p.get(name, float("nan")) for _, p in points], marker=".", label=name)
    ax.set_xlabel("generations done")
    ax.set_ylabel("probability")
    ax.set_ylim(-0.02, 1.02)
    _int_ticks(ax)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return Plot("context", title, _png(fig))


def _best_rows(run: RunData) -> list[str]:
    rows = []
    for rec in run.records:
        draws = (rec.get("context") or {}).get("draws") or []
        rewards = rec.get("rewards") or []
        scored = [(r, k) for k, r in enumerate(rewards) if isinstance(r, (int, float)) and k < len(draws)]
        if not scored:
            continue
        reward, k = max(scored)
        draw = draws[k]
        slots = ", ".join(f"{escape(s)} = {i}" for s, i in (draw.get("slots") or {}).items()) or "-"
        skills = ", ".join(escape(s) for s in draw.get("skills") or []) or "(none)"
        rows.append(f"<tr><td>{rec.get('generation')}</td><td>{k}</td><td>{reward:.3g}</td><td>{skills}</td>"
                    f"<td>{slots}</td></tr>")
    return rows


def context_section(run: RunData) -> str:
    """HTML: the library (origin, first and last probability) and each generation's best member's context."""
    points = trajectory(run)
    if not points:
        return ""
    ctx = run.meta["context"]
    lib = ctx.get("library") or {}
    first, last = points[0][1], points[-1][1]
    lines = []
    for skill in lib.get("skills") or []:
        name = skill.get("name", "")
        origin = skill.get("origin") or "the run's config (coevo.skills / coevo.library)"
        lines.append(f"<tr><td>{escape(name)}</td><td>skill</td><td>{first.get(name, float('nan')):.3f}</td>"
                     f"<td>{last.get(name, float('nan')):.3f}</td><td>{escape(str(origin))}</td>"
                     f"<td><pre>{escape(str(skill.get('text', ''))[:400])}</pre></td></tr>")
    for slot, alternatives in (lib.get("slots") or {}).items():
        for k, alt in enumerate(alternatives):
            key = f"{slot} = alternative {k}"
            lines.append(f"<tr><td>{escape(slot)}[{k}]</td><td>slot</td><td>{first.get(key, float('nan')):.3f}</td>"
                         f"<td>{last.get(key, float('nan')):.3f}</td><td>the run's config</td>"
                         f"<td><pre>{escape(str(alt)[:400])}</pre></td></tr>")
    best = _best_rows(run)
    return ('<section id="context"><h2>Context search</h2>'
            f"<p>coevo.mode {escape(str(ctx.get('mode')))}; library hash <code>{escape(str(ctx.get('library_hash'))[:12])}"
            "</code>. Probabilities: at the start and after the last recorded generation.</p>"
            '<table class="turns"><tr><th>name</th><th>kind</th><th>p start</th><th>p now</th><th>origin</th>'
            "<th>text</th></tr>" + "".join(lines) + "</table>"
            "<h3>The best member of each generation played</h3>"
            + ('<table class="turns"><tr><th>generation</th><th>member</th><th>reward</th><th>skills</th>'
               "<th>slots</th></tr>" + "".join(best) + "</table>" if best else "<p>No scored member yet.</p>")
            + "</section>")
