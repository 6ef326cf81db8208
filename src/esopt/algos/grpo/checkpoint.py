"""GRPO checkpoints: RUN/checkpoint/{model.safetensors, optimizer.pt, state.json}.

Crash-safe: a complete checkpoint is on disk at every instant.

- A checkpoint is written into `checkpoint.tmp/`, state.json last, every file
  and the folder fsynced: a folder is complete when it has state.json (and the
  files state.json names).
- It is then swapped in with two renames: `checkpoint/` -> `checkpoint.old/`,
  `checkpoint.tmp/` -> `checkpoint/`; `checkpoint.old/` is deleted last.
  `checkpoint.old/` is deleted before a save only while `checkpoint/` is complete.
- A reader takes `checkpoint/` if complete, else `checkpoint.old/` (a crash
  between the two renames); `checkpoint.tmp/` is never read.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ...es.history import atomic_write_text, fsync_path

NAME = "checkpoint"
TMP, OLD = NAME + ".tmp", NAME + ".old"
STATE = "state.json"


def _state_of(folder: Path) -> dict | None:
    """The folder's state if it is a complete checkpoint, else None."""
    try:
        state = json.loads((folder / STATE).read_text())
    except (OSError, ValueError):
        return None
    files = ["model.safetensors"] + (["optimizer.pt"] if state.get("optimizer", True) else [])
    return state if all((folder / f).is_file() for f in files) else None


def locate(run_path) -> Path | None:
    """The folder of the run's last complete checkpoint: checkpoint/, else checkpoint.old/, else None."""
    for name in (NAME, OLD):
        folder = Path(run_path) / name
        if _state_of(folder) is not None:
            return folder
    return None


def exists(run_path) -> bool:
    return locate(run_path) is not None


def read_state(run_path) -> dict | None:
    folder = locate(run_path)
    return None if folder is None else _state_of(folder)


def save(run_path, model, optimizer, state: dict) -> None:
    import torch
    from safetensors.torch import save_model

    run_path = Path(run_path)
    final, tmp, old = run_path / NAME, run_path / TMP, run_path / OLD
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_model(model, str(tmp / "model.safetensors"))  # handles tied weights
    if optimizer is not None:
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    for f in tmp.iterdir():
        fsync_path(f)
    atomic_write_text(tmp / STATE, json.dumps({**state, "optimizer": optimizer is not None}, indent=1))  # the marker
    fsync_path(tmp)
    if _state_of(final) is not None:  # old/ is not needed while checkpoint/ is complete
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
    else:  # checkpoint/ missing (or incomplete): old/, if any, is the last complete one and stays until the swap
        shutil.rmtree(final, ignore_errors=True)
    fsync_path(run_path)
    os.replace(tmp, final)
    fsync_path(run_path)
    shutil.rmtree(old, ignore_errors=True)


def load_weights(run_path, model) -> dict:
    """Load the last complete checkpoint's weights into model (in place); returns its state."""
    from safetensors.torch import load_model

    folder = locate(run_path)
    if folder is None:
        raise FileNotFoundError(f"{run_path} has no GRPO checkpoint ({NAME}/{STATE})")
    missing, unexpected = load_model(model, str(folder / "model.safetensors"), strict=False)
    if unexpected or [m for m in missing if not _tied(model, m)]:
        raise RuntimeError(f"checkpoint of {run_path} does not fit the model: missing {missing}, unexpected {unexpected}")
    return _state_of(folder)


def load_optimizer(run_path, optimizer) -> None:
    import torch

    folder = locate(run_path)
    if folder is None:
        raise FileNotFoundError(f"{run_path} has no GRPO checkpoint ({NAME}/{STATE})")
    optimizer.load_state_dict(torch.load(folder / "optimizer.pt", map_location="cpu", weights_only=True))


def _tied(model, name: str) -> bool:
    """save_model drops one name of each tied pair; that name is not really missing."""
    params = dict(model.named_parameters(remove_duplicate=False))
    p = params.get(name)
    return p is not None and any(q is p and n != name for n, q in params.items())
