"""esopt bench settings: one algorithm's named settings side by side on the validation split.

    esopt bench settings configs/demo.yaml --arms configs/studies/scope-sigma-arms.yaml --seeds 0 --jobs 2

The arms file maps labels to overrides, `{label: [key=value, ...]}`; each label x seed is one
`esopt train` run (folder `<label>-seed<seed>` under `--out` without .json plus `-runs`; a
finished run is read back, and its record under `-records` lets a later session continue where
the run folders are gone). Per setting: validation before and after training with the paired
difference and its SE over validation tasks (the mean over seeds, with the spread between them
when there are several), updates made, updates in which every member scored the same (an ES
generation that moved nothing), episodes, training seconds and peak RSS. Held-out is not read:
this bench is for choosing settings (configs should set tasks.heldout small).
"""
from __future__ import annotations

from pathlib import Path
from statistics import mean, stdev

from ..runs import run_all, train_run


def read_settings(path: str) -> dict[str, list[str]]:
    """The arms file: {label: [override, ...]}; one line naming what is wrong otherwise."""
    import yaml

    from ...config import ConfigError

    try:
        tree = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"--arms {path}: cannot read it as YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(tree, dict) or not tree:
        raise ConfigError(f"--arms {path} must map labels to lists of overrides ({{label: [key=value, ...]}})")
    return labelled(path, tree)


def labelled(path: str, tree: dict, where: str = "") -> dict[str, list[str]]:
    """{label: [override, ...]} checked: labels name run folders, overrides parse (ConfigError, one line)."""
    import re

    from ...config import ConfigError, parse_override

    for label, overrides in tree.items():
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", str(label)):
            raise ConfigError(f"--arms {path}: {where}label {label!r} names run folders: letters, digits, . _ + -")
        if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
            raise ConfigError(f"--arms {path}: {where}{label} must be a list of key=value overrides")
        for o in overrides:
            parse_override(o)
    return {str(k): list(v) for k, v in tree.items()}


def row(runs: list[dict]) -> dict:
    """One setting's figures over its seeds."""
    vals = [r["summary"].get("validation") or {} for r in runs]
    if not all(v.get("improvement") for v in vals):
        from ...config import ConfigError

        raise ConfigError(f"{runs[0]['run_dir']} has no validation before and after: set tasks.validation > 0 and "
                          "eval.at_start=true")
    gains = [v["improvement"]["mean"] for v in vals]
    last = [r["curve"][-1] for r in runs]
    rss = [r["peak_rss_mb"] for r in runs if r.get("peak_rss_mb") is not None]
    return {"validation_base": mean(v["base"]["reward"] for v in vals),
            "validation_final": mean(v["final"]["reward"] for v in vals),
            "gain": mean(gains), "gain_se_over_tasks": mean(v["improvement"]["se"] for v in vals),
            "gain_std_over_seeds": stdev(gains) if len(gains) > 1 else None, "gains": gains,
            "updates": mean(r["summary"]["generations"] for r in runs),
            "flat_updates": mean(r.get("flat_updates") or 0 for r in runs),
            "episodes": mean(x["episodes"] for x in last), "train_seconds": mean(x["train_seconds"] for x in last),
            "peak_rss_mb": max(rss) if rss else None, "seeds": [r.get("seed") for r in runs]}


def table(rows: dict[str, dict]) -> str:
    lines = ["| setting | validation before -> after | gain (± SE over tasks) | updates (flat) | episodes | train s |"
             " peak RSS |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for label, r in rows.items():
        spread = f", sd over seeds {r['gain_std_over_seeds']:.3f}" if r["gain_std_over_seeds"] is not None else ""
        rss = f"{r['peak_rss_mb'] / 1024:.1f} GB" if r["peak_rss_mb"] else "-"
        lines.append(f"| {label} | {r['validation_base']:.3f} -> {r['validation_final']:.3f} | {r['gain']:+.3f} ± "
                     f"{r['gain_se_over_tasks']:.3f}{spread} | {r['updates']:g} ({r['flat_updates']:g}) | "
                     f"{r['episodes']:g} | {r['train_seconds']:.0f} | {rss} |")
    return "\n".join(lines)


def main(config: str, overrides: list[str], out: str, arms: str | None, seeds: list[int], jobs: int = 1) -> dict:
    from ...config import ConfigError
    from ..common import write_results

    if not arms:
        raise ConfigError("bench settings needs --arms FILE ({label: [key=value, ...]}), e.g. "
                          "configs/studies/scope-sigma-arms.yaml")
    settings = read_settings(arms)
    work = str(Path(out).with_suffix("")) + "-runs"
    records = str(Path(out).with_suffix("")) + "-records"  # committed: the study resumes from them
    plan = [(label, seed) for label in settings for seed in seeds]
    print(f"[bench] settings: {len(settings)} x {len(seeds)} seed(s) = {len(plan)} runs, {jobs} side by side; "
          f"validation before and after each", flush=True)

    def call(label, seed):
        def go():
            run = train_run(config, [*overrides, *settings[label], f"run.seed={seed}"], work, f"{label}-seed{seed}",
                            records=records)
            return {**run, "seed": seed}
        return go

    done = run_all([call(label, seed) for label, seed in plan], jobs=jobs)
    by = {label: [r for (lab, _), r in zip(plan, done) if lab == label] for label in settings}
    rows = {label: row(runs) for label, runs in by.items()}
    print(table(rows), flush=True)
    results = {f"gain_{label}": r["gain"] for label, r in rows.items()}
    write_results(out, "settings", results, {"config": config, "overrides": overrides, "arms_file": arms,
                                             "arms": settings, "seeds": seeds, "jobs": jobs, "rows": rows,
                                             "table": table(rows)})
    return rows
