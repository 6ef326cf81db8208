"""esopt bench horizon: the horizon claim. ES vs GRPO at equal episodes over several
horizons (Sudoku with more blanks, hence more turns), held-out reward per horizon
over several seeds: how much each method's final reward drops from the shortest
horizon to the longest.

A horizon is a named task (`--tasks`): `4x4-bN` or `9x9-hN` is Sudoku of that
size with N blanks and at most 3N turns (the paper's turn cap; the 9x9 ones are
bench memory's tasks). The default, `4x4-b2,4x4-b4,4x4-b6`, fits a CPU; the
paper's scale is 9x9 with H* = 5, 10, 15 on a GPU:

    esopt bench horizon configs/paper-sudoku9.yaml model=Qwen/Qwen3.5-4B runtime.device=cuda \\
        runtime.dtype=bfloat16 --tasks 9x9-h5,9x9-h10,9x9-h15 --seeds 0,1,2

Everything else (model, ES settings, budget, decoding, eval.every,
tasks.validation) comes from the config and applies to every horizon. Per
horizon and seed: one ES run at sigma `--es-sigma` and one GRPO run at equal
episodes (bench compare's arm_overrides) with the learning rate `--grpo-lr`.
By default both are the tuned ones, `es_best_sigma` and `grpo_best_lr` of
compare.json beside `--out` (run `esopt bench compare` first, on the same
config; sigma.end is scaled by the same factor, as compare does), else the
config's sigma and a learning rate of 1e-5; the bench prints which. Held-out reward is evaluated before training and at the end (the same
held-out puzzles for both methods at a seed). Runs are read back by name
(`<task>-es-sigma<s>-seed<n>`, `<task>-grpo-lr<lr>-seed<n>`) when finished.

`--jobs N` trains up to N runs side by side (bench compare's too): their seconds are then
not a quiet machine's.

RESULT lines: es_drop_short_to_long and grpo_drop_short_to_long (final held-out
reward at the shortest horizon minus at the longest, means over seeds; with at
least two horizons), es_minus_grpo_at_longest.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from statistics import mean

from ...envs.sudoku import MAX_BLANKS
from .compare import ARMS, _mb, arm_overrides, heldout_row, training_decoding
from ..machine.memory import TASKS as MEMORY_TASKS
from ..runs import run_all, train_run

DEFAULT_TASKS = ("4x4-b2", "4x4-b4", "4x4-b6")
PAPER_TASKS = ("9x9-h5", "9x9-h10", "9x9-h15")
DEFAULT_GRPO_LR = 1e-5
_NAME = re.compile(r"^(4x4|9x9)-[bh]([1-9][0-9]*)$")


def task_overrides(name: str) -> list[str]:
    """Config overrides of a horizon: `4x4-bN` / `9x9-hN` -> size, N blanks, 3N turns."""
    from ...config import ConfigError

    if name in MEMORY_TASKS and name.startswith("9x9"):
        return list(MEMORY_TASKS[name])  # the same tasks as bench memory
    m = _NAME.match(name)
    if not m:
        raise ConfigError(f"bench horizon: unknown task {name!r}; allowed: 4x4-bN or 9x9-hN (N blanks, 3N turns), "
                          f"e.g. {','.join(DEFAULT_TASKS)} or {','.join(PAPER_TASKS)}")
    size, blanks = int(m.group(1)[0]), int(m.group(2))
    if blanks > MAX_BLANKS[size]:
        raise ConfigError(f"bench horizon: task {name!r} has more blanks than a {size}x{size} puzzle allows "
                          f"(at most {MAX_BLANKS[size]})")
    return [f"env.options.size={size}", f"env.options.blanks={blanks}", f"env.max_turns={3 * blanks}"]


def _blanks(name: str) -> int:
    return int(next(o for o in task_overrides(name) if o.startswith("env.options.blanks=")).split("=")[1])


def default_grpo_lr(out: str) -> tuple[float, str]:
    """grpo_best_lr from compare.json beside `out` (bench compare's tuned rate), else DEFAULT_GRPO_LR."""
    path = Path(out).with_name("compare.json")
    try:
        data = json.loads(path.read_text())
        lr = float(data["results"]["grpo_best_lr"])
    except (OSError, ValueError, KeyError, TypeError):
        return DEFAULT_GRPO_LR, f"default {DEFAULT_GRPO_LR:g}: no grpo_best_lr in {path} (run esopt bench compare)"
    return lr, (f"grpo_best_lr of {path} (tuned on {data.get('config')} {' '.join(data.get('overrides') or [])})")


def default_es_sigma(out: str, cfg) -> tuple[float, str]:
    """es_best_sigma from compare.json beside `out` (bench compare's tuned sigma.start), else the config's."""
    path = Path(out).with_name("compare.json")
    try:
        data = json.loads(path.read_text())
        return float(data["results"]["es_best_sigma"]), f"es_best_sigma of {path}"
    except (OSError, ValueError, KeyError, TypeError):
        return cfg.es.sigma.start, f"config: no es_best_sigma in {path}"


def drops(table: dict[str, dict[str, dict]], tasks: list[str]) -> dict:
    """RESULT figures from {task: {arm: heldout_row}}: per method the final held-out mean at the
    shortest horizon (fewest blanks) minus at the longest; ES minus GRPO at the longest."""
    order = sorted(tasks, key=_blanks)
    short, long_ = order[0], order[-1]
    res = {}
    if len(order) > 1:
        for arm in ARMS:
            res[f"{arm}_drop_short_to_long"] = table[short][arm]["final_mean"] - table[long_][arm]["final_mean"]
    res["es_minus_grpo_at_longest"] = table[long_]["es"]["final_mean"] - table[long_]["grpo"]["final_mean"]
    return res


def _plot(table: dict, tasks: list[str], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [_blanks(t) for t in tasks]
    fig, ax = plt.subplots(figsize=(6, 4))
    for arm, color, dx in (("es", "tab:blue", -0.08), ("grpo", "tab:orange", 0.08)):
        ax.errorbar([v + dx for v in x], [table[t][arm]["final_mean"] for t in tasks],
                    yerr=[table[t][arm]["final_std"] for t in tasks], marker="o", capsize=4, color=color,
                    label=f"{arm.upper()} after training")
    ax.plot(x, [mean(table[t][a]["base_mean"] for a in ARMS) for t in tasks], ls="--", marker=".", color="gray",
            label="base model")
    ax.set_xticks(x, [f"{t}\n({3 * b} turns)" for t, b in zip(tasks, x)])
    ax.set_xlabel("horizon: blanks to fill")
    ax.set_ylabel("held-out reward (mean, sample std over seeds)")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title("ES vs GRPO at equal episodes across horizons")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(config: str, overrides: list[str], out: str, seeds: list[int], tasks: list[str] | None = None,
         grpo_lr: float | None = None, work_dir: str | None = None, jobs: int = 1,
         es_sigma: float | None = None) -> dict:
    from ...config import ConfigError, load_config
    from ..common import write_results

    if len(seeds) < 1:
        raise ConfigError("bench horizon needs at least one seed (--seeds 0,1)")
    tasks = list(tasks or DEFAULT_TASKS)
    if len(set(tasks)) != len(tasks):
        raise ConfigError(f"bench horizon: --tasks lists a task twice ({','.join(tasks)})")
    per_task = {t: task_overrides(t) for t in tasks}
    tasks.sort(key=_blanks)
    if len(tasks) < 3:
        print(f"[bench] note: {len(tasks)} horizon(s); the horizon claim needs at least three", flush=True)
    if grpo_lr is None:
        grpo_lr, source = default_grpo_lr(out)
    else:
        source = "--grpo-lr"
    if not grpo_lr > 0:
        raise ConfigError(f"bench horizon: --grpo-lr must be > 0, got {grpo_lr}")
    cfg = load_config(config, overrides)
    sigma, sigma_source = (es_sigma, "--es-sigma") if es_sigma is not None else default_es_sigma(out, cfg)
    if not sigma > 0:
        raise ConfigError(f"bench horizon: --es-sigma must be > 0, got {sigma}")
    sigma_end = cfg.es.sigma.end * sigma / cfg.es.sigma.start
    print(f"[bench] GRPO lr {grpo_lr:g} ({source}); ES sigma {sigma:g} -> {sigma_end:g} ({sigma_source})", flush=True)
    work = work_dir or str(Path(out).with_suffix("")) + "-runs"
    base = list(overrides) + ["eval.at_start=true"]  # held-out before training: the paired improvement
    setting = {"es": (f"sigma{sigma:g}", [f"es.sigma.start={sigma!r}", f"es.sigma.end={sigma_end!r}"]),
               "grpo": (f"lr{grpo_lr:g}", [f"grpo.lr={grpo_lr!r}"])}

    runs: dict[str, dict[str, list[dict]]] = {t: {arm: [] for arm in ARMS} for t in tasks}
    table: dict[str, dict[str, dict]] = {}
    tcfgs = {t: load_config(config, base + per_task[t]) for t in tasks}

    def run(t: str, arm: str, seed: int) -> dict:
        label, extra = setting[arm]
        r = train_run(config, base + per_task[t] + arm_overrides(tcfgs[t], arm) + extra + [f"run.seed={seed}"],
                      work, f"{t}-{arm}-{label}-seed{seed}")
        return {**r, "seed": seed, "setting": label}

    plan = [(t, arm, seed) for t in tasks for seed in seeds for arm in ARMS]
    for (t, arm, seed), r in zip(plan, run_all([lambda p=p: run(*p) for p in plan], jobs)):
        runs[t][arm].append(r)
        print(f"{t} {arm:4s} seed {seed}: held-out {r['summary']['base']['reward']:.4f} -> "
              f"{r['summary']['final']['reward']:.4f} after {r['curve'][-1]['episodes']} episodes", flush=True)
    for t in tasks:
        tcfg = tcfgs[t]
        table[t] = {arm: {"setting": setting[arm][0], "overrides": per_task[t],
                          "training_decoding": training_decoding(load_config(config, base + per_task[t]
                                                                             + arm_overrides(tcfg, arm)), arm),
                          **heldout_row(runs[t][arm])} for arm in ARMS}
        if table[t]["es"]["episodes"] != table[t]["grpo"]["episodes"]:
            raise RuntimeError(f"{t}: unequal episodes (ES {table[t]['es']['episodes']}, "
                               f"GRPO {table[t]['grpo']['episodes']})")

    print(f"\nheld-out reward per horizon, seeds {seeds} (mean +- sample std over seeds)")
    print(f"{'task':10s} {'algo':5s} {'setting':>12s} {'base':>7s} {'final':>17s} {'improvement':>12s} "
          f"{'episodes':>9s} {'train s':>8s} {'peak RSS MB':>12s}")
    for t in tasks:
        for arm in ARMS:
            row = table[t][arm]
            print(f"{t:10s} {arm:5s} {row['setting']:>12s} {row['base_mean']:7.4f} {row['final_mean']:8.4f} +- "
                  f"{row['final_std']:.4f} {mean(row['improvements']):+12.4f} {row['episodes']:9d} "
                  f"{row['train_seconds_mean']:8.0f} "
                  f"{_mb(row['peak_rss_mb']):>12s}")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    png = str(Path(out).with_suffix(".png"))
    _plot(table, tasks, png)
    print(f"plot: {png}")
    res = drops(table, tasks)
    write_results(out, "horizon", res, {"config": config, "overrides": overrides, "seeds": seeds, "tasks": tasks,
                                        "task_overrides": per_task, "grpo_lr": grpo_lr, "grpo_lr_source": source,
                                        "es_sigma": [sigma, sigma_end], "es_sigma_source": sigma_source, "jobs": jobs, "table": table, "runs": runs,
                                        "plot": png})
    return res
