"""Training runs driven by benchmarks: each in its own process (`esopt train`), so
memory and wall time are its own, then read back from its run folder."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from ..train.rundir import RunDir


def train_run(config: str, overrides: list[str], out_dir: str, name: str, log=print) -> dict:
    """Run `esopt train CONFIG overrides` into out_dir/name and return its held-out curve.

    curve: one point per evaluation: generation (or GRPO step), episodes played
    before it, seconds of training before it (evaluations excluded), reward, SE.
    An existing finished run of that name is read back instead of trained again.
    """
    path = Path(out_dir) / name
    if not (path / "summary.json").exists():
        cmd = [sys.executable, "-m", "esopt.cli", "train", config, *overrides, f"run.out_dir={out_dir}", f"run.name={name}"]
        t0 = time.time()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"training run {name} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        log(f"[bench] {name}: trained in {time.time() - t0:.0f}s")
    return read_run(path)


def read_run(path: Path) -> dict:
    summary = json.loads((path / "summary.json").read_text())
    metrics = RunDir(path).metrics()
    per_gen = summary.get("episodes_per_generation")
    train_seconds: dict[int, float] = {}
    episodes: dict[int, int] = {}
    spent, played = 0.0, 0
    for m in metrics:
        if m.get("kind") == "train":
            g = m["generation"]
            spent += sum(v for k, v in m.items() if k.startswith("time_"))
            played += int(m.get("episodes") or per_gen or 0)
            train_seconds[g + 1], episodes[g + 1] = spent, played
    # reward/se: held-out (None at evaluations that played only the validation split);
    # validation/validation_se: the validation split's figures where the run has one
    curve = [{"generation": m["generation"], "episodes": episodes.get(m["generation"], 0),
              "train_seconds": train_seconds.get(m["generation"], 0.0),
              "reward": m.get("heldout_reward"), "se": m.get("heldout_reward_se"),
              "validation": m.get("validation_reward"), "validation_se": m.get("validation_reward_se")}
             for m in metrics if m.get("kind") == "eval"]
    return {"run_dir": str(path), "summary": summary, "curve": curve}
