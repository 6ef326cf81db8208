"""Command-line argument helpers shared by the CLI and the studies' commands."""
from __future__ import annotations

import re
from pathlib import Path

DEFAULT_CONFIG = "configs/demo.yaml"


def split_args(items: list[str]) -> tuple[str | None, list[str]]:
    """First non-override argument is the config file; KEY=VALUE items are overrides."""
    config, overrides = None, []
    for it in items:
        if "=" in it:
            overrides.append(it)
        elif config is None:
            config = it
        else:
            raise SystemExit(f"esopt: error: unexpected argument {it!r} (overrides look like es.population=8)")
    return config, overrides


def default_config() -> str:
    if Path(DEFAULT_CONFIG).exists():
        return DEFAULT_CONFIG
    raise SystemExit(f"esopt: error: no config given and {DEFAULT_CONFIG} not found in {Path.cwd()}")


def ints(text: str | None, flag: str, default: str | None = None) -> list[int] | None:
    """Comma-separated integers of `flag` (or of `default` when the flag was not given)."""
    return _numbers(text if text else default, flag, int, "integers")


def floats(text: str | None, flag: str, default: str | None = None) -> list[float] | None:
    return _numbers(text if text else default, flag, float, "numbers")


def _numbers(text, flag, kind, what):
    if text is None:
        return None
    try:
        return [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"esopt: error: {flag} takes comma-separated {what}, got {text!r}") from None


def names(text: str | None) -> list[str] | None:
    """Comma-separated names, blanks dropped; None when not given."""
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


_NEW_TASK = re.compile(r"[^=:,\s]+=[^=:]+\.ya?ml(:|$)")  # name=config.yaml[:...]


def task_list(text: str | None) -> list[str]:
    """Comma-separated tasks, each a name or ``name=config.yaml[:override,override,...]``: a piece that is
    neither (it holds a '=' but names no .yaml config) goes on the previous task's overrides, so
    ``name=config.yaml:a=1,b=2`` is one task with two overrides."""
    out: list[str] = []
    for piece in (p.strip() for p in (text or "").split(",")):
        if not piece:
            continue
        if out and "=" in piece and not _NEW_TASK.match(piece):
            out[-1] += "," + piece
        else:
            out.append(piece)
    return out
