"""bench compare (a tuned comparison: sweep on validation, held-out for the chosen settings)
and bench horizon (ES vs GRPO across horizons). Canned runs test the choice and the
arithmetic; one tiny real run each tests the plumbing end to end."""
import json
import math
from statistics import mean, stdev

import pytest

from conftest import TINY_OVERRIDES

from esopt.config import ConfigError

TINY = TINY_OVERRIDES + ["es.generations=1", "es.population=2", "es.episodes_per_member=2", "tasks.heldout=2",
                         "agent.max_new_tokens=2", "grpo.micro_batch=4"]


def canned_run(name, out_dir, heldout, validation, base=0.1, seconds=2.0, rss=100.0):
    """What train_run returns for a finished run with a validation split (held-out at the ends only)."""
    return {"run_dir": f"{out_dir}/{name}", "peak_rss_mb": rss, "peak_cuda_mb": None, "wall_seconds": seconds + 1,
            "summary": {"base": {"reward": base}, "final": {"reward": heldout},
                        "improvement": {"mean": heldout - base, "se": 0.01},
                        "validation": {"base": {"reward": base}, "final": {"reward": validation}}},
            "curve": [{"generation": 0, "episodes": 0, "train_seconds": 0.0, "reward": base, "se": 0.0,
                       "validation": base, "validation_se": 0.0},
                      {"generation": 1, "episodes": 8, "train_seconds": seconds / 2, "reward": None, "se": None,
                       "validation": (base + validation) / 2, "validation_se": 0.0},
                      {"generation": 2, "episodes": 16, "train_seconds": seconds, "reward": heldout, "se": 0.0,
                       "validation": validation, "validation_se": 0.0}]}


def split_name(name):
    """es-sigma0.004-seed1 -> ("es", "sigma0.004", 1); grpo-lr1e-05-seed0 -> ("grpo", "lr1e-05", 0)."""
    head, seed = name.rsplit("-seed", 1)
    arm, label = head.split("-", 1)
    return arm, label, int(seed)


def fake_train_run(monkeypatch, module, figures, calls):
    """Patch module.train_run: figures(arm, label, seed) -> (held-out final, validation final)."""
    def fake(config, overrides, out_dir, name, log=print, records=None):
        calls.append((name, list(overrides)))
        heldout, validation = figures(*split_name(name))
        return canned_run(name, out_dir, heldout, validation)

    monkeypatch.setattr(module, "train_run", fake)


# ----------------------------------------------------------------------------------------- compare


def test_compare_chooses_on_validation_never_heldout(monkeypatch, tmp_path, capsys):
    from esopt.studies.method import compare

    # validation ranks sigma x2 and lr 1e-4 best; held-out ranks them worst
    val = {"sigma0.002": 0.2, "sigma0.004": 0.3, "sigma0.008": 0.5, "lr1e-06": 0.1, "lr1e-05": 0.2, "lr0.0001": 0.4}
    held = {"sigma0.002": 0.9, "sigma0.004": 0.6, "sigma0.008": 0.3, "lr1e-06": 0.8, "lr1e-05": 0.5, "lr0.0001": 0.2}
    calls = []
    fake_train_run(monkeypatch, compare, lambda arm, label, seed: (held[label] + 0.01 * seed, val[label]), calls)
    out = tmp_path / "compare.json"
    res = compare.main("configs/demo.yaml", TINY, str(out), seeds=[0, 1, 2])  # demo: sigma.start 4e-3
    assert res["es_best_sigma"] == 0.008 and res["grpo_best_lr"] == 1e-4
    # the sweep: 3 settings each at the tuning seed (default: the first of --seeds), with a validation split
    sweep = calls[:6]
    assert sorted(split_name(n)[1] for n, _ in sweep) == sorted(val) and all(split_name(n)[2] == 0 for n, _ in sweep)
    assert all(f"tasks.validation={compare.DEFAULT_VALIDATION}" in o and "eval.at_start=true" in o for _, o in calls)
    assert [split_name(n)[0] for n, _ in sweep] == ["es", "grpo"] * 3  # the k-th of each side by side
    es_sweep = dict(c for c in sweep if c[0].startswith("es-"))
    assert "es.sigma.start=0.008" in es_sweep["es-sigma0.008-seed0"]
    assert "es.sigma.end=0.004" in es_sweep["es-sigma0.008-seed0"]  # demo's end 2e-3, scaled alike
    grpo = dict(c for c in sweep if c[0].startswith("grpo-"))["grpo-lr0.0001-seed0"]
    assert "grpo.lr=0.0001" in grpo and "grpo.steps=1" in grpo and "grpo.group_size=2" in grpo
    # the final runs: the chosen settings only, every seed
    assert [n for n, _ in calls[6:]] == [f"{a}-{s}-seed{k}" for k in (0, 1, 2)
                                         for a, s in (("es", "sigma0.008"), ("grpo", "lr0.0001"))]
    data = json.loads(out.read_text())
    t = data["table"]
    assert t["es"]["finals"] == pytest.approx([0.30, 0.31, 0.32])  # the chosen settings' held-out figures
    assert t["grpo"]["finals"] == pytest.approx([0.20, 0.21, 0.22])
    assert t["es"]["sweep"]["sigma0.008"]["validation_mean"] == 0.5 and t["es"]["setting"] == "sigma0.008"
    assert t["es"]["training_decoding"] == "greedy" and t["grpo"]["training_decoding"] == "sampled T=1"
    assert t["es"]["improvements"] == pytest.approx([0.2, 0.21, 0.22])
    assert t["es"]["peak_rss_mb"] == 100.0 and t["es"]["train_seconds_mean"] == 2.0 and t["es"]["episodes"] == 16
    diff = mean(t["es"]["finals"]) - mean(t["grpo"]["finals"])
    assert res["es_minus_grpo_heldout"] == pytest.approx(diff)
    pooled = math.sqrt((stdev(t["es"]["finals"]) ** 2 + stdev(t["grpo"]["finals"]) ** 2) / 2)
    assert res["es_minus_grpo_over_spread"] == pytest.approx(diff / pooled)
    assert data["es_minus_grpo_per_seed"] == pytest.approx([0.1, 0.1, 0.1])
    assert (tmp_path / "compare.png").stat().st_size > 0
    lines = capsys.readouterr().out.splitlines()
    assert any("sigma0.008" in ln and ln.rstrip().endswith("*") for ln in lines)
    assert lines[-1].startswith("RESULT es_minus_grpo_over_spread=")


def test_compare_choice_is_the_mean_over_tuning_seeds(monkeypatch, tmp_path):
    from esopt.studies.method import compare

    # lr 1e-5 wins on seed 0 alone, 1e-6 on the mean over seeds 0 and 1; the config's validation split is kept
    val = {("lr1e-06", 0): 0.4, ("lr1e-06", 1): 0.4, ("lr1e-05", 0): 0.6, ("lr1e-05", 1): 0.0}
    calls = []
    fake_train_run(monkeypatch, compare, lambda arm, label, seed: (0.5, val.get((label, seed), 0.3)), calls)
    res = compare.main("configs/demo.yaml", TINY + ["tasks.validation=2"], str(tmp_path / "c.json"), seeds=[5],
                       grpo_lrs=[1e-6, 1e-5], es_sigmas=[0.001, 0.003], tune_seeds=[0, 1])
    assert res["grpo_best_lr"] == 1e-6 and res["es_best_sigma"] == 0.001  # ES: a tie, the first listed
    assert "es_minus_grpo_over_spread" not in res  # one final seed: no spread
    assert all("tasks.validation=2" in o and not any(x.startswith("tasks.validation=64") for x in o) for _, o in calls)
    assert [n for n, _ in calls[8:]] == ["es-sigma0.001-seed5", "grpo-lr1e-06-seed5"]


def test_compare_refuses_unequal_tuning_budgets(tmp_path):
    from esopt.studies.method.compare import main as compare

    with pytest.raises(ConfigError, match=r"as many ES sigmas as GRPO .* \(--es-sigmas has 2, --grpo-lrs has 3\)"):
        compare("configs/demo.yaml", TINY, str(tmp_path / "c.json"), seeds=[0], es_sigmas=[1e-3, 2e-3])
    with pytest.raises(ConfigError, match="lists a value twice"):
        compare("configs/demo.yaml", TINY, str(tmp_path / "c.json"), seeds=[0], grpo_lrs=[1e-5, 1e-5, 1e-4])
    assert not (tmp_path / "c-runs").exists()


def test_compare_cli_unequal_sweeps_one_line(capsys):
    from esopt.cli import main

    rc = main(["bench", "compare", "configs/demo.yaml", "runtime.threads=1", "--grpo-lrs", "1e-5,1e-4",
               "--es-sigmas", "0.004"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("esopt: error: bench compare: equal tuning budget")


@pytest.mark.slow  # process-heavy: the default tier stays under 5 minutes (docs/design.md)
def test_compare_end_to_end_tiny(esopt_cache, tmp_path, capsys):
    from esopt.studies.method.compare import main as compare

    out = tmp_path / "compare.json"
    over = TINY + ["tasks.validation=2"]
    res = compare(str("configs/demo.yaml"), over, str(out), seeds=[3], grpo_lrs=[1e-5], es_sigmas=[0.004])
    data = json.loads(out.read_text())
    assert res["es_best_sigma"] == 0.004 and res["grpo_best_lr"] == 1e-5
    # the tuning run of the chosen setting at seed 3 is the final run: two runs in all
    assert sorted(p.name for p in (tmp_path / "compare-runs").iterdir()) == [
        "es-sigma0.004-seed3", "es-sigma0.004-seed3.bench.json", "grpo-lr1e-05-seed3", "grpo-lr1e-05-seed3.bench.json"]
    es, grpo = data["runs"]["final"]["es"][0], data["runs"]["final"]["grpo"][0]
    for run in (es, grpo):
        assert [p["episodes"] for p in run["curve"]] == [0, 4]  # equal episodes
        assert run["curve"][-1]["validation"] is not None and run["curve"][-1]["reward"] is not None
        assert run["peak_rss_mb"] > 50 and run["wall_seconds"] > 0
    assert es["summary"]["base"]["reward"] == grpo["summary"]["base"]["reward"]  # same base, same held-out puzzles
    t = data["table"]
    assert t["es"]["training_decoding"] == "greedy" and t["grpo"]["training_decoding"] == "sampled T=1"
    assert res["es_minus_grpo_heldout"] == t["es"]["final_mean"] - t["grpo"]["final_mean"]
    assert (tmp_path / "compare.png").stat().st_size > 0
    capsys.readouterr()
    # read back, not retrained; the peak RSS is kept
    assert compare("configs/demo.yaml", over, str(out), seeds=[3], grpo_lrs=[1e-5], es_sigmas=[0.004]) == res
    assert "trained in" not in capsys.readouterr().out
    assert json.loads(out.read_text())["table"]["es"]["peak_rss_mb"] == t["es"]["peak_rss_mb"]
    # a folder holding a run of other settings is not silently reused
    with pytest.raises(ConfigError, match=r"holds a run with other settings \(agent.max_new_tokens: 2 there, 3 now"):
        compare("configs/demo.yaml", over + ["agent.max_new_tokens=3"], str(out), seeds=[3], grpo_lrs=[1e-5],
                es_sigmas=[0.004])


# ----------------------------------------------------------------------------------------- horizon


def test_horizon_task_overrides():
    from esopt.studies.method.horizon import task_overrides
    from esopt.studies.machine.memory import TASKS
    from esopt.config import load_config

    assert task_overrides("4x4-b2") == ["env.options.size=4", "env.options.blanks=2", "env.max_turns=6"]
    assert task_overrides("4x4-b6") == ["env.options.size=4", "env.options.blanks=6", "env.max_turns=18"]
    for name in ("9x9-h5", "9x9-h10", "9x9-h15"):
        assert task_overrides(name) == TASKS[name]  # bench memory's tasks
    assert task_overrides("9x9-h10") == ["env.options.size=9", "env.options.blanks=10", "env.max_turns=30"]
    cfg = load_config("configs/demo.yaml", task_overrides("4x4-b6"))  # the demo's max_turns: 3 is replaced
    assert (cfg.env.options.size, cfg.env.options.blanks, cfg.env.max_turns) == (4, 6, 18)
    for bad in ("4x4-demo", "5x5-b2", "9x9-h0", "4x4"):
        with pytest.raises(ConfigError, match="4x4-bN or 9x9-hN"):
            task_overrides(bad)
    with pytest.raises(ConfigError, match="at most 12"):
        task_overrides("4x4-b13")


def test_horizon_drops_and_overrides_canned(monkeypatch, tmp_path, capsys):
    from esopt.studies.method import horizon

    final = {("4x4-b2", "es"): 0.8, ("4x4-b4", "es"): 0.6, ("4x4-b6", "es"): 0.5,
             ("4x4-b2", "grpo"): 0.9, ("4x4-b4", "grpo"): 0.5, ("4x4-b6", "grpo"): 0.2}
    calls = []

    def fake(config, overrides, out_dir, name, log=print, records=None):
        calls.append((name, list(overrides)))
        task, arm = name.split("-")[0] + "-" + name.split("-")[1], name.split("-")[2]
        seed = int(name.rsplit("-seed", 1)[1])
        return canned_run(name, out_dir, final[(task, arm)] + 0.02 * seed, 0.0)

    monkeypatch.setattr(horizon, "train_run", fake)
    (tmp_path / "compare.json").write_text(json.dumps({"config": "configs/demo.yaml", "overrides": [],
                                                       "results": {"grpo_best_lr": 1e-4,
                                                                   "es_best_sigma": 0.008}}))
    out = tmp_path / "horizon.json"
    res = horizon.main("configs/demo.yaml", TINY, str(out), seeds=[0, 1], tasks=["4x4-b6", "4x4-b2", "4x4-b4"])
    assert res["es_drop_short_to_long"] == pytest.approx(0.3)
    assert res["grpo_drop_short_to_long"] == pytest.approx(0.7)
    assert res["es_minus_grpo_at_longest"] == pytest.approx(0.3)
    data = json.loads(out.read_text())
    assert data["tasks"] == ["4x4-b2", "4x4-b4", "4x4-b6"] and data["grpo_lr"] == 1e-4
    assert "grpo_best_lr of" in data["grpo_lr_source"]
    assert data["table"]["4x4-b4"]["grpo"]["finals"] == pytest.approx([0.5, 0.52])
    by_name = dict(calls)
    assert len(calls) == 12
    b6 = by_name["4x4-b6-grpo-lr0.0001-seed1"]
    assert {"env.options.blanks=6", "env.max_turns=18", "grpo.lr=0.0001", "grpo.steps=1", "grpo.group_size=2",
            "grpo.puzzles_per_step=2", "run.seed=1", "algo=grpo"} <= set(b6)
    es = by_name["4x4-b2-es-sigma0.008-seed0"]  # compare's tuned sigma, sigma.end scaled alike (demo: 4e-3 -> 2e-3)
    assert {"env.options.blanks=2", "env.max_turns=6", "algo=es", "es.sigma.start=0.008", "es.sigma.end=0.004"} <= set(es)
    assert not any("grpo.lr" in o for o in es)
    # horizon adds no validation split of its own (the only one is TINY's tasks.validation=0)
    assert all([o for o in ov if o.startswith("tasks.validation")] == ["tasks.validation=0"] for _, ov in calls)
    assert (tmp_path / "horizon.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert "GRPO lr 0.0001 (grpo_best_lr of" in printed and "ES sigma 0.008 -> 0.004 (es_best_sigma of" in printed
    # no compare.json: 1e-5, said so
    (tmp_path / "compare.json").unlink()
    assert horizon.default_grpo_lr(str(out))[0] == 1e-5


@pytest.mark.slow  # process-heavy: the default tier stays under 5 minutes (docs/design.md)
def test_horizon_end_to_end_tiny(esopt_cache, tmp_path, capsys):
    from esopt.studies.method.horizon import main as horizon

    out = tmp_path / "horizon.json"
    res = horizon("configs/demo.yaml", TINY, str(out), seeds=[0], tasks=["4x4-b3"], grpo_lr=1e-5, jobs=2)
    assert set(res) == {"es_minus_grpo_at_longest"}  # one horizon: no drop
    data = json.loads(out.read_text())
    row = data["table"]["4x4-b3"]
    assert row["es"]["episodes"] == row["grpo"]["episodes"] == 4
    assert row["es"]["bases"] == row["grpo"]["bases"]
    assert data["jobs"] == 2  # the two runs trained side by side, each in its own folder
    assert res["es_minus_grpo_at_longest"] == row["es"]["final_mean"] - row["grpo"]["final_mean"]
    cfg = (tmp_path / "horizon-runs" / "4x4-b3-grpo-lr1e-05-seed0" / "config.yaml").read_text()
    assert "blanks: 3" in cfg and "max_turns: 9" in cfg and "lr: 1.0e-05" in cfg
    assert (tmp_path / "horizon.png").stat().st_size > 0
    out_lines = capsys.readouterr().out.splitlines()
    assert "GRPO lr 1e-05 (--grpo-lr)" in "\n".join(out_lines)
    assert out_lines[-1].startswith("RESULT es_minus_grpo_at_longest=")


# ----------------------------------------------------------------------------------------- train_run


def test_run_all_keeps_order_and_runs_side_by_side():
    import threading
    import time

    from esopt.studies.runs import run_all

    live, peak = [0], [0]
    lock = threading.Lock()

    def call(k):
        def f():
            with lock:
                live[0] += 1
                peak[0] = max(peak[0], live[0])
            time.sleep(0.05 * (4 - k))  # later calls finish first
            with lock:
                live[0] -= 1
            return {"k": k}
        return f

    assert [r["k"] for r in run_all([call(k) for k in range(4)], jobs=3)] == [0, 1, 2, 3]
    assert peak[0] == 3
    peak[0] = 0
    assert [r["k"] for r in run_all([call(k) for k in range(3)], jobs=1)] == [0, 1, 2] and peak[0] == 1


def test_train_run_moves_aside_resumes_and_keeps_peaks(monkeypatch, tmp_path):
    import subprocess
    from pathlib import Path

    from esopt.studies import runs
    from esopt.config import dump_config, load_config

    path, over = tmp_path / "r", ["model=tiny-llama", "es.generations=2"]
    cmds = []

    def fake_run(cmd, **kw):  # the child: writes a finished run and its peaks
        cmds.append(cmd[4:])
        path.mkdir(exist_ok=True)
        (path / "summary.json").write_text(json.dumps({"final": {"reward": 0.5}}))
        (path / "metrics.jsonl").write_text(json.dumps({"kind": "eval", "generation": 2, "heldout_reward": 0.5}) + "\n")
        Path(cmd[3]).write_text(json.dumps({"peak_rss_mb": 100.0 + len(cmds), "peak_cuda_mb": None}))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(runs, "_child", fake_run)  # the training process
    # an interrupted run that cannot be resumed (GRPO before its first checkpoint): moved aside, trained afresh
    path.mkdir()
    (path / "metrics.jsonl").write_text("{}\n")
    r = runs.train_run("configs/demo.yaml", over, str(tmp_path), "r", log=lambda *_: None)
    assert cmds[0][0] == "configs/demo.yaml" and "run.name=r" in cmds[0]
    assert len(list(tmp_path.glob("r.incomplete-*"))) == 1
    assert r["peak_rss_mb"] == 101.0 and r["curve"][0]["reward"] == 0.5
    # an interrupted ES run (history.json) of the same settings: resumed; peaks merged
    (path / "summary.json").unlink()
    (path / "history.json").write_text("{}")
    (path / "config.yaml").write_text(dump_config(load_config("configs/demo.yaml", over + [
        f"run.out_dir={tmp_path}", "run.name=r", "runtime.threads=3"])))  # threads may differ
    r = runs.train_run("configs/demo.yaml", over, str(tmp_path), "r", log=lambda *_: None)
    assert cmds[1] == ["--resume", str(path)]
    meta = json.loads((tmp_path / "r.bench.json").read_text())
    assert meta["processes"] == 2 and meta["peak_rss_mb"] == 102.0 == r["peak_rss_mb"]
    # finished: read back, no process
    assert runs.train_run("configs/demo.yaml", over, str(tmp_path), "r")["peak_rss_mb"] == 102.0 and len(cmds) == 2
    with pytest.raises(ConfigError, match=r"es.generations: 2 there, 3 now"):
        runs.train_run("configs/demo.yaml", ["model=tiny-llama", "es.generations=3"], str(tmp_path), "r")
