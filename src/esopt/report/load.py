"""Read a run folder tolerantly: whatever is there, plus notes on what is not.

A run may be finished, still running, killed mid-way, or have lost files: each
reader takes what it can and adds one line to ``RunData.missing`` saying what
is absent or unreadable, so the page can say so instead of failing.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..envs.origin import recall_run
from ..utils.jsonl import read_jsonl
from ..utils.settings import ConfigError

RUN_FILES = ("config.yaml", "history.json", "metrics.jsonl")
_TRAJ = re.compile(r"^(eval_)?gen(\d+)\.jsonl$")


@dataclass
class Report:
    """A written report: its page, its PNG files and what it lists as missing."""

    path: Path  # the HTML page
    pngs: list[Path] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # e.g. compared runs of another environment


@dataclass
class RunData:
    path: Path
    config: dict = field(default_factory=dict)
    config_text: str = ""
    meta: dict = field(default_factory=dict)
    records: list[dict] = field(default_factory=list)  # history.json generations
    train: list[dict] = field(default_factory=list)  # one row per generation (metrics, else history)
    evals: list[dict] = field(default_factory=list)  # kind=eval metrics lines, by generation
    summary: dict | None = None
    train_traj: dict[int, Path] = field(default_factory=dict)  # generation -> trajectories/genNNNN.jsonl
    eval_traj: dict[int, Path] = field(default_factory=dict)  # generation -> trajectories/eval_genNNNN.jsonl
    missing: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.name

    def cfg(self, dotted: str, default=None):
        """A config value by dotted key (``es.sigma.start``), or ``default``."""
        node = self.config
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    @property
    def algo(self) -> str:
        return str(self.cfg("algo", "es"))

    @property
    def algorithm(self):
        """The plug-in of the run's algo (esopt.train.algorithm), which says what its updates are
        called, how many were planned, what each plays and which settings to show; an algo not
        known here gets the contract's defaults."""
        from ..train.algorithm import Algorithm, algorithm
        from ..utils.settings import ConfigError

        try:
            return algorithm(self.algo)
        except ConfigError:
            return Algorithm()

    @property
    def planned(self) -> int | None:
        key = self.algorithm.budget_key
        g = self.cfg(key) if key else None
        return g if isinstance(g, int) else None

    @property
    def episodes_per_generation(self) -> int | None:
        """Training episodes played per update (an ES generation, a GRPO step), from the config."""
        return self.algorithm.episodes_per_update(self.cfg)

    @property
    def done(self) -> int:
        """Generations recorded (history, else metrics)."""
        return max(len(self.records), len(self.train))

    @property
    def env_id(self) -> str:
        return str(self.cfg("env.id", "sudoku"))

    @property
    def status(self) -> str:
        planned = f" of {self.planned}" if self.planned else ""
        if self.summary is not None:
            return f"finished: {self.done}{planned} generations"
        return (f"not finished (no summary.json): {self.done}{planned} generations recorded; "
                "the run is still going, or it was stopped")


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and any((path / f).exists() for f in RUN_FILES)


def load_run(path) -> RunData:
    path = Path(path)
    if not is_run_dir(path):
        if not path.exists():
            raise FileNotFoundError(f"run folder {path} does not exist")
        raise FileNotFoundError(f"{path} is not an esopt run folder (it has none of {', '.join(RUN_FILES)})")
    run = RunData(path=path)
    _read_config(run)
    _read_history(run)
    if run.config:  # config.yaml must agree with what the run's record wrote down
        from ..train.resume_check import check_record

        check_record(path, lambda key: run.cfg(key))
    train, run.evals = _read_metrics(run)
    run.train = _train_rows(run, train)
    _read_summary(run)
    _find_trajectories(run)
    if not run.evals and run.eval_traj:
        run.evals = [_eval_from_episodes(g, p) for g, p in sorted(run.eval_traj.items())]
        run.missing.append("no kind=eval lines in metrics.jsonl: held-out figures recomputed from the episodes")
    if run.planned and run.done < run.planned:
        run.missing.append(f"only {run.done} of {run.planned} generations recorded")
    if not run.evals:
        run.missing.append("no held-out evaluation yet (no kind=eval line in metrics.jsonl, "
                           "no trajectories/eval_genNNNN.jsonl)")
    return run


def _eval_from_episodes(generation: int, path: Path) -> dict:
    episodes, _ = read_jsonl(path)
    rewards = [e["reward"] for e in episodes if isinstance(e.get("reward"), (int, float))]
    row = {"kind": "eval", "generation": generation, "heldout_n": len(rewards)}
    if rewards:
        n = len(rewards)
        mean = sum(rewards) / n
        var = sum((x - mean) ** 2 for x in rewards) / max(n - 1, 1)
        row.update(heldout_reward=mean, heldout_reward_se=math.sqrt(var / n),
                   heldout_solved=sum(bool(e.get("solved")) for e in episodes) / len(episodes))
    return row


def _read_config(run: RunData) -> None:
    p = run.path / "config.yaml"
    if not p.exists():
        run.missing.append("config.yaml is missing: settings unknown")
        return
    try:
        recall_run(run.path)  # an env registered in the process that made the run: its episode views
    except ConfigError:
        pass  # not importable: its episodes are drawn as plain turn tables
    try:
        run.config_text = p.read_text()
        data = yaml.safe_load(run.config_text)
        run.config = data if isinstance(data, dict) else {}
    except (OSError, yaml.YAMLError) as err:
        run.missing.append(f"config.yaml could not be read ({_short(err)})")


def _read_history(run: RunData) -> None:
    p = run.path / "history.json"
    if not p.exists():
        if run.algorithm.record != "history":
            return  # only ES runs keep a seed history
        run.missing.append("history.json is missing: no per-member rewards, seeds or weights hashes")
        return
    try:
        data = json.loads(p.read_text())
        run.meta = data.get("meta", {}) or {}
        run.records = [r for r in data.get("generations", []) if isinstance(r, dict)]
    except (OSError, ValueError, AttributeError) as err:
        run.missing.append(f"history.json could not be read ({_short(err)}): per-member rewards not shown")


def _read_metrics(run: RunData) -> tuple[list[dict], list[dict]]:
    p = run.path / "metrics.jsonl"
    if not p.exists():
        run.missing.append("metrics.jsonl is missing: reward statistics come from history.json, no timings")
        return [], []
    rows, bad = read_jsonl(p)
    if bad:
        run.missing.append(f"metrics.jsonl: {bad} unreadable line(s) skipped (a write cut short?)")
    train, evals = {}, {}
    for r in rows:  # the last line of a generation wins (a resumed run rewrites them)
        g = r.get("generation")
        if isinstance(g, int):
            (evals if r.get("kind") == "eval" else train)[g] = r
    return [train[g] for g in sorted(train)], [evals[g] for g in sorted(evals)]


def _train_rows(run: RunData, train: list[dict]) -> list[dict]:
    """Metrics rows, completed from the history for generations the metrics lack."""
    have = {r["generation"] for r in train}
    extra = []
    for rec in run.records:
        g = rec.get("generation")
        if isinstance(g, int) and g not in have:
            rewards = [x for x in rec.get("rewards") or [] if isinstance(x, (int, float)) and math.isfinite(x)]
            row = {"kind": "train", "generation": g, "sigma": rec.get("sigma"), "alpha": rec.get("alpha"),
                   "from_history": True}
            if rewards:
                mean = sum(rewards) / len(rewards)
                row.update(reward_mean=mean, reward_min=min(rewards), reward_max=max(rewards),
                           reward_std=math.sqrt(sum((x - mean) ** 2 for x in rewards) / len(rewards)))
            extra.append(row)
    if extra and train:
        gens = ", ".join(str(r["generation"] + 1) for r in extra)  # numbered from 1, as on the plots
        run.missing.append(f"metrics.jsonl lacks generation(s) {gens}: rewards from history.json, no timings there")
    return sorted(train + extra, key=lambda r: r["generation"])


def _read_summary(run: RunData) -> None:
    p = run.path / "summary.json"
    if not p.exists():
        run.missing.append("summary.json is missing: the run has not finished (final figures not available)")
        return
    try:
        run.summary = json.loads(p.read_text())
    except (OSError, ValueError) as err:
        run.missing.append(f"summary.json could not be read ({_short(err)})")


def _find_trajectories(run: RunData) -> None:
    folder = run.path / "trajectories"
    if folder.is_dir():
        for f in folder.iterdir():
            m = _TRAJ.match(f.name)
            if m:
                (run.eval_traj if m.group(1) else run.train_traj)[int(m.group(2))] = f
    lost = [g for g in sorted({r["generation"] for r in run.train}) if g not in run.train_traj]
    if lost:
        run.missing.append("no training episodes for generation(s) " + ", ".join(str(g + 1) for g in lost) + " ("
                           + ", ".join(f"trajectories/gen{g:04d}.jsonl" for g in lost) + " missing)")
    lost = [e["generation"] for e in run.evals if e["generation"] not in run.eval_traj]
    if lost:
        run.missing.append("no held-out episodes for evaluation(s) after " + ", ".join(map(str, lost))
                           + " generation(s) (" + ", ".join(f"trajectories/eval_gen{g:04d}.jsonl" for g in lost)
                           + " missing)")


def _short(err: Exception) -> str:
    text = f"{type(err).__name__}: {err}"
    return text if len(text) < 160 else text[:157] + "..."
