"""A training run's lifecycle, the same for every algorithm: where members are played (here, or
on Ray workers), start (run folder, writer lock, the algorithm's trainer), resume (what may change,
replay under the lock, the config kept) and a clean release whatever happens.

The command line and the studies (benchmarks, esopt adapt) launch runs through `train`.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ..config import Config, dump_config, load_config
from ..es.history import RunFolderError, atomic_write_text
from ..utils.settings import ConfigError
from .algorithm import Algorithm, algorithm
from .preflight import check_run_config
from .resume_check import check_record, check_resume, get_key
from .rundir import RunDir, env_slug
from .stop import Stopped, StoppedDuring, stop_on_signals


@dataclass
class Session:
    run: RunDir
    cfg: Config
    algo: Algorithm
    trainer: object
    start: int  # the next update to make


def remote(runner) -> bool:
    """Whether members are played on other machines' devices (Ray), not this process's model."""
    return runner is not None and getattr(runner, "remote", True)


def served(runner) -> bool:
    """Whether a harness plays the episodes (esopt serve's runner)."""
    return getattr(runner, "command", None) == "esopt serve"


def make_runner(workers: int | None = None, address: str | None = None):
    """Where members are played: on Ray with workers / address (train/ray/), else here (None)."""
    if workers is None and address is None:
        return None
    from .ray.runner import RayRunner

    return RayRunner(workers=workers, address=address)


# the demo's measured pace (docs/results/demo.md, 2026-12-03): SmolLM2-135M-Instruct on 4x4 Sudoku, 2 CPU
# cores, 128 held-out episodes of up to 3 turns in 126 s; only used to say roughly how long defaults take
DEMO_SECONDS_PER_EPISODE = 126 / 128


def defaults_notice(cfg: Config, algo: Algorithm) -> str | None:
    """One line when the config chose neither the model nor the run's length: what will run, how many
    episodes, and (for the default model on Sudoku) about how long, so a bare config is not a surprise."""
    section = algo.budget_key.partition(".")[0]
    chose_budget = bool(getattr(getattr(cfg, section, None), "model_fields_set", {"?"}))
    if "model" in cfg.model_fields_set or chose_budget:
        return None
    per_update = algo.episodes_per_update(lambda k: get_key(cfg, k))
    budget = get_key(cfg, algo.budget_key)
    episodes = None if per_update is None else per_update * budget
    line = (f"[esopt] the config sets neither the model nor the {section} budget: it runs the defaults, {cfg.model}, "
            f"{algo.budget_key}={budget}" + (f" ({episodes} training episodes)" if episodes else ""))
    if episodes and cfg.env.id == "sudoku" and cfg.model == Config.model_fields["model"].default:
        minutes = (episodes + 2 * cfg.tasks.heldout) * DEMO_SECONDS_PER_EPISODE / 60
        line += f", about {minutes:.0f} min on 2 CPU cores at the demo's pace"
    return line + f"; set model= and {algo.budget_key}= to choose (configs/demo.yaml is an example)"


def start(cfg: Config, runner=None, log=print, **options) -> Session:
    """A new run folder (locked) and the trainer of cfg.algo; a folder left empty by a failure is removed."""
    algo = algorithm(cfg.algo)
    algo.check(cfg, on_ray=remote(runner))
    notice = defaults_notice(cfg, algo)
    if notice:
        log(notice)
    if cfg.run.name is None and algo.run_prefix:
        cfg.run.name = f"{algo.run_prefix}{env_slug(cfg.env.id)}-{time.strftime('%Y%m%d-%H%M%S')}"
    run = RunDir.create(cfg)
    log(f"[esopt] run folder: {run.path}")
    try:
        trainer = algo.trainer(cfg, run, runner=runner, **options)
    except BaseException:
        remove_if_empty(run)  # nothing trained: leave no orphan folder behind
        raise
    return Session(run, cfg, algo, trainer, 0)


def checked_config(run: RunDir) -> Config:
    """The run's own config.yaml, refused (one line) where it disagrees with what its record wrote down."""
    own = run.load_config()
    check_record(run.path, lambda key: get_key(own, key))
    return own


def resume(path: str | Path, overrides=(), algo_name: str | None = None, runner=None,
           strict: bool = False, own: Config | None = None) -> Session:
    """The run at `path` continued: overrides checked against what its record fixes, its record
    replayed and verified under the writer lock; overrides given are kept in its config.yaml.
    own: its config.yaml, checked against its record already (checked_config)."""
    run = RunDir(Path(path))
    own = own or checked_config(run)  # config.yaml agrees with what the history recorded
    cfg = run.load_config(list(overrides))
    if strict:
        algorithm(cfg.algo).check_overrides(overrides)
    algorithm(cfg.algo).extend(own, cfg)
    if algo_name and algo_name != cfg.algo:
        raise ConfigError(f"{path} is a {cfg.algo} run; --algo {algo_name} cannot resume it")
    algo = algorithm(cfg.algo)
    if not algo.resumable:
        raise RunFolderError(f"{path} is a {algo.title} run, which cannot be resumed: start a new one")
    algo.check(cfg, on_ray=remote(runner))
    check_run_config(cfg, device=not remote(runner), served=served(runner))
    run.lock()
    run.use_config(cfg)
    try:
        check_resume(run, cfg, algo)  # under the lock: what is done cannot change while we check
        trainer = algo.trainer(cfg, run, runner=runner)
        begin = trainer.resume()  # replays and verifies the record under the new config
    except BaseException:
        run.unlock()
        raise
    if overrides:  # e.g. es.generations=20 extends the run; later resumes see the same config
        atomic_write_text(run.config_path, dump_config(cfg))
    return Session(run, cfg, algo, trainer, begin)


def finished(path: str | Path, overrides=(), log=print, own: Config | None = None) -> dict | None:
    """The summary of the run at `path` if it is finished and the overrides ask for no more updates
    (nothing is loaded, evaluated or written then), else None. own: as resume's."""
    run = RunDir(Path(path))
    if not (run.path / "summary.json").exists() or not run.config_path.exists():
        return None
    own = own or checked_config(run)
    cfg = run.load_config(list(overrides))
    algo = algorithm(cfg.algo)
    if not algo.resumable:
        return None  # resume says why it cannot
    check_resume(run, cfg, algo)  # an override that would change the record is refused all the same
    done, budget = algo.done(run, cfg), get_key(cfg, algo.budget_key)
    if done != budget:
        return None
    log(f"[esopt] {run.path} is finished: {done} of {budget} {algo.unit} done, nothing to do (nothing changed). "
        f"To train further: esopt train --resume {run.path} {algo.budget_key}={budget + max(1, budget // 2)}")
    return json.loads((run.path / "summary.json").read_text())


def stopped_line(session: Session, how: str) -> Stopped:
    """The one line a stopped run ends with: what its record keeps and the exact resume command."""
    algo, run = session.algo, session.run
    done = algo.done(run, session.cfg)
    total = get_key(session.cfg, algo.budget_key)
    command = getattr(getattr(session.trainer, "runner", None), "command", "esopt train")  # esopt serve: its own
    return Stopped(f"[esopt] stopped {how}: {run.path} keeps {done} of {total} {algo.unit} (its {algo.record}); "
                   f"continue with: {command} --resume {run.path}")


def remove_if_empty(run: RunDir) -> None:
    """Delete a run folder created by this process that holds nothing but its config and empty folders."""
    run.unlock()
    files = [p for p in run.path.rglob("*") if p.is_file() and p.name not in ("config.yaml", ".lock")]
    if not files:
        shutil.rmtree(run.path, ignore_errors=True)


def train(config: str | Path | Config | None = None, overrides=(), *, resume_dir: str | Path | None = None,
          algo_name: str | None = None, workers: int | None = None, address: str | None = None,
          strict: bool = False, runner=None, **options) -> dict:
    """Check, start (from config + overrides, or a Config) or resume (resume_dir + overrides), train,
    release. Returns the run's summary. Every check that needs no model runs before anything is written.
    strict (the command line): another algorithm's budget key given without this one's is refused.
    runner: where members are played, if not here or on Ray (esopt serve: by an HTTP client)."""
    on_ray = workers is not None or address is not None
    own = None  # a resumed run's config.yaml, checked against its record once
    if resume_dir is None:
        cfg = config if isinstance(config, Config) else load_config(
            config, list(overrides) + ([f"algo={algo_name}"] if algo_name else []))
        check_run_config(cfg, device=not on_ray, served=served(runner))  # on Ray the workers check their devices
        algorithm(cfg.algo).check(cfg, on_ray=on_ray)
        if strict:
            algorithm(cfg.algo).check_overrides(overrides)
    elif config is not None:
        raise ConfigError("a resumed run takes its own config; pass no config file with --resume")
    else:
        own = checked_config(RunDir(Path(resume_dir)))  # once: finished and resume take it as checked
        summary = finished(resume_dir, overrides, own=own)
        if summary is not None:
            return summary
    session = None
    try:
        runner = runner or make_runner(workers, address)
        session = (resume(resume_dir, overrides, algo_name, runner, strict, own=own) if resume_dir is not None
                   else start(cfg, runner, **options))
        try:
            with stop_on_signals():
                return session.trainer.train(session.start)
        except (Stopped, KeyboardInterrupt) as err:
            how = ("now" if isinstance(err, KeyboardInterrupt) else
                   f"during {err.phase} (not recorded: the resume plays it)" if isinstance(err, StoppedDuring)
                   else "at a safe point")
            raise stopped_line(session, how) from None
        except OSError as err:  # a full or read-only disk: what was written stays (the record is written atomically)
            raise RunFolderError(f"training stopped: {err}. The run's {session.algo.record} is intact; once the "
                                 f"disk has room (or is writable) continue with: esopt train --resume "
                                 f"{session.run.path}") from None
    except KeyboardInterrupt:
        if session is not None:
            raise
        raise Stopped("[esopt] stopped before training began: nothing to keep") from None
    finally:
        if runner is not None:
            runner.close()  # stops the Ray workers (and the Ray instance esopt started)
        if session is not None:
            session.run.close()  # flushes the sinks and releases the lock (the process ending releases it too)
