"""esopt bench population: vanilla ES (fixed sigma) with a small and a large
population on a weaker and a stronger backbone; best and final reward per run,
in a table like the paper's (backbone x G, best / final): final is held-out;
best is the best evaluation on the validation split when the runs have one
(tasks.validation), else on held-out (as in earlier versions).

A backbone is any model esopt loads: an alias, a Hugging Face folder, or an
exported ES run (`esopt export RUN DIR`) as the stronger one.
"""
from __future__ import annotations

from pathlib import Path

from ..runs import train_run


def main(config: str, overrides: list[str], out: str, models: list[str], populations: list[int], seed: int = 0,
         work_dir: str | None = None) -> dict:
    from ...config import ConfigError, load_config
    from ..common import write_results

    if len(models) < 1 or len(populations) < 2:
        raise ConfigError("bench population needs >= 1 model (--models) and >= 2 population sizes (--populations 8,16)")
    cfg = load_config(config, overrides)
    sigma = cfg.es.sigma.start
    fixed = [f"es.sigma.end={sigma}", "es.sigma.schedule=constant"]  # vanilla ES: fixed sigma
    work = work_dir or str(Path(out).with_suffix("")) + "-runs"
    table: dict[str, dict[str, dict]] = {}
    for k, model in enumerate(models):
        table[model] = {}
        for g in populations:
            run = train_run(config, overrides + fixed + [f"model={model}", f"es.population={g}", f"run.seed={seed}"],
                            work, f"model{k}-G{g}")
            rewards = [p["reward"] for p in run["curve"] if p["reward"] is not None]
            # "best" over the evaluations: on the validation split when the runs have one (held-out is
            # then played only at the start and the end, and a best-of on it would select on test data)
            val = [p["validation"] for p in run["curve"] if p.get("validation") is not None]
            best, best_on = (max(val[1:] or val), "validation") if val else (max(rewards[1:] or rewards), "heldout")
            table[model][str(g)] = {"base": rewards[0], "best": best, "best_on": best_on, "final": rewards[-1],
                                    "curve": run["curve"], "run_dir": run["run_dir"]}
            print(f"{model} G={g}: held-out base {rewards[0]:.4f}, best ({best_on}) {best:.4f}, "
                  f"final {rewards[-1]:.4f}", flush=True)
    print("\n" + f"{'backbone':40s} " + " ".join(f"{'G=' + str(g) + ' best/final':>20s}" for g in populations))
    for model, row in table.items():
        print(f"{model[-40:]:40s} " + " ".join(f"{row[str(g)]['best']:9.4f}/{row[str(g)]['final']:.4f}" for g in populations))
    small, large = str(min(populations)), str(max(populations))
    res = {f"large_minus_small_final_{k}": row[large]["final"] - row[small]["final"] for k, row in enumerate(table.values())}
    write_results(out, "population", res, {"config": config, "overrides": overrides, "models": models,
                                           "populations": populations, "seed": seed, "sigma": sigma, "table": table})
    return res
