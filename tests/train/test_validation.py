"""The validation split: disjoint from training and held-out, played at every evaluation,
while held-out is played only before training and at the end."""
import json

import pytest

from esopt.envs.sudoku import SudokuTasks
from esopt.train.evaluate import paired_difference, summarize
from esopt.train.rundir import RunDir

from test_trainer import make_trainer


def test_validation_disjoint_from_heldout_and_training():
    tasks = SudokuTasks(4, 2, seed=3, heldout_reserve=256, validation_reserve=256)
    heldout = {p.grid for p in tasks.heldout(256)}
    val = [p.grid for p in tasks.validation(256)]
    assert len(set(val)) == 256 and not set(val) & heldout
    train = {p.grid for k in range(20) for p in tasks.train(32, k)}
    assert not train & heldout and not train & set(val)
    assert tasks.validation(10) == tasks.validation(256)[:10]  # a fixed list, prefix-stable
    with pytest.raises(ValueError, match="validation_reserve"):
        SudokuTasks(4, 2, seed=3, validation_reserve=4).validation(5)


def test_no_validation_split_keeps_training_draws():
    a = SudokuTasks(4, 2, seed=3).train(16, 5)
    b = SudokuTasks(4, 2, seed=3, validation_reserve=0).train(16, 5)
    assert a == b


def test_heldout_only_at_boundaries_with_a_validation_split(tiny_cfg):
    cfg = tiny_cfg("tasks.validation=4", "eval.every=1", "run.name=val")
    tr = make_trainer(cfg)
    summary = tr.train()
    evals = [m for m in RunDir(tr.run.path).metrics() if m["kind"] == "eval"]
    assert [m["generation"] for m in evals] == [0, 1, 2, 3]
    assert all(m["validation_n"] == 4 for m in evals)
    assert [("heldout_reward" in m) for m in evals] == [True, False, False, True]
    traj = sorted(p.name for p in (tr.run.path / "trajectories").iterdir() if not p.name.startswith("gen"))
    assert traj == ["eval_gen0000.jsonl", "eval_gen0003.jsonl", "val_gen0000.jsonl", "val_gen0001.jsonl",
                    "val_gen0002.jsonl", "val_gen0003.jsonl"]
    assert {"base", "final", "improvement"} <= set(summary) and summary["validation"]["final"]["n"] == 4
    saved = json.loads((tr.run.path / "summary.json").read_text())
    assert saved["validation"]["base"]["n"] == 4


def test_without_validation_every_evaluation_is_heldout(tiny_cfg):
    tr = make_trainer(tiny_cfg("eval.every=1", "run.name=noval"))
    tr.train()
    evals = [m for m in RunDir(tr.run.path).metrics() if m["kind"] == "eval"]
    assert all("heldout_reward" in m and "validation_reward" not in m for m in evals)


def _eps(rewards_by_task):
    return [{"task": t, "reward": r, "solved": False, "error": None}
            for rep in range(len(next(iter(rewards_by_task.values()))))
            for t, rs in rewards_by_task.items() for r in [rs[rep]]]


def test_repeats_are_averaged_per_task_before_the_se():
    # 2 tasks x 3 repeats: the SE is over the 2 task means, not the 6 episodes
    before = summarize(_eps({"a": [0.0, 0.0, 0.0], "b": [1.0, 1.0, 1.0]}))
    after = summarize(_eps({"a": [1.0, 0.0, 1.0], "b": [1.0, 1.0, 1.0]}))
    assert before["per_task"] == [0.0, 1.0] and before["tasks"] == 2 and before["n"] == 6
    assert before["reward_se"] == pytest.approx(0.5)  # std([0, 1], ddof=1) / sqrt(2)
    diff, se = paired_difference(after["per_task"], before["per_task"])
    assert diff == pytest.approx(1 / 3) and se == pytest.approx(1 / 3)  # diffs [2/3, 0]


def test_by_task_family_groups_web_episode_ids():
    from esopt.train.evaluate import by_task_family

    eps = [{"task": "miniwob.click-button#4", "reward": 1.0}, {"task": "miniwob.enter-text#8", "reward": 0.0},
           {"task": "miniwob.click-button#12", "reward": 0.0}, {"task": "webarena-file:/t.json#3#16", "reward": 1.0}]
    assert by_task_family(eps) == {"miniwob.click-button": (1.0, 2), "miniwob.enter-text": (0.0, 1),
                                   "webarena-file:/t.json#3": (1.0, 1)}
    assert by_task_family([{"task": "4x4-puzzle-17", "reward": 1.0}] + eps) == {}  # Sudoku ids: no families
