"""bench compare --arms (named settings per method, e.g. configs/studies/equal-time-arms.yaml) at
equal wall-clock: the k-th settings side by side, tuning-only runs never play held-out, curves
against training seconds (mean and spread over seeds), ES - GRPO paired task by task; and run
records, through which a study continues where its run folders are gone."""
import json
import subprocess
from pathlib import Path

import pytest

from test_compare_horizon import TINY, split_name

from esopt.config import ConfigError


def arms_file(tmp_path, es=("a", "b"), grpo=("x", "y")):
    path = tmp_path / "arms.yaml"
    lines = ["es:"] + [f"  {k}: [es.population={2 * (i + 1)}]" for i, k in enumerate(es)]
    lines += ["grpo:"] + [f"  {k}: [grpo.lr={10.0 ** -(i + 4)}]" for i, k in enumerate(grpo)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def timed_run(name, out_dir, val, final, tasks):
    """A finished equal-time run: validation at 0, 100 and 200 training seconds; held-out at the ends."""
    return {"run_dir": f"{out_dir}/{name}", "peak_rss_mb": 1.0, "peak_cuda_mb": None, "wall_seconds": 1.0,
            "summary": {"base": {"reward": 0.1}, "final": {"reward": final}, "improvement": {"mean": final - 0.1, "se": 0.0},
                        "validation": {"final": {"reward": val}}},
            "curve": [{"generation": 0, "episodes": 0, "train_seconds": 0.0, "reward": 0.1, "validation": 0.1},
                      {"generation": 2, "episodes": 20, "train_seconds": 100.0, "reward": None, "validation": val / 2},
                      {"generation": 4, "episodes": 40, "train_seconds": 200.0, "reward": final, "validation": val}],
            "heldout_by_task": {"base": None, "final": tasks}}


def test_arms_side_by_side_tuning_without_heldout_curves_and_paired_tasks(monkeypatch, tmp_path, capsys):
    from esopt.studies.method import compare

    val = {"a": 0.2, "b": 0.4, "x": 0.5, "y": 0.3}
    calls = []

    def fake(config, overrides, out_dir, name, log=print, records=None):
        calls.append((name, list(overrides), records))
        arm, label, seed = split_name(name)
        es = arm == "es"
        tasks = {"t1": 0.5 if es else 0.25, "t2": 0.5 if es else 0.0, "t3": 0.25 * seed}  # ES ahead on t1, t2
        return timed_run(name, out_dir, val[label], 0.3 if es else 0.2, tasks)

    monkeypatch.setattr(compare, "train_run", fake)
    out = tmp_path / "eq.json"
    res = compare.main("configs/demo.yaml", TINY + ["eval.every_seconds=100"], str(out), seeds=[0, 1],
                       tune_seeds=[9], budget_seconds=200, arms=arms_file(tmp_path))
    assert res["es_best_arm"] == "b" and res["grpo_best_arm"] == "x"
    names = [n for n, _, _ in calls]
    assert names[:4] == ["es-a-seed9", "grpo-x-seed9", "es-b-seed9", "grpo-y-seed9"]
    assert names[4:] == ["es-b-seed0", "grpo-x-seed0", "es-b-seed1", "grpo-x-seed1"]
    assert all("eval.heldout=never" in o for _, o, _ in calls[:4])  # seed 9 has no final run
    assert not any("eval.heldout=never" in o for _, o, _ in calls[4:])
    assert "es.population=4" in calls[2][1] and "grpo.lr=0.0001" in calls[1][1]
    assert all(r == str(tmp_path / "eq-records") for _, _, r in calls)
    data = json.loads(out.read_text())
    by_task = data["es_minus_grpo_by_task"]
    assert by_task["mean"] == pytest.approx(0.25) and by_task["se_over_seeds"] == pytest.approx(0.0)
    assert by_task["per_seed"][0]["mean"] == pytest.approx(0.25)
    # per seed differences 0.25, 0.5, 0 (SE 0.25 / sqrt 3); two seeds pooled: / sqrt 2
    assert by_task["se_over_tasks"] == pytest.approx(0.25 / 3 ** 0.5 / 2 ** 0.5, rel=1e-6)
    curves = data["validation_curves"]
    assert curves["grid_seconds"] == [0.0, 100.0, 200.0]
    assert curves["es"]["mean"] == pytest.approx([0.1, 0.2, 0.4]) and curves["grpo"]["std"] == [0.0, 0.0, 0.0]
    assert data["arms"]["es"]["b"] == ["es.population=4"] and (tmp_path / "eq.png").stat().st_size > 0
    assert "RESULT es_best_arm=b" in capsys.readouterr().out


def test_step_curve_holds_the_last_evaluation():
    from esopt.studies.method.compare import curve_grid, step_curve

    run = {"curve": [{"train_seconds": 0.0, "validation": 0.1}, {"train_seconds": 130.0, "validation": 0.3},
                     {"train_seconds": 260.0, "validation": 0.2}]}
    assert step_curve(run, "validation", [0, 100, 130, 250, 400]) == [0.1, 0.1, 0.3, 0.3, 0.2]
    assert curve_grid([run], 100) == [0, 100, 200, 260.0]


def test_mean_curves_can_step_at_every_evaluation():
    from esopt.studies.method.compare import mean_curves

    runs = {"es": [{"curve": [{"train_seconds": 0.0, "validation": 0.1}, {"train_seconds": 110.0, "validation": 0.5}]},
                   {"curve": [{"train_seconds": 0.0, "validation": 0.3}, {"train_seconds": 120.0, "validation": 0.7}]}]}
    on_marks = mean_curves(runs, "validation", 100)
    assert on_marks["grid_seconds"] == [0, 100, 120.0] and on_marks["es"]["mean"] == pytest.approx([0.2, 0.2, 0.6])
    at_evals = mean_curves(runs, "validation", 100, at_evaluations=True)
    assert at_evals["grid_seconds"] == [0, 100, 110.0, 120.0]
    assert at_evals["es"]["mean"] == pytest.approx([0.2, 0.2, 0.4, 0.6])


def test_arms_files_are_checked(tmp_path):
    from esopt.studies.method.compare import main, read_arms

    with pytest.raises(ConfigError, match="as many ES arms as GRPO arms"):
        main("configs/demo.yaml", TINY, str(tmp_path / "c.json"), seeds=[0],
             arms=arms_file(tmp_path, es=("a",), grpo=("x", "y")))
    bad = tmp_path / "bad.yaml"
    for text, msg in (("es: {a: [x=1]}\n", "must map exactly es and grpo"),
                      ("es: {'a b': [x=1]}\ngrpo: {y: [z=1]}\n", "names run folders"),
                      ("es: {a: x=1}\ngrpo: {y: [z=1]}\n", "must be a list of key=value overrides"),
                      ("es: {a: [nokey]}\ngrpo: {y: [z=1]}\n", "must look like key.path=value")):
        bad.write_text(text)
        with pytest.raises(ConfigError, match=msg):
            read_arms(str(bad))
    with pytest.raises(ConfigError, match="leave out --grpo-lrs"):
        main("configs/demo.yaml", TINY, str(tmp_path / "c.json"), seeds=[0], grpo_lrs=[1e-5],
             arms=arms_file(tmp_path))
    assert not (tmp_path / "c-runs").exists()
    shipped = read_arms("configs/studies/equal-time-arms.yaml")
    assert len(shipped["es"]) == len(shipped["grpo"]) == 6


def test_a_run_record_stands_in_for_its_folder(monkeypatch, tmp_path):
    from esopt.config import dump_config, load_config
    from esopt.studies import runs

    over = ["model=tiny-llama", "es.generations=2"]
    path, records = tmp_path / "work" / "r", tmp_path / "records"
    trained = []

    def fake_run(cmd, **kw):  # the child: a finished run
        trained.append(cmd)
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.yaml").write_text(dump_config(load_config("configs/demo.yaml", over + [
            f"run.out_dir={path.parent}", "run.name=r"])))
        (path / "summary.json").write_text(json.dumps({"final": {"reward": 0.5}, "generations": 2}))
        (path / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in (
            {"kind": "train", "generation": 0, "time_rollout": 3.0, "episodes": 4},
            {"kind": "train", "generation": 1, "time_rollout": 4.0, "episodes": 4},
            {"kind": "eval", "generation": 2, "heldout_reward": 0.5})))
        (path / "trajectories").mkdir(exist_ok=True)
        (path / "trajectories" / "eval_gen0002.jsonl").write_text(
            "".join(json.dumps({"task": t, "reward": r}) + "\n" for t, r in (("p1", 1.0), ("p2", 0.0), ("p1", 0.5))))
        Path(cmd[3]).write_text(json.dumps({"peak_rss_mb": 10.0, "peak_cuda_mb": None}))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(runs, "_child", fake_run)  # the training process
    first = runs.train_run("configs/demo.yaml", over, str(path.parent), "r", log=lambda *_: None, records=str(records))
    assert first["curve"][-1]["train_seconds"] == 7.0 and first["heldout_by_task"]["final"] == {"p1": 0.75, "p2": 0.0}
    rec = json.loads((records / "r.json").read_text())
    assert rec["config"]["es"]["generations"] == 2 and rec["summary"]["final"]["reward"] == 0.5
    import shutil

    shutil.rmtree(path.parent)  # another machine: only the committed records are there
    again = runs.train_run("configs/demo.yaml", over, str(path.parent), "r", records=str(records))
    assert len(trained) == 1 and again["curve"] == first["curve"] and again["peak_rss_mb"] == 10.0
    with pytest.raises(ConfigError, match=r"es.generations: 2 there, 3 now"):
        runs.train_run("configs/demo.yaml", ["model=tiny-llama", "es.generations=3"], str(path.parent), "r",
                       records=str(records))
    # a setting esopt gained after the record was written counts as its default there
    del rec["config"]["eval"]["heldout"]
    (records / "r.json").write_text(json.dumps(rec))
    assert runs.train_run("configs/demo.yaml", over, str(path.parent), "r", records=str(records))["summary"]
    with pytest.raises(ConfigError, match=r"eval.heldout: 'start_end' there, 'end' now"):
        runs.train_run("configs/demo.yaml", over + ["eval.heldout=end", "tasks.validation=4"], str(path.parent), "r",
                       records=str(records))


def test_tune_only_then_finals_with_their_own_overrides_and_pass_at_k(monkeypatch, tmp_path, capsys):
    """--tune-only stops after the choice (no final run); --final-override reaches only the runs at final seeds
    (a fresh held-out set, pass@k), so the tuning runs stay the ones already recorded; pass@k of the finals is in
    the table and a RESULT line."""
    from esopt.studies.method import compare

    val = {"a": 0.2, "b": 0.4, "x": 0.5, "y": 0.3}
    calls = []

    def fake(config, overrides, out_dir, name, log=print, records=None):
        calls.append((name, list(overrides)))
        arm, label, seed = split_name(name)
        run = timed_run(name, out_dir, val[label], 0.3 if arm == "es" else 0.2, None)
        if "eval.pass_at=[1,2]" in overrides:
            run["summary"]["base"].update(pass_at_1=0.1, pass_at_2=0.15)
            run["summary"]["final"].update(pass_at_1=(0.3 + 0.2 * seed) if arm == "es" else 0.2, pass_at_2=0.5,
                                           pass_at_2_se=0.1, pass_at_n=2)
        return run

    monkeypatch.setattr(compare, "train_run", fake)
    out, arms = tmp_path / "v.json", arms_file(tmp_path)
    fresh = ["tasks.heldout_skip=8", "eval.pass_at=[1,2]"]
    kw = dict(seeds=[0, 1], tune_seeds=[9], budget_seconds=200, arms=arms, final_overrides=fresh)
    res = compare.main("configs/demo.yaml", TINY, str(out), tune_only=True, **kw)
    assert res == {"es_best_arm": "b", "grpo_best_arm": "x"}
    assert [n for n, _ in calls] == ["es-a-seed9", "grpo-x-seed9", "es-b-seed9", "grpo-y-seed9"]
    assert not any("tasks.heldout_skip=8" in o for _, o in calls)
    data = json.loads(out.read_text())
    assert data["tune_only"] and data["final_overrides"] == fresh and data["sweep"]["es"]["b"]["validation_mean"] == 0.4
    assert "* chosen" in capsys.readouterr().out

    calls.clear()
    res = compare.main("configs/demo.yaml", TINY, str(out), **kw)
    finals = calls[4:]
    assert [n for n, _ in finals] == ["es-b-seed0", "grpo-x-seed0", "es-b-seed1", "grpo-x-seed1"]
    assert all(o[-len(fresh) - 1:-1] == fresh for _, o in finals) and not any("tasks.heldout_skip=8" in o for _, o in calls[:4])
    assert res["es_minus_grpo_pass_at_1"] == pytest.approx(0.2) and res["es_minus_grpo_pass_at_2"] == 0.0
    assert res["es_minus_grpo_pass_at_1_se_over_seeds"] == pytest.approx(0.1)  # per seed +0.1, +0.3
    assert "ES - GRPO +0.2000 (SE over seeds 0.1000; per seed +0.100, +0.300)" in capsys.readouterr().out
    row = json.loads(out.read_text())["table"]["es"]["pass_at"]
    assert row["1"] == {"bases": [0.1, 0.1], "finals": [0.3, 0.5], "final_mean": pytest.approx(0.4), "base_mean": 0.1}
    with pytest.raises(ConfigError, match="tasks.heldout_skipp"):
        compare.main("configs/demo.yaml", TINY, str(out), **{**kw, "final_overrides": ["tasks.heldout_skipp=8"]})


def test_unseen_by_seeds_gives_the_finals_on_tasks_no_choice_played(monkeypatch, tmp_path, capsys):
    """--unseen-by-seeds: the finals again on the held-out tasks whose content none of the held-out and
    validation sets of the named seeds (under the tuning settings) holds; per method before/after and ES - GRPO
    task by task on them, and RESULT lines."""
    from esopt.studies.method import compare, unseen

    def contents(cfg, seed, split):  # seed 5's sets hold the content of final task t1; t2, t3 are fresh
        if seed == 5:
            return {"a": "A", "b": "B"} if split == "heldout" else {"v": "V"}
        assert split == "heldout" and cfg.tasks.heldout_skip == 8  # the final runs' held-out set
        return {"t1": "B", "t2": "X", "t3": "Y"}

    monkeypatch.setattr(unseen, "split_contents", contents)

    def fake(config, overrides, out_dir, name, log=print, records=None):
        arm, label, seed = split_name(name)
        es = arm == "es"
        run = timed_run(name, out_dir, 0.5, 0.3, {"t1": 0.0 if es else 1.0, "t2": 1.0 if es else 0.5, "t3": 0.5})
        run["heldout_by_task"]["base"] = {"t1": 0.5, "t2": 0.25, "t3": 0.25}
        return run

    monkeypatch.setattr(compare, "train_run", fake)
    out = tmp_path / "u.json"
    res = compare.main("configs/demo.yaml", TINY, str(out), seeds=[0, 1], tune_seeds=[9], budget_seconds=200,
                       arms=arms_file(tmp_path), final_overrides=["tasks.heldout_skip=8"], unseen_by_seeds=[5])
    assert res["es_minus_grpo_heldout_unseen"] == pytest.approx(0.25)  # (0.5 + 0) / 2 on t2, t3
    assert res["es_minus_grpo_unseen_se_over_seeds"] == pytest.approx(0.0)
    data = json.loads(out.read_text())["unseen"]
    assert data["tasks_per_seed"] == [2, 2] and data["seen_by_seeds"] == [5]
    assert data["es"]["bases"] == [0.25, 0.25] and data["es"]["finals"] == [0.75, 0.75]
    assert data["grpo"]["improvements"] == pytest.approx([0.25, 0.25])
    assert json.loads(out.read_text())["es_minus_grpo_by_task"]["mean"] == pytest.approx(-1 / 6)  # all three tasks
    assert "held-out tasks no run at seeds [5] played in held-out or validation: 2/2" in capsys.readouterr().out
    # finals on a set the named seeds played: nothing unseen, said in one line, the rest reported as before
    monkeypatch.setattr(unseen, "split_contents", lambda cfg, seed, split: {"t1": "A", "t2": "B", "t3": "V"})
    res = compare.main("configs/demo.yaml", TINY, str(out), seeds=[0, 1], tune_seeds=[9], budget_seconds=200,
                       arms=arms_file(tmp_path), unseen_by_seeds=[5])
    assert "es_minus_grpo_heldout_unseen" not in res and json.loads(out.read_text())["unseen"] is None
    assert "no figures on unseen tasks" in capsys.readouterr().out


def test_unseen_tasks_on_real_sudoku_pools():
    """Within one run seed the splits are disjoint, so a fresh held-out set (skip) is unseen by its own seed's
    held-out and validation sets, and a set that was played is all seen."""
    from esopt.config import load_config
    from esopt.studies.method.unseen import seen_contents, split_contents, unseen_ids

    tune = load_config("configs/demo.yaml", ["tasks.heldout=8", "tasks.validation=4"])
    fresh = load_config("configs/demo.yaml", ["tasks.heldout=8", "tasks.validation=4", "tasks.heldout_skip=8"])
    seen = seen_contents(tune, [0])
    assert len(seen) == 12
    assert unseen_ids(fresh, 0, seen) == set(split_contents(fresh, 0, "heldout")) and len(unseen_ids(fresh, 0, seen)) == 8
    assert unseen_ids(tune, 0, seen) == set()
