"""The task namespaces ``webarenalite``, ``webarena``, ``webarena-file`` and ``webarena-verified``
for esopt.envs.browser.tasks.

Task ids: ``webarenalite.<id>`` (BrowserGym's WebArena-Lite ids), ``webarena.<id>``,
``webarena-verified.<id>`` and ``webarena-file:<path>#<task_id>`` for a JSON
file of your own; ``webarenalite.*``, ``webarena.*``, ``webarena-verified.*``
and ``webarena-file:<path>`` stand for all of a source's tasks. The tasks are
esopt's :class:`task.WebArenaTask` (:class:`verified_task.VerifiedTask` for
Verified), built directly, not through gymnasium's registry (so BrowserGym's
own ``webarenalite.*`` registrations, should they be imported, do not collide).
Importing this module reads no file and touches no network.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from . import configs, verified
from .judge import Judge
from .preflight import check_config

FILE = "webarena-file"
VERIFIED = "webarena-verified"
PACKAGED = tuple(configs.PACKAGED)


def _parse(task_id: str) -> tuple[str, str, str]:
    """(namespace, source: path or namespace, task part) of an id or pattern."""
    if task_id.startswith(FILE + ":"):
        path, _, task = task_id[len(FILE) + 1:].partition("#")
        if not path:
            raise ValueError(f"{task_id!r}: name the file: {FILE}:<path to a WebArena-format JSON list>[#<task_id>]")
        return FILE, str(Path(path).expanduser().resolve()), task or "*"
    ns, _, task = task_id.partition(".")
    if ns not in (*PACKAGED, VERIFIED) or not task:
        raise ValueError(f"unknown WebArena task {task_id!r}: use webarenalite.<id>, webarena.<id>, "
                         f"{VERIFIED}.<id> or {FILE}:<path>#<task_id>")
    return ns, ns, task


def _configs(ns: str, source: str) -> dict[int, dict]:
    if ns == FILE:
        return configs.from_file(source)
    return verified.tasks() if ns == VERIFIED else configs.packaged(ns)


def _name(ns: str, source: str, task_id: int) -> str:
    return f"{FILE}:{source}#{task_id}" if ns == FILE else f"{ns}.{task_id}"


def task_ids(pattern: str) -> list[str]:
    """The task ids ``pattern`` stands for (a wildcard or one id, checked to exist)."""
    ns, source, task = _parse(pattern)
    found = _configs(ns, source)
    if task == "*":
        if not found:
            raise ValueError(f"{pattern!r} holds no task")
        return [_name(ns, source, i) for i in sorted(found)]
    return [_name(ns, source, _lookup(pattern, ns, source, task)[0])]


def _lookup(task_id: str, ns: str, source: str, task: str) -> tuple[int, dict]:
    found = _configs(ns, source)
    try:
        number = int(task)
    except ValueError:
        number = None
    if number not in found:
        some = ", ".join(str(i) for i in sorted(found)[:5])
        raise ValueError(f"unknown WebArena task {task_id!r}: no task {task!r} there (ids such as {some}, ...)")
    return number, found[number]


def config_of(task_id: str) -> dict:
    """The (unfilled) config of one task id."""
    ns, source, task = _parse(task_id)
    if task == "*":
        raise ValueError(f"{task_id!r} names no single task (#<task_id>)")
    return _lookup(task_id, ns, source, task)[1]


def entrypoint(task_id: str):
    """The BrowserGym task class (built with seed=..., **task_kwargs(task_id, judge))."""
    config_of(task_id)
    if task_id.startswith(VERIFIED + "."):
        from .verified_task import VerifiedTask

        return VerifiedTask
    from .task import WebArenaTask

    return WebArenaTask


def task_kwargs(task_id: str, judge=None) -> dict:
    if task_id.startswith(VERIFIED + "."):
        return {"task": config_of(task_id), "name": task_id}
    return {"config": config_of(task_id), "name": task_id,
            "judge": None if judge is None else asdict(Judge.from_config(judge))}


def task_split(task_id: str) -> str:
    ns, source, task = _parse(task_id)
    number, config = _lookup(task_id, ns, source, task)
    return configs.split_of(config, number)


def check_task(task_id: str, judge=None) -> list[str]:
    """The hosts the task's pages need; ValueError (naming the task) when it cannot run here."""
    try:
        if task_id.startswith(VERIFIED + "."):
            return verified.check_task(config_of(task_id))
        return check_config(config_of(task_id), Judge.from_config(judge))
    except ValueError as err:
        raise ValueError(f"{task_id}: {err}") from None
