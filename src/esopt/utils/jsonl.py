"""Tolerant JSONL reading: run files can end in a torn line (a kill or a full disk mid-write)."""
from __future__ import annotations

import json
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
