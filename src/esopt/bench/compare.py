"""esopt bench compare: ES vs GRPO on one task at equal numbers of episodes,
several seeds each; held-out reward against episodes played and against
training wall time (evaluations excluded); a plot, a table (mean +- std over
seeds) and JSON.

Equal episodes: ES plays population x episodes_per_member episodes per
generation; GRPO plays puzzles_per_step x group_size per step, with
group_size = population and puzzles_per_step = episodes_per_member (so both
see the same number of puzzles per update, each played `population` times),
and as many steps as ES has generations. Both evaluate on the same held-out
puzzles (they depend only on the run seed) every `eval.every` updates.
"""
from __future__ import annotations

from pathlib import Path
from statistics import mean, pstdev

from .runs import train_run


def arm_overrides(cfg, arm: str) -> list[str]:
    if arm == "es":
        return ["algo=es"]
    return ["algo=grpo", f"grpo.steps={cfg.es.generations}", f"grpo.group_size={cfg.es.population}",
            f"grpo.puzzles_per_step={cfg.es.episodes_per_member}"]


def _plot(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for arm, runs in results.items():
        for k, run in enumerate(runs):
            c = run["curve"]
            for ax, key in zip(axes, ("episodes", "train_seconds")):
                ax.plot([p[key] for p in c], [p["reward"] for p in c], marker="o", alpha=0.8,
                        color="tab:blue" if arm == "es" else "tab:orange", label=arm.upper() if k == 0 else None)
    axes[0].set_xlabel("training episodes")
    axes[1].set_xlabel("training wall time (s, evaluations excluded)")
    axes[0].set_ylabel("held-out reward")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("ES vs GRPO at equal episodes (one line per seed)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(config: str, overrides: list[str], out: str, seeds: list[int], work_dir: str | None = None) -> dict:
    from ..config import ConfigError, load_config
    from .common import write_results

    if len(seeds) < 1:
        raise ConfigError("bench compare needs at least one seed (--seeds 0,1,2)")
    cfg = load_config(config, overrides)
    work = work_dir or str(Path(out).with_suffix("")) + "-runs"
    results: dict[str, list[dict]] = {"es": [], "grpo": []}
    for seed in seeds:
        for arm in results:
            run = train_run(config, overrides + arm_overrides(cfg, arm) + [f"run.seed={seed}"], work, f"{arm}-seed{seed}")
            run["seed"] = seed
            results[arm].append(run)
            final = run["curve"][-1]
            print(f"{arm:4s} seed {seed}: held-out {run['curve'][0]['reward']:.4f} -> {final['reward']:.4f} "
                  f"after {final['episodes']} episodes, {final['train_seconds']:.0f}s of training", flush=True)
    table = {}
    for arm, runs in results.items():
        finals = [r["curve"][-1]["reward"] for r in runs]
        table[arm] = {"final_mean": mean(finals), "final_std": pstdev(finals), "finals": finals,
                      "base_mean": mean(r["curve"][0]["reward"] for r in runs),
                      "episodes": runs[0]["curve"][-1]["episodes"],
                      "train_seconds_mean": mean(r["curve"][-1]["train_seconds"] for r in runs)}
    print(f"\n{'algo':5s} {'held-out base':>14s} {'final (mean +- std)':>22s} {'episodes':>9s} {'train s':>8s}")
    for arm, row in table.items():
        print(f"{arm:5s} {row['base_mean']:14.4f} {row['final_mean']:13.4f} +- {row['final_std']:.4f} "
              f"{row['episodes']:9d} {row['train_seconds_mean']:8.0f}")
    png = str(Path(out).with_suffix(".png"))
    _plot(results, png)
    print(f"plot: {png}")
    res = {"es_minus_grpo_heldout": table["es"]["final_mean"] - table["grpo"]["final_mean"]}
    write_results(out, "compare", res, {"config": config, "overrides": overrides, "seeds": seeds, "table": table,
                                        "runs": results, "plot": png})
    return res
