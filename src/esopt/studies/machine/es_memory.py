"""esopt bench es-memory: peak memory of one ES generation vs evaluating the same
episodes, on one config (the demo's by default); each phase in its own fresh
process, the two alternating `repeats` times. The multi-task version with a
GRPO step is `esopt bench memory` (studies/machine/memory.py)."""
from __future__ import annotations

from statistics import median

from ..common import write_results
from .memory import measure, peak_of


def main(config: str, overrides: list[str], out: str, repeats: int = 3) -> dict:
    """The ratio is of the median peaks."""
    runs = measure(config, overrides, ("inference", "es"), repeats)
    peaks = {phase: median(peak_of(row) for row in rows) for phase, rows in runs.items()}
    ratio = peaks["es"] / peaks["inference"]
    print(f"median peak memory: inference {peaks['inference']:.0f} MB, ES generation {peaks['es']:.0f} MB")
    write_results(out, "es-memory", {"es_over_inference_peak_rss": ratio},
                  {"config": config, "overrides": overrides, "repeats": repeats,
                   "median_peak_rss_mb": peaks, "runs": runs})
    return peaks
