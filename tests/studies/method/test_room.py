"""esopt bench room: the base table on validation (one model load), the choice of tasks with room,
and ES over seeds read back from the runs (tiny model)."""
import json
from pathlib import Path

import pytest

from conftest import TINY_OVERRIDES

from esopt.studies.method import room
from esopt.cli import main


@pytest.mark.slow  # process-heavy: the default tier stays under 5 minutes (docs/design.md)
def test_room_table_and_es_over_seeds(esopt_cache, tmp_path, capsys, monkeypatch):
    envs = str(Path(__file__).parents[2] / "envs")  # guess_env, the example env, for this process and the runs'
    monkeypatch.syspath_prepend(envs)
    monkeypatch.setenv("PYTHONPATH", envs)
    tiny = [o for o in TINY_OVERRIDES if not o.startswith("tasks.validation")] + ["tasks.validation=4"]
    out = tmp_path / "room.json"
    assert main(["bench", "room", "--tasks", "rg-leg-counting-1,guess=configs/demo.yaml:env.id=guess_env:GuessEnv",
                 *tiny, "--out", str(out), "--runs", str(tmp_path / "runs")]) == 0
    data = json.loads(out.read_text())
    assert set(data["base"]) == {"rg-leg-counting-1", "guess"} and "es" not in data
    assert all(r["episodes"] == 4 for r in data["base"].values())
    assert "RESULT guess_validation_solved=" in capsys.readouterr().out
    assert "| guess |" in out.with_suffix(".md").read_text()
    assert all(0 < r["top_reply_share"] <= 1 and r["distinct_replies"] >= 1 for r in data["base"].values())

    res = room.train_seeds("guess", "configs/demo.yaml", ["env.id=guess_env:GuessEnv", *tiny, "es.generations=1"],
                           [3], str(tmp_path / "runs"), log=lambda *a: None)
    assert [p["seed"] for p in res["seeds"]] == [3] and res["improvement_se"] == 0  # one seed: no spread
    assert (tmp_path / "runs" / "guess-seed3" / "summary.json").exists()
    again = room.train_seeds("guess", "configs/demo.yaml", ["env.id=guess_env:GuessEnv", *tiny, "es.generations=1"],
                             [3], str(tmp_path / "runs"), log=lambda *a: None)
    assert again["seeds"] == res["seeds"]  # finished runs are read back, not trained again


def test_tasks_with_room_are_the_hardest_inside_the_band():
    table = {n: {"solved": s} for n, s in {"a": 0.05, "b": 0.3, "c": 0.15, "d": 0.8, "e": 0.7}.items()}
    assert room.with_room(table, 2) == ["c", "b"] and room.with_room(table, 5) == ["c", "b", "e"]


def test_a_task_whose_base_model_replies_one_constant_has_no_room():
    eps = [{"turns": [{"response": "<answer>2</answer>"}]}] * 19 + [{"turns": [{"response": "<answer>12</answer>"}]}]
    assert room.top_reply(eps) == ("<answer>2</answer>", 0.95, 2) and room.top_reply([]) == ("", 0.0, 0)
    games = [{"turns": [{"response": "5"}, {"response": g}]} for g in ("3", "3", "8", "1")]  # one opening, then own play
    assert room.top_reply(games) == ("5 / 3", 0.5, 3)
    table = {"counts": {"solved": 0.27, "top_reply_share": 0.95, "top_reply": "2"},
             "varied": {"solved": 0.4, "top_reply_share": 0.3, "top_reply": "x"}, "old": {"solved": 0.5}}
    assert room.with_room(table, 3) == ["varied", "old"]
    md = room.markdown({"base": {n: {**r, "solved_se": 0, "reward": r["solved"], "reward_se": 0, "turns": 1,
                                     "episodes": 20} for n, r in table.items()}})
    assert "| `2` (95%): constant |" in md and "| `x` (30%) |" in md


def test_a_task_the_preflight_refuses_is_recorded_and_skipped(esopt_cache, tmp_path):
    tiny = [o for o in TINY_OVERRIDES if not o.startswith("tasks.validation")] + ["tasks.validation=4"]
    details = room.main(["rg-leg-counting-0", "rg-leg-counting-1"], tiny + ["tasks.heldout=128", "tasks.validation=64"],
                        str(tmp_path / "room.json"))
    assert "repeats its questions" in details["base"]["rg-leg-counting-0"]["refused"]
    assert details["base"]["rg-leg-counting-1"]["episodes"] == 64
    assert "| rg-leg-counting-0 | refused: " in (tmp_path / "room.md").read_text()


def test_tasks_on_the_command_line_keep_their_overrides_together():
    from esopt.studies.method.room import parse_task
    from esopt.utils.args import task_list as split_tasks

    text = "a=configs/x.yaml:env.options.digits=4,env.options.terms=3,rg-gcd-0,b=configs/y.yml"
    assert split_tasks(text) == ["a=configs/x.yaml:env.options.digits=4,env.options.terms=3", "rg-gcd-0",
                                 "b=configs/y.yml"]
    assert parse_task(split_tasks(text)[0]) == ("a", ("configs/x.yaml", ["env.options.digits=4",
                                                                          "env.options.terms=3"]))
    assert split_tasks(None) == [] and split_tasks("rg-gcd-0,,rg-chain-sum-1") == ["rg-gcd-0", "rg-chain-sum-1"]
