"""Where an env registered in this process comes from, so that its runs stay usable elsewhere.

An env registered with an object (``esopt.envs.register("guess", GuessEnv)``) exists only in the
process that registered it; ``esopt eval --run``, ``--resume``, ``export`` and ``report`` run in
another. A run of one records, in RUN/env.json, the ``module:attr`` path that names the registered
object and the folder its module is imported from; a later process registers that path under the
same id before it reads the run's config. An object no other process can import (defined in
``__main__`` or inside a function) gets a one-line notice when its run starts and a one-line error,
naming the way out, when the command line later needs it.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..utils.settings import ConfigError
from .spec import EnvSpec, in_process, known, module_root, register_spec

FILE = "env.json"


def _path_of(obj: Any) -> tuple[str | None, str]:
    """(module:attr naming ``obj`` in its module, or None, the module's name)."""
    home = obj.factory if isinstance(obj, EnvSpec) else obj
    module_name = getattr(home, "__module__", None) or ""
    module = sys.modules.get(module_name)
    if module is None or module_name == "__main__":
        return None, module_name
    for name, value in vars(module).items():
        if value is obj:
            return f"{module_name}:{name}", module_name
    return None, module_name


def origin(env_id: str) -> dict | None:
    """What RUN/env.json keeps for an env registered in this process with an object: {id, import
    (module:attr or None), path (the folder to import it from), module}; None for every other id."""
    obj = in_process(env_id)
    if obj is None:
        return None
    path, module = _path_of(obj)
    return {"id": env_id, "import": path, "path": module_root(path) if path else None, "module": module}


def unreachable_notice(record: dict) -> str:
    where = "__main__ (the script or notebook that ran)" if record["module"] == "__main__" else \
        f"{record['module'] or 'an unnamed module'}, not as a module attribute"
    return (f"[esopt] env.id={record['id']} is registered in this process only (defined in {where}): eval, "
            f"--resume, export and report of this run from the command line cannot build it; define it at the top "
            f"level of an importable module and use env.id=module:attr, or an esopt.envs entry point (docs/envs.md)")


def recall(record: dict, run_path) -> None:
    """Make the env a run recorded (RUN/env.json) resolvable in this process: register its import
    path under its id, or raise ConfigError with one line when it has none. Nothing happens when the id
    already resolves here (the same process, an entry point)."""
    env_id = record.get("id")
    if not isinstance(env_id, str) or not env_id or known(env_id):
        return
    path = record.get("import")
    if not path:
        raise ConfigError(f"env.id={env_id} of {run_path} was registered in the process that made the run "
                         f"(in {record.get('module') or '?'}), and no other process can import it: register it "
                         f"again and use the Python API, or define it in a module and use env.id=module:attr")
    folder = record.get("path")
    if folder and folder not in sys.path:  # last: whatever this process imports first still wins
        sys.path.append(folder)
    register_spec(path, env_id)


def recall_run(run_path) -> None:
    """recall() of what a run folder's env.json keeps (nothing when it keeps none: not an in-process env)."""
    file = Path(run_path) / FILE
    if not file.exists():
        return
    try:
        record = json.loads(file.read_text())
    except (OSError, ValueError):
        record = {}
    recall(record if isinstance(record, dict) else {}, run_path)
