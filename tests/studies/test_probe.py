"""esopt probe: the figures on hand-made episodes, the recommendation, and one run on the tiny model."""
import contextlib
import json
import math

import pytest

from conftest import TINY_OVERRIDES
from esopt.studies.probe import (FORMAT_BREAK_MAX, SIGNAL_SHARE, episodes_hint, format_ok, measure,
                                 population_hint, recommend, reports_actions)


def ep(task, reward, *responses, actions=None, error=None):
    actions = actions if actions is not None else [None] * len(responses)
    return {"task": task, "reward": reward, "error": error, "solved": False,
            "turns": [{"response": r, "action": a, "reward": 0.0} for r, a in zip(responses, actions)]}


def test_measure_counts_replies_format_rewards_and_ties():
    base = [ep("a", 0.5, "r1c1=2", actions=["m"]), ep("b", 0.0, "x", actions=[None])]
    m1 = [ep("a", 0.5, "r1c1=2", actions=["m"]), ep("b", 0.0, "y", actions=[None])]   # b's reply changed
    m2 = [ep("a", 1.0, "r1c1=3", actions=["m"]), ep("b", 0.0, "x", actions=[None])]   # a's reply and reward changed
    m3 = [ep("a", 0.0, "zz", actions=[None]), ep("b", 0.0, "r2c2=1", actions=["m"])]  # a's format broken, b's mended
    r = measure(base, [m1, m2, m3], by_action=True)
    assert r["episodes"] == 6
    assert r["replies_changed"] == pytest.approx(4 / 6)
    assert r["format_changed"] == pytest.approx(2 / 6) and r["format_broken"] == pytest.approx(1 / 6)
    assert r["reward_changed"] == pytest.approx(2 / 6)
    assert [t["tied"] for t in r["per_task"]] == [False, True]  # a: 0.5, 1.0, 0.0; b: all 0
    assert r["tasks_tied"] == 0.5 and r["signal_share"] == 0.5 and r["spread"] == pytest.approx(0.5)
    # judged by errors alone, the unread replies are no format change; an error is
    failed = [ep("a", 0.5, "r1c1=2"), ep("b", -1.0, "x", error="Traceback ...")]
    r = measure(base, [m3, failed], by_action=False)
    assert r["format_changed"] == r["format_broken"] == pytest.approx(1 / 4) and r["errors"] == 1


def test_measure_refuses_members_of_other_tasks():
    with pytest.raises(ValueError, match="base's tasks"):
        measure([ep("a", 0, "x"), ep("b", 0, "x")], [[ep("b", 0, "x"), ep("a", 0, "x")]], False)


def test_format_is_read_actions_when_the_env_reports_them():
    read, unread = ep("a", 0, "r1c1=2", actions=[(1, 1, 2)]), ep("a", 0, "hello")
    assert reports_actions([unread, read]) and not reports_actions([unread])
    assert format_ok(read, True) and not format_ok(unread, True) and format_ok(unread, False)
    tool = {"task": "a", "reward": 0, "error": None, "turns": [{"response": "call", "action": None,
                                                                 "tool_calls": [{"name": "f", "result": "1"}]}]}
    failed = {"task": "a", "reward": 0, "error": "tb", "turns": [{"response": "x", "failed": True}]}
    assert format_ok(tool, True) and not format_ok(failed, True) and not format_ok(failed, False)


def row(signal, broken, replies=0.5, moved=0.25):
    return {"signal_share": signal, "tasks_tied": 1 - signal, "format_broken": broken, "replies_changed": replies,
            "reward_changed": moved}


def test_recommend_takes_the_smallest_sigma_with_signal_that_keeps_the_format():
    rows = {0.0: row(0, 0, 0, 0), 1e-3: row(0.25, 0), 3e-3: row(0.6, 0.05), 1e-2: row(0.9, 0.4)}
    rec = recommend(rows)
    assert rec["sigma"] == 3e-3 and rec["verdict"] == "ok"
    assert rec["episodes_per_member"] == math.ceil(math.log(0.05) / math.log(0.4))  # 0.4^E <= 5%: E = 4
    assert rec["population"] == 8  # 2 / 0.25
    # the format breaks before the signal comes: the most signal that keeps it
    rec = recommend({1e-3: row(0.1, 0), 3e-3: row(0.3, 0.02), 1e-2: row(0.9, FORMAT_BREAK_MAX + 0.1)})
    assert rec["sigma"] == 3e-3 and rec["verdict"] == "weak" and "lack room" in rec["why"]
    # no signal anywhere: larger sigmas if replies hardly change, another task if they do and rewards do not
    assert "larger sigmas" in recommend({1e-3: row(0.0, 0, replies=0.1, moved=0)})["why"]
    flat = recommend({1e-3: row(0.0, 0, replies=0.9, moved=0)})
    assert "flat" in flat["why"] and flat["population"] is None and flat["episodes_per_member"] is None
    rec = recommend({1e-3: row(0.9, 0.5), 1e-2: row(1.0, 0.9)})
    assert rec["sigma"] == 1e-3 and rec["verdict"] == "format" and "smaller" in rec["why"]
    assert SIGNAL_SHARE == 0.5


def test_hints():
    assert episodes_hint(0.0) == 1 and episodes_hint(1.0) is None and episodes_hint(0.5) == 5
    assert population_hint(0.0, True) is None and population_hint(0.3, True) == 8 and population_hint(0.3, False) == 7
    assert population_hint(1.0, True) == 2


@pytest.mark.parametrize("noise", [[], ["es.noise=lowrank"]], ids=["in-place", "low-rank-rows"])
def test_probe_on_the_tiny_model(esopt_cache, tmp_path, capsys, noise):
    from esopt.cli import main
    from esopt.config import load_config
    from esopt.train.tasks import TaskSource

    out = tmp_path / "probe.json"
    overrides = [*TINY_OVERRIDES, "tasks.validation=3", f"run.out_dir={tmp_path}", *noise]
    rc = main(["probe", "configs/demo.yaml", *overrides, "--sigmas", "0,0.05", "--members", "2", "--tasks", "2",
               "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    lines = captured.out.strip().splitlines()
    assert lines[-1].startswith("RESULT probe_sigma=")
    result = json.loads(out.read_text())
    zero, large = result["sigmas"]["0"], result["sigmas"]["0.05"]
    assert zero["episodes"] == large["episodes"] == 4 and result["episodes"] == 2 * (1 + 2 * 2)
    assert zero["replies_changed"] == zero["reward_changed"] == zero["format_changed"] == 0  # the base, bit for bit
    assert zero["tasks_tied"] == 1.0
    assert large["replies_changed"] > 0  # a perturbation this large moves a tiny random model's replies
    assert result["recommendation"]["sigma"] == 0.05  # sigma 0 is never recommended
    # the validation split's first two tasks, never a held-out one
    cfg = load_config("configs/demo.yaml", overrides)
    source = TaskSource(cfg.env, cfg.tasks, cfg.run.seed)
    assert result["split"] == "validation" and result["tasks"] == source.validation()[1][:2]
    assert not set(result["tasks"]) & set(source.heldout()[1])


def test_without_a_validation_split_it_plays_training_tasks(tiny_cfg):
    from esopt.studies.probe import tasks_of
    from esopt.train.tasks import TaskSource

    cfg = tiny_cfg()  # tasks.validation=0
    source = TaskSource(cfg.env, cfg.tasks, cfg.run.seed)
    envs, ids, _, split = tasks_of(cfg, source, 2)
    assert split == "train" and ids == source.train(2, 0)[1] and len(envs) == 2
    assert not set(ids) & set(source.heldout()[1])


@pytest.mark.parametrize("flags, message", [
    (["--sigmas=0,-1e-3"], "--sigmas takes comma-separated numbers >= 0"),
    (["--sigmas", "big"], "--sigmas takes comma-separated numbers >= 0"),
    (["--members", "3"], "--members must be even with es.antithetic=true"),
    (["--tasks", "0"], "--tasks must be >= 1"),
    (["--out", "no/such/folder/p.json"], "does not exist"),
    (["--population", "4"], "probe does not take --population"),
])
def test_bad_flags_are_one_line(esopt_cache, capsys, flags, message):
    from esopt.cli import main

    with pytest.raises(SystemExit) if flags[0] == "--population" else contextlib.nullcontext():
        rc = main(["probe", "configs/demo.yaml", "model=tiny-llama", *flags])
        assert rc == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
