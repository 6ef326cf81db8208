"""esopt bench es-memory: peak RSS of one ES generation vs evaluating the same episodes.

Each phase runs in its own fresh Python process (so neither inherits the
other's allocations): `inference` plays every member's episodes with the base
weights; `es` runs one real ES generation (perturb, play, restore, update).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from ..utils.memory import peak_rss_mb


def phase_main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("phase", choices=["inference", "es"])
    ap.add_argument("config")
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args(argv)
    import tempfile

    from ..config import load_config
    from ..train.evaluate import run_episodes
    from ..train.rundir import RunDir
    from ..train.trainer import Trainer

    cfg = load_config(a.config, a.overrides + [f"run.out_dir={tempfile.mkdtemp()}", "run.name=bench"])
    trainer = Trainer(cfg, RunDir.create(cfg), log=lambda *_: None)
    rss_loaded = peak_rss_mb()
    t0 = time.time()
    if a.phase == "es":
        trainer.generation(0)
    else:
        for m in trainer.strategy.ask(0):
            envs, ids, obs = trainer.tasks.train(cfg.es.episodes_per_member, 0)
            run_episodes(trainer.policy, envs, ids, obs, cfg, seed=m.index)
    print(json.dumps({"phase": a.phase, "peak_rss_mb": peak_rss_mb(), "rss_after_load_mb": rss_loaded,
                      "seconds": time.time() - t0, "correction_mb": trainer.perturber.last_correction_bytes / 2**20}))


def main(config: str, overrides: list[str], out: str, repeats: int = 3) -> dict:
    """Alternate the two phases `repeats` times; the ratio is of the median peaks."""
    from statistics import median

    from .common import write_results

    runs: dict[str, list[dict]] = {"inference": [], "es": []}
    for r in range(repeats):
        for phase in ("inference", "es"):
            proc = subprocess.run([sys.executable, "-m", "esopt.bench.es_memory", phase, config, *overrides],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"{phase} phase failed:\n{proc.stderr[-3000:]}")
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            runs[phase].append(row)
            print(f"[{r + 1}/{repeats}] {phase:9s}: peak RSS {row['peak_rss_mb']:.0f} MB "
                  f"(after load {row['rss_after_load_mb']:.0f} MB), {row['seconds']:.0f}s", flush=True)
    peaks = {phase: median(row["peak_rss_mb"] for row in rows) for phase, rows in runs.items()}
    ratio = peaks["es"] / peaks["inference"]
    print(f"median peak RSS: inference {peaks['inference']:.0f} MB, ES generation {peaks['es']:.0f} MB")
    write_results(out, "es-memory", {"es_over_inference_peak_rss": ratio},
                  {"config": config, "overrides": overrides, "repeats": repeats,
                   "median_peak_rss_mb": peaks, "runs": runs})
    return peaks


if __name__ == "__main__":
    phase_main()
