"""esopt adapt: the table over tasks x budgets x settings with real tiny-model sub-runs, paired
held-out episodes, resume/skip on a re-run, up-front validation, --from a trained run, and the
win/tie/loss rule on constructed numbers."""
import json

import pytest
import yaml

from esopt.studies.adapt import grid as adapt_mod
from esopt.studies.adapt.table import compare, comparisons, markdown, outcome, totals

BASE = {
    "model": "tiny-llama",
    "runtime": {"threads": 1},
    "es": {"population": 2, "episodes_per_member": 2, "antithetic": True},
    "env": {"id": "sudoku", "size": 4, "blanks": 2, "max_turns": 2},
    "tasks": {"heldout": 3, "validation": 0},
    "agent": {"max_new_tokens": 4, "examples": []},
    "eval": {"every": 0},
    "coevo": {"skills": [{"name": "A", "text": "alpha"}, {"name": "B", "text": "bravo"}]},
}


def write_config(tmp_path, **adapt):
    section = {"budgets": [4, 8], "tasks": {"b2": {}, "b3-binary": {"env.blanks": 3, "env.reward": "binary"}},
               "out_dir": str(tmp_path / "out"), "name": "t"} | adapt
    path = tmp_path / "adapt.yaml"
    path.write_text(yaml.safe_dump({**BASE, "adapt": section}))
    return path


@pytest.fixture
def count_trainers(monkeypatch):
    made = []
    real = adapt_mod.Trainer

    def counting(cfg, run, *a, **k):
        made.append((run.path.parent.name, run.path.name))
        return real(cfg, run, *a, **k)

    monkeypatch.setattr(adapt_mod, "Trainer", counting)
    return made


def test_outcome_and_compare_on_known_numbers():
    assert outcome(0.3, 0.1) == "win" and outcome(-0.3, 0.1) == "loss"
    assert outcome(0.19, 0.1) == "tie" and outcome(-0.19, 0.1) == "tie"  # within 2 SE
    assert outcome(0.0, 0.0) == "tie" and outcome(0.01, 0.0) == "win"
    # paired: A beats B by exactly 1 on every task -> SE 0 -> win, though unpaired SEs would overlap
    a = {"t1": 1.0, "t2": 5.0, "t3": 9.0}
    b = {"t1": 0.0, "t2": 4.0, "t3": 8.0}
    assert compare(a, b) == {"diff": 1.0, "se": 0.0, "outcome": "win"}
    # differences 1, -1, 0.5: mean 1/6, SE = sqrt(var/3) with var = ((5/6)^2 + (7/6)^2 + (1/3)^2) / 2
    c = compare({"t1": 1.0, "t2": 0.0, "t3": 0.5}, {"t1": 0.0, "t2": 1.0, "t3": 0.0})
    assert c["diff"] == pytest.approx(1 / 6)
    assert c["se"] == pytest.approx((((5 / 6) ** 2 + (7 / 6) ** 2 + (1 / 3) ** 2) / 2 / 3) ** 0.5)
    assert c["outcome"] == "tie"
    assert compare(b, a)["outcome"] == "loss"
    with pytest.raises(ValueError, match="same held-out tasks"):
        compare(a, {"t1": 0.0, "t2": 0.0, "tX": 0.0})
    comps = comparisons({"none": b, "weights": a, "context": b, "both": None})
    assert [(c["a"], c["b"], c["outcome"]) for c in comps] == [("weights", "none", "win"), ("context", "none", "tie")]
    rows = [{"task": "x", "budget": 4, "comparisons": comps, "settings": {}},
            {"task": "y", "budget": 4, "comparisons": comps[:1], "settings": {}}]
    assert totals(rows) == {"weights vs none @ 4": {"win": 2, "tie": 0, "loss": 0},
                            "context vs none @ 4": {"win": 0, "tie": 1, "loss": 0}}
    assert "| x | 4 |" in markdown(rows, ["none", "weights"])


@pytest.mark.slow  # process-heavy: the default tier stays under 5 minutes (docs/design.md)
def test_adapt_table_pairs_skips_and_resumes(esopt_cache, tmp_path, count_trainers):
    path = write_config(tmp_path)
    result = adapt_mod.run_adapt(path, [], log=lambda *a: None)
    root = tmp_path / "out" / "t"
    assert not result["failed"]
    # every (task, budget, setting) cell, with figures
    assert [(r["task"], r["budget"]) for r in result["rows"]] == [("b2", 4), ("b2", 8), ("b3-binary", 4),
                                                                   ("b3-binary", 8)]
    for row in result["rows"]:
        assert set(row["settings"]) == {"none", "context", "weights", "both"}
        assert all(c["n"] == 3 and c["status"] == "ran" for c in row["settings"].values())
        assert len(row["comparisons"]) == 5 and {c["outcome"] for c in row["comparisons"]} <= {"win", "tie", "loss"}
    # none is evaluated once per task (budget-independent), the others once per budget
    assert sorted(count_trainers) == sorted([(t, n) for t in ("b2", "b3-binary") for n in
                                             ["none"] + [f"{s}-b{b}" for s in ("context", "weights", "both")
                                                         for b in (4, 8)]])
    row = result["rows"][0]
    assert row["settings"]["none"]["run_dir"] == result["rows"][1]["settings"]["none"]["run_dir"]
    # generations = budget // (population x episodes per member)
    assert json.loads((root / "b2" / "weights-b8" / "summary.json").read_text())["generations"] == 2
    assert len(json.loads((root / "b2" / "both-b4" / "history.json").read_text())["generations"]) == 1
    # sub-runs of a task play the same held-out episodes; the two tasks differ
    ids = {}
    for sub in root.glob("*/*"):
        g = json.loads((sub / "summary.json").read_text())["generations"]
        ids.setdefault(sub.parent.name, set()).add(
            tuple(ep["task"] for ep in map(json.loads, (sub / "trajectories" / f"eval_gen{g:04d}.jsonl").open())))
    assert len(ids["b2"]) == 1 and len(ids["b3-binary"]) == 1 and ids["b2"] != ids["b3-binary"]
    assert next(iter(ids["b3-binary"]))[0].count("0") == 3  # the variant's 3 blanks
    md = (root / "adapt.md").read_text()
    assert "| b3-binary | 8 |" in md and "both vs context" in md
    assert json.loads((root / "adapt.json").read_text())["rows"] == json.loads(json.dumps(result["rows"]))

    # a re-run skips every finished sub-run and gives the same table
    count_trainers.clear()
    mtime = (root / "b2" / "weights-b4" / "history.json").stat().st_mtime_ns
    again = adapt_mod.run_adapt(path, [], log=lambda *a: None)
    assert count_trainers == []
    assert (root / "b2" / "weights-b4" / "history.json").stat().st_mtime_ns == mtime
    assert [r["comparisons"] for r in again["rows"]] == [r["comparisons"] for r in result["rows"]]
    # an unfinished sub-run (history, no summary) resumes from its history to the same figures
    before = json.loads((root / "b2" / "both-b8" / "summary.json").read_text())
    (root / "b2" / "both-b8" / "summary.json").unlink()
    third = adapt_mod.run_adapt(path, [], log=lambda *a: None)
    assert count_trainers == [("b2", "both-b8")]
    assert third["rows"][1]["settings"]["both"]["status"] == "resumed"
    after = json.loads((root / "b2" / "both-b8" / "summary.json").read_text())
    assert after["weights_hash"] == before["weights_hash"] and after["final"] == {**before["final"],
                                                                                  "seconds": after["final"]["seconds"]}
    # a changed config for an existing adapt folder is refused, naming the sub-run
    from esopt.config import ConfigError

    with pytest.raises(ConfigError, match="different config"):
        adapt_mod.run_adapt(path, ["agent.max_new_tokens=5"], log=lambda *a: None)


@pytest.mark.parametrize("adapt, message", [
    ({"tasks": {"bad": {"env.blankz": 3}}}, r"adapt.tasks.bad .*env.options.blankz"),
    ({"tasks": {"ok": {}, "bad": {"env.blanks": 99}}}, r"adapt.tasks.bad .*env.options.blanks=99"),
    ({"tasks": {"m": {"model": "tiny-qwen2"}}}, r"adapt.tasks.m: 'model' cannot vary"),
    ({"budgets": [3]}, r"budget 3 is less than one generation"),
    ({"settings": ["all"]}, r"adapt.settings"),
])
def test_bad_input_fails_with_one_line_and_writes_nothing(esopt_cache, tmp_path, capsys, adapt, message):
    fails_with_one_line(write_config(tmp_path, **adapt), tmp_path, capsys, message)


def fails_with_one_line(path, tmp_path, capsys, message):
    """`esopt adapt PATH` exits 2 with one error line matching `message`, and writes no out folder."""
    import re

    from esopt.cli import main

    assert main(["adapt", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("esopt: error: ")
    assert re.search(message, err[0]), err[0]
    assert not (tmp_path / "out").exists()


def weight_rollout(policy, envs, ids, obs, cfg, seed, on_turn=None, **kw):
    import torch

    from esopt.agent.rollout import Episode

    with torch.no_grad():
        r = float(policy.model(torch.arange(3, 13).view(1, -1)).logits[0, -1, :16].sum())
    return [Episode(task=i, observation0=o, reward=r, done=True) for i, o in zip(ids, obs)]


def test_from_a_trained_run_starts_from_its_weights(esopt_cache, tmp_path, tiny_cfg, capsys):
    from esopt.train.rundir import RunDir
    from esopt.algos.es.trainer import Trainer

    cfg = tiny_cfg("run.name=src", "es.generations=1", "es.population=2", "es.episodes_per_member=2",
                   "es.sigma.start=0.05", "es.sigma.end=0.05", "eval.at_start=false")
    tr = Trainer(cfg, RunDir.create(cfg), log=lambda *a: None)
    tr.rollout_fn = weight_rollout  # the tiny model never scores on Sudoku: a reward that moves with the weights
    trained = tr.train()["weights_hash"]
    assert trained != tr.history.meta["base_weights_hash"]
    path = write_config(tmp_path, settings=["none", "weights"], budgets=[4], tasks={"b2": {}})
    result = adapt_mod.run_adapt(path, [], from_run=str(tr.run.path), log=lambda *a: None)
    root = tmp_path / "out" / "t"
    assert result["start"]["weights_hash"] == trained and result["start"]["generations"] == 1
    assert result["rows"][0]["settings"]["none"]["weights_hash"] == trained  # evaluated with the run's weights
    meta = json.loads((root / "b2" / "weights-b4" / "history.json").read_text())["meta"]
    assert meta["base_weights_hash"] == trained  # adapted from them
    # eval --run rebuilds a sub-run's weights from the run it started from, then its own history
    from esopt.cli import main
    from esopt.train.weights import load_run_weights
    from esopt.es.perturb import weights_hash

    sub = root / "b2" / "weights-b4"
    assert json.loads((sub / "init.json").read_text())["weights_hash"] == trained
    model, _, _, n = load_run_weights(sub)
    assert n == 1 and weights_hash(model) == json.loads((sub / "summary.json").read_text())["weights_hash"]
    capsys.readouterr()
    assert main(["eval", "--run", str(sub)]) == 0
    reward = result["rows"][0]["settings"]["weights"]["reward"]
    assert f"RESULT heldout_reward={reward:.4f}" in capsys.readouterr().out
    # so does esopt train --resume of an unfinished one
    (sub / "summary.json").unlink()
    assert main(["train", "--resume", str(sub)]) == 0
    assert json.loads((sub / "summary.json").read_text())["weights_hash"] == weights_hash(model)
    # the same adapt folder from other starting weights is refused
    from esopt.config import ConfigError

    with pytest.raises(ConfigError, match="other weights"):
        adapt_mod.run_adapt(path, [], log=lambda *a: None)


def test_from_a_context_run_starts_from_its_final_context(esopt_cache, tmp_path, tiny_cfg):
    from esopt.agent.rollout import Episode
    from esopt.train.rundir import RunDir
    from esopt.algos.es.trainer import Trainer

    def skill_b(policy, envs, ids, obs, cfg, seed, on_turn=None, context=None, **kw):
        ctxs = context if isinstance(context, list) else [context] * len(ids)
        return [Episode(task=i, observation0=o, reward=float("## B\nbravo" in c.system_prompt), done=True)
                for i, o, c in zip(ids, obs, ctxs)]

    cfg = tiny_cfg("run.name=ctx", "coevo.mode=context",
                   "coevo.skills=[{name: A, text: alpha}, {name: B, text: bravo}]",
                   "es.generations=6", "es.population=4", "es.episodes_per_member=1", "eval.at_start=false")
    tr = Trainer(cfg, RunDir.create(cfg), log=lambda *a: None)
    tr.rollout_fn = skill_b
    tr.train()
    assert tr.context.search.probs()["skills"]["B"] > 0.5
    path = write_config(tmp_path, settings=["none"], budgets=[4], tasks={"b2": {}})
    adapt_mod.run_adapt(path, [], from_run=str(tr.run.path), log=lambda *a: None)
    prompt = RunDir(tmp_path / "out" / "t" / "b2" / "none").load_config().agent.system_prompt
    assert "## B\nbravo" in prompt


def test_a_failed_sub_run_is_recorded_and_the_others_go_on(esopt_cache, tmp_path, monkeypatch):
    real = adapt_mod.Trainer

    def flaky(cfg, run, *a, **k):
        if run.path.name == "context-b4":
            raise RuntimeError("boom")
        return real(cfg, run, *a, **k)

    monkeypatch.setattr(adapt_mod, "Trainer", flaky)
    path = write_config(tmp_path, budgets=[4], tasks={"b2": {}})
    result = adapt_mod.run_adapt(path, [], log=lambda *a: None)
    root = tmp_path / "out" / "t"
    assert result["failed"] == [str(root / "b2" / "context-b4")]
    row = result["rows"][0]
    assert "boom" in row["settings"]["context"]["error"] and row["settings"]["both"]["status"] == "ran"
    assert [(c["a"], c["b"]) for c in row["comparisons"]] == [("weights", "none"), ("both", "none"),
                                                              ("both", "weights")]
    assert "| failed |" in (root / "adapt.md").read_text()
    monkeypatch.setattr(adapt_mod, "Trainer", real)
    again = adapt_mod.run_adapt(path, [], log=lambda *a: None)
    assert not again["failed"] and again["rows"][0]["settings"]["context"]["status"] == "ran"
    assert {k: v["status"] for k, v in again["rows"][0]["settings"].items()} == {
        "none": "skipped", "context": "ran", "weights": "skipped", "both": "skipped"}
    assert len(again["rows"][0]["comparisons"]) == 5
