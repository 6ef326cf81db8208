"""The optional `gepa` package, imported only when a GEPA baseline runs."""
from __future__ import annotations

import importlib

from ...config import ConfigError

GEPA_VERSION = "0.1.4"  # the version esopt's adapter was written and tested against
INSTALL_HINT = "pip install 'esopt[prompt-opt]' (make install installs it)"


class MissingPackage(ConfigError):
    """An optional package a command needs is not installed (one error line, with the fix)."""


def require_gepa(needed_by: str = "esopt baseline gepa"):
    """The gepa module, or MissingPackage naming the extra that installs it (needed_by: what asked for it)."""
    try:
        return importlib.import_module("gepa")
    except ImportError as err:
        raise MissingPackage(f"{needed_by} needs the gepa package ({err}); {INSTALL_HINT}") from None


def evaluation_batch(outputs: list, scores: list[float], trajectories: list | None):
    """gepa's EvaluationBatch (the engine reads its fields by name)."""
    from gepa.core.adapter import EvaluationBatch

    return EvaluationBatch(outputs=outputs, scores=scores, trajectories=trajectories)
