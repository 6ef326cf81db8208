"""What `esopt train --resume RUN key=value ...` may change, checked before anything is written.

The record of a run (ES: its history; GRPO: its checkpoint) was made under the run's config:
settings that change what it means, or how it replays, cannot change on resume (the algorithm's
`frozen` keys). Settings of the updates still to come (more of them, sigma/alpha schedules,
evaluation, batch sizes) can.
"""
from __future__ import annotations

import json

from ..es.history import RunFolderError
from ..utils.settings import ConfigError
from .algorithm import algorithm


TASK_SET = "env.task_set"


def task_set(options: dict, max_turns, free) -> dict:
    """The episodes a run plays, as its record keeps them: env.max_turns and env.options without the
    ``free`` keys (the env spec's run_options: workers, timeouts, the browser's path...)."""
    options = json.loads(json.dumps(options or {}))
    for dotted in free:
        *parents, last = dotted.split(".")
        node = options
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return {"max_turns": max_turns, "options": options, "free": list(free)}


def _differs(a, b, prefix: str = "env"):
    """(dotted key, value in a, value in b) of the first place two task sets (or any JSON data) differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in [*a, *(k for k in b if k not in a)]:
            if k != "free" and a.get(k) != b.get(k):
                return _differs(a.get(k), b.get(k), f"{prefix}.{k}")
    return prefix, a, b


def _run_options(env_id: str) -> tuple[str, ...]:
    from ..envs.spec import resolve

    try:
        return resolve(env_id).run_options
    except Exception:  # an env that cannot be found here: nothing of it is free
        return ()


def get_key(cfg, dotted: str):
    if dotted == TASK_SET:
        env = cfg.env
        return task_set(plain(env.options), env.max_turns, _run_options(env.id))
    computed = algorithm(cfg.algo).computed.get(dotted)
    if computed is not None:
        source, compute = computed
        return compute(get_key(cfg, source))
    node = cfg
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def done_so_far(run, cfg) -> int:
    """Updates made in `run` (whose own config is `cfg`), as its algorithm counts them."""
    return algorithm(cfg.algo).done(run, cfg)


def check_resume(run, new, algo=None) -> None:
    """Refuse (one line) overrides that change the meaning of the run's record, and budgets
    below what is already done."""
    old = run.load_config()
    algo = algo or algorithm(old.algo)
    for key in algo.frozen:
        if key in algo.computed:  # e.g. a library's hash: an override's is checked against the record by the trainer
            continue
        if get_key(old, key) != get_key(new, key):
            shown, was, now = (_differs(get_key(old, key), get_key(new, key)) if key == TASK_SET
                               else (key, get_key(old, key), get_key(new, key)))
            raise RunFolderError(f"{shown} cannot change on resume ({was!r} in {run.path}, {now!r} given): the "
                                 f"{algo.record} was made with it; start a new run for other settings")
    done = algo.done(run, old)
    key = algo.budget_key
    if get_key(new, key) < done:
        raise RunFolderError(f"{key}={get_key(new, key)} is fewer than the {done} already done in {run.path}; to "
                             f"evaluate earlier weights use `esopt eval --run` on a copy, or keep {key} >= {done}")


# ------------------------------------------------------------------ the record is the authority
def plain(value):
    """A config value as JSON data (what history.json records and config.yaml holds)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return json.loads(json.dumps(value))


def record_settings(cfg, algo=None) -> dict:
    """The settings that give a run's record its meaning (the algorithm's frozen keys), as recorded
    in history.json's meta when the run starts."""
    algo = algo or algorithm(cfg.algo)
    return {key: plain(get_key(cfg, key)) for key in algo.recorded_keys(cfg)}


def recorded_settings(run_path) -> dict | None:
    """The settings the run's record (ES: history.json; GRPO: its checkpoint) wrote down at the start;
    None: no record, or one written before they were."""
    from pathlib import Path

    from .algorithm import of_run

    algo = of_run(Path(run_path))
    return algo.recorded_settings(Path(run_path)) if algo is not None else None


def check_record(run_path, value_of) -> None:
    """Refuse (one line) a config.yaml that disagrees with what the run's record (ES: its history;
    GRPO: its checkpoint) wrote down: the record says what was done; the config beside it is only a
    copy (swapped or edited by hand, it must not rewrite the run). value_of(key) -> the config's value."""
    from pathlib import Path

    settings = recorded_settings(run_path) or {}
    try:
        computed = algorithm(settings.get("algo") or value_of("algo")).computed
    except Exception:  # an unknown algo: the "algo" key itself is compared below
        computed = {}
    for key, recorded in settings.items():
        try:
            if key == TASK_SET:  # compared as recorded: without the keys it left out
                have = task_set(plain(value_of("env.options")), value_of("env.max_turns"), recorded.get("free", ()))
            elif key in computed:
                source, compute = computed[key]
                try:
                    have = compute(value_of(source))
                except (ConfigError, OSError, ValueError):  # e.g. a library file not reachable from here: the
                    continue  # trainer checks it against the record when it loads it
            else:
                have = plain(value_of(key))
        except (AttributeError, KeyError):
            have = None
        if have != recorded:
            if key == TASK_SET and isinstance(have, dict):
                key, have, recorded = _differs(have, recorded)
            if key in computed:
                raise RunFolderError(
                    f"{Path(run_path) / 'config.yaml'} gives another {key} ({str(have)[:12]}) than the run's record "
                    f"was made with ({str(recorded)[:12]}): config.yaml is only a copy (edited or swapped?); restore "
                    f"its {computed[key][0]} settings, or start a new run")
            shown = json.dumps(recorded)
            raise RunFolderError(
                f"{Path(run_path) / 'config.yaml'} says {key}={json.dumps(have)}, but the run's record was made "
                f"with {key}={shown}: config.yaml is only a copy (edited or swapped?); put back {key}: {shown} "
                "there, or start a new run for other settings")
