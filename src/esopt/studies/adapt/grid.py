"""`esopt adapt`: test-time adaptation of a starting agent (the base model, or a trained run's
final weights) to new task variants under an episode budget, with settings none / context /
weights / both (and the prompt optimiser GEPA, `gepa`, when asked for: adapt_gepa.py), and a
paired win/tie/loss table against matched baselines (adapt_table.py).

    <adapt.out_dir>/<adapt.name>/
        start.json              where the starting weights came from, and their hash
        <task>/none/            held-out evaluation of the starting agent (once per task)
        <task>/<setting>-b<B>/  an ordinary ES run folder: coevo.mode=<setting>, B training episodes
        <task>/gepa-b<B>/       a GEPA baseline run folder: B episodes, weights frozen (adapt_gepa.py)
        adapt.json, adapt.md    the table

Every sub-run of a task has the same config apart from coevo.mode and es.generations, so it
plays the same held-out episodes (tasks.heldout, run.seed): differences are paired. A sub-run
with summary.json is finished and skipped on a re-run; one with a history resumes from it (an
unfinished gepa sub-run starts again: GEPA cannot resume).
"""
from __future__ import annotations

import copy
import json
import re
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from ...config import (Config, ConfigError, Strict, build_config, dump_config, parse_override, read_config_tree,
                      set_dotted)
from . import gepa as adapt_gepa, table as adapt_table

Setting = Literal["none", "context", "weights", "both", "gepa"]
# keys a task variant may not set: adapt sets them per sub-run, or they fix the starting agent
FIXED_KEYS = ("model", "algo", "coevo.mode", "es.generations", "run.out_dir", "run.name", "eval.at_start")


class AdaptConfig(Strict):
    budgets: list[int] = Field(min_length=1)  # training episodes per sub-run
    settings: list[Setting] = ["none", "context", "weights", "both"]  # gepa: only when asked for
    tasks: dict[str, dict[str, Any]] = Field(min_length=1)  # name -> dotted overrides ({}: the config's own task)
    out_dir: str = "runs"
    name: str | None = None  # default: adapt-<config file stem>
    gepa: dict[str, Any] = {}  # the gepa setting's GepaOptions (algos/gepa/baseline.py), all but budget

    @field_validator("budgets")
    @classmethod
    def _positive(cls, v):
        bad = [b for b in v if b < 1]
        if bad:
            raise ValueError(f"budgets are training episodes, at least 1 each; got {bad}")
        return sorted(set(v))

    @field_validator("settings")
    @classmethod
    def _unique(cls, v):
        if not v:
            raise ValueError("give at least one of none, context, weights, both, gepa")
        return [s for s in adapt_table.SETTINGS if s in v]  # table order

    @field_validator("tasks")
    @classmethod
    def _names(cls, v):
        for name, overrides in v.items():
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
                raise ValueError(f"task name {name!r} must be a folder name (letters, digits, . _ -)")
            if not isinstance(overrides, dict):
                raise ValueError(f"task {name!r} must map dotted keys to values (e.g. {{env.options.blanks: 3}})")
        return v


@dataclass
class SubRun:
    task: str
    setting: str
    budget: int | None  # None: the `none` setting, shared by every budget
    cfg: Config
    path: Path
    gepa: Any = None  # the gepa setting's GepaOptions


# ---------------------------------------------------------------------- config and plan
def load_adapt(path: str | Path, overrides: list[str]) -> tuple[AdaptConfig, dict]:
    """The `adapt:` section (validated) and the rest of the config file as a tree, with the
    command line's overrides applied (adapt.* ones to the adapt section)."""
    path = Path(path)
    tree = read_config_tree(path)
    section = tree.pop("adapt", None)
    if not isinstance(section, dict):
        raise ConfigError(f"config file {path} has no adapt: section (adapt: {{budgets: [64, 128], tasks: {{...}}}})")
    for item in overrides:
        key, value = parse_override(item)
        if key.startswith("adapt."):
            set_dotted(section, key.removeprefix("adapt."), value)
        else:
            set_dotted(tree, key, value)
    try:
        adapt = AdaptConfig.model_validate(section)
    except ValidationError as err:
        e = err.errors()[0]
        key = ".".join(str(x) for x in e["loc"])
        raise ConfigError(f"bad adapt.{key}: {e['msg'].removeprefix('Value error, ')}") from None
    if adapt.name is None:
        adapt.name = f"adapt-{path.stem}"
    build_config(tree)  # the base config itself is valid
    return adapt, tree


def plan(adapt: AdaptConfig, tree: dict, start_context=None) -> list[SubRun]:
    """Every sub-run's full config, validated before anything is written; a bad variant or
    budget raises ConfigError naming it. start_context: an AgentContext to start from (a
    context run's final one) instead of the config's agent prompt and examples."""
    from ...train.preflight import check_run_config

    root = Path(adapt.out_dir) / adapt.name
    if "gepa" in adapt.settings:
        adapt_gepa.require()
    subs = []
    for task, variant in adapt.tasks.items():
        where = f"adapt.tasks.{task}"
        t = copy.deepcopy(tree)
        if start_context is not None:
            set_dotted(t, "agent.system_prompt", start_context.system_prompt)
            set_dotted(t, "agent.examples", [dict(m) for m in start_context.examples])
        for key, value in variant.items():
            if key in FIXED_KEYS or key.split(".")[0] in ("model", "algo"):
                raise ConfigError(f"{where}: '{key}' cannot vary by task (adapt sets {', '.join(FIXED_KEYS)})")
            try:
                set_dotted(t, key, value)
            except ConfigError as err:
                raise ConfigError(f"{where}: {err}") from None
        if ((t.get("coevo") or {}).get("grow") or {}).get("every"):
            raise ConfigError(f"{where}: coevo.grow.every must be 0 under esopt adapt: its equal episode budgets "
                              "count members' episodes, not the growth gate's")
        for setting in adapt.settings:
            for budget in ([None] if setting == "none" else adapt.budgets):
                s = copy.deepcopy(t)
                name = "none" if budget is None else f"{setting}-b{budget}"
                try:
                    cfg = build_config(s)
                    gens = 1
                    if budget is not None:
                        per_gen = cfg.es.population * cfg.es.episodes_per_member
                        gens = budget // per_gen
                        if setting == "gepa":  # GEPA counts its own episodes; es.generations is the ES runs'
                            gens = max(gens, 1)
                        if gens < 1:
                            raise ConfigError(f"budget {budget} is less than one generation (es.population "
                                              f"{cfg.es.population} x es.episodes_per_member "
                                              f"{cfg.es.episodes_per_member} = {per_gen} episodes)")
                    mode = "weights" if setting in ("none", "gepa") else setting
                    for key, value in (("coevo.mode", mode),
                                       ("es.generations", gens), ("eval.at_start", False),
                                       ("run.out_dir", str(root / task)), ("run.name", name)):
                        set_dotted(s, key, value)
                    cfg = build_config(s)
                    check_run_config(cfg)
                    opts = adapt_gepa.options(adapt.gepa, budget, cfg) if setting == "gepa" else None
                except ConfigError as err:
                    raise ConfigError(f"{where} ({name}): {err}") from None
                subs.append(SubRun(task, setting, budget, cfg, root / task / name, opts))
    return subs


def check_existing(subs: list[SubRun]) -> None:
    """A sub-run folder already holding a run must have been made with the same config."""
    for sub in subs:
        old = sub.path / "config.yaml"
        if old.exists() and ((sub.path / "history.json").exists() or (sub.path / "summary.json").exists()):
            if old.read_text() != dump_config(sub.cfg):
                raise ConfigError(f"{sub.path} was made with a different config than this adapt command gives it: "
                                  "choose another adapt.name, or restore the config it was made with")
        if sub.setting == "gepa":
            adapt_gepa.check_existing(sub)


# ---------------------------------------------------------------------- starting agent
def start_source(from_run: str | None, cfg: Config):
    """(source run's config, its final context or None); checks the run fits `cfg` without loading weights."""
    if from_run is None:
        return None, None
    from ...train.rundir import RunDir

    run = RunDir(Path(from_run))
    src = run.load_config()
    if src.model != cfg.model or src.runtime.dtype != cfg.runtime.dtype:
        raise ConfigError(f"--from {from_run} was trained from model {src.model} ({src.runtime.dtype}); the adapt "
                          f"config gives {cfg.model} ({cfg.runtime.dtype}): make them the same")
    from ...train.algorithm import algorithm

    algo = algorithm(src.algo)
    found = algo.final_context(run, src, None) if algo.holds(run.path) else None  # a context run's context
    return src, None if found is None else found[0]


def load_start(from_run: str | None, cfg: Config, log=print):
    """(model, tokenizer, description): the base model, or --from's final weights (replayed, hash-verified)."""
    from ...es.perturb import weights_hash
    from ...models import load_model

    if from_run is None:
        model, tok = load_model(cfg.model, cfg.runtime.dtype, cfg.runtime.device)
        return model, tok, {"from": None, "model": cfg.model, "weights_hash": weights_hash(model)}
    from ...train.weights import load_run_weights

    model, tok, _, n = load_run_weights(from_run)
    info = {"from": str(Path(from_run).resolve()), "generations": n, "model": cfg.model,
            "weights_hash": weights_hash(model)}
    log(f"[esopt] adapt: starting from {from_run} after {n} generations (weights {info['weights_hash'][:12]})")
    return model, tok, info


# ---------------------------------------------------------------------- sub-runs
def Trainer(*args, **kwargs):  # the ES trainer, imported when used (tests replace it to count constructions)
    from ...algos.es.trainer import Trainer as T

    return T(*args, **kwargs)


def write_init(run, start: dict) -> None:
    """RUN/init.json: the run and generation the starting weights came from (with --from);
    eval --run / export / report rebuild the start from it (train.weights.start_from)."""
    if start["from"] is not None:
        from ...es.history import atomic_write_text

        init = {k: start[k] for k in ("from", "generations", "weights_hash")}
        atomic_write_text(run.path / "init.json", json.dumps(init, indent=1))


def play(sub: SubRun, model, tok, start_state, start: dict, log=print) -> str:
    """Run one sub-run to its summary.json; 'skipped' (already finished), 'resumed', 'restarted'
    (an unfinished gepa sub-run) or 'ran'."""
    from ...es.perturb import weights_hash
    from ...train.rundir import RunDir, holds_run
    from ...report import refresh_report
    from ...train.summary import finish_run

    if (sub.path / "summary.json").exists():
        return "skipped"
    model.load_state_dict(start_state)
    if weights_hash(model) != start["weights_hash"]:
        raise RuntimeError("the starting weights did not restore bit-exactly")
    if sub.setting == "gepa":
        return adapt_gepa.play(sub, model, tok, start, lambda run: write_init(run, start), log)
    resumed = holds_run(sub.path)
    if resumed:
        run = RunDir(sub.path)
        run.lock()
    else:
        run = RunDir.create(sub.cfg)
    try:
        write_init(run, start)
        trainer = Trainer(sub.cfg, run, model, tok, log=log)
        if sub.setting == "none":
            finish_run(run, model, {0: trainer.evaluate(0)}, 0, log)
            refresh_report(run.path, log)
        else:
            trainer.train(trainer.resume() if resumed else 0)
    finally:
        run.unlock()
    return "resumed" if resumed else "ran"


def figures(sub: SubRun) -> dict:
    """Held-out figures of a finished sub-run and its per-task rewards {task id: mean}, from its
    final evaluation's trajectories."""
    from ...train.evaluate import summarize
    from ...train.rundir import RunDir

    summary = json.loads((sub.path / "summary.json").read_text())
    episodes = RunDir(sub.path).read_trajectories(f"eval_gen{summary['generations']:04d}")
    if not episodes:
        raise RuntimeError(f"{sub.path} has no held-out trajectories of generation {summary['generations']}")
    by_task: dict[str, list[float]] = {}
    for ep in episodes:
        by_task.setdefault(str(ep["task"]), []).append(ep["reward"])
    stats = summarize(episodes)
    return {"reward": stats["reward"], "reward_se": stats["reward_se"], "solved": stats["solved"], "n": stats["n"],
            "generations": summary["generations"], "weights_hash": summary.get("weights_hash"),
            "per_task": {k: sum(v) / len(v) for k, v in by_task.items()}}


# ---------------------------------------------------------------------- the command
def table_text(name: str, start: dict, rows: list[dict], settings: list[str]) -> str:
    """adapt.md: a heading naming the starting agent, then the table."""
    return (f"# esopt adapt: {name}\n\nStarting agent: {start['from'] or start['model']} (weights "
            f"{start['weights_hash'][:12]}). Held-out reward mean ± SE per setting; W/T/L: the paired held-out "
            "difference (A - B, ± its SE) is above 2 SE / within / below.\n\n" + adapt_table.markdown(rows, settings))


def run_adapt(config: str | Path, overrides: list[str], from_run: str | None = None, log=print) -> dict:
    """Plan (validating everything), run or skip every sub-run, write adapt.json and adapt.md;
    returns adapt.json's content."""
    from ...es.history import atomic_write_text

    adapt, tree = load_adapt(config, overrides)
    src, context = start_source(from_run, build_config(copy.deepcopy(tree)))
    if context is not None:
        log("[esopt] adapt: every sub-run starts from --from's final context (its most likely draw)")
    subs = plan(adapt, tree, context)
    check_existing(subs)
    root = Path(adapt.out_dir) / adapt.name
    model, tok, start = load_start(from_run, subs[0].cfg, log)
    start_file = root / "start.json"
    if start_file.exists():
        old = json.loads(start_file.read_text())
        if old.get("weights_hash") != start["weights_hash"]:
            raise ConfigError(f"{root} was started from other weights ({old.get('from') or old.get('model')}, "
                              f"{str(old.get('weights_hash'))[:12]}): choose another adapt.name")
    root.mkdir(parents=True, exist_ok=True)
    atomic_write_text(start_file, json.dumps(start, indent=1))
    start_state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    cells: dict[tuple, dict] = {}
    for k, sub in enumerate(subs):
        label = f"{sub.task} / {sub.path.name}"
        t0 = time.time()
        try:
            status = play(sub, model, tok, start_state, start, log)
            fig = figures(sub)
            log(f"[esopt] adapt {k + 1}/{len(subs)} {label}: {status}, held-out {fig['reward']:.3f} ± "
                f"{fig['reward_se']:.3f} ({time.time() - t0:.0f}s)")
        except Exception:  # recorded; the other sub-runs go on
            status, fig = "failed", {"error": traceback.format_exc()}
            log(f"[esopt] adapt {k + 1}/{len(subs)} {label} failed:\n{fig['error']}")
        cells[(sub.task, sub.setting, sub.budget)] = {"run_dir": str(sub.path), "status": status, **fig}

    rows = []
    for task in adapt.tasks:
        for budget in adapt.budgets:
            settings = {s: cells.get((task, s, None if s == "none" else budget)) for s in adapt.settings}
            per_task = {s: (c or {}).get("per_task") for s, c in settings.items()}
            try:
                comps = adapt_table.comparisons(per_task)
            except ValueError as err:
                comps = []
                log(f"[esopt] adapt {task} budget {budget}: no comparisons ({err})")
            rows.append({"task": task, "budget": budget, "comparisons": comps,
                         "settings": {s: None if c is None else {k: v for k, v in c.items() if k != "per_task"}
                                      for s, c in settings.items()}})
    result = {"config": str(config), "start": start, "settings": adapt.settings, "budgets": adapt.budgets,
              "tasks": adapt.tasks, "rows": rows, "totals": adapt_table.totals(rows),
              "failed": [c["run_dir"] for c in cells.values() if c["status"] == "failed"]}
    atomic_write_text(root / "adapt.json", json.dumps(result, indent=1))
    atomic_write_text(root / "adapt.md", table_text(adapt.name, start, rows, adapt.settings))
    log(adapt_table.markdown(rows, adapt.settings))
    log(f"[esopt] adapt: {root / 'adapt.json'}, {root / 'adapt.md'}"
        + (f"; {len(result['failed'])} sub-run(s) failed (see adapt.json)" if result["failed"] else ""))
    return result
