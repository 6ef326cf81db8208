"""`make demo`: train with the demo config, evaluate base and result on the same
held-out puzzles, write the run's report, and print the figures (RESULT lines last)."""
from __future__ import annotations

import sys
import time

from .config import load_config
from .report import default_report_path
from .train.preflight import check_run_config
from .train.rundir import RunDir
from .algos.es.trainer import Trainer


def main(argv: list[str]) -> int:
    config = argv[0] if argv else "configs/demo.yaml"
    cfg = load_config(config, argv[1:])
    check_run_config(cfg)  # one line, before a run folder exists
    if cfg.run.name is None:
        cfg.run.name = f"demo-seed{cfg.run.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    run = RunDir.create(cfg)
    print(f"[esopt] demo: ES on {cfg.model}, {cfg.env.options.size}x{cfg.env.options.size} Sudoku with {cfg.env.options.blanks} blanks, "
          f"{cfg.es.generations} generations x {cfg.es.population} members x {cfg.es.episodes_per_member} episodes; "
          f"run folder {run.path}", flush=True)
    t0 = time.time()
    summary = Trainer(cfg, run).train()
    base, final, imp = summary["base"], summary["final"], summary["improvement"]
    print(f"[esopt] held-out: n={final['n']} puzzles (the same for base and ES), run seed {cfg.run.seed}, "
          f"greedy decoding, reward={cfg.env.options.reward}")
    print(f"[esopt] base {base['reward']:.4f} (solved {base['solved']:.3f}) -> ES {final['reward']:.4f} "
          f"(solved {final['solved']:.3f}); paired difference {imp['mean']:+.4f} ± {imp['se']:.4f} (SE)")
    if "validation" in summary:  # the centre's progress, measured during the run on the validation split
        curve = [(m["generation"], m["validation_reward"]) for m in run.metrics()
                 if m.get("kind") == "eval" and "validation_reward" in m]
        print(f"[esopt] validation reward after N generations ({cfg.tasks.validation} puzzles, disjoint from "
              "training and held-out): " + ", ".join(f"N={g} {r:.3f}" for g, r in curve))
    print(f"[esopt] total {time.time() - t0:.0f}s; run folder {run.path}")
    report = default_report_path(run.path)
    if report.exists():  # written by the trainer at the end of the run
        print(f"[esopt] report: {report.resolve()} (open it in a browser)")
    else:
        print(f"[esopt] report not written; retry with: esopt report {run.path}")
    print(f"RESULT heldout_reward_base={base['reward']:.4f}")
    print(f"RESULT heldout_reward_es={final['reward']:.4f}")
    return 0


def run(argv: list[str]) -> int:
    from .errors import one_line

    return one_line(main, argv)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
