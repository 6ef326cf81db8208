"""bench settings: named settings of one algorithm trained side by side and compared on the validation
split (before -> after, paired SE, updates that moved nothing), resumable from its run records."""
import json

import pytest
from test_compare_horizon import TINY

from esopt.config import ConfigError


def test_named_settings_are_trained_tabulated_and_read_back(esopt_cache, tmp_path, capsys):
    from esopt.studies.method import settings

    arms = tmp_path / "arms.yaml"
    arms.write_text("full: [es.scope=full]\nnorms-rms: [es.scope=norms, es.sigma_scale=rms, es.sigma.start=0.05]\n")
    out = tmp_path / "s.json"
    overrides = TINY + ["tasks.validation=3", "runtime.threads=1"]
    rows = settings.main("configs/demo.yaml", overrides, str(out), str(arms), seeds=[0], jobs=2)
    assert list(rows) == ["full", "norms-rms"]
    for r in rows.values():
        assert r["updates"] == 1 and r["episodes"] == 4 and 0 <= r["flat_updates"] <= 1
        assert r["gain"] == pytest.approx(r["validation_final"] - r["validation_base"])
    data = json.loads(out.read_text())
    assert data["rows"] == rows and "| norms-rms |" in data["table"]
    assert "RESULT gain_full=" in capsys.readouterr().out
    records = sorted(p.name for p in (tmp_path / "s-records").iterdir())
    assert records == ["full-seed0.json", "norms-rms-seed0.json"]
    # the run folders gone, the records answer: nothing is trained again
    import shutil

    shutil.rmtree(tmp_path / "s-runs")
    assert settings.main("configs/demo.yaml", overrides, str(out), str(arms), seeds=[0]) == rows
    assert not (tmp_path / "s-runs").exists()


@pytest.mark.parametrize("text, said", [("[a, b]", "must map labels to lists of overrides"),
                                        ("bad/label: [es.population=2]", "names run folders"),
                                        ("a: es.population=2", "must be a list of key=value overrides")])
def test_a_bad_arms_file_is_one_line(tmp_path, text, said):
    from esopt.studies.method import settings

    path = tmp_path / "arms.yaml"
    path.write_text(text + "\n")
    with pytest.raises(ConfigError, match=said):
        settings.read_settings(str(path))


def test_a_pause_file_holds_new_runs_until_it_is_removed(tmp_path, monkeypatch):
    """RUNS/PAUSE: a run about to start waits, one line said; removing the file lets it start."""
    import functools
    import threading
    import time

    from esopt.studies import runs

    started = []

    def child(cmd, **kw):
        started.append(time.time())
        raise KeyboardInterrupt  # stop train_run right after the launch: only when it launched matters here

    monkeypatch.setattr(runs, "_child", child)  # the training process
    monkeypatch.setattr(runs, "wait_while_paused", functools.partial(runs.wait_while_paused, poll=0.05))
    work = tmp_path / "runs"
    work.mkdir()
    flag = work / runs.PAUSE
    flag.write_text("")
    lines, said = [], []

    def log(line):  # the user reads the line, then removes the file 0.3 s later
        lines.append(line)
        if "waiting" in line:
            said.append(time.time())
            threading.Timer(0.3, flag.unlink).start()

    with pytest.raises(KeyboardInterrupt):
        runs.train_run("configs/demo.yaml", [], str(work), "r", log=log)
    assert lines[0] == f"[bench] r: waiting to start while {flag} exists (remove it to go on)", lines
    assert started and started[0] - said[0] >= 0.3 and lines[1].startswith("[bench] r: starting after")


def test_settings_that_played_held_out_get_its_figures_and_paired_differences(monkeypatch, tmp_path, capsys):
    """Runs that played held-out at both ends: held-out before -> after per setting and every two settings'
    difference on the final held-out seed by seed; runs without it (tuning, eval.heldout=never) get neither."""
    from esopt.studies.method import settings

    final = {("full", 0): 0.30, ("full", 1): 0.20, ("norms", 0): 0.35, ("norms", 1): 0.30}

    def fake(config, overrides, out_dir, name, records=None):
        label, seed = name.rsplit("-seed", 1)
        sm = {"generations": 2, "validation": {"base": {"reward": 0.1}, "final": {"reward": 0.2},
                                              "improvement": {"mean": 0.1, "se": 0.02}}}
        if "eval.heldout=never" not in overrides:
            f = final[(label, int(seed))]
            sm.update(base={"reward": 0.1}, final={"reward": f}, improvement={"mean": f - 0.1, "se": 0.03})
        return {"run_dir": f"{out_dir}/{name}", "summary": sm, "peak_rss_mb": 1024.0, "flat_updates": 0,
                "curve": [{"episodes": 8, "train_seconds": 5.0}]}

    monkeypatch.setattr(settings, "train_run", fake)
    arms = tmp_path / "arms.yaml"
    arms.write_text("full: [es.scope=full]\nnorms: [es.scope=norms]\n")
    out = tmp_path / "f.json"
    rows = settings.main("configs/demo.yaml", [], str(out), str(arms), seeds=[0, 1])
    assert rows["norms"]["heldout_gain"] == pytest.approx(0.225) and rows["full"]["heldout_finals"] == [0.3, 0.2]
    pair = json.loads(out.read_text())["heldout_pairs"]["full - norms"]
    assert pair["per_seed"] == pytest.approx([-0.05, -0.1]) and pair["mean"] == pytest.approx(-0.075)
    assert pair["se_over_seeds"] == pytest.approx(0.025)
    said = capsys.readouterr().out
    assert "held-out after training, full - norms: -0.0750 (SE over seeds 0.0250" in said
    assert "| full | 0.100 -> 0.200 | +0.100 ± 0.020, sd over seeds 0.000 | 0.100 -> 0.250 | +0.150 ± 0.030" in said
    assert "RESULT heldout_gain_norms=" in said
    tuning = settings.main("configs/demo.yaml", ["eval.heldout=never"], str(tmp_path / "t.json"), str(arms), seeds=[0])
    assert "heldout_gain" not in tuning["full"]
    assert json.loads((tmp_path / "t.json").read_text())["heldout_pairs"] == {}
    assert "held-out before" not in json.loads((tmp_path / "t.json").read_text())["table"]


def test_settings_finals_give_pairs_task_by_task_and_figures_on_tasks_no_choice_played(monkeypatch, tmp_path, capsys):
    """Final runs with per-task held-out figures: each pair's difference task by task (SE over tasks beside the
    SE over seeds), and with unseen_by_seeds the figures again on the held-out tasks whose content no held-out or
    validation set of those seeds holds, the sets read under the command's settings with tasks.heldout_skip=0."""
    from esopt.studies.method import settings, unseen

    def contents(cfg, seed, split):  # seed 10's tuning sets hold final task t1's content; t2, t3 are fresh
        if seed == 10:
            assert cfg.tasks.heldout_skip == 0
            return {"a": "A", "b": "B"} if split == "heldout" else {"v": "V"}
        assert split == "heldout" and cfg.tasks.heldout_skip == 8  # the final runs' held-out set
        return {"t1": "B", "t2": "X", "t3": "Y"}

    monkeypatch.setattr(unseen, "split_contents", contents)
    final = {"full": {"t1": 1.0, "t2": 0.5, "t3": 0.5}, "norms": {"t1": 0.0, "t2": 1.0, "t3": 0.5}}

    def fake(config, overrides, out_dir, name, records=None):
        label = name.rsplit("-seed", 1)[0]
        f = sum(final[label].values()) / 3
        sm = {"generations": 2, "validation": {"base": {"reward": 0.1}, "final": {"reward": 0.2},
                                              "improvement": {"mean": 0.1, "se": 0.02}},
              "base": {"reward": 0.25}, "final": {"reward": f}, "improvement": {"mean": f - 0.25, "se": 0.03}}
        return {"run_dir": f"{out_dir}/{name}", "summary": sm, "peak_rss_mb": 1024.0, "flat_updates": 0,
                "curve": [{"episodes": 8, "train_seconds": 5.0}],
                "heldout_by_task": {"base": {"t1": 0.5, "t2": 0.0, "t3": 0.25}, "final": dict(final[label])}}

    monkeypatch.setattr(settings, "train_run", fake)
    arms = tmp_path / "arms.yaml"
    arms.write_text("full: [es.scope=full]\nnorms: [es.scope=norms]\n")
    out = tmp_path / "f.json"
    settings.main("configs/demo.yaml", ["tasks.heldout_skip=8"], str(out), str(arms), seeds=[0, 1],
                  unseen_by_seeds=[10])
    data = json.loads(out.read_text())
    by_task = data["heldout_pairs"]["full - norms"]["by_task"]
    assert by_task["mean"] == pytest.approx(1 / 6) and by_task["se_over_tasks"] == pytest.approx(0.44096 / 2 ** 0.5, rel=1e-4)
    got = data["unseen"]
    assert got["tasks_per_seed"] == [2, 2] and got["seen_by_seeds"] == [10]
    assert got["rows"]["norms"]["bases"] == [0.125, 0.125] and got["rows"]["norms"]["finals"] == [0.75, 0.75]
    assert got["pairs"]["full - norms"]["mean"] == pytest.approx(-0.25)  # (-0.5 + 0) / 2 on t2, t3
    said = capsys.readouterr().out
    assert "held-out tasks no run at seeds [10] played in held-out or validation: 2/2 of seeds [0, 1]" in said
    assert "full - norms task by task: -0.2500 (SE over seeds 0.0000" in said
    assert "RESULT heldout_unseen_gain_norms=0.625" in said
    # finals on the sets those seeds played: nothing unseen, said in one line
    monkeypatch.setattr(unseen, "split_contents", lambda cfg, seed, split: {"t1": "A", "t2": "B", "t3": "V"})
    settings.main("configs/demo.yaml", [], str(out), str(arms), seeds=[0], unseen_by_seeds=[10])
    assert json.loads(out.read_text())["unseen"] is None and "no figures on unseen tasks" in capsys.readouterr().out


def test_ctrl_c_ends_runs_waiting_on_a_pause_file_side_by_side(tmp_path, monkeypatch):
    """--jobs 2, both runs waiting on RUNS/PAUSE: Ctrl-C ends the bench at once with Interrupted. It used to hang:
    the worker threads waited on the file forever while the executor waited for them."""
    import functools
    import os
    import signal
    import threading
    import time

    from esopt.studies import runs
    from esopt.train.stop import Interrupted

    monkeypatch.setattr(runs, "_child", lambda *a, **k: pytest.fail("no run may start while paused"))
    monkeypatch.setattr(runs, "wait_while_paused", functools.partial(runs.wait_while_paused, poll=0.05))
    work = tmp_path / "runs"
    work.mkdir()
    flag = work / runs.PAUSE
    flag.write_text("")
    lines = []
    waiting = threading.Event()

    def log(line, **kw):
        lines.append(line)
        if "waiting" in line and sum("waiting" in x for x in lines) == 2:
            waiting.set()

    threading.Thread(target=lambda: waiting.wait(10) and os.kill(os.getpid(), signal.SIGINT), daemon=True).start()
    fallback = threading.Timer(10, lambda: flag.unlink(missing_ok=True))  # were the fix gone: no hang, a failure
    fallback.start()
    calls = [lambda n=n: runs.train_run("configs/demo.yaml", [], str(work), n, log=log) for n in ("a", "b")]
    t0 = time.time()
    try:
        with pytest.raises(Interrupted), runs.stop_children_on_signals(log=log):
            runs.run_all(calls, jobs=2)
    finally:
        fallback.cancel()
    assert waiting.is_set() and time.time() - t0 < 5, lines
    assert flag.exists()  # ended by the stop, not by the file going


def test_the_table_rounds_flat_updates_averaged_over_seeds():
    """Flat updates are a mean over seeds: 1 of 3 reads 0.33, not 0.333333."""
    from esopt.studies.method.settings import table

    row = {"validation_base": 0.1, "validation_final": 0.2, "gain": 0.1, "gain_se_over_tasks": 0.02,
           "gain_std_over_seeds": 0.01, "updates": 8, "flat_updates": 1 / 3, "episodes": 512,
           "train_seconds": 1000.0, "peak_rss_mb": 4096.0}
    assert "| 8 (0.33) | 512 | 1000 | 4.0 GB |" in table({"full": row})
