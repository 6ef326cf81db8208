"""GRPO checkpoint layout: always one complete checkpoint on disk; readers fall back to
checkpoint.old/ when checkpoint/ is missing or incomplete (a crash between the renames)."""
import json
import shutil

import pytest
import torch

from esopt.es.perturb import weights_hash
from esopt.algos.grpo import checkpoint
from esopt.train.rundir import RunDir, holds_run

from conftest import tiny_llama


def save(run, model, opt, step):
    checkpoint.save(run, model, opt, {"step": step, "weights_hash": weights_hash(model)})


def test_fallback_to_the_last_complete_checkpoint(tmp_path, tiny_cfg):
    model = tiny_llama().requires_grad_(True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    run = tmp_path / "run"
    assert checkpoint.locate(run) is None and not holds_run(run)
    save(run, model, opt, 1)
    save(run, model, opt, 1)  # a second save replaces the first and leaves nothing beside it
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint"]
    step1 = weights_hash(model)

    # as after a crash between the renames, with a stray incomplete checkpoint/ (no state.json)
    (run / "checkpoint").rename(run / "checkpoint.old")
    (run / "checkpoint").mkdir()
    shutil.copy(run / "checkpoint.old" / "model.safetensors", run / "checkpoint")
    assert checkpoint.locate(run) == run / "checkpoint.old" and checkpoint.read_state(run)["step"] == 1
    assert holds_run(run)
    with pytest.raises(FileExistsError):  # a new run may not be created over it
        RunDir.create(tiny_cfg(f"run.out_dir={tmp_path}", "run.name=run"))

    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    assert checkpoint.load_weights(run, model)["step"] == 1 and weights_hash(model) == step1
    checkpoint.load_optimizer(run, opt)

    with torch.no_grad():
        for p in model.parameters():
            p.mul_(2.0)
    save(run, model, opt, 2)  # keeps checkpoint.old/ until the new one is in place, then removes it
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint"]
    assert json.loads((run / "checkpoint" / "state.json").read_text())["step"] == 2

    (run / "checkpoint" / "optimizer.pt").unlink()  # a checkpoint missing a file it names is incomplete
    assert checkpoint.locate(run) is None
