"""`esopt adapt --merge OUT.json A/adapt.json B/adapt.json ...`: one table from adapt commands
whose tasks differ (seeds run in different sessions or on different machines).

The inputs must share the settings, the budgets and the starting weights (hash); a task may
appear in one input only. The rows are concatenated in the order given and the win / tie / loss
totals are recounted over all of them; nothing is re-evaluated (the rows' comparisons are the
ones each adapt command computed from its own paired held-out episodes).
"""
from __future__ import annotations

import json
from pathlib import Path

from ...config import ConfigError
from . import table as adapt_table

KEYS = ("rows", "settings", "budgets", "start", "tasks")


def _load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file (give the adapt.json files to merge)") from None
    except (OSError, ValueError) as err:
        raise ConfigError(f"{path} is not readable JSON: {err}") from None
    missing = [k for k in KEYS if not isinstance(data, dict) or k not in data]
    if missing:
        raise ConfigError(f"{path} is not an esopt adapt.json (no {', '.join(missing)})")
    return data


def merge(out: str | Path, inputs: list[str | Path]) -> dict:
    """Check the inputs fit together, write OUT (.json) and its .md table beside it; returns the merged
    adapt.json content. Every check runs before anything is written."""
    from ...es.history import atomic_write_text
    from .grid import table_text

    out = Path(out)
    if out.suffix != ".json":
        raise ConfigError(f"--merge {out}: the merged table is written as JSON; give a file name ending in .json")
    if len(inputs) < 2:
        raise ConfigError("--merge needs at least two adapt.json files after the output file")
    paths = [Path(p) for p in inputs]
    if out.resolve() in {p.resolve() for p in paths}:
        raise ConfigError(f"--merge {out} is one of the inputs: write the merged table to another file")
    tables = [_load(p) for p in paths]
    first, head = tables[0], paths[0]
    for path, t in zip(paths[1:], tables[1:]):
        for key in ("settings", "budgets"):
            if t[key] != first[key]:
                raise ConfigError(f"{path} has {key} {t[key]}, {head} has {first[key]}: only tables of the same "
                                  f"{key} merge")
        if t["start"].get("weights_hash") != first["start"].get("weights_hash"):
            raise ConfigError(f"{path} started from other weights ({str(t['start'].get('weights_hash'))[:12]}) than "
                              f"{head} ({str(first['start'].get('weights_hash'))[:12]}): only tables of one "
                              "starting agent merge")
    seen: dict[str, Path] = {}
    for path, t in zip(paths, tables):
        for task in t["tasks"]:
            if task in seen:
                raise ConfigError(f"task {task!r} is in both {seen[task]} and {path}: a task may be in one table only")
            seen[task] = path
    rows = [row for t in tables for row in t["rows"]]
    result = {"merged_from": [str(p) for p in paths], "config": [t.get("config") for t in tables],
              "start": first["start"], "settings": first["settings"], "budgets": first["budgets"],
              "tasks": {k: v for t in tables for k, v in t["tasks"].items()}, "rows": rows,
              "totals": adapt_table.totals(rows), "failed": [f for t in tables for f in t.get("failed", [])]}
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(result, indent=1))
    name = f"{out.stem} (merged from {', '.join(str(p) for p in paths)})"
    atomic_write_text(out.with_suffix(".md"), table_text(name, result["start"], rows, result["settings"]))
    return result
