"""The report of a heuristic-search run (esopt adapt --env ahd-<problem>): the best heuristic's
code and objectives, the best-so-far objective over the proposals, what came of the proposals
per operator, and (for +ES) the weight steps. Read from the run folder's proposals.jsonl,
summary.json, config.yaml and history.json, whichever are there."""
from __future__ import annotations

import json
import math
import time
from html import escape
from pathlib import Path

import yaml

from .. import __version__
from ..utils.jsonl import read_jsonl
from .figure import Plot, _figure, _png


def is_ahd_run(path) -> bool:
    return (Path(path) / "proposals.jsonl").exists()


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def best_so_far(records: list[dict], reference: float | None) -> tuple[list[int], list[float]]:
    """(LLM calls made, best validation objective after them), starting from the reference at 0."""
    xs, ys = ([0], [reference]) if _num(reference) else ([], [])
    best = reference if _num(reference) else math.inf
    for r in sorted(records, key=lambda r: r.get("index", 0)):
        if r.get("valid") and _num(r.get("objective")):
            best = min(best, r["objective"])
        if math.isfinite(best):
            xs.append(int(r.get("index", 0)) + 1)
            ys.append(best)
    return xs, ys


def curve(records: list[dict], reference: float | None) -> Plot:
    title = "Best validation objective over the proposals (lower is better)"
    xs, ys = best_so_far(records, reference)
    if len(xs) < 2:
        return Plot("best", title, None, "no proposal recorded yet")
    fig, (ax,) = _figure()
    ax.step(xs, ys, where="post", label="best so far")
    valid = [(r["index"] + 1, r["objective"]) for r in records if r.get("valid") and _num(r.get("objective"))]
    if valid:
        ax.scatter([v[0] for v in valid], [v[1] for v in valid], s=10, alpha=0.5, color="gray", label="valid child")
    if _num(reference):
        ax.axhline(reference, ls=":", color="black", lw=1, label="reference")
    ax.set_xlabel("LLM calls")
    ax.set_ylabel("validation objective")
    ax.legend(fontsize=8)
    return Plot("best", title, _png(fig))


def _operator_rows(records: list[dict]) -> list[str]:
    ops: dict[str, list[dict]] = {}
    for r in records:
        ops.setdefault(str(r.get("operator")), []).append(r)
    rows = []
    for op, rs in ops.items():
        rewards = [r["reward"] for r in rs if _num(r.get("reward"))]
        dup = sum(1 for r in rs if str(r.get("reason") or "").startswith("duplicate"))
        valid = sum(1 for r in rs if r.get("valid"))
        mean = f"{sum(rewards) / len(rewards):.4g}" if rewards else "-"
        rows.append(f"<tr><td>{escape(op)}</td><td>{len(rs)}</td><td>{valid}</td><td>{dup}</td>"
                    f"<td>{len(rs) - valid - dup}</td><td>{mean}</td></tr>")
    return rows


def _reasons(records: list[dict], top: int = 8) -> list[str]:
    counts: dict[str, int] = {}
    for r in records:
        if not r.get("valid") and r.get("reason"):
            key = str(r["reason"]).splitlines()[0][:120]
            key = "duplicate" if key.startswith("duplicate") else key
            counts[key] = counts.get(key, 0) + 1
    return [f"<tr><td>{n}</td><td>{escape(k)}</td></tr>" for k, n in sorted(counts.items(), key=lambda kv: -kv[1])[:top]]


def section(path: Path, records: list[dict], summary: dict | None, config: dict, history: dict | None,
            files: dict[str, str], plot: Plot) -> str:
    from .html import _figure as figure_html
    from .html import _kv

    best = (summary or {}).get("best")
    if best is None and records:  # unfinished: the best valid child so far
        valid = [r for r in records if r.get("valid") and _num(r.get("objective"))]
        if valid:
            b = min(valid, key=lambda r: r["objective"])
            best = {"id": f"p{b['index']}", "code": b.get("code"), "idea": b.get("idea"), "objective": b["objective"]}
    held = ((best or {}).get("heldout") or {})
    rows = [("run folder", f"<code>{escape(str(path))}</code>"),
            ("status", escape("finished" if summary else f"not finished (no summary.json): {len(records)} proposals")),
            ("problem / method", escape(f"{config.get('problem')} / {config.get('method')}")),
            ("budget / seed", escape(f"{config.get('budget')} LLM calls / seed {config.get('seed')}")),
            ("model", escape(str(config.get("model"))))]
    if summary:
        rows.append(("reference (validation)", escape(f"{summary['reference']['objective']:.6g}")))
        rows.append(("proposals", escape(", ".join(f"{k} {v}" for k, v in summary.get("counts", {}).items()))))
    if best:
        rows.append(("best heuristic", escape(f"{best.get('id')}: validation {best.get('objective'):.6g}"
                                              + (f", held-out {held.get('objective'):.6g}" if _num(held.get("objective"))
                                                 else f", held-out not valid ({held.get('reason')})" if held else ""))))
    if history and history.get("generations"):
        last = history["generations"][-1]
        rows.append(("ES steps", escape(f"{len(history['generations'])}, weights {str(last.get('weights_hash'))[:12]} "
                                        f"(base {str(history.get('meta', {}).get('base_weights_hash'))[:12]}), "
                                        f"sigma {history['generations'][0].get('sigma'):.3g} -> {last.get('sigma'):.3g}")))
    code = (f"<p>{escape(str(best.get('idea') or ''))}</p><pre class=\"config\">{escape(str(best.get('code')))}</pre>"
            if best and best.get("code") else '<p class="missing">no heuristic yet</p>')
    ops = _operator_rows(records)
    reasons = _reasons(records)
    return ('<section id="ahd"><h2>Heuristic search</h2>' + _kv(rows) + figure_html(plot, files)
            + "<h3>The best heuristic</h3>" + code
            + ("<h3>Proposals per operator</h3><table class=\"cmp\"><tr><th>operator</th><th>calls</th><th>valid</th>"
               "<th>duplicates</th><th>invalid</th><th>mean reward</th></tr>" + "".join(ops) + "</table>" if ops else "")
            + ("<h3>Why proposals failed</h3><table class=\"cmp\"><tr><th>n</th><th>reason</th></tr>"
               + "".join(reasons) + "</table>" if reasons else "")
            + "</section>")


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_ahd_report(run_dir, out=None):
    """The page of a heuristic-search run at `out` (default RUN_DIR/report/report.html), its plot beside it."""
    from ..es.history import atomic_write_bytes
    from .load import Report
    from .html import CSS

    path = Path(run_dir)
    records, bad = read_jsonl(path / "proposals.jsonl")
    summary = _json(path / "summary.json")
    history = _json(path / "history.json")
    try:
        config = yaml.safe_load((path / "config.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        config = {}
    missing = []
    if bad:
        missing.append(f"{bad} unreadable line(s) in proposals.jsonl")
    if summary is None:
        missing.append("no summary.json: the run is going, stopped, or failed (see error.txt)")
    ref = (summary or {}).get("reference", {}).get("objective")
    if ref is None and records:
        ref = records[0].get("best_so_far") if records[0].get("best_id") == "ref" else None
    plot = curve(records, ref)
    out = Path(out) if out else path / "report" / "report.html"
    if out.is_dir():
        out = out / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    files, written = {}, []
    png = out.parent / f"{out.stem}-{plot.key}.png"
    if plot.png is not None:
        atomic_write_bytes(png, plot.png)
        files[plot.key] = png.name
        written.append(png)
    body = [f"<h1>esopt heuristic search: {escape(path.name)}</h1>"]
    if missing:
        body.append('<section id="missing" class="missing"><b>Missing or incomplete</b><ul>'
                    + "".join(f"<li>{escape(m)}</li>" for m in missing) + "</ul></section>")
    body.append(section(path, records, summary, config, history, files, plot))
    body.append(f'<section id="config"><h2>Config</h2><pre class="config">{escape(yaml.safe_dump(config))}</pre></section>')
    body.append(f"<footer><p>Written by esopt {escape(__version__)} on {time.strftime('%Y-%m-%d %H:%M:%S')}; "
                f"refresh with <code>esopt report {escape(str(path))}</code>.</p></footer>")
    html = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\">"
            f"<title>esopt heuristic search: {escape(path.name)}</title><style>{CSS}</style></head><body>"
            f"{''.join(body)}</body></html>\n")
    atomic_write_bytes(out, html.encode("utf-8"))
    return Report(out, written, missing)
