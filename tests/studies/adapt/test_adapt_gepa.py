"""esopt adapt with the gepa setting: gepa sub-runs in the plan (budgets, folders, the task's seed
and starting context), a real tiny-model table in which GEPA's held-out episodes pair with the
ES sub-runs' of the same task, the gepa comparisons and RESULT lines, skip on a re-run and a
restart from scratch of an unfinished one, and one-line errors that write nothing."""
import json
import sys

import pytest
import yaml

from esopt.studies.adapt import grid as adapt_mod
from esopt.studies.adapt import gepa as adapt_gepa
from esopt.studies.adapt.table import comparisons, markdown, totals

from test_adapt import BASE as ADAPT_BASE
from test_adapt import fails_with_one_line

# test_adapt's tiny setting, with sampled replies: the evaluation seed decides them, so the pairing
# below checks it too
BASE = {**ADAPT_BASE, "agent": {**ADAPT_BASE["agent"], "sampling": {"temperature": 1.0}}}
# no validation split: GEPA's valset is 3 further training tasks; a budget of 8 holds the seed's
# valset pass (3) and one worst-case iteration (2 x minibatch 1 + 3)
GEPA = {"train_tasks": 3, "val_tasks": 3, "minibatch": 1, "reflection_tokens": 8}
SEEDS = {"s0": {"run.seed": 0}, "s1": {"run.seed": 1}}


def write_config(tmp_path, **adapt):
    section = {"budgets": [8], "settings": ["none", "context", "both", "gepa"], "tasks": SEEDS, "gepa": GEPA,
               "out_dir": str(tmp_path / "out"), "name": "t"} | adapt
    path = tmp_path / "adapt.yaml"
    path.write_text(yaml.safe_dump({**BASE, "adapt": section}))
    return path


class ScriptedReflection:
    """GEPA's reflection LM: always the same proposal, in a code block."""

    def __init__(self):
        self.prompts = []

    def __call__(self, prompt):
        self.prompts.append(prompt)
        return "A better instruction:\n```\nFill exactly one empty cell per turn.\n```"


@pytest.fixture
def gepa_runs(monkeypatch):
    """The GEPA baselines adapt builds, with a scripted reflection LM (the task model still plays)."""
    made = []
    real = adapt_gepa.Baseline

    def scripted(cfg, run, opts, **kw):
        made.append((run.path.parent.name, run.path.name, opts.budget))
        return real(cfg, run, opts, reflection_lm=ScriptedReflection(), **kw)

    monkeypatch.setattr(adapt_gepa, "Baseline", scripted)
    return made


def heldout(sub, generation=None):
    """(task ids, rewards, replies) of a finished sub-run folder's final held-out evaluation (or
    that after `generation`)."""
    g = json.loads((sub / "summary.json").read_text())["generations"] if generation is None else generation
    eps = [json.loads(line) for line in (sub / "trajectories" / f"eval_gen{g:04d}.jsonl").open()]
    return (tuple(ep["task"] for ep in eps), tuple(ep["reward"] for ep in eps),
            tuple(tuple(t["response"] for t in ep["turns"]) for ep in eps))


def test_plan_has_gepa_sub_runs_per_task_and_budget(esopt_cache, tmp_path):
    pytest.importorskip("gepa")
    from esopt.agent.rollout import AgentContext

    path = write_config(tmp_path, budgets=[8, 16], settings=["none", "weights", "gepa"])
    adapt, tree = adapt_mod.load_adapt(path, [])
    subs = adapt_mod.plan(adapt, tree)
    root = tmp_path / "out" / "t"
    gepa = [s for s in subs if s.setting == "gepa"]
    assert [(s.task, s.budget, s.path) for s in gepa] == [(t, b, root / t / f"gepa-b{b}") for t in ("s0", "s1")
                                                          for b in (8, 16)]
    assert [s.gepa.budget for s in gepa] == [8, 16, 8, 16]
    assert all(s.gepa.val_tasks == 3 and s.gepa.minibatch == 1 for s in gepa)
    es = {(s.task, s.budget): s.cfg for s in subs if s.setting == "weights"}
    for s in gepa:  # the ES sub-run's config of the same task and budget, but for the mode and folder
        twin = es[(s.task, s.budget)]
        assert s.cfg.run.seed == twin.run.seed == int(s.task[1]) and s.cfg.tasks == twin.tasks
        assert s.cfg.coevo.mode == "weights" and s.cfg.es.generations == twin.es.generations
        assert s.cfg.model_dump(exclude={"run"}) == twin.model_dump(exclude={"run"})
    assert not [s for s in subs if s.setting == "none" and s.gepa is not None]
    # not in the default settings: an adapt section without `settings` plans no gepa sub-run
    section = yaml.safe_load(path.read_text())
    del section["adapt"]["settings"]
    path.write_text(yaml.safe_dump(section))
    adapt, tree = adapt_mod.load_adapt(path, [])
    assert adapt.settings == ["none", "context", "weights", "both"]
    assert "gepa" not in {s.setting for s in adapt_mod.plan(adapt, tree)}
    # --from's final context is GEPA's starting context too
    start = AgentContext("You are the adapted agent.", ({"role": "user", "content": "hi"},))
    adapt, tree = adapt_mod.load_adapt(path, ["adapt.settings=[none, gepa]"])
    for s in adapt_mod.plan(adapt, tree, start):
        assert s.cfg.agent.system_prompt == "You are the adapted agent."
        assert [dict(m) for m in s.cfg.agent.examples] == [{"role": "user", "content": "hi"}]


def test_gepa_in_the_table_pairs_skips_and_restarts(esopt_cache, tmp_path, gepa_runs, capsys):
    pytest.importorskip("gepa")
    from esopt.cli import main

    path = write_config(tmp_path)
    assert main(["adapt", str(path)]) == 0
    out = capsys.readouterr().out
    root = tmp_path / "out" / "t"
    result = json.loads((root / "adapt.json").read_text())
    assert not result["failed"] and sorted(gepa_runs) == [("s0", "gepa-b8", 8), ("s1", "gepa-b8", 8)]
    for row in result["rows"]:
        assert row["settings"]["gepa"]["status"] == "ran" and row["settings"]["gepa"]["n"] == 3
        assert [(c["a"], c["b"]) for c in row["comparisons"]] == [
            ("context", "none"), ("both", "none"), ("both", "context"), ("context", "gepa"), ("both", "gepa")]
    for key in ("context vs gepa @ 8", "both vs gepa @ 8"):
        assert sum(result["totals"][key].values()) == 2  # summed over the two seeds
        v = result["totals"][key]
        name = key.replace(" vs ", "_vs_").replace(" @ ", "_b")
        assert f"RESULT adapt_{name}=W{v['win']}/T{v['tie']}/L{v['loss']}" in out
    md = (root / "adapt.md").read_text()
    assert "| gepa | context vs none |" in md and "| context vs gepa | both vs gepa |" in md

    # GEPA played within its budget, weights frozen, and its held-out episodes are the ES sub-runs'
    for task in SEEDS:
        summary = json.loads((root / task / "gepa-b8" / "summary.json").read_text())
        assert summary["algo"] == "gepa" and summary["budget_episodes"] == 8 and summary["episodes"]["used"] <= 8
        assert summary["weights_hash"] == result["start"]["weights_hash"]
        ids = {name: heldout(root / task / name)[0] for name in ("none", "context-b8", "both-b8", "gepa-b8")}
        assert len(set(ids.values())) == 1, ids
        # the same starting agent and evaluation seed: GEPA's configured-context evaluation is `none`'s,
        # reply for reply (the tiny model's rewards are all 0; its replies are not all alike)
        base = heldout(root / task / "gepa-b8", generation=0)
        assert base == heldout(root / task / "none") and len(set(base[2])) > 1
    assert heldout(root / "s0" / "gepa-b8")[0] != heldout(root / "s1" / "gepa-b8")[0]  # seeds, other puzzles

    # a re-run skips the finished gepa sub-runs
    gepa_runs.clear()
    summary_file = root / "s0" / "gepa-b8" / "summary.json"
    mtime = summary_file.stat().st_mtime_ns
    again = adapt_mod.run_adapt(path, [], log=lambda *a: None)
    assert gepa_runs == [] and summary_file.stat().st_mtime_ns == mtime
    assert {r["settings"]["gepa"]["status"] for r in again["rows"]} == {"skipped"}
    assert [r["comparisons"] for r in again["rows"]] == [r["comparisons"] for r in result["rows"]]

    # an unfinished one restarts from scratch: its old files go, the new run is the same run
    sub = root / "s0" / "gepa-b8"
    before = json.loads(summary_file.read_text())
    calls = len((sub / "reflections.jsonl").read_text().splitlines())
    summary_file.unlink()
    (sub / "stray.txt").write_text("from the interrupted run")
    lines = []
    third = adapt_mod.run_adapt(path, [], log=lines.append)
    assert gepa_runs == [("s0", "gepa-b8", 8)] and third["rows"][0]["settings"]["gepa"]["status"] == "restarted"
    assert any("cannot resume" in line and "restarts from scratch" in line for line in map(str, lines))
    assert not (sub / "stray.txt").exists()
    assert len((sub / "reflections.jsonl").read_text().splitlines()) == calls  # not appended to the old ones
    after = json.loads(summary_file.read_text())
    assert after["final"]["reward"] == before["final"]["reward"] and after["episodes"] == before["episodes"]

    # other GEPA options for a finished gepa folder are refused, naming them
    from esopt.config import ConfigError

    with pytest.raises(ConfigError, match=r"other GEPA options \(minibatch\)"):
        adapt_mod.run_adapt(path, ["adapt.gepa.minibatch=2"], log=lambda *a: None)


def test_from_a_trained_run_gepa_starts_from_its_weights(esopt_cache, tmp_path, tiny_cfg, gepa_runs):
    pytest.importorskip("gepa")
    import torch

    from esopt.agent.rollout import Episode
    from esopt.train.rundir import RunDir
    from esopt.algos.es.trainer import Trainer

    def weight_rollout(policy, envs, ids, obs, cfg, seed, on_turn=None, **kw):  # a reward that moves with the weights
        with torch.no_grad():
            r = float(policy.model(torch.arange(3, 13).view(1, -1)).logits[0, -1, :16].sum())
        return [Episode(task=i, observation0=o, reward=r, done=True) for i, o in zip(ids, obs)]

    cfg = tiny_cfg("run.name=src", "es.generations=1", "es.population=2", "es.episodes_per_member=2",
                   "es.sigma.start=0.05", "es.sigma.end=0.05", "eval.at_start=false")
    tr = Trainer(cfg, RunDir.create(cfg), log=lambda *a: None)
    tr.rollout_fn = weight_rollout
    trained = tr.train()["weights_hash"]
    assert trained != tr.history.meta["base_weights_hash"]
    path = write_config(tmp_path, settings=["none", "gepa"], tasks={"s0": {}})
    result = adapt_mod.run_adapt(path, [], from_run=str(tr.run.path), log=lambda *a: None)
    sub = tmp_path / "out" / "t" / "s0" / "gepa-b8"
    assert not result["failed"] and gepa_runs == [("s0", "gepa-b8", 8)]
    assert result["rows"][0]["settings"]["gepa"]["weights_hash"] == trained  # played with the run's weights, frozen
    assert json.loads((sub / "init.json").read_text())["weights_hash"] == trained


def test_missing_gepa_is_one_line_and_writes_nothing(esopt_cache, tmp_path, monkeypatch, capsys):
    from esopt.cli import main

    monkeypatch.setitem(sys.modules, "gepa", None)  # import gepa now raises ImportError
    path = write_config(tmp_path)
    assert main(["adapt", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("esopt: error: adapt.settings gepa needs the gepa package")
    assert "esopt[prompt-opt]" in err[0]
    assert not (tmp_path / "out").exists()
    # without gepa among the settings, the same config plans without it
    adapt, tree = adapt_mod.load_adapt(path, ["adapt.settings=[none, weights]"])
    assert {s.setting for s in adapt_mod.plan(adapt, tree)} == {"none", "weights"}


@pytest.mark.parametrize("adapt, message", [
    # the second task's validation split (6 episodes) is GEPA's valset there: a budget of 4 misses a pass;
    # found at plan time, before the first task's sub-runs are written
    ({"budgets": [4], "settings": ["none", "gepa"], "gepa": {},
      "tasks": {"ok": {"tasks.validation": 3}, "big": {"tasks.validation": 6}}},
     r"adapt.tasks.big \(gepa-b4\): adapt.budgets 4 episodes is less than one pass over GEPA's valset \(6 tasks\)"),
    ({"budgets": [8, 2], "settings": ["none", "gepa"]},  # 2 episodes: below one ES generation too, but gepa has none
     r"adapt.tasks.s0 \(gepa-b2\): adapt.budgets 2 episodes is less than one pass over GEPA's valset \(3 tasks\): "
     r"raise adapt.budgets or lower adapt.gepa.val_tasks"),
    ({"gepa": {"minibatchh": 1}}, r"adapt.tasks.s0 \(gepa-b8\): adapt.gepa: unknown option\(s\) minibatchh"),
    ({"gepa": {"minibatch": 0}}, r"adapt.gepa.minibatch must be at least 1"),
    ({"gepa": {"components": ["example_9_user"]}}, r"adapt.gepa.components: example_9_user not in"),
    ({"gepa": {"val_tasks": "many"}}, r"bad adapt.gepa.val_tasks"),
])
def test_bad_gepa_settings_fail_with_one_line_and_write_nothing(esopt_cache, tmp_path, capsys, adapt, message):
    pytest.importorskip("gepa")
    fails_with_one_line(write_config(tmp_path, **adapt), tmp_path, capsys, message)


def test_gepa_comparisons_on_known_numbers():
    none = {"t1": 0.0, "t2": 0.0, "t3": 0.0}
    gepa = {"t1": 0.5, "t2": 0.5, "t3": 0.5}
    context = {"t1": 1.5, "t2": 1.5, "t3": 1.5}  # gepa + 1 everywhere: a win over gepa
    both = {"t1": 0.0, "t2": 0.0, "t3": 0.0}  # gepa - 0.5 everywhere: a loss to gepa
    comps = comparisons({"none": none, "context": context, "both": both, "gepa": gepa})
    got = {(c["a"], c["b"]): c["outcome"] for c in comps}
    assert got[("context", "gepa")] == "win" and got[("both", "gepa")] == "loss"
    assert [(c["a"], c["b"]) for c in comps][-2:] == [("context", "gepa"), ("both", "gepa")]
    # without a gepa cell there is no gepa comparison, and the table has no gepa columns
    assert not [c for c in comparisons({"none": none, "context": context, "both": both}) if c["b"] == "gepa"]
    rows = [{"task": "x", "budget": 8, "comparisons": comps, "settings": {}}]
    assert totals(rows)["both vs gepa @ 8"] == {"win": 0, "tie": 0, "loss": 1}
    md = markdown(rows, ["none", "context", "both", "gepa"])
    assert "| gepa |" in md.splitlines()[0] and "context vs gepa" in md and "both vs gepa" in md
    assert "gepa" not in markdown(rows, ["none", "context", "both"]).splitlines()[0]
