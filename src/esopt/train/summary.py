"""The end of a run, for any algorithm: summary.json (base vs final held-out
figures with their paired difference) and the run's report."""
from __future__ import annotations

from ..es.perturb import weights_hash
from ..utils.seeding import derive_seed
from .evaluate import evaluate, paired_difference, summarize
from .rundir import RunDir


def record_eval(run: RunDir, policy, tasks, cfg, generation: int, log=print, unit: str = "generations") -> dict:
    """Held-out evaluation after `generation` updates: trajectories, metrics line and log line."""
    stats, episodes = evaluate(policy, tasks, cfg, seed=derive_seed("eval", cfg.run.seed))
    run.write_trajectories(f"eval_gen{generation:04d}", [{"generation": generation, **ep} for ep in episodes])
    run.log({"kind": "eval", "generation": generation, **{f"heldout_{k}": v for k, v in stats.items() if k != "per_task"}})
    log(f"[esopt] held-out after {generation} {unit}: reward {stats['reward']:.3f} ± {stats['reward_se']:.3f} "
        f"(solved {stats['solved']:.3f}, n={stats['n']}, {stats['seconds']:.0f}s)")
    return stats


def load_eval(run: RunDir, generation: int):
    """The figures of an earlier evaluation, from its recorded episodes (after a resume)."""
    episodes = run.read_trajectories(f"eval_gen{generation:04d}")
    return summarize(episodes) if episodes else None


def finish_run(run: RunDir, model, evals: dict, generations: int, log=print, **extra) -> dict:
    """Write summary.json from the evaluations {generation: stats}, close the run, refresh its report."""
    final = evals[generations]
    summary = {"run_dir": str(run.path), **extra, "generations": generations, "weights_hash": weights_hash(model),
               "final": {k: v for k, v in final.items() if k != "per_task"}}
    base = evals.get(0) or load_eval(run, 0)
    if base is not None:
        diff, se = paired_difference(final["per_task"], base["per_task"])
        summary["base"] = {k: v for k, v in base.items() if k != "per_task"}
        summary["improvement"] = {"mean": diff, "se": se}
    run.write_json("summary.json", summary)
    run.close()
    from ..report import refresh_report

    refresh_report(run.path, log)  # never raises: the run is complete without its report
    return summary
