"""esopt bench settings: one algorithm's named settings side by side on the validation split.

    esopt bench settings configs/demo.yaml --arms configs/studies/scope-sigma-arms.yaml --seeds 0 --jobs 2

The arms file maps labels to overrides, `{label: [key=value, ...]}`; each label x seed is one
`esopt train` run (folder `<label>-seed<seed>` under `--out` without .json plus `-runs`; a
finished run is read back, and its record under `-records` lets a later session continue where
the run folders are gone). Per setting: validation before and after training with the paired
difference and its SE over validation tasks (the mean over seeds, with the spread between them
when there are several), updates made, updates in which every member scored the same (an ES
generation that moved nothing), episodes, training seconds and peak RSS.

Held-out: runs that played it before and after training (eval.heldout=start_end, the default) also
give held-out before -> after per setting and, for every two settings, their difference on the final
held-out seed by seed (mean, SE over seeds): the way to take the settings a tuning invocation chose
(on validation, with eval.heldout=never so held-out is not played) to final figures at other seeds,
e.g. on a fresh held-out set (tasks.heldout_skip). Choosing on held-out figures is the mistake this
keeps apart: tune with held-out off, then run the chosen settings with it on. Where the runs recorded
per-task held-out figures, each pair also gets its task-by-task difference (SE over tasks beside the SE over
seeds), and --unseen-by-seeds gives the finals again on the held-out tasks that no run at those seeds played
in held-out or validation under the command's settings with tasks.heldout_skip=0 (the sets a tuning
invocation reads), as bench compare does.
"""
from __future__ import annotations

from pathlib import Path
from statistics import mean, stdev

from ...utils.stats import mean_se
from ..runs import run_all, train_run
from .unseen import paired_by_task, paired_note


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
            "peak_rss_mb": max(rss) if rss else None, "seeds": [r.get("seed") for r in runs],
            **heldout_figures(runs)}


def heldout_figures(runs: list[dict]) -> dict:
    """Held-out before and after training over seeds, when every run played it at both ends ({} otherwise)."""
    sm = [r["summary"] for r in runs]
    if not all("base" in x and "final" in x and "improvement" in x for x in sm):
        return {}
    gains = [x["improvement"]["mean"] for x in sm]
    finals = [x["final"]["reward"] for x in sm]
    return {"heldout_base": mean(x["base"]["reward"] for x in sm), "heldout_final": mean(finals),
            "heldout_finals": finals, "heldout_gain": mean(gains), "heldout_gains": gains,
            "heldout_gain_se_over_tasks": mean(x["improvement"]["se"] for x in sm),
            "heldout_gain_std_over_seeds": stdev(gains) if len(gains) > 1 else None}


def paired_heldout(rows: dict[str, dict]) -> dict[str, dict]:
    """For every two settings with held-out figures at the same seeds: A - B on the final held-out, per seed
    (the same tasks at a seed), its mean and SE over seeds (None with one seed)."""
    have = [label for label, r in rows.items() if "heldout_finals" in r]
    out = {}
    for i, a in enumerate(have):
        for b in have[i + 1:]:
            if rows[a]["seeds"] != rows[b]["seeds"]:
                continue
            diffs = [x - y for x, y in zip(rows[a]["heldout_finals"], rows[b]["heldout_finals"])]
            d, se = mean_se(diffs)
            out[f"{a} - {b}"] = {"per_seed": diffs, "mean": d, "se_over_seeds": se if len(diffs) > 1 else None}
    return out


def unseen_settings(config: str, overrides: list[str], seeds: list[int], unseen_by_seeds: list[int],
                    by: dict[str, list[dict]]) -> dict | None:
    """The finals on the held-out tasks no run at `unseen_by_seeds` played (held-out or validation, under the
    command's settings with tasks.heldout_skip=0): per setting before/after and every two settings' difference
    task by task. None where a final seed has no such task or a run lacks per-task figures."""
    from .unseen import subset_row, unseen_keep

    keep = unseen_keep(config, [*overrides, "tasks.heldout_skip=0"], overrides, seeds, unseen_by_seeds)
    if not all(keep):  # e.g. the finals replay a set those seeds played (no tasks.heldout_skip)
        return None
    rows = {label: subset_row(runs, keep) for label, runs in by.items()}
    if None in rows.values():
        return None
    labels = list(by)
    pairs = {f"{a} - {b}": paired_by_task(by[a], by[b], keep) for i, a in enumerate(labels) for b in labels[i + 1:]}
    return {"seen_by_seeds": unseen_by_seeds, "tasks_per_seed": [len(k) for k in keep], "rows": rows,
            "pairs": pairs}


def table(rows: dict[str, dict]) -> str:
    held = any("heldout_gain" in r for r in rows.values())
    lines = ["| setting | validation before -> after | gain (± SE over tasks) |"
             + (" held-out before -> after | held-out gain |" if held else "")
             + " updates (flat) | episodes | train s | peak RSS |",
             "| --- | --- | --- |" + (" --- | --- |" if held else "") + " --- | --- | --- | --- |"]
    for label, r in rows.items():
        spread = f", sd over seeds {r['gain_std_over_seeds']:.3f}" if r["gain_std_over_seeds"] is not None else ""
        rss = f"{r['peak_rss_mb'] / 1024:.1f} GB" if r["peak_rss_mb"] else "-"
        cells = ""
        if held and "heldout_gain" in r:
            sd = r["heldout_gain_std_over_seeds"]
            cells = (f" {r['heldout_base']:.3f} -> {r['heldout_final']:.3f} | {r['heldout_gain']:+.3f} ± "
                     f"{r['heldout_gain_se_over_tasks']:.3f}" + (f", sd over seeds {sd:.3f}" if sd is not None else "")
                     + " |")
        elif held:
            cells = " - | - |"
        lines.append(f"| {label} | {r['validation_base']:.3f} -> {r['validation_final']:.3f} | {r['gain']:+.3f} ± "
                     f"{r['gain_se_over_tasks']:.3f}{spread} |{cells} {r['updates']:g} ({round(r['flat_updates'], 2):g}) | "
                     f"{r['episodes']:g} | {r['train_seconds']:.0f} | {rss} |")
    return "\n".join(lines)


def main(config: str, overrides: list[str], out: str, arms: str | None, seeds: list[int], jobs: int = 1,
         unseen_by_seeds: list[int] | None = None) -> dict:
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
    pairs = paired_heldout(rows)
    for name, d in pairs.items():
        a, b = name.split(" - ")
        d["by_task"] = paired_by_task(by[a], by[b])
        se = f"{d['se_over_seeds']:.4f}" if d["se_over_seeds"] is not None else "n/a (one seed)"
        tasks = f", SE over tasks {d['by_task']['se_over_tasks']:.4f}" if d["by_task"] else ""
        print(f"held-out after training, {name}: {d['mean']:+.4f} (SE over seeds {se}{tasks}; per seed "
              f"{', '.join(f'{x:+.3f}' for x in d['per_seed'])})", flush=True)
    unseen = unseen_settings(config, overrides, seeds, unseen_by_seeds, by) if unseen_by_seeds else None
    if unseen is not None:
        print(f"held-out tasks no run at seeds {unseen_by_seeds} played in held-out or validation: "
              f"{'/'.join(map(str, unseen['tasks_per_seed']))} of seeds {seeds}", flush=True)
        for label, r in unseen["rows"].items():
            print(f"  {label} {r['base_mean']:.4f} -> {r['final_mean']:.4f} (improvement per seed "
                  f"{', '.join(f'{v:+.3f}' for v in r['improvements'])})", flush=True)
        for name, p in unseen["pairs"].items():
            print(f"  {name} task by task: {paired_note(p)}", flush=True)
    elif unseen_by_seeds:
        print(f"(no figures on unseen tasks: a final seed has no held-out task outside the sets of seeds "
              f"{unseen_by_seeds}, or the runs lack per-task held-out figures)", flush=True)
    results = {f"gain_{label}": r["gain"] for label, r in rows.items()}
    results.update({f"heldout_gain_{label}": r["heldout_gain"] for label, r in rows.items() if "heldout_gain" in r})
    if unseen is not None:
        results.update({f"heldout_unseen_gain_{label}": mean(r["improvements"]) for label, r in unseen["rows"].items()})
    write_results(out, "settings", results, {"config": config, "overrides": overrides, "arms_file": arms,
                                             "arms": settings, "seeds": seeds, "jobs": jobs, "rows": rows,
                                             "heldout_pairs": pairs, "unseen": unseen, "table": table(rows)})
    return rows
