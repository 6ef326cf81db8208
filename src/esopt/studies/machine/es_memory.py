"""esopt bench es-memory: peak memory of one ES generation vs evaluating the same
episodes, on one config (the demo's by default); each phase in its own fresh
process, the two alternating `repeats` times. The multi-task version with a
GRPO step is `esopt bench memory` (studies/machine/memory.py).

The measured generation always ends in an update (a generation whose members scored alike is
given coefficients of 1), so es.optimizer's state (es/optim.py) is made in it and counted: from
its tensors (optimizer_state_mb) beside what docs/config.md states for it (4 bytes per tuned
element for momentum, 8 for adam, 0 for sgd). --optimizers sgd,momentum,adam measures one ES
generation per optimizer beside the same inference runs."""
from __future__ import annotations

from statistics import median

from ..common import write_results
from .memory import measure, peak_of


def main(config: str, overrides: list[str], out: str, repeats: int = 3, optimizers: list[str] | None = None) -> dict:
    """The ratio is of the median peaks (the first optimizer's, or the config's)."""
    runs = measure(config, overrides, ("inference", "es"), repeats) if not optimizers else \
        measure(config, overrides + [f"es.optimizer={optimizers[0]}"], ("inference", "es"), repeats)
    by_opt = {runs["es"][0].get("optimizer", "sgd"): runs["es"]}
    for opt in (optimizers or [])[1:]:
        by_opt[opt] = measure(config, overrides + [f"es.optimizer={opt}"], ("es",), repeats, label=f"{opt} ")["es"]
    peaks = {phase: median(peak_of(row) for row in rows) for phase, rows in runs.items()}
    ratio = peaks["es"] / peaks["inference"]
    print(f"median peak memory: inference {peaks['inference']:.0f} MB, ES generation {peaks['es']:.0f} MB")
    results = {}
    table = {}
    for opt, rows in by_opt.items():
        row = {"median_peak_mb": median(peak_of(r) for r in rows),
               "optimizer_state_mb": rows[0].get("optimizer_state_mb", 0.0),
               "optimizer_stated_mb": rows[0].get("optimizer_stated_mb", 0.0), "scope_numel": rows[0].get("scope_numel")}
        table[opt] = row
        print(f"es.optimizer={opt}: ES generation peak {row['median_peak_mb']:.0f} MB, optimizer state "
              f"{row['optimizer_state_mb']:.1f} MB counted ({row['optimizer_stated_mb']:.1f} MB stated: "
              f"{row['scope_numel']} tuned elements)")
        results[f"es_optimizer_state_mb_{opt}"] = float(row["optimizer_state_mb"])
        if len(by_opt) > 1:
            results[f"es_over_inference_peak_rss_{opt}"] = row["median_peak_mb"] / peaks["inference"]
    results["es_over_inference_peak_rss"] = ratio  # the headline, last (RESULT lines are read bottom up)
    write_results(out, "es-memory", results,
                  {"config": config, "overrides": overrides, "repeats": repeats,
                   "median_peak_rss_mb": peaks, "optimizers": table, "runs": runs,
                   "optimizer_runs": {k: v for k, v in by_opt.items() if k not in (optimizers or [None])[:1]}})
    return peaks
