"""esopt bench compare: ES vs GRPO on one task at equal numbers of episodes, each
method at its best setting, chosen on a validation split with the same tuning
budget; held-out reward of the chosen settings over several seeds, the spread,
and the cost (training seconds, peak memory).

1. Sweep (tuning). GRPO's learning rate (`--grpo-lrs`, default 1e-6,1e-5,1e-4)
   and ES's sigma (`--es-sigmas`: sigma.start values, each with sigma.end scaled
   by the same factor; default the config's start x 0.5, 1, 2) are swept, one
   run per setting and tuning seed (`--tune-seeds`, default the first of
   `--seeds`). Equal tuning budget: both lists must have the same length, and
   every run plays the same number of episodes. Every run has a validation split
   (`tasks.validation`; the config's, or DEFAULT_VALIDATION puzzles if it has
   none), disjoint from training and held-out. Each method's setting is the one
   with the best final validation reward (mean over tuning seeds; the first
   listed on a tie). Held-out figures of the sweep are recorded but never read
   for the choice.
2. Final runs. Each method's chosen setting x `--seeds`, with the same settings
   as the sweep (so a tuning run of the chosen setting at a seed in --seeds is
   reused, not repeated; give --tune-seeds disjoint from --seeds to keep the
   choice's luck out of the final figures). Reported per method: held-out base
   and final (mean +- std over seeds, sample std), the per-seed paired
   improvement (final - base on the same held-out puzzles), training seconds
   (evaluations excluded), peak RSS (and peak CUDA memory on a GPU) of the
   training process, and the training decoding (ES: greedy or sampled, from
   agent.sampling; GRPO: sampled at grpo.temperature).

Equal episodes: ES plays population x episodes_per_member episodes per
generation; GRPO plays puzzles_per_step x group_size per step, with
group_size = population and puzzles_per_step = episodes_per_member (so both
see the same number of puzzles per update, each played `population` times),
and as many steps as ES has generations. Both evaluate on the same held-out
and validation puzzles (they depend only on the run seed).

Equal wall-clock (`--budget-seconds S`): every run, sweep and final, trains
until its updates have taken S seconds (run.budget_seconds; evaluations
excluded; the update that crosses S finishes), at most es.generations
updates, whose schedules keep their configured length. Each method then plays
as many episodes as its speed allows: the table gives each run's episodes and
seconds, and RESULT es_over_grpo_episodes the ratio of their means. Seconds are
only comparable on a quiet machine: keep --jobs 1 there.

Run folders (under `--out` without .json, plus `-runs`) are named
`<method>-<setting>-seed<seed>` (`es-sigma0.004-seed0`, `grpo-lr1e-05-seed1`):
a finished run is read back instead of trained again, so a sweep can be split
over several invocations (same config and overrides; a folder holding other
settings stops the bench with the differences named). `--jobs N` trains up to N
runs of a phase side by side (on a GPU, or a CPU with cores to spare; each run's
runtime.threads should be its share of the cores); the seconds reported are then
those of runs sharing the machine, and the JSON records `jobs`.
"""
from __future__ import annotations

import math
from pathlib import Path
from statistics import mean, stdev

from ...utils.stats import mean_se
from ..runs import run_all, train_run
from .unseen import paired_by_task, paired_note

DEFAULT_GRPO_LRS = (1e-6, 1e-5, 1e-4)
DEFAULT_SIGMA_FACTORS = (0.5, 1.0, 2.0)
DEFAULT_VALIDATION = 64  # validation puzzles when the config has no validation split
ARMS = ("es", "grpo")


def arm_overrides(cfg, arm: str) -> list[str]:
    if arm == "es":
        return ["algo=es"]
    return ["algo=grpo", f"grpo.steps={cfg.es.generations}", f"grpo.group_size={cfg.es.population}",
            f"grpo.puzzles_per_step={cfg.es.episodes_per_member}"]


def read_arms(path: str) -> dict[str, list[dict]]:
    """An arms file (--arms): YAML {es: {label: [override, ...]}, grpo: {label: [...]}}, each label one
    setting of that method (its run folders are named by it). Returned as sweep_settings' settings."""
    import yaml

    from ...config import ConfigError
    from .settings import labelled

    try:
        tree = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"--arms {path}: cannot read it as YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(tree, dict) or set(tree) != set(ARMS):
        raise ConfigError(f"--arms {path} must map exactly {' and '.join(ARMS)} to their settings "
                          f"({{label: [override, ...]}}), got {sorted(tree) if isinstance(tree, dict) else tree!r}")
    out = {}
    for arm in ARMS:
        settings = tree[arm]
        if not isinstance(settings, dict) or not settings:
            raise ConfigError(f"--arms {path}: {arm} must map labels to lists of overrides, got {settings!r}")
        out[arm] = [{"label": label, "value": label, "overrides": overrides}
                    for label, overrides in labelled(path, settings, f"{arm} ").items()]
    return out


def sweep_settings(cfg, grpo_lrs=None, es_sigmas=None, arms: dict | None = None) -> dict[str, list[dict]]:
    """Per method, the settings tried: {label, value, overrides} (arms: read_arms' instead of the sigma
    and learning-rate lists). Equal tuning budget: the same number of distinct settings for each
    method (a ConfigError otherwise)."""
    from ...config import ConfigError

    if arms is not None:
        if grpo_lrs or es_sigmas:
            raise ConfigError("bench compare: --arms names every setting; leave out --grpo-lrs and --es-sigmas")
        if len(arms["es"]) != len(arms["grpo"]):
            raise ConfigError(f"bench compare: equal tuning budget needs as many ES arms as GRPO arms "
                              f"(es has {len(arms['es'])}, grpo has {len(arms['grpo'])})")
        return arms
    start, end = cfg.es.sigma.start, cfg.es.sigma.end
    sigmas = list(es_sigmas) if es_sigmas else [start * f for f in DEFAULT_SIGMA_FACTORS]
    lrs = list(grpo_lrs) if grpo_lrs else list(DEFAULT_GRPO_LRS)
    for flag, vals in (("--es-sigmas", sigmas), ("--grpo-lrs", lrs)):
        if not vals or any(not v > 0 for v in vals):
            raise ConfigError(f"bench compare: {flag} takes positive numbers, got {vals}")
        if len({f"{v:g}" for v in vals}) != len(vals):  # a run folder is named by its value's %g
            raise ConfigError(f"bench compare: {flag} lists a value twice (to 6 significant digits) in {vals}: "
                              f"each setting is one run")
    if len(sigmas) != len(lrs):
        raise ConfigError(f"bench compare: equal tuning budget needs as many ES sigmas as GRPO learning rates "
                          f"(--es-sigmas has {len(sigmas)}, --grpo-lrs has {len(lrs)})")
    es = [{"label": f"sigma{s:g}", "value": s,
           "overrides": [f"es.sigma.start={s!r}", f"es.sigma.end={end * s / start!r}"]} for s in sigmas]
    grpo = [{"label": f"lr{lr:g}", "value": lr, "overrides": [f"grpo.lr={lr!r}"]} for lr in lrs]
    return {"es": es, "grpo": grpo}


def training_decoding(cfg, arm: str) -> str:
    """How training episodes are decoded: ES plays with agent.sampling, GRPO samples at
    grpo.temperature (none: agent.sampling.temperature)."""
    s = cfg.agent.sampling
    extra = (f", top-p {s.top_p:g}" if s.top_p < 1 else "") + (f", top-k {s.top_k}" if s.top_k else "")
    if arm == "es":
        return "greedy" if s.temperature == 0 else f"sampled T={s.temperature:g}{extra}"
    return f"sampled T={cfg.grpo.temperature or s.temperature:g}{extra}"


def final_validation(run: dict) -> float:
    """The run's validation reward after training (never its held-out figure)."""
    val = run["curve"][-1].get("validation") if run["curve"] else None
    if val is None:
        val = ((run["summary"].get("validation") or {}).get("final") or {}).get("reward")
    if val is None:
        raise ValueError(f"{run['run_dir']} has no validation figures: tuning runs need tasks.validation > 0")
    return val


def choose(sweep: dict[str, list[dict]]) -> int:
    """Index of the setting with the best mean final validation reward (first on a tie)."""
    means = [mean(final_validation(r) for r in runs) for runs in sweep.values()]
    return max(range(len(means)), key=lambda k: (means[k], -k))


def sweep_rows(runs_by_label: dict[str, list[dict]]) -> dict:
    """Per setting of one method: its final validation rewards over tuning seeds and their mean (the choice's
    figures), and the held-out finals of runs that played held-out (recorded, never read for the choice)."""
    return {label: {"validation_mean": mean(final_validation(r) for r in runs),
                    "validation_finals": [final_validation(r) for r in runs],
                    "heldout_finals_not_used": [r["curve"][-1]["reward"] for r in runs
                                                if r["curve"][-1]["reward"] is not None]}
            for label, runs in runs_by_label.items()}


def print_sweep(sweeps: dict, chosen: dict, tune_seeds: list[int]) -> None:
    print(f"\nsweep: validation reward after training, mean over tuning seeds {tune_seeds} (* chosen)")
    for arm in ARMS:
        for label, row in sweeps[arm].items():
            mark = "*" if label == chosen[arm]["label"] else " "
            print(f"  {arm:5s} {label:>14s} {row['validation_mean']:8.4f} {mark}")


def pass_at_rows(runs: list[dict]) -> dict:
    """pass@k of held-out before and after training (eval.pass_at) per k, over seeds: {k: {bases, finals,
    base_mean, final_mean}}; empty when the runs did not measure it."""
    ks = sorted({int(key[len("pass_at_"):]) for key in runs[0]["summary"]["final"]
                 if key.startswith("pass_at_") and key[len("pass_at_"):].isdigit()}) if runs else []
    out = {}
    for k in ks:
        bases = [(r["summary"].get("base") or {}).get(f"pass_at_{k}") for r in runs]
        finals = [r["summary"]["final"].get(f"pass_at_{k}") for r in runs]
        if None in finals:
            continue
        out[str(k)] = {"bases": bases, "finals": finals, "final_mean": mean(finals),
                       "base_mean": mean(bases) if None not in bases else None}
    return out


def heldout_row(runs: list[dict]) -> dict:
    """Held-out figures and cost of one method's runs over seeds (shared with bench horizon)."""
    finals = [r["summary"]["final"]["reward"] for r in runs]
    bases = [r["summary"]["base"]["reward"] for r in runs]
    rss = [r.get("peak_rss_mb") for r in runs if r.get("peak_rss_mb") is not None]
    cuda = [r.get("peak_cuda_mb") for r in runs if r.get("peak_cuda_mb") is not None]
    return {"seeds": [r.get("seed") for r in runs], "base_mean": mean(bases), "bases": bases,
            "final_mean": mean(finals), "final_std": stdev(finals) if len(finals) > 1 else 0.0, "finals": finals,
            "improvements": [r["summary"]["improvement"]["mean"] for r in runs],
            "improvement_ses": [r["summary"]["improvement"]["se"] for r in runs],
            "episodes": runs[0]["curve"][-1]["episodes"],
            "episodes_per_seed": [r["curve"][-1]["episodes"] for r in runs],
            "episodes_mean": mean(r["curve"][-1]["episodes"] for r in runs),
            "train_seconds_per_seed": [r["curve"][-1]["train_seconds"] for r in runs],
            "train_seconds_mean": mean(r["curve"][-1]["train_seconds"] for r in runs),
            "peak_rss_mb": max(rss) if rss else None,  # the largest over seeds
            "peak_cuda_mb": max(cuda) if cuda else None, "pass_at": pass_at_rows(runs)}


def unseen_figures(config: str, base: list[str], final_overrides: list[str], seeds: list[int],
                   unseen_by_seeds: list[int], final: dict[str, list[dict]]) -> dict | None:
    """The finals on the held-out tasks that none of the held-out and validation sets of runs at
    `unseen_by_seeds` (under the tuning settings) holds: per method before/after and ES - GRPO task by task.
    None where a final seed has no such task or a run lacks per-task figures."""
    from .unseen import subset_row, unseen_keep

    keep = unseen_keep(config, base, base + final_overrides, seeds, unseen_by_seeds)
    if not all(keep):  # e.g. the finals replay a set those seeds played (no tasks.heldout_skip)
        return None
    rows = {arm: subset_row(final[arm], keep) for arm in ARMS}
    if None in rows.values():
        return None
    paired = paired_by_task(final["es"], final["grpo"], keep)
    return {"seen_by_seeds": unseen_by_seeds, "tasks_per_seed": [len(k) for k in keep], **rows,
            "es_minus_grpo_by_task": paired}


def step_curve(run: dict, key: str, grid: list[float]) -> list[float | None]:
    """The run's `key` (validation or reward) at each training second of `grid`: that of its last
    evaluation at or before it (the weights a user would have at that time); held after the run ends."""
    pts = [(p["train_seconds"], p[key]) for p in run["curve"] if p.get(key) is not None]
    out = []
    for t in grid:
        seen = [v for s, v in pts if s <= t]
        out.append(seen[-1] if seen else None)
    return out


def curve_grid(runs: list[dict], step: float | None) -> list[float]:
    """Training seconds at which curves are compared: 0, step, 2 step, ... up to the longest run."""
    end = max((r["curve"][-1]["train_seconds"] for r in runs if r["curve"]), default=0.0)
    step = step or max(end / 8, 1.0)
    return [k * step for k in range(int(end // step) + 1)] + ([end] if end % step else [])


def mean_curves(final: dict[str, list[dict]], key: str, step: float | None, at_evaluations: bool = False) -> dict:
    """{grid, per method: mean and std over seeds at each grid point} of step_curve. at_evaluations:
    the grid also has every run's evaluation times, so a mean drawn as steps changes when an
    evaluation lands (evaluations come just after each mark: on the marks alone it lags one)."""
    runs = [r for rs in final.values() for r in rs]
    grid = curve_grid(runs, step)
    if at_evaluations:
        grid = sorted(set(grid) | {p["train_seconds"] for r in runs for p in r["curve"] if p.get(key) is not None})
    out = {"grid_seconds": grid}
    for arm, runs in final.items():
        rows = [step_curve(r, key, grid) for r in runs]
        cols = [[v for v in col if v is not None] for col in zip(*rows)] if rows else []
        out[arm] = {"mean": [mean(c) if c else None for c in cols],
                    "std": [stdev(c) if len(c) > 1 else 0.0 if c else None for c in cols]}
    return out


def _mb(v) -> str:
    return f"{v:.0f}" if v is not None else "n/a"


def _plot_budget(sweep: dict, final: dict, path: str, budget_seconds: float, step: float | None) -> None:
    """Equal wall-clock: validation against training seconds for every sweep setting, then the chosen
    settings' validation curves (mean ± std over seeds; each seed thin) and held-out before/after."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"es": plt.get_cmap("Blues"), "grpo": plt.get_cmap("Oranges")}
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    for arm, settings in sweep.items():
        for k, (label, runs) in enumerate(settings.items()):
            for j, run in enumerate(runs):
                pts = [(p["train_seconds"], p["validation"]) for p in run["curve"] if p.get("validation") is not None]
                if pts:
                    axes[0].plot(*zip(*pts), marker=".", color=colors[arm](0.35 + 0.6 * k / max(len(settings) - 1, 1)),
                                 label=f"{arm.upper()} {label}" if j == 0 else None)
    curves = mean_curves(final, "validation", step, at_evaluations=True)
    grid = curves["grid_seconds"]
    for arm, runs in final.items():
        c = colors[arm](0.8)
        for run in runs:
            pts = [(p["train_seconds"], p["validation"]) for p in run["curve"] if p.get("validation") is not None]
            if pts:
                axes[1].plot(*zip(*pts), lw=0.7, alpha=0.5, color=c)
        m, sd = curves[arm]["mean"], curves[arm]["std"]
        xs = [x for x, v in zip(grid, m) if v is not None]
        mm = [v for v in m if v is not None]
        ss = [v for v, mv in zip(sd, m) if mv is not None]
        axes[1].step(xs, mm, where="post", lw=2, color=c, label=f"{arm.upper()} {runs[0]['setting']}: mean of {len(runs)}")
        axes[1].fill_between(xs, [a - b for a, b in zip(mm, ss)], [a + b for a, b in zip(mm, ss)], step="post",
                             color=c, alpha=0.15)
        for k, run in enumerate(runs):
            sm, end = run["summary"], run["curve"][-1]["train_seconds"]
            if "base" in sm and "final" in sm:
                axes[2].plot([0, end], [sm["base"]["reward"], sm["final"]["reward"]], "o-", color=c, alpha=0.8,
                             label=f"{arm.upper()} {run['setting']}" if k == 0 else None)
    for ax in axes:
        ax.axvline(budget_seconds, color="0.5", ls=":", lw=1)
        ax.set_xlabel("training seconds (evaluations excluded)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_title("sweep: validation reward (the choice)")
    axes[1].set_title("chosen settings: validation reward, mean ± std over seeds")
    axes[2].set_title("chosen settings: held-out before -> after (one line per seed)")
    axes[0].set_ylabel("validation reward")
    axes[1].set_ylabel("validation reward")
    axes[2].set_ylabel("held-out reward")
    fig.suptitle(f"ES vs GRPO at {budget_seconds:g} s of training each, each at its best validation setting")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot(sweep: dict, final: dict, path: str, budget_seconds: float | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"es": plt.get_cmap("Blues"), "grpo": plt.get_cmap("Oranges")}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for arm, settings in sweep.items():  # validation during the sweep: one line per setting and tuning seed
        for k, (label, runs) in enumerate(settings.items()):
            for j, run in enumerate(runs):
                pts = [(p["episodes"], p["validation"]) for p in run["curve"] if p.get("validation") is not None]
                axes[0].plot(*zip(*pts), marker=".", color=colors[arm](0.45 + 0.5 * k / max(len(settings) - 1, 1)),
                             label=f"{arm.upper()} {label}" if j == 0 else None)
    for arm, runs in final.items():  # held-out of the chosen settings: one line per seed
        for k, run in enumerate(runs):
            pts = [p for p in run["curve"] if p.get("reward") is not None]
            for ax, key in zip(axes[1:], ("episodes", "train_seconds")):
                ax.plot([p[key] for p in pts], [p["reward"] for p in pts], marker="o", alpha=0.8,
                        color=colors[arm](0.75), label=f"{arm.upper()} {run['setting']}" if k == 0 else None)
    axes[0].set_title("sweep: validation reward (choice)")
    axes[1].set_title("chosen settings: held-out reward")
    axes[2].set_title("chosen settings: held-out reward")
    axes[0].set_ylabel("validation reward")
    axes[1].set_ylabel("held-out reward")
    axes[0].set_xlabel("training episodes")
    axes[1].set_xlabel("training episodes")
    axes[2].set_xlabel("training wall time (s, evaluations excluded)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    equal = f"{budget_seconds:g} s of training each" if budget_seconds is not None else "equal episodes"
    fig.suptitle(f"ES vs GRPO at {equal}, each at its best validation setting (one line per seed)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(config: str, overrides: list[str], out: str, seeds: list[int], work_dir: str | None = None,
         grpo_lrs: list[float] | None = None, es_sigmas: list[float] | None = None,
         tune_seeds: list[int] | None = None, jobs: int = 1, budget_seconds: float | None = None,
         arms: str | None = None, records: str | None = None, final_overrides: list[str] | None = None,
         tune_only: bool = False, unseen_by_seeds: list[int] | None = None) -> dict:
    from ...config import ConfigError, load_config
    from ..common import write_results

    if len(seeds) < 1:
        raise ConfigError("bench compare needs at least one seed (--seeds 0,1,2)")
    if budget_seconds is not None and not budget_seconds > 0:
        raise ConfigError(f"bench compare: --budget-seconds takes a positive number of seconds, got {budget_seconds:g}")
    if budget_seconds is not None:
        overrides = list(overrides) + [f"run.budget_seconds={budget_seconds!r}"]
    tune_seeds = list(tune_seeds) if tune_seeds else seeds[:1]
    cfg = load_config(config, overrides)
    settings = sweep_settings(cfg, grpo_lrs, es_sigmas, read_arms(arms) if arms else None)
    # held-out before training (the paired improvement) and a validation split (the choice)
    base = list(overrides) + ["eval.at_start=true"] + (
        [] if cfg.tasks.validation else [f"tasks.validation={DEFAULT_VALIDATION}"])
    cfg = load_config(config, base)
    final_overrides = list(final_overrides or [])
    if final_overrides:  # checked now: a typo must not wait for the sweep to end
        load_config(config, base + final_overrides)
    work = work_dir or str(Path(out).with_suffix("")) + "-runs"
    records = records or str(Path(out).with_suffix("")) + "-records"  # committed: the study resumes from them
    episodes = cfg.es.generations * cfg.es.population * cfg.es.episodes_per_member
    per_run = (f"{budget_seconds:g} s of training (at most {episodes} episodes)" if budget_seconds is not None
               else f"{episodes} episodes")
    print(f"[bench] tuning budget per method: {len(settings['es'])} settings x {len(tune_seeds)} seed(s) x "
          f"{per_run}; choice on {cfg.tasks.validation} validation puzzles", flush=True)

    def run(arm: str, setting: dict, seed: int) -> dict:
        # a tuning run at a seed of no final run never plays held-out (the choice reads validation alone); a run at
        # a final seed plays it, with --final-override's settings (a fresh held-out set, pass@k)
        tuning_only = final_overrides if seed in seeds else ["eval.heldout=never"]
        r = train_run(config, base + arm_overrides(cfg, arm) + setting["overrides"] + tuning_only + [f"run.seed={seed}"], work,
                      f"{arm}-{setting['label']}-seed{seed}", records=records)
        return {**r, "seed": seed, "setting": setting["label"]}

    # 1. sweep: validation reward only
    sweep: dict[str, dict[str, list[dict]]] = {arm: {} for arm in ARMS}
    # the k-th setting of each method side by side (--jobs 2): both see the same contention
    plan = [(arm, settings[arm][k], seed) for seed in tune_seeds for k in range(len(settings["es"])) for arm in ARMS]
    for (arm, s, seed), r in zip(plan, run_all([lambda p=p: run(*p) for p in plan], jobs)):
        sweep[arm].setdefault(s["label"], []).append(r)
        print(f"sweep {arm:4s} {s['label']:>14s} seed {seed}: validation {final_validation(r):.4f}", flush=True)
    chosen = {arm: settings[arm][choose(sweep[arm])] for arm in ARMS}
    for arm in ARMS:
        print(f"[bench] {arm}: {chosen[arm]['label']} has the best validation reward", flush=True)
    sweeps = {arm: sweep_rows(sweep[arm]) for arm in ARMS}
    meta = {"config": config, "overrides": overrides, "final_overrides": final_overrides, "seeds": seeds,
            "tune_seeds": tune_seeds, "validation_puzzles": cfg.tasks.validation, "episodes_per_run": episodes,
            "jobs": jobs, "budget_seconds": budget_seconds, "arms_file": arms,
            "settings": {arm: [s["label"] for s in settings[arm]] for arm in ARMS},
            "arms": {arm: {s["label"]: s["overrides"] for s in settings[arm]} for arm in ARMS}}
    if tune_only:  # the choice alone: the final runs are another invocation's (the same command without it)
        print_sweep(sweeps, chosen, tune_seeds)
        res = {"es_best_arm" if arms else "es_best_sigma": chosen["es"]["label" if arms else "value"],
               "grpo_best_arm" if arms else "grpo_best_lr": chosen["grpo"]["label" if arms else "value"]}
        write_results(out, "compare", res, {**meta, "tune_only": True, "sweep": sweeps, "runs": {"sweep": sweep}})
        return res

    # 2. final runs of the chosen settings: held-out
    final: dict[str, list[dict]] = {arm: [] for arm in ARMS}
    plan = [(arm, chosen[arm], seed) for seed in seeds for arm in ARMS]
    for (arm, s, seed), r in zip(plan, run_all([lambda p=p: run(*p) for p in plan], jobs)):
        final[arm].append(r)
        c, sm = r["curve"], r["summary"]
        print(f"{arm:4s} {s['label']} seed {seed}: held-out {sm['base']['reward']:.4f} -> "
              f"{sm['final']['reward']:.4f} after {c[-1]['episodes']} episodes, {c[-1]['train_seconds']:.0f}s "
              f"of training", flush=True)

    table = {}
    for arm in ARMS:
        table[arm] = {"setting": chosen[arm]["label"], "value": chosen[arm]["value"],
                      "training_decoding": training_decoding(load_config(config, base + arm_overrides(cfg, arm)), arm),
                      "sweep": sweeps[arm], **heldout_row(final[arm])}
    if budget_seconds is None and table["es"]["episodes"] != table["grpo"]["episodes"]:
        raise RuntimeError(f"unequal episodes: ES {table['es']['episodes']}, GRPO {table['grpo']['episodes']}")

    print_sweep(sweeps, chosen, tune_seeds)
    print(f"\nheld-out, chosen settings, seeds {seeds} (mean +- sample std over seeds)"
          + (f"; {jobs} runs side by side: seconds are not a quiet machine's" if jobs > 1 else ""))
    print(f"{'algo':5s} {'setting':>13s} {'training decoding':>22s} {'base':>7s} {'final':>17s} "
          f"{'improvement per seed':>24s} {'episodes':>9s} {'train s':>8s} {'peak RSS MB':>12s}"
          + ("  (episodes and train s: means over seeds)" if budget_seconds is not None else ""))
    for arm in ARMS:
        row = table[arm]
        imps = ",".join(f"{v:+.3f}" for v in row["improvements"])
        print(f"{arm:5s} {row['setting']:>13s} {row['training_decoding']:>22s} {row['base_mean']:7.4f} "
              f"{row['final_mean']:8.4f} +- {row['final_std']:.4f} {imps:>24s} {row['episodes_mean']:9.0f} "
              f"{row['train_seconds_mean']:8.0f} {_mb(row['peak_rss_mb']):>12s}"
              + (f" (CUDA {_mb(row['peak_cuda_mb'])} MB)" if row["peak_cuda_mb"] is not None else ""))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    png = str(Path(out).with_suffix(".png"))
    step = cfg.eval.every_seconds
    if budget_seconds is not None:
        _plot_budget(sweep, final, png, budget_seconds, step)
    else:
        _plot(sweep, final, png, budget_seconds)
    print(f"plot: {png}")
    paired = paired_by_task(final["es"], final["grpo"])
    if paired is not None:
        print(f"ES - GRPO on the final held-out, task by task: {paired_note(paired)}")

    unseen = (unseen_figures(config, base, final_overrides, seeds, unseen_by_seeds, final)
              if unseen_by_seeds else None)
    if unseen is not None:
        print(f"held-out tasks no run at seeds {unseen_by_seeds} played in held-out or validation: "
              f"{'/'.join(map(str, unseen['tasks_per_seed']))} of seeds {seeds}")
        for arm in ARMS:
            print(f"  {arm:5s} {unseen[arm]['base_mean']:.4f} -> {unseen[arm]['final_mean']:.4f} "
                  f"(improvement per seed {','.join(f'{v:+.3f}' for v in unseen[arm]['improvements'])})")
        if unseen["es_minus_grpo_by_task"] is not None:
            print(f"  ES - GRPO task by task: {paired_note(unseen['es_minus_grpo_by_task'])}")
    elif unseen_by_seeds:
        print(f"(no figures on unseen tasks: a final seed has no held-out task outside the sets of seeds "
              f"{unseen_by_seeds}, or the final runs lack per-task held-out figures)")

    diff = table["es"]["final_mean"] - table["grpo"]["final_mean"]
    spread = math.sqrt((table["es"]["final_std"] ** 2 + table["grpo"]["final_std"] ** 2) / 2)
    res = ({"es_minus_grpo_heldout": diff, "es_best_arm": chosen["es"]["label"],
            "grpo_best_arm": chosen["grpo"]["label"]} if arms else
           {"es_minus_grpo_heldout": diff, "es_best_sigma": chosen["es"]["value"],
            "grpo_best_lr": chosen["grpo"]["value"]})
    if paired is not None:
        res["es_minus_grpo_se_over_tasks"] = paired["se_over_tasks"]
        if paired["se_over_seeds"] is not None:
            res["es_minus_grpo_se_over_seeds"] = paired["se_over_seeds"]
    if spread > 0:
        res["es_minus_grpo_over_spread"] = diff / spread
    else:
        print("(no spread over seeds: one seed, or equal finals; es_minus_grpo_over_spread left out)")
    for k, row in table["es"]["pass_at"].items():  # pass@k of the final held-out (eval.pass_at), ES - GRPO
        other = table["grpo"]["pass_at"].get(k)
        if other is not None:
            diffs = [a - b for a, b in zip(row["finals"], other["finals"])]  # seed by seed: the same tasks
            d, se = mean_se(diffs)
            se = se if len(diffs) > 1 else None
            res[f"es_minus_grpo_pass_at_{k}"] = d
            if se is not None:
                res[f"es_minus_grpo_pass_at_{k}_se_over_seeds"] = se
            print(f"held-out pass@{k} after training, mean over seeds: ES {row['final_mean']:.4f}, GRPO "
                  f"{other['final_mean']:.4f}; ES - GRPO {d:+.4f} (SE over seeds "
                  f"{f'{se:.4f}' if se is not None else 'n/a'}; per seed {', '.join(f'{d:+.3f}' for d in diffs)})")
    if unseen is not None and unseen["es_minus_grpo_by_task"] is not None:
        res["es_minus_grpo_heldout_unseen"] = unseen["es_minus_grpo_by_task"]["mean"]
        if unseen["es_minus_grpo_by_task"]["se_over_seeds"] is not None:
            res["es_minus_grpo_unseen_se_over_seeds"] = unseen["es_minus_grpo_by_task"]["se_over_seeds"]
    if budget_seconds is not None:
        res["es_over_grpo_episodes"] = table["es"]["episodes_mean"] / max(table["grpo"]["episodes_mean"], 1)
    per_seed = [e - g for e, g in zip(table["es"]["finals"], table["grpo"]["finals"])]
    write_results(out, "compare", res, {
        **meta, "es_minus_grpo_by_task": paired, "unseen": unseen,
        "validation_curves": mean_curves(final, "validation", step) if budget_seconds is not None else None,
        "pooled_std": spread, "es_minus_grpo_per_seed": per_seed, "table": table,
        "runs": {"sweep": sweep, "final": final}, "plot": png})
    return res
