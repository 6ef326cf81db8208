"""The one-minute check (README): ES on a tiny random model and the vowels toy task moves the
held-out reward, by more than 2 SE on the same 32 tasks, within a minute on one core. If the
optimizer, the update or the rollout were broken (weights never moving, updates of the wrong
sign), the reward would not rise and this test fails."""
from __future__ import annotations

import json

from esopt.cli import main


def test_es_visibly_moves_the_smoke_tasks_reward(esopt_cache, tmp_path, capsys):
    assert main(["train", "configs/smoke.yaml", f"run.out_dir={tmp_path}", "run.name=smoke"]) == 0
    summary = json.loads((tmp_path / "smoke" / "summary.json").read_text())
    gain = summary["improvement"]
    assert gain["mean"] > 2 * gain["se"] > 0, gain
    train = [json.loads(line) for line in (tmp_path / "smoke" / "metrics.jsonl").read_text().splitlines()]
    rewards = [m["reward_mean"] for m in train if m.get("kind") == "train"]
    assert sum(rewards[-5:]) > sum(rewards[:5])  # the members' reward rose during training too
