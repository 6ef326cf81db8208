"""GRPO checkpoints: RUN/checkpoint/{model.safetensors, optimizer.pt, state.json}.

Written into a temporary folder, then swapped in: a crash leaves the previous
checkpoint (or the new one) whole, never a mix.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_model, save_model

NAME = "checkpoint"


def checkpoint_dir(run_path) -> Path:
    return Path(run_path) / NAME


def read_state(run_path) -> dict | None:
    p = checkpoint_dir(run_path) / "state.json"
    return json.loads(p.read_text()) if p.exists() else None


def save(run_path, model, optimizer, state: dict) -> None:
    final = checkpoint_dir(run_path)
    tmp, old = final.with_name(NAME + ".tmp"), final.with_name(NAME + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_model(model, str(tmp / "model.safetensors"))  # handles tied weights
    if optimizer is not None:
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    (tmp / "state.json").write_text(json.dumps(state, indent=1))
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)


def load_weights(run_path, model) -> dict:
    """Load the checkpoint's weights into model (in place); returns its state."""
    state = read_state(run_path)
    if state is None:
        raise FileNotFoundError(f"{run_path} has no GRPO checkpoint ({NAME}/state.json)")
    missing, unexpected = load_model(model, str(checkpoint_dir(run_path) / "model.safetensors"), strict=False)
    if unexpected or [m for m in missing if not _tied(model, m)]:
        raise RuntimeError(f"checkpoint of {run_path} does not fit the model: missing {missing}, unexpected {unexpected}")
    return state


def load_optimizer(run_path, optimizer) -> None:
    p = checkpoint_dir(run_path) / "optimizer.pt"
    optimizer.load_state_dict(torch.load(p, map_location="cpu", weights_only=True))


def _tied(model, name: str) -> bool:
    """save_model drops one name of each tied pair; that name is not really missing."""
    params = dict(model.named_parameters(remove_duplicate=False))
    p = params.get(name)
    return p is not None and any(q is p and n != name for n, q in params.items())
