"""Rebuild a run's final weights from its history and write a Hugging Face folder."""
from __future__ import annotations

import json
from pathlib import Path

from .es.build import make_perturber
from .es.perturb import weights_hash
from .models import load_model
from .train.rundir import RunDir


def load_run_weights(run_dir: str | Path, upto: int | None = None):
    """(model, tokenizer, cfg) with the run's weights after `upto` generations (default: all)."""
    run = RunDir(Path(run_dir))
    cfg = run.load_config()
    model, tok = load_model(cfg.model, cfg.runtime.dtype, cfg.runtime.device)
    if cfg.algo == "grpo":  # a gradient run keeps its weights, not a seed history
        from .rl.checkpoint import load_weights

        if upto is not None:
            raise ValueError("a GRPO run keeps only its last checkpoint: weights after `upto` steps are not available")
        return model, tok, cfg, int(load_weights(run.path, model)["step"])
    n = run.history().replay(make_perturber(model, cfg.es), upto=upto)
    return model, tok, cfg, n


def export_run(run_dir: str | Path, out_dir: str | Path) -> dict:
    model, tok, cfg, n = load_run_weights(run_dir)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    info = {"run_dir": str(run_dir), "base_model": cfg.model, "generations": n, "weights_hash": weights_hash(model)}
    (out / "esopt_export.json").write_text(json.dumps(info, indent=1))
    return info
