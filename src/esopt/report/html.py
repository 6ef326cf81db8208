"""The report page: one self-contained HTML file (plots as data URIs, inline
CSS and a few lines of inline JS, nothing fetched when it is opened)."""
from __future__ import annotations

import base64
import json
import math
import time
from html import escape

from .. import __version__
from .episodes import Viewer
from .load import RunData
from .figure import Plot
from .plots import memory_text

CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1100px;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
nav a{margin-right:1em}code,pre{font-size:13px}pre.config{background:#f6f6f6;padding:.6em;overflow:auto}
table.kv td,table.cmp td,table.cmp th{padding:.15em .6em;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
table.kv td:first-child{color:#555;white-space:nowrap}
table.settings{border-collapse:collapse;margin:.1em 0}table.settings th{font-weight:normal;color:#777;text-align:left;
padding:.1em .6em;border-bottom:1px solid #ddd}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}figcaption{font-weight:bold}
.missing{color:#8a4b00;background:#fff4e0;padding:.3em .6em;border-left:4px solid #e0a030}
#missing ul{margin:.3em 0}.status{font-size:1.05em}.bad{color:#c22}
.episode{border:1px solid #ddd;border-radius:4px;padding:.5em;margin:.6em 0}.ep-head{margin-bottom:.3em}
#traj-select{font-size:15px;margin:.5em 0}
"""

JS = """
(function () {
  var select = document.getElementById("traj-select");
  if (!select) return;
  function show() {
    document.querySelectorAll(".traj-view").forEach(function (view) {
      view.hidden = view.dataset.key !== select.value;
    });
  }
  select.addEventListener("change", show);
  show();
})();
"""


def _fmt(x, digits: int = 4) -> str:
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, float):
        return "nan" if not math.isfinite(x) else f"{x:.{digits}g}"
    return str(x)


def _kv(rows: list[tuple[str, str]]) -> str:
    return '<table class="kv">' + "".join(f"<tr><td>{escape(k)}</td><td>{v}</td></tr>" for k, v in rows) + "</table>"


def _value(x) -> str:
    """A setting's value as HTML: a mapping as a table of name | value (nested ones inside), else its text."""
    if isinstance(x, dict):
        if not x:
            return "(none)"
        return ('<table class="kv settings"><tr><th>name</th><th>value</th></tr>'
                + "".join(f"<tr><td>{escape(str(k))}</td><td>{_value(v)}</td></tr>" for k, v in x.items())
                + "</table>")
    if isinstance(x, float):
        return escape(_fmt(x, 6))
    return escape(str(x))


def _heldout(run: RunData) -> str:
    s = run.summary or {}
    if "final" in s and "base" in s and "improvement" in s:
        f, b, imp = s["final"], s["base"], s["improvement"]
        return escape(f"base {_fmt(b.get('reward'))} -> final {_fmt(f.get('reward'))}; paired difference "
                      f"{_fmt(imp.get('mean'))} ± {_fmt(imp.get('se'))} SE (n={f.get('n')})")
    if "final" in s:
        return escape(f"final {_fmt(s['final'].get('reward'))} (no base evaluation)")
    if run.evals:
        e = run.evals[-1]
        return escape(f"latest: {_fmt(e.get('heldout_reward'))} ± {_fmt(e.get('heldout_reward_se'))} SE after "
                      f"{e['generation']} generation(s) (the run has no summary yet)")
    return '<span class="missing">no held-out evaluation yet</span>'


def _pass_at(run: RunData) -> str:
    """A table of the held-out pass@k figures (eval.pass_at) of each evaluation that has them: generation, then
    pass@k ± SE per k, then the sampled attempts per episode; "" when no evaluation has them."""
    from ..utils.stats import pass_at_ks

    evals = [e for e in run.evals if pass_at_ks(e, "heldout_")]
    if not evals:
        return ""
    ks = sorted({k for e in evals for k in pass_at_ks(e, "heldout_")})
    head = "<tr><th>after generation</th>" + "".join(f"<th>pass@{k} ± SE</th>" for k in ks) + "<th>attempts</th></tr>"
    rows = []
    for e in evals:
        cells = [str(e.get("generation"))] + [
            f"{_fmt(e.get(f'heldout_pass_at_{k}'))} ± {_fmt(e.get(f'heldout_pass_at_{k}_se'))}"
            if f"heldout_pass_at_{k}" in e else "" for k in ks] + [str(e.get("heldout_pass_at_n", ""))]
        rows.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>")
    return f'<table class="cmp pass-at">{head}{"".join(rows)}</table>'


def _dict(x) -> dict:
    return x if isinstance(x, dict) else {}


def _items(d: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items())


def _env_row(c) -> str:
    """env.id, its turn limit and the options its spec shows (all of them for an env not found here);
    configs written before env.options keep an env's keys directly under env."""
    env = _dict(c("env"))
    if not env:
        return "unknown"
    options = _dict(env.get("options")) or {k: v for k, v in env.items() if k not in ("id", "max_turns", "options")}
    try:
        from ..envs.spec import resolve

        keys = resolve(str(env.get("id", "sudoku"))).summary_keys
    except Exception:  # an env that cannot be imported here still gets its settings shown
        keys = ()
    shown = {k: options[k] for k in keys if k in options} if keys else options
    head = {"id": env.get("id", "sudoku")} | ({"max_turns": env["max_turns"]} if env.get("max_turns") else {})
    return _items(head | shown)


def summary_rows(run: RunData) -> list[tuple[str, str]]:
    """(label, HTML) rows: where the run stands, model, environment, seed, algorithm settings, figures."""
    c, meta = run.cfg, run.meta
    model = escape(str(c("model", "unknown")))
    if meta.get("base_weights_hash"):
        model += f" (base weights {escape(str(meta['base_weights_hash'])[:12])})"
    if isinstance(meta.get("scope_numel"), int):
        model += f", {meta['scope_numel']:,} parameters in scope"
    rows = [("run folder", f"<code>{escape(str(run.path))}</code>"), ("status", escape(run.status)),
            ("model", model), ("environment", escape(_env_row(c))),
            ("run seed", escape(str(c("run.seed", "unknown")))), ("held-out reward", _heldout(run)),
            ("algorithm", escape(run.algo))]
    pass_at = _pass_at(run)
    if pass_at:  # eval.pass_at: sampled attempts besides the greedy reward above
        rows.insert(-1, ("held-out pass@k (sampled attempts; mean over tasks ± SE)", pass_at))
    rows += [(label, _value(value)) for label, value in run.algorithm.settings_rows(c, meta)]
    samp = _dict(c("agent.sampling"))
    rows.append(("decoding", escape(f"temperature {samp.get('temperature')}, top-p {samp.get('top_p')}, "
                                    f"top-k {samp.get('top_k')}, {c('agent.max_new_tokens')} new tokens per turn")))
    train_s = sum(v for r in run.train for k, v in r.items() if k.startswith("time_") and isinstance(v, (int, float)))
    eval_s = sum(e.get("heldout_seconds") or 0 for e in run.evals)
    tokens = sum(r.get("tokens") or 0 for r in run.train)
    if train_s or eval_s:
        rows.append(("time", escape(f"training {train_s:.0f}s, held-out evaluation {eval_s:.0f}s"
                                    + (f", {tokens:,} tokens generated in training" if tokens else ""))))
    rows.append(("memory", escape(memory_text(run))))
    failed = sum(len(r.get("member_errors") or {}) for r in run.records)
    nonfinite = sum(r.get("nonfinite_rewards") or 0 for r in run.records)
    if failed or nonfinite:
        rows.append(("failures", f'<span class="bad">{nonfinite} non-finite member reward(s), {failed} member '
                                 "error(s) recorded in history.json</span>"))
    if run.records and run.records[-1].get("weights_hash"):
        g = run.records[-1].get("generation")
        rows.append(("latest weights hash", escape(str(run.records[-1]["weights_hash"])[:12])
                     + f" (after generation {escape(str(g + 1 if isinstance(g, int) else g))})"))
    return rows


def _figure(plot: Plot, files: dict[str, str]) -> str:
    if plot.png is None:
        return (f'<figure id="plot-{plot.key}"><figcaption>{escape(plot.title)}</figcaption>'
                f'<p class="missing">{escape(plot.note)}</p></figure>')
    data = base64.b64encode(plot.png).decode("ascii")
    link = f' (<a href="{escape(files[plot.key])}">PNG</a>)' if plot.key in files else ""
    note = f'<p class="missing">{escape(plot.note)}</p>' if plot.note else ""
    return (f'<figure id="plot-{plot.key}"><figcaption>{escape(plot.title)}{link}</figcaption>{note}'
            f'<img class="plot" alt="{escape(plot.title)}" src="data:image/png;base64,{data}"></figure>')


def _compare_table(runs: list[RunData], labels: list[str]) -> str:
    head = ("<tr><th>run</th><th>status</th><th>model</th><th>algorithm</th><th>noise</th><th>G</th>"
            "<th>generations</th><th>held-out</th></tr>")
    rows = []
    for run, label in zip(runs, labels):
        noise = str(run.cfg("es.noise", "?")) + (f" rank {run.cfg('es.rank')}" if run.cfg("es.noise") == "lowrank" else "")
        cells = [label, run.status, str(run.cfg("model", "?")), str(run.cfg("algo", "es")), noise,
                 str(run.cfg("es.population", "?")), f"{run.done}/{run.planned or '?'}"]
        rows.append("<tr>" + "".join(f"<td>{escape(x)}</td>" for x in cells) + f"<td>{_heldout(run)}</td></tr>")
    return f'<table class="cmp">{head}{"".join(rows)}</table>'


def page(run: RunData, plots: list[Plot], viewer: Viewer, files: dict[str, str],
         compare: list[RunData] = (), labels: list[str] = (), compare_plots: list[Plot] = ()) -> str:
    missing = [escape(m) for m in run.missing + viewer.notes]
    for other, label in zip(compare, labels[1:]):
        missing += [f"{escape(label)}: {escape(m)}" for m in other.missing]
    from .context import context_section

    context_html = context_section(run)  # empty unless the run searched its context (coevo)
    nav = ["<a href='#summary'>Summary</a>", "<a href='#plots'>Plots</a>"]
    if context_html:
        nav.append("<a href='#context'>Context</a>")
    if compare:
        nav.append("<a href='#compare'>Comparison</a>")
    nav += ["<a href='#trajectories'>Trajectories</a>", "<a href='#config'>Config</a>"]
    body = [f"<h1>esopt run report: {escape(run.name)}</h1>", f"<nav>{''.join(nav)}</nav>",
            f'<p class="status">{escape(run.status)}</p>']
    if missing:
        body.append('<section id="missing" class="missing"><b>Missing or incomplete</b><ul>'
                    + "".join(f"<li>{m}</li>" for m in missing) + "</ul></section>")
    body.append(f'<section id="summary"><h2>Summary</h2>{_kv(summary_rows(run))}</section>')
    body.append('<section id="plots"><h2>Plots</h2>' + "".join(_figure(p, files) for p in plots) + "</section>")
    body.append(context_html)
    if compare:
        body.append(f'<section id="compare"><h2>Comparison</h2>{_compare_table([run, *compare], list(labels))}'
                    + "".join(_figure(p, files) for p in compare_plots) + "</section>")
    body.append('<section id="trajectories"><h2>Trajectories</h2><p>The best and the worst episode of each '
                f"generation, turn by turn.</p>{viewer.html}</section>")
    meta = json.dumps(run.meta, indent=1) if run.meta else "(no history.json meta)"
    config = escape(run.config_text) if run.config_text else '<span class="missing">config.yaml not available</span>'
    body.append(f'<section id="config"><h2>Config</h2><pre class="config">{config}</pre>'
                f'<h3>history.json meta</h3><pre class="config">{escape(meta)}</pre></section>')
    body.append(f"<footer><p>Written by esopt {escape(__version__)} on {time.strftime('%Y-%m-%d %H:%M:%S')}; "
                f"refresh with <code>esopt report {escape(str(run.path))}</code>.</p></footer>")
    css = CSS + "".join(viewer.css)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<link rel=\"icon\" href=\"data:,\"><title>esopt report: {escape(run.name)}</title>"
            f"<style>{css}</style></head><body>{''.join(body)}<script>{JS}</script></body></html>\n")
