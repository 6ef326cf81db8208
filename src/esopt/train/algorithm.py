"""The contract between the harness and a training algorithm, and the registry that names them.

The harness (run folders, sessions, resume checks, evaluation, export, reports) never tests a
run's `algo` string: it asks the run's Algorithm. An algorithm is one package under esopt.algos
with a plug-in object; a new one is a package and one line in ALGORITHMS (or an `esopt.algos`
entry point), nothing else. The harness names plug-ins by import path, so nothing in train/
imports an algorithm's package.
"""
from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from pathlib import Path

from ..utils.settings import ConfigError

ALGORITHMS = {
    "es": "esopt.algos.es.plugin:ES",
    "grpo": "esopt.algos.grpo.plugin:GRPO",
    "gepa": "esopt.algos.gepa.plugin:GEPA",
}


class Algorithm:
    """What the harness asks of an algorithm. Defaults suit an algorithm that keeps nothing to
    resume from; each plug-in overrides what it has."""

    name = ""
    title = ""  # in summaries and RESULT lines: ES, GRPO, GEPA
    unit = "generations"  # what one update is called in logs and reports
    budget_key = "es.generations"  # the config key counting updates
    # unchangeable on resume; env.task_set: env.max_turns and env.options but their run options (resume_check.task_set)
    frozen: tuple[str, ...] = ("model", "algo", "runtime.dtype", "run.seed", "env.id", "env.task_set")
    # recorded settings computed from a config value: key -> (the config key it is computed from, function);
    # checked against config.yaml like the frozen ones, before any model loads (train/resume_check.py)
    computed: dict = {}
    record = "history"  # what a resume continues from (said in messages)
    resumable = True
    on_ray = False  # whether members can be played on Ray workers (train/ray/)
    run_prefix = ""  # default run folder names: <prefix><env>-<time>
    step_name = "generation"  # one update, on a report's axes
    schedules = False  # whether sigma and alpha schedules drive it (a report plots them against the plan)

    def recorded_keys(self, cfg) -> tuple[str, ...]:
        """The frozen settings a run started with `cfg` writes into its record (all of them here)."""
        return self.frozen

    def check(self, cfg, on_ray: bool = False) -> None:
        """Refuse (ConfigError, one line) settings this algorithm cannot run, before anything is written."""
        if on_ray and not self.on_ray:
            raise ConfigError(f"--workers / --ray-address play ES members on Ray; the {self.title} baseline runs in "
                              "one process")

    def check_overrides(self, overrides) -> None:
        """Refuse (one line) another algorithm's budget key given without this one's: the run would
        silently ignore it (--algo grpo es.generations=2 trains grpo.steps updates)."""
        keys = {item.split("=", 1)[0].strip() for item in overrides}
        if self.budget_key in keys:
            return
        for name in ALGORITHMS:
            other = algorithm(name).budget_key
            if other != self.budget_key and other in keys:
                raise ConfigError(f"{other} does not set the length of an algo={self.name} run: give "
                                  f"{self.budget_key}=N (the number of {self.unit})")

    def extend(self, old, new, log=print) -> None:
        """A resume with a larger budget than the run's (old: its config, new: with the overrides):
        settle in `new` what the longer run keeps of the old plan (ES: its schedules)."""

    def trainer(self, cfg, run, runner=None, log=print, **options):
        """The object that trains: train(start) -> summary, resume() -> next update, evaluate(n)."""
        raise NotImplementedError

    def done(self, run, cfg) -> int:
        """Updates already made in `run` (whose own config is `cfg`)."""
        return 0

    def holds(self, path: Path) -> bool:
        """Whether `path` holds something of this algorithm's to resume from."""
        return False

    def recorded_settings(self, path: Path) -> dict | None:
        """The frozen settings the run's record wrote down when it started (None: none kept)."""
        return None

    def load_weights(self, run, cfg, model, upto: int | None = None) -> int:
        """Put the run's weights after `upto` updates (default: all) into `model`; returns how many."""
        raise NotImplementedError(f"{self.title} runs keep no weights to load")

    def final_context(self, run, cfg, upto: int):
        """(AgentContext, description) the run's agent plays with after `upto` updates; None: the config's."""
        return None

    def export_files(self, folder: Path, run, cfg) -> dict | None:
        """Write what an export carries besides the weights (e.g. a context); returns its description."""
        return None

    # a report reads run folders that may be damaged: c(dotted key, default) answers from the run's
    # config.yaml as written (None where missing), meta is history.json's metadata ({} without one)
    def episodes_per_update(self, c) -> int | None:
        """Training episodes one update plays."""
        return None

    def settings_rows(self, c, meta: dict) -> list[tuple[str, str | dict]]:
        """(label, value) rows of the algorithm's settings, a value being a text or a mapping (a report draws
        it as a table of name | value): by default its config section, if any."""
        section = c(self.name)
        if not isinstance(section, dict) or not section:
            return []
        return [(self.title, dict(section))]


def product(c, *keys: str) -> int | None:
    """The product of these config values, if every one is an int."""
    values = [c(k) for k in keys]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    out = 1
    for v in values:
        out *= v
    return out


def algorithm(name: str) -> Algorithm:
    """The plug-in of `name`: registered here or by an `esopt.algos` entry point."""
    target = ALGORITHMS.get(name)
    if target is None:
        found = [ep for ep in entry_points(group="esopt.algos") if ep.name == name]
        if not found:
            raise ConfigError(f"unknown algo {name!r}; known: {', '.join(sorted(ALGORITHMS))}")
        return found[0].load()()
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)()


def of_run(path: Path) -> Algorithm | None:
    """The algorithm whose record `path` holds (any registered one), or None."""
    for name in ALGORITHMS:
        algo = algorithm(name)
        if algo.holds(path):
            return algo
    return None
