"""A run's weights, whatever trained it: loaded by asking the run's algorithm (ES replays its
history, GRPO loads its checkpoint), and the weights a run started from (esopt adapt --from)."""
from __future__ import annotations

import json
from pathlib import Path

from ..es.perturb import weights_hash
from .algorithm import algorithm
from .rundir import RunDir


def load_run_weights(run_dir: str | Path, upto: int | None = None):
    """(model, tokenizer, cfg, n) with the run's weights after `upto` updates (default: all), n of them."""
    from ..models import load_model

    from .resume_check import check_record, get_key

    run = RunDir(Path(run_dir))
    cfg = run.load_config()
    check_record(run.path, lambda key: get_key(cfg, key))  # before anything loads: the history is the authority
    model, tok = load_model(cfg.model, cfg.runtime.dtype, usable_device(cfg.runtime.device))
    n = algorithm(cfg.algo).load_weights(run, cfg, model, upto)
    return model, tok, cfg, n


def start_from(run: RunDir, model) -> None:
    """A run that started from another run's final weights (esopt adapt --from) names it in
    RUN/init.json: load those weights into `model` (replayed, hash-verified) before its own history."""
    path = run.path / "init.json"
    if not path.exists():
        return
    info = json.loads(path.read_text())
    src, _, _, _ = load_run_weights(info["from"], upto=info.get("generations"))
    model.load_state_dict(src.state_dict())
    if weights_hash(model) != info["weights_hash"]:
        raise RuntimeError(f"{run.path} started from {info['from']} with weights {info['weights_hash'][:12]}; "
                           f"replaying that run now gives {weights_hash(model)[:12]}")


def usable_device(device: str) -> str:
    """The run's device, or the CPU where this machine lacks it: replay gives the same bits on
    either (tests/es/test_cuda.py), so a GPU run exports and evaluates on a CPU-only machine."""
    from .preflight import check_device
    from ..utils.settings import ConfigError

    try:
        check_device(device)
        return device
    except ConfigError:
        print(f"[esopt] the run used runtime.device={device}, not available here: loading it on the CPU", flush=True)
        return "cpu"


def replay(history, perturber, upto: int | None = None) -> int:
    """history.replay with a progress bar (generations replayed, rate and ETA) when there are several."""
    from tqdm import tqdm

    total = len(history.records[:upto])
    bar = tqdm(total=total, desc="replaying the history", unit="generation", dynamic_ncols=True, mininterval=1.0,
               leave=False, disable=total < 2)
    try:
        return history.replay(perturber, upto, on_generation=lambda done, total: bar.update(1))
    finally:
        bar.close()
