"""`esopt bench NAME` for the method studies: one row per bench, with the flags it takes.

A row is (module, what it measures, flags, call), as in machine/benches.py: `flags` are (flag,
argparse keywords) pairs, the only options `esopt bench NAME` accepts besides --out;
`call(module, a, config, overrides)` runs the bench from the parsed flags `a`. Imported whenever
the command line is built: nothing here imports torch or a bench."""
from __future__ import annotations

from ...utils.args import floats, ints, names, task_list
from ..common import out_path

_JOBS = ("--jobs", dict(type=int, default=1,
         help="training runs side by side (default 1; seconds are then shared-machine figures; give each run "
              "its share of the cores with runtime.threads)"))


def _room(m, a, config, overrides):
    if config:  # each task has its own config; the arguments are overrides for all of them
        raise SystemExit(f"esopt: error: bench room takes overrides only (each task names its config); got {config}")
    m.main(task_list(a.tasks), overrides, out_path(a, "room"), train=a.train, seeds=ints(a.seeds, "--seeds", "0,1,2"),
           runs=a.runs or "runs/room")


BENCHES = {
    "compare": ("compare", "ES vs GRPO at equal episodes (or seconds), each tuned on validation",
                (("--seeds", dict(help="run seeds of the final runs of each method's chosen setting (default 0,1,2)")),
                 ("--grpo-lrs", dict(help="GRPO learning rates swept (default 1e-6,1e-5,1e-4)")),
                 ("--es-sigmas", dict(help="ES sigma.start values swept, sigma.end scaled alike "
                      "(default: the config's sigma x 0.5,1,2); as many as --grpo-lrs")),
                 ("--tune-seeds", dict(help="run seeds of the sweep, chosen on validation (default: the first of "
                      "--seeds)")),
                 ("--budget-seconds", dict(type=float, default=None,
                      help="every run trains for this many seconds (evaluations excluded; run.budget_seconds) "
                      "instead of equal episodes; es.generations is then the most updates a run may make")),
                 ("--arms", dict(help="a YAML file of the settings swept, {es: {label: [override, ...]}, grpo: {...}} "
                      "(as many of each), instead of --es-sigmas / --grpo-lrs; e.g. "
                      "configs/studies/equal-time-arms.yaml")),
                 ("--final-override", dict(action="append", metavar="KEY=VALUE", dest="final_overrides",
                      help="a setting for the runs at --seeds only (they play held-out), e.g. "
                      "tasks.heldout_skip=128 for a held-out set no choice has seen, eval.pass_at=[1,4]; repeatable; "
                      "the tuning runs keep the command's settings")),
                 ("--tune-only", dict(action="store_true",
                      help="stop after the sweep and the choice (no final runs): run the same command without it "
                      "for the finals")),
                 ("--unseen-by-seeds", dict(help="also give the finals on the held-out tasks that no run at these "
                      "seeds played in held-out or validation under the tuning settings (compared by content), e.g. "
                      "0,1,...,10 for every seed a choice has read")),
                 _JOBS),
                lambda m, a, c, o: m.main(c, o, out_path(a, "compare"), ints(a.seeds, "--seeds", "0,1,2"),
                                          grpo_lrs=floats(a.grpo_lrs, "--grpo-lrs"),
                                          es_sigmas=floats(a.es_sigmas, "--es-sigmas"),
                                          tune_seeds=ints(a.tune_seeds, "--tune-seeds"), jobs=a.jobs,
                                          budget_seconds=a.budget_seconds, arms=a.arms,
                                          final_overrides=a.final_overrides, tune_only=a.tune_only,
                                          unseen_by_seeds=ints(a.unseen_by_seeds, "--unseen-by-seeds"))),
    "settings": ("settings", "one algorithm's named settings (--arms) side by side on the validation split",
                 (("--arms", dict(help="a YAML file of the settings, {label: [override, ...]}, e.g. "
                       "configs/studies/scope-sigma-arms.yaml")),
                  ("--seeds", dict(help="run seeds of every setting (default 0)")),
                  ("--unseen-by-seeds", dict(help="also give held-out figures on the tasks that no run at these "
                       "seeds played in held-out or validation under the command's settings with "
                       "tasks.heldout_skip=0 (compared by content), e.g. 0,1,...,10")),
                  _JOBS),
                 lambda m, a, c, o: m.main(c, o, out_path(a, "settings"), a.arms, ints(a.seeds, "--seeds", "0"),
                                           jobs=a.jobs, unseen_by_seeds=ints(a.unseen_by_seeds,
                                                                             "--unseen-by-seeds"))),
    "population": ("population", "vanilla ES, small vs large population, on a weaker and a stronger backbone",
                   (("--models", dict(help="comma-separated backbones, weaker first (aliases, folders, exports)")),
                    ("--populations", dict(help="comma-separated population sizes (default 8,16)")),
                    ("--seed", dict(type=int, default=0, help="run seed"))),
                   lambda m, a, c, o: m.main(c, o, out_path(a, "population"), names(a.models) or [],
                                             ints(a.populations, "--populations", "8,16"), seed=a.seed)),
    "horizon": ("horizon", "ES vs GRPO as the episode gets longer",
                (("--tasks", dict(help="horizons as 4x4-bN / 9x9-hN, N blanks and 3N turns "
                      "(default 4x4-b2,4x4-b4,4x4-b6; the paper's: 9x9-h5,9x9-h10,9x9-h15)")),
                 ("--seeds", dict(help="run seeds (default 0,1)")),
                 ("--grpo-lr", dict(type=float, default=None,
                      help="GRPO learning rate (default: grpo_best_lr of compare.json beside --out, else 1e-5)")),
                 ("--es-sigma", dict(type=float, default=None,
                      help="ES sigma.start, sigma.end scaled alike (default: es_best_sigma of compare.json "
                      "beside --out, else the config's)")),
                 _JOBS),
                lambda m, a, c, o: m.main(c, o, out_path(a, "horizon"), ints(a.seeds, "--seeds", "0,1"),
                                          tasks=names(a.tasks), grpo_lr=a.grpo_lr, jobs=a.jobs, es_sigma=a.es_sigma)),
    "room": ("room", "which tasks a small model can learn (validation success), ES on those with room",
             (("--tasks", dict(help="task names (studies/method/room.py TASKS) or name=config:override,... "
                   "(default: all)")),
              ("--train", dict(type=int, default=0,
                   help="train ES on this many tasks with the most room (validation success in [0.1, 0.7], "
                   "lowest first; left out: tasks where the base model plays 90%% of episodes with the same "
                   "replies), --seeds each (default 0: the base table only)")),
              ("--seeds", dict(help="ES run seeds (default 0,1,2)")),
              ("--runs", dict(help="folder of the ES runs (default runs/room; finished runs are read back)"))),
             _room),
}

TAKES_NO_CONFIG = {"room"}  # its arguments are overrides only: each task names its own config
