"""A user's env that misbehaves is named where the user looks (train/failures.py): every generation and
evaluation line counts the failed episodes with the first one's reason, a run whose every episode fails
stops with one line (exit 2), a failed episode keeps the reply that made it fail, and no file of the run
folder holds a NaN or Infinity token."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TINY_OVERRIDES

from esopt.cli import main

HERE = Path(__file__).resolve().parent


def strict(text: str):
    def refuse(token):
        raise ValueError(f"{token} is not JSON")
    return json.loads(text, parse_constant=refuse)


def every_file_is_strict_json(run: Path) -> int:
    n = 0
    for path in run.rglob("*"):
        if path.suffix == ".json":
            strict(path.read_text())
            n += 1
        elif path.suffix == ".jsonl":
            for line in path.read_text().splitlines():
                strict(line)
            n += 1
    return n


def args(tmp_path, env: str, *extra):
    return ["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=2", f"env.id=misbehaving_envs:{env}",
            "tasks.heldout=4", "agent.system_prompt=", *extra, f"run.out_dir={tmp_path}", "run.name=r"]


def test_some_nan_rewards_are_failed_episodes_counted_on_every_line(esopt_cache, tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    assert main(args(tmp_path, "NanSometimes")) == 0
    out = capsys.readouterr().out
    lines = [x for x in out.splitlines() if "episodes failed (first: " in x]
    assert any(x.startswith("[esopt] gen 1/2") for x in lines), out
    assert any("held-out after 0 generations" in x for x in lines) and "reward nan" in lines[0], lines
    assert "a reward is a finite number" in lines[0]
    assert "[esopt] failed held-out episodes: base 2 of 4, final 2 of 4" in out, out  # the summary says it too
    run = tmp_path / "r"
    assert every_file_is_strict_json(run) >= 5
    episodes = [json.loads(x) for x in (run / "trajectories" / "gen0000.jsonl").read_text().splitlines()]
    failed = [ep for ep in episodes if ep["error"]]
    assert failed and all(ep["turns"] and ep["turns"][-1]["failed"] and "response" in ep["turns"][-1] for ep in failed)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["final"]["errors"] > 0 and summary["final"]["reward"] == summary["final"]["reward"]  # finite


@pytest.mark.parametrize("env, why", [("NoneRewardForReplies", "returned ('Done.', None"),
                                      ("NanSometimes", "returned the reward nan")])
def test_a_run_whose_every_episode_fails_stops_with_one_line(esopt_cache, tmp_path, capsys, monkeypatch, env, why):
    monkeypatch.syspath_prepend(str(HERE))
    assert main(args(tmp_path, env, *(["env.options.every=1"] if env == "NanSometimes" else []))) == 2
    stderr = capsys.readouterr().err
    err = [x for x in stderr.splitlines() if x.startswith("esopt")]  # besides the progress bars
    assert "Traceback" not in stderr and len(err) == 1 and err[0].startswith("esopt: error: every episode of the held-out evaluation after 0 "
                                               "generations failed (4 of 4; first: "), err
    assert why in err[0] and f"esopt train --resume {tmp_path / 'r'}" in err[0], err
    run = tmp_path / "r"
    assert every_file_is_strict_json(run) >= 1
    episodes = [json.loads(x) for x in (run / "trajectories" / "eval_gen0000.jsonl").read_text().splitlines()]
    assert len(episodes) == 4 and all(ep["turns"][0]["failed"] for ep in episodes)  # the replies, for a look


@pytest.mark.parametrize("env, said", [
    ("RaisesInInit", "(train split): building its envs raised RuntimeError: cannot open the task file"),
    ("ResetReturnsDict", "(train split): reset() the env's reset() returned {'observation': 'Say anything.'}; "
                         "a TextEnv's reset returns (observation: str, info: dict)"),
    ("NoneReward", "(train split): step('') (a reply, as the model may give one) the env's step() returned")])
def test_an_env_that_cannot_play_is_one_line_before_any_run_folder(esopt_cache, tmp_path, capsys, monkeypatch, env,
                                                                    said):
    monkeypatch.syspath_prepend(str(HERE))
    assert main(args(tmp_path, env)) == 2
    stderr = capsys.readouterr().err
    assert stderr.count("\n") == 1 and stderr.startswith(f"esopt: error: env.id=misbehaving_envs:{env} "), stderr
    assert said in stderr, stderr
    assert not list(tmp_path.iterdir())  # nothing half made


def test_eval_of_a_run_checks_its_env_before_loading_the_weights(esopt_cache, tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    assert main(args(tmp_path, "NanSometimes", "es.generations=1")) == 0
    import esopt.train.weights as weights

    def never(*a, **k):
        raise AssertionError("the weights were loaded before the env was checked")

    monkeypatch.setattr(weights, "load_run_weights", never)
    capsys.readouterr()
    assert main(["eval", "--run", str(tmp_path / "r"), "env.id=no_such_module:Env"]) == 2
    assert "cannot import no_such_module" in capsys.readouterr().err


def test_options_a_kwargs_factory_does_not_name_are_warned_about_in_one_line(esopt_cache, tmp_path, capsys,
                                                                               monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    assert main(args(tmp_path, "TakesAnything", "es.generations=1", "env.options.colour=red", "env.options.every=3")) == 0
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("[esopt] warning")]
    assert err == ["[esopt] warning: env.options not in TakesAnything's signature (it takes **kwargs, so nothing "
                   "checks them): colour"], err


@pytest.mark.parametrize("env, extra, line", [
    ("FewTasks", ["tasks.validation=2"], "[esopt] warning: env.id=misbehaving_envs:FewTasks has 6 distinct tasks under "
     "these options, fewer than the splits ask for (held-out 4 + validation 2 + the training tasks): they must share "
     "tasks, so held-out reward partly measures tasks trained on"),
    ("FewTasks", [], None),  # 4 held-out + training fit in 6
    ("TasksByOption", ["env.options.every=4"], "has 4 distinct tasks under these options"),
    ("TasksByOption", ["env.options.every=9"], None)])
def test_splits_that_must_share_tasks_are_warned_about_at_start(esopt_cache, tmp_path, capsys, monkeypatch, env, extra,
                                                                line):
    """An env that declares how many distinct tasks it has (distinct_tasks: an int, or a function of its options)
    gets one line at start when held-out, validation and training cannot all be different tasks."""
    monkeypatch.syspath_prepend(str(HERE))
    assert main(args(tmp_path, env, "es.generations=1", *extra)) == 0
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("[esopt] warning")]
    if line is None:
        assert err == [], err
    else:
        assert len(err) == 1 and line in err[0], err
    capsys.readouterr()
    assert main(["eval", "--run", str(tmp_path / "r")]) == 0  # eval plays held-out only: 4 tasks fit in any of these
    assert not [x for x in capsys.readouterr().err.splitlines() if x.startswith("[esopt] warning")]


def test_export_checks_the_env_before_the_weights_and_report_needs_none(esopt_cache, tmp_path, capsys, monkeypatch):
    """A run whose env module is gone from here: export refuses in one line naming it before any model
    loads (as train and eval do); report draws its episodes as plain turn tables."""
    monkeypatch.syspath_prepend(str(HERE))
    assert main(args(tmp_path, "NanSometimes", "es.generations=1")) == 0
    import sys

    import esopt.envs.spec as spec
    import esopt.models as models

    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(HERE)])
    monkeypatch.delitem(sys.modules, "misbehaving_envs")
    monkeypatch.setattr(spec, "_SPECS", {k: v for k, v in spec._SPECS.items() if not k.startswith("misbehaving")})
    monkeypatch.chdir(tmp_path)  # the console's folder is searched too

    def never(*a, **k):
        raise AssertionError("the model was loaded before the env was checked")

    monkeypatch.setattr(models, "load_model", never)
    capsys.readouterr()
    assert main(["export", str(tmp_path / "r"), str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot import misbehaving_envs" in err and not (tmp_path / "hf").exists()
    assert main(["report", str(tmp_path / "r")]) == 0


def test_a_step_that_never_returns_fails_its_episode_at_the_time_limit(esopt_cache, tmp_path, capsys, monkeypatch):
    """run.call_timeout_s (agent/timebox.py): in the pre-run check, one line before anything is written; in
    training and evaluations, the episode fails with the reason on the console counts and the run goes on."""
    monkeypatch.syspath_prepend(str(HERE))
    assert main(args(tmp_path, "HangsOnCheck", "run.call_timeout_s=0.5")) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("esopt")]
    assert len(err) == 1 and "step('')" in err[0] and "took longer than 0.5 s (run.call_timeout_s)" in err[0], err
    assert not (tmp_path / "r").exists()
    assert main(args(tmp_path, "HangsSometimes", "run.call_timeout_s=0.5")) == 0
    out = capsys.readouterr().out
    lines = [x for x in out.splitlines() if "episodes failed (first: " in x]
    assert lines and "took longer than 0.5 s" in lines[0], out


def test_a_megabyte_observation_is_one_line_before_the_run(esopt_cache, tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    assert main(args(tmp_path, "HugeReset")) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("esopt")]
    assert len(err) == 1 and "observation of 1,048,576 characters; agent.max_observation_chars is 100,000" in err[0]
    assert not (tmp_path / "r").exists()


def test_a_prompt_past_the_model_s_positions_fails_its_episode_before_decoding(esopt_cache, tmp_path, capsys,
                                                                                 monkeypatch):
    """20,000 characters (under agent.max_observation_chars) of a character-level model with 4,096 positions: the
    episode fails with the token count on the console's line, its turn is never decoded, and the run goes on."""
    monkeypatch.syspath_prepend(str(HERE))
    assert main(args(tmp_path, "LongSometimes")) == 0
    out = capsys.readouterr().out
    lines = [x for x in out.splitlines() if "episodes failed (first: " in x]
    assert any(x.startswith("[esopt] gen 1/2") for x in lines), out
    assert "passes the model's 4,096 positions" in lines[0] and "the prompt is 20,0" in lines[0], lines[0]
    episodes = [json.loads(x) for x in (tmp_path / "r" / "trajectories" / "gen0000.jsonl").read_text().splitlines()]
    failed = [ep for ep in episodes if ep["error"]]
    assert failed and len(failed) < len(episodes) and all(not ep["turns"] for ep in failed)
