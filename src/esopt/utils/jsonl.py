"""Tolerant JSONL reading (run files can end in a torn line: a kill or a full disk mid-write), and strict
JSON writing (run files never hold NaN or Infinity tokens)."""
from __future__ import annotations

import json
import math
from pathlib import Path


def read_jsonl(path: Path) -> tuple[list[dict], int]:
    """(the JSON objects of the file's lines, number of lines skipped as torn, garbage or not
    objects); an unreadable file counts as one bad line."""
    rows, bad = [], 0
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return [], 1
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad += 1
    return rows, bad


def strict_dumps(value, **kwargs) -> str:
    """JSON that strict readers accept: NaN and infinities become null (json.dumps would write the
    bare NaN / Infinity tokens, which are not JSON)."""
    try:
        return json.dumps(value, allow_nan=False, **kwargs)
    except ValueError:  # a non-finite float somewhere: only then walk the value
        return json.dumps(finite(value), allow_nan=False, **kwargs)


def finite(value):
    """`value` with every non-finite float replaced by None (dicts, lists and tuples walked)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value
