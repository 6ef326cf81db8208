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
from .figure import Plot, _figure, _int_ticks, _png


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
    names = list(dict.fromkeys(n for _, p in points for n in p))  # grown skills join where they were admitted
    for name in names:
        ax.plot([g for g, _ in points], [p.get(name, float("nan")) for _, p in points], marker=".", label=name)
    ax.set_xlabel("generations done")
    ax.set_ylabel("probability")
    ax.set_ylim(-0.02, 1.02)
    _int_ticks(ax)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return Plot("context", title, _png(fig))


def _number(generation) -> str:
    """A recorded generation index (from 0) as the report numbers generations: from 1."""
    return str(generation + 1) if isinstance(generation, int) and not isinstance(generation, bool) else str(generation)


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
        rows.append(f"<tr><td>{_number(rec.get('generation'))}</td><td>{k}</td><td>{reward:.3g}</td><td>{skills}</td>"
                    f"<td>{slots}</td></tr>")
    return rows


def _lineage(a: dict) -> str:
    """One line of where a grown skill came from."""
    lin = a.get("lineage") or {}
    gate = lin.get("gate") or {}
    parts = []
    for s in lin.get("sources") or []:
        reward = s.get("reward")
        reward = f"{reward:.3g}" if isinstance(reward, (int, float)) else "?"
        parts.append(f"{s.get('role')} episode (member {s.get('member')}, task {str(s.get('task'))[:24]}, "
                     f"reward {reward})")
    src = "; ".join(parts)
    figures = (f"gate: {gate.get('mean_with', float('nan')):.3g} with, {gate.get('mean_without', float('nan')):.3g} "
               f"without (SE {gate.get('se', float('nan')):.3g}, {gate.get('n')} training tasks)") if gate else ""
    return (f"grown after generation {_number(lin.get('generation'))} by {lin.get('proposer')}; {figures}; "
            f"from {src or 'no recorded episodes'}")


def grown(run: RunData) -> list[tuple[dict, dict]]:
    """(generation record, growth entry) of every growth step recorded, in order."""
    return [(rec, rec["growth"]) for rec in run.records if isinstance(rec.get("growth"), dict)]


def _growth_rows(run: RunData) -> list[str]:
    rows = []
    for rec, growth in grown(run):
        gen = _number(rec.get("generation"))
        if growth.get("skipped") or growth.get("error"):
            rows.append(f"<tr><td>{gen}</td><td>-</td><td>-</td><td>"
                        f"{escape(str(growth.get('skipped') or growth.get('error')))}</td><td></td></tr>")
        for c in growth.get("candidates") or []:
            gate = c.get("gate") or {}
            figures = (f"{gate['mean_with']:.3g} vs {gate['mean_without']:.3g} (SE {gate['se']:.3g}, n {gate['n']})"
                       if gate else "-")
            verdict = c.get("verdict", "")
            reason = c.get("reason") or ""
            rows.append(f"<tr><td>{gen}</td><td>{c.get('candidate')}</td><td><pre>{escape(str(c.get('reply', ''))[:400])}"
                        f"</pre></td><td>{escape(verdict)}{': ' + escape(reason) if reason else ''}</td>"
                        f"<td>{escape(figures)}</td></tr>")
    return rows


def context_section(run: RunData) -> str:
    """HTML: the library (origin, first and last probability), grown skills' lineage, every growth
    step's candidates and verdicts, and each generation's best member's context."""
    points = trajectory(run)
    if not points:
        return ""
    ctx = run.meta["context"]
    lib = ctx.get("library") or {}
    first, last = points[0][1], points[-1][1]
    lines = []
    skills = [dict(s) for s in lib.get("skills") or []]
    for _, growth in grown(run):
        skills += [{"name": a.get("name", ""), "text": a.get("text", ""), "origin": _lineage(a), "grown": True}
                   for a in growth.get("admitted") or []]
    for skill in skills:
        name = skill.get("name", "")
        origin = skill.get("origin") or "the run's config (coevo.skills / coevo.library)"
        start = next((p[name] for _, p in points if name in p), float("nan"))  # a grown skill: where it joined
        lines.append(f"<tr><td>{escape(name)}</td><td>skill</td><td>{start:.3f}</td>"
                     f"<td>{last.get(name, float('nan')):.3f}</td><td>{escape(str(origin))}</td>"
                     f"<td><pre>{escape(str(skill.get('text', ''))[:400])}</pre></td></tr>")
    for slot, alternatives in (lib.get("slots") or {}).items():
        for k, alt in enumerate(alternatives):
            key = f"{slot} = alternative {k}"
            lines.append(f"<tr><td>{escape(slot)}[{k}]</td><td>slot</td><td>{first.get(key, float('nan')):.3f}</td>"
                         f"<td>{last.get(key, float('nan')):.3f}</td><td>the run's config</td>"
                         f"<td><pre>{escape(str(alt)[:400])}</pre></td></tr>")
    best = _best_rows(run)
    rows = _growth_rows(run)
    growth = ("<h3>Library growth</h3><p>Every proposal (coevo.grow), its verdict, and the gate's mean training "
              "reward with vs without it (p start of a grown skill: where it joined).</p>"
              '<table class="turns"><tr><th>after generation</th><th>candidate</th><th>reply</th><th>verdict</th>'
              "<th>gate</th></tr>" + "".join(rows) + "</table>") if rows else ""
    return ('<section id="context"><h2>Context search</h2>'
            f"<p>coevo.mode {escape(str(ctx.get('mode')))}; library hash <code>{escape(str(ctx.get('library_hash'))[:12])}"
            "</code>. Probabilities: at the start and after the last recorded generation.</p>"
            '<table class="turns"><tr><th>name</th><th>kind</th><th>p start</th><th>p now</th><th>origin</th>'
            "<th>text</th></tr>" + "".join(lines) + "</table>"
            "<h3>The best member of each generation played</h3>"
            + ('<table class="turns"><tr><th>generation</th><th>member</th><th>reward</th><th>skills</th>'
               "<th>slots</th></tr>" + "".join(best) + "</table>" if best else "<p>No scored member yet.</p>")
            + growth + "</section>")
