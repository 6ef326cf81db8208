"""The shipped task file (``tasks.json``, WebArena's task format plus a few fields) and its checks.

Each task is a WebArena-style dict: ``task_id``, ``sites``, ``intent``,
``intent_template``, ``instantiation_dict``, ``intent_template_id``,
``start_url`` (``__SHOP__`` stands for the site's base URL), ``require_login``,
``require_reset``, ``eval`` (see :mod:`evaluate`). esopt adds ``kind`` (the
template's name), ``split`` (train / validation / heldout, stratified by kind)
and ``site_seed`` (the world the reference answers were read from).
"""

from __future__ import annotations

import functools
import json
from importlib import resources

from esopt.envs.browser.webshop.evaluate import EVAL_TYPES, PLACEHOLDER, includes

SPLITS = ("train", "validation", "heldout")
TASKS_RESOURCE = "tasks.json"
REQUIRED = {"task_id": int, "sites": list, "intent": str, "intent_template": str, "instantiation_dict": dict,
            "intent_template_id": int, "start_url": str, "require_login": bool, "require_reset": bool, "eval": dict,
            "kind": str, "split": str, "site_seed": int}


@functools.lru_cache(maxsize=1)
def _load() -> tuple[dict, ...]:
    text = resources.files("esopt.envs.browser.webshop").joinpath(TASKS_RESOURCE).read_text(encoding="utf-8")
    return tuple(json.loads(text))


def load_tasks(split: str | None = None) -> list[dict]:
    """The shipped tasks (fresh copies), all or those of ``split``."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    return [json.loads(json.dumps(t)) for t in _load() if split is None or t["split"] == split]


def get_task(task_id: int) -> dict:
    for task in _load():
        if task["task_id"] == task_id:
            return json.loads(json.dumps(task))
    raise KeyError(f"no webshop task {task_id!r}; ids run from 0 to {len(_load()) - 1}")


def task_problems(task: dict) -> list[str]:
    """What is wrong with one task dict (empty when it is valid)."""
    problems = []
    for key, kind in REQUIRED.items():
        if not isinstance(task.get(key), kind) or (kind is int and isinstance(task.get(key), bool)):
            problems.append(f"{key} must be a {kind.__name__}")
    if problems:
        return problems
    if task["split"] not in SPLITS:
        problems.append(f"split must be one of {SPLITS}")
    if not task["start_url"].startswith(PLACEHOLDER + "/"):
        problems.append(f"start_url must start with {PLACEHOLDER}/")
    spec = task["eval"]
    types = spec.get("eval_types")
    if not types or not isinstance(types, list) or set(types) - set(EVAL_TYPES):
        return problems + [f"eval.eval_types must be a non-empty list from {EVAL_TYPES}"]
    if "string_match" in types:
        ref = spec.get("reference_answers") or {}
        if not ref or set(ref) - {"exact_match", "must_include"}:
            problems.append("string_match needs reference_answers with exact_match and/or must_include")
        leaked = [a for a in ref.get("must_include", []) if includes(task["intent"], a)]
        if leaked:
            problems.append(f"the intent gives the answer away: {leaked}")
    if "url_match" in types and not str(spec.get("reference_url", "")).startswith(PLACEHOLDER + "/"):
        problems.append(f"url_match needs reference_url starting with {PLACEHOLDER}/")
    if "program_html" in types:
        items = spec.get("program_html") or []
        if not items or any(set(i) != {"url", "locator", "required_contents"} for i in items):
            problems.append("program_html needs a list of {url, locator, required_contents}")
    if "db_match" in types:
        items = spec.get("db_match") or []
        if not items or any(not str(i.get("sql", "")).lstrip().upper().startswith("SELECT")
                            or not isinstance(i.get("expected"), list) for i in items):
            problems.append("db_match needs a list of {sql: SELECT ..., params, expected: [rows]}")
    return problems
