"""esopt bench memory: peak memory of (a) evaluation only, (b) one ES generation,
(c) one GRPO step, on the same model and the same episodes, for 9x9 Sudoku at
H* = 5, 10, 15 (at most 3 x H* turns) and for the 4x4 demo task.

The evaluation phase holds no ES state (it ignores `es.noise`, so a noise
table is not allocated there). Every measurement runs in its own fresh Python process (nothing inherited from
another phase): peak RSS from getrusage on the CPU, torch.cuda.max_memory_allocated
on a GPU. Same episodes: ES plays population x episodes_per_member episodes (the
members one after another); evaluation plays the same puzzles as often with
the base weights; GRPO plays the same puzzles in groups of `population` episodes
(puzzles_per_step = episodes_per_member, group_size = population), then updates.

GRPO's update always runs (a group whose rewards are all equal gets
advantages of +-1 instead of 0 here, so the backward pass is never skipped),
on the longest `--grpo-sequences` turn sequences of the step
(default: two micro-batches), not all of them: the peak is set by one
micro-batch's activations plus the gradients and AdamW state, which do not grow
with the number of micro-batches accumulated, and a full update of a 45-turn
step takes hours on two CPU cores. The JSON records the cap.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time

from ...utils.memory import peak_rss_mb

PHASES = ("inference", "es", "grpo")
TASKS = {
    "4x4-demo": [],
    "9x9-h5": ["env.options.size=9", "env.options.blanks=5", "env.max_turns=15"],
    "9x9-h10": ["env.options.size=9", "env.options.blanks=10", "env.max_turns=30"],
    "9x9-h15": ["env.options.size=9", "env.options.blanks=15", "env.max_turns=45"],
}


def _peak(device: str) -> dict:
    out = {"peak_rss_mb": peak_rss_mb()}
    if device.startswith("cuda"):
        import torch

        out["peak_cuda_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def _always_update() -> None:
    """Give flat groups (all rewards equal: zero advantage, no backward pass) advantages
    of +-1, so the measured step always runs its update; memory does not depend on the
    advantage values, but skipping the backward pass would hide the step's peak."""
    import torch

    from ...algos.grpo import trainer as rl_trainer

    real = rl_trainer.group_advantages

    def nonflat(rewards, scale_std=True, eps=1e-6):
        adv = real(rewards, scale_std, eps)
        flat = (adv == 0).all(dim=1)
        signs = torch.tensor([1.0 if k % 2 == 0 else -1.0 for k in range(adv.shape[1])], dtype=adv.dtype)
        return torch.where(flat[:, None], signs.expand_as(adv), adv)

    rl_trainer.group_advantages = nonflat


def _es_always_updates(trainer) -> None:
    """A generation whose members all scored alike makes no update (and es.optimizer's state would
    never be made): give such a generation coefficients of 1 here, so the measured generation
    always ends in a real update, its optimizer state included; memory does not depend on the values."""
    import numpy as np

    from ...es.strategy import Told

    strategy = trainer.step.strategy
    real = strategy.tell

    def nonflat(members, rewards):
        told = real(members, rewards)
        if np.any(told.coefficients):
            return told
        return Told(told.shaped, np.ones(len(members)), told.nonfinite)  # an antithetic pair: its seed x 2

    strategy.tell = nonflat


def phase_main(argv=None) -> None:
    """One measurement (run in a fresh process); prints one JSON line."""
    ap = argparse.ArgumentParser()
    ap.add_argument("phase", choices=PHASES)
    ap.add_argument("config")
    ap.add_argument("overrides", nargs="*")
    ap.add_argument("--grpo-sequences", type=int, default=0, help="update on the longest N turn sequences (0: all)")
    a = ap.parse_args(argv)

    from ...config import load_config
    from ...train.evaluate import run_episodes
    from ...train.rundir import RunDir

    overrides = list(a.overrides)
    if a.phase == "inference":  # plain inference holds no ES state: no noise table, no low-rank factors
        overrides.append("es.noise=gaussian")
    cfg = load_config(a.config, overrides + [f"run.out_dir={tempfile.mkdtemp()}", "run.name=bench"])
    if a.phase == "grpo":
        from ...algos.grpo.trainer import GRPOTrainer

        cfg = load_config(a.config, a.overrides + [f"run.out_dir={tempfile.mkdtemp()}", "run.name=bench", "algo=grpo",
                                                   f"grpo.puzzles_per_step={cfg.es.episodes_per_member}",
                                                   f"grpo.group_size={cfg.es.population}"])
        _always_update()
        trainer = GRPOTrainer(cfg, RunDir.create(cfg), log=lambda *_: None)
        if a.grpo_sequences:
            update = trainer.update

            def capped(samples, update=update):
                longest = sorted(samples, key=lambda s: len(s.prompt_ids) + len(s.response_ids))[-a.grpo_sequences:]
                return update(longest)

            trainer.update = capped
    else:
        from ...algos.es.trainer import Trainer

        trainer = Trainer(cfg, RunDir.create(cfg), log=lambda *_: None)
        if a.phase == "es":
            _es_always_updates(trainer)
    loaded = _peak(cfg.runtime.device)
    t0 = time.time()
    extra = {}
    if a.phase == "inference":
        for m in trainer.step.strategy.ask(0):
            envs, ids, obs = trainer.tasks.train(cfg.es.episodes_per_member, 0)
            episodes = run_episodes(trainer.policy, envs, ids, obs, cfg, seed=m.index)
            extra["turns"] = extra.get("turns", 0) + sum(len(ep.turns) for ep in episodes)
    else:
        stats = trainer.generation(0)
        extra["tokens"] = stats.get("tokens")
        if a.phase == "es":
            extra["correction_mb"] = trainer.perturber.last_correction_bytes / 2**20
            # es.optimizer's state (es/optim.py), counted from its tensors, beside what the docs state for it
            rule = trainer.perturber.rule
            extra.update(optimizer=rule.kind, optimizer_state_mb=rule.state_bytes() / 2**20,
                         optimizer_stated_mb=4 * rule.buffers * trainer.perturber.numel / 2**20,
                         scope_numel=trainer.perturber.numel)
        else:
            extra["trained_tokens"] = stats.get("trained_tokens")
    print(json.dumps({"phase": a.phase, **_peak(cfg.runtime.device), "after_load": loaded,
                      "seconds": time.time() - t0, **extra}))


def run_phase(phase: str, config: str, overrides: list[str], grpo_sequences: int = 0) -> dict:
    cmd = [sys.executable, "-m", "esopt.studies.machine.memory", phase, config, *overrides, f"--grpo-sequences={grpo_sequences}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{phase} phase ({' '.join(overrides)}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def peak_of(row: dict) -> float:
    """The figure compared: GPU memory where measured, else peak RSS."""
    return row.get("peak_cuda_mb", row["peak_rss_mb"])


def measure(config: str, overrides: list[str], phases=PHASES, repeats: int = 1, grpo_sequences: int = 0,
            label: str = "") -> dict[str, list[dict]]:
    """The phases alternated `repeats` times, each in a fresh process."""
    runs: dict[str, list[dict]] = {p: [] for p in phases}
    for r in range(repeats):
        for phase in phases:
            row = run_phase(phase, config, overrides, grpo_sequences)
            runs[phase].append(row)
            print(f"{label}[{r + 1}/{repeats}] {phase:9s}: peak {peak_of(row):.0f} MB "
                  f"(after load {peak_of(row['after_load']):.0f} MB), {row['seconds']:.0f}s", flush=True)
    return runs


def _plot(table: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(table)
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(PHASES)
    for k, phase in enumerate(PHASES):
        xs = [i + (k - 1) * width for i in range(len(tasks))]
        ax.bar(xs, [table[t].get(phase, 0) for t in tasks], width, label=phase)
    ax.set_xticks(range(len(tasks)), tasks)
    ax.set_ylabel("peak memory (MB)")
    ax.set_title("Peak memory: evaluation vs one ES generation vs one GRPO step")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(config: str, overrides: list[str], out: str, repeats: int = 1, tasks: list[str] | None = None,
         grpo_sequences: int | None = None) -> dict:
    from statistics import median

    from ...config import ConfigError, load_config
    from ..common import write_results

    tasks = tasks or list(TASKS)
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ConfigError(f"unknown memory-bench task(s) {unknown}; allowed: {', '.join(TASKS)}")
    cfg = load_config(config, overrides)
    if grpo_sequences is None:
        grpo_sequences = 2 * cfg.grpo.micro_batch
    settings = {"config": config, "overrides": overrides, "repeats": repeats, "grpo_update_sequences": grpo_sequences,
                "population": cfg.es.population, "episodes_per_member": cfg.es.episodes_per_member}
    from ..common import kept_from_earlier

    runs = kept_from_earlier(out, settings, "runs", TASKS, tasks, "bench")
    for task in tasks:
        runs[task] = measure(config, overrides + TASKS[task], PHASES, repeats, grpo_sequences, label=f"{task} ")
    runs = {t: runs[t] for t in TASKS if t in runs}
    table = {t: {p: median(peak_of(r) for r in rows) for p, rows in r_.items()} for t, r_ in runs.items()}
    print(f"\n{'task':10s} " + " ".join(f"{p:>10s}" for p in PHASES) + "   es/inference  grpo/es")
    for task, row in table.items():
        print(f"{task:10s} " + " ".join(f"{row[p]:10.0f}" for p in PHASES)
              + f"   {row['es'] / row['inference']:12.3f}  {row['grpo'] / row['es']:7.2f}")
    results = {"es_over_inference_peak_max": max(r["es"] / r["inference"] for r in table.values())}
    if "9x9-h5" in table and "9x9-h15" in table:
        results["es_peak_growth_5_to_15"] = table["9x9-h15"]["es"] / table["9x9-h5"]["es"] - 1
    last = "9x9-h15" if "9x9-h15" in table else list(table)[-1]
    results["grpo_over_es_peak_at_15" if last == "9x9-h15" else f"grpo_over_es_peak_{last}"] = (
        table[last]["grpo"] / table[last]["es"])
    png = str(out).rsplit(".", 1)[0] + ".png"
    _plot(table, png)
    print(f"plot: {png}")
    write_results(out, "memory", results, {**settings, "median_peak_mb": table, "tasks": {t: TASKS[t] for t in table},
                                           "runs": runs, "plot": png})
    return results


if __name__ == "__main__":
    phase_main()
