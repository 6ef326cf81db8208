"""The `gepa` setting of `esopt adapt`: the GEPA baseline (algos/gepa/baseline.py) as one more
sub-run of a task, at each budget, in `<task>/gepa-b<B>/`.

Its config is the task's, as the ES sub-runs get it (same tasks.heldout, run.seed, evaluation
seed, and with --from the same starting context), with coevo.mode=weights (GEPA starts from
agent.system_prompt / agent.examples; the starting weights stay frozen). GEPA plays B training
episodes, its valset passes included (as `esopt baseline gepa --budget B` counts them), with the
options of the adapt config's `adapt.gepa:` section (GepaOptions' fields, all but budget).

GEPA keeps no resumable state: a gepa sub-run without summary.json is cleared and started again.
"""
from __future__ import annotations

import dataclasses
import json
import shutil

from pydantic import TypeAdapter, ValidationError

from ...config import ConfigError, dump_config


def Baseline(*args, **kwargs):  # the GEPA baseline, imported when used (tests replace it to script the reflection LM)
    from ...algos.gepa.baseline import GepaBaseline

    return GepaBaseline(*args, **kwargs)


def require() -> None:
    """MissingPackage (one line naming the prompt-opt extra) when gepa is not installed."""
    from ...algos.gepa.requires import require_gepa

    require_gepa("adapt.settings gepa")


def option_name(option: str) -> str:
    return "adapt.budgets" if option == "budget" else f"adapt.gepa.{option}"


def options(section: dict, budget: int, cfg):
    """GepaOptions of `adapt.gepa` with `budget` episodes, checked against the sub-run's config
    (check_options: at least one valset pass in the budget, known components, ...)."""
    from ...algos.gepa.baseline import GepaOptions, check_options

    known = sorted(f.name for f in dataclasses.fields(GepaOptions) if f.name != "budget")
    unknown = sorted(set(section) - set(known))
    if unknown:
        raise ConfigError(f"adapt.gepa: unknown option(s) {', '.join(unknown)} (the budget is each of adapt.budgets); "
                          f"known: {', '.join(known)}")
    try:
        opts = TypeAdapter(GepaOptions).validate_python({**section, "budget": budget})
    except ValidationError as err:
        e = err.errors()[0]
        raise ConfigError(f"bad adapt.gepa.{'.'.join(str(x) for x in e['loc'])}: {e['msg']}") from None
    check_options(cfg, opts, option_name)
    return opts


def check_existing(sub) -> None:
    """A finished gepa sub-run must have been made with the same GEPA options."""
    old = sub.path / "baseline.json"
    if not (sub.path / "summary.json").exists() or not old.exists():
        return
    made = json.loads(old.read_text())
    want = json.loads(json.dumps(dataclasses.asdict(sub.gepa)))
    differ = sorted(k for k in want if made.get(k) != want[k])
    if differ:
        raise ConfigError(f"{sub.path} was made with other GEPA options ({', '.join(differ)}) than this adapt "
                          "command gives it: choose another adapt.name, or restore adapt.gepa")


def play(sub, model, tok, start: dict, write_init, log=print) -> str:
    """GEPA on the sub-run's config to its summary.json, from the weights now in `model` (the
    starting ones, which it must leave unchanged); 'ran', or 'restarted' when an unfinished one
    was cleared first. write_init(run): the starting weights' provenance (init.json), as the ES
    sub-runs get it."""
    from ...es.history import atomic_write_text
    from ...es.perturb import weights_hash
    from ...train.rundir import RunDir

    sub.path.mkdir(parents=True, exist_ok=True)
    run = RunDir(sub.path)
    run.lock()  # a second adapt process on this folder is refused before anything is cleared
    try:
        left = [p for p in sub.path.iterdir() if p.name != ".lock"]
        if left:
            log(f"[esopt] adapt: {sub.path} holds an unfinished GEPA run; GEPA cannot resume, so it restarts "
                "from scratch (its files are removed)")
            for p in left:
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        run.trajectories.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run.config_path, dump_config(sub.cfg))
        write_init(run)
        Baseline(sub.cfg, run, sub.gepa, model=model, tokenizer=tok, log=log).train()
    finally:
        run.unlock()
    if weights_hash(model) != start["weights_hash"]:
        raise RuntimeError(f"GEPA changed the starting weights in {sub.path}: they must stay frozen")
    return "restarted" if left else "ran"
