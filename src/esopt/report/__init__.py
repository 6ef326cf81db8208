"""Run reports: one self-contained HTML page per run (plots, summary, config,
trajectory viewer), with the plots also written as PNG files beside it.

    report = write_report("runs/demo-20261130-041500")   # -> runs/.../report/report.html
    write_report(run_a, compare=[run_b], out="cmp/a-vs-b.html")

Works on finished, running, killed or damaged run folders: what is missing is
listed at the top of the page.
"""
from __future__ import annotations

from pathlib import Path

from ..es.history import atomic_write_bytes
from .load import Report, RunData, is_run_dir, load_run

__all__ = ["Report", "RunData", "default_report_path", "is_run_dir", "load_run", "refresh_report", "write_report"]


def default_report_path(run_dir) -> Path:
    return Path(run_dir) / "report" / "report.html"


def _labels(runs: list[RunData]) -> list[str]:
    labels = [r.name for r in runs]
    for i, r in enumerate(runs):
        if labels.count(r.name) > 1:
            labels[i] = f"{r.path.parent.name}/{r.name}"
    return [lab if labels.count(lab) == 1 else f"{lab} #{i + 1}" for i, lab in enumerate(labels)]


def write_report(run_dir, compare=(), out=None) -> Report:
    """Build the page for ``run_dir`` (overlaying ``compare`` runs) at ``out``; PNGs go beside it."""
    from .ahd import is_ahd_run, write_ahd_report
    from .episodes import viewer
    from .html import page
    from .plots import compare_plots, run_plots

    if is_ahd_run(run_dir):  # a heuristic-search run (esopt adapt --env ahd-<problem>): a page of its own
        report = write_ahd_report(run_dir, out)
        if compare:
            report.missing.append("--compare does not apply to heuristic-search runs (see the ahd.md table)")
        return report
    run = load_run(run_dir)
    others = [load_run(p) for p in compare]
    out = Path(out) if out else default_report_path(run.path)
    if out.is_dir():
        out = out / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    plots = run_plots(run)
    labels = _labels([run, *others])
    cplots = compare_plots([run, *others], labels) if others else []
    files, written = {}, []
    for p in plots + cplots:
        png = out.parent / f"{out.stem}-{p.key}.png"
        if p.png is None:
            png.unlink(missing_ok=True)  # a stale plot from an earlier refresh would mislead
            continue
        atomic_write_bytes(png, p.png)
        files[p.key] = png.name
        written.append(png)
    view = viewer(run)
    warnings = mismatched(run, others, labels)
    run.missing[:0] = warnings  # at the top of the page too
    html = page(run, plots, view, files, others, labels, cplots)
    atomic_write_bytes(out, html.encode("utf-8"))
    notes = run.missing + view.notes + [f"{lab}: {m}" for o, lab in zip(others, labels[1:]) for m in o.missing]
    return Report(out, written, notes, warnings=warnings)


def mismatched(run: RunData, others: list[RunData], labels: list[str]) -> list[str]:
    """A line per compared run that plays another environment or task set than `run`."""
    def setting(r):
        return {"env": r.cfg("env"), "tasks": r.cfg("tasks")}

    out = []
    for other, label in zip(others, labels[1:]):
        diff = [k for k, v in setting(other).items() if v != setting(run)[k]]
        if diff:
            out.append(f"--compare: {label} plays another {' and '.join(diff)} setting than {labels[0]} "
                       f"({', '.join(f'{k}: {setting(other)[k]} vs {setting(run)[k]}' for k in diff)}); "
                       "its curves are not comparable")
    return out


def refresh_report(run_dir, log=print) -> Path | None:
    """Write the run's report at its default place, for trainers at the end of a run.

    Never raises (a report failure must not fail a finished run): logs one line
    with the path, or with the error and the command that retries.
    """
    try:
        path = write_report(run_dir).path
    except Exception as err:
        log(f"[esopt] report not written ({type(err).__name__}: {err}); retry with: esopt report {run_dir}")
        return None
    log(f"[esopt] report: {path}")
    return path
