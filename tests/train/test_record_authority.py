"""The record is the authority (issue 30): a run's config.yaml, edited by hand or swapped for another
run's, cannot rewrite what its history (ES) or checkpoint (GRPO) recorded. resume, eval --run, export and report refuse the
mismatch in one line naming the key and both values, before any model loads; the untouched run works."""
from __future__ import annotations

import json
import shutil

import pytest
import yaml

from conftest import TINY_OVERRIDES
from esopt.cli import main

# every setting ES records (its frozen keys), with another valid value
EDITS = {
    "model": "tiny-qwen2",
    "algo": "grpo",
    "runtime.dtype": "bfloat16",
    "run.seed": 7,
    "env.id": "vowels",
    "es.scope": "all_linear",
    "es.noise": "counter",
    "es.sigma_scale": "rms",
    "es.rank": 2,
    "es.table_size": 1 << 23,
    "es.lowrank_others": "full",
    "es.update_rounding": "stochastic",
    "es.population": 6,
    "es.antithetic": False,
    "es.shaping": "centered_rank",
    "coevo.lr": 2.0,
    "coevo.init_prob": 0.3,
    "coevo.init_logits": {"tip": 1.0},
    "coevo.logit_clip": 3.0,
}
# the task set (env.task_set: env.max_turns and env.options but how episodes are run), named by the key that differs
TASK_SET_EDITS = {"env.max_turns": 5, "env.options.blanks": 3, "env.options.reward": "binary"}
EDITS.update(TASK_SET_EDITS)
COMMANDS = {
    "resume": lambda run, tmp: ["train", "--resume", str(run)],
    "extend": lambda run, tmp: ["train", "--resume", str(run), "es.generations=4"],
    "eval": lambda run, tmp: ["eval", "--run", str(run)],
    "export": lambda run, tmp: ["export", str(run), str(tmp / "out")],
    "report": lambda run, tmp: ["report", str(run)],
}


@pytest.fixture(scope="module")
def runs(esopt_cache, tmp_path_factory):
    """Two finished tiny runs that differ in population and noise: the second's config is the swap."""
    out = tmp_path_factory.mktemp("authority")
    base = ["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=2", f"run.out_dir={out}"]
    assert main([*base, "run.name=a"]) == 0
    assert main([*base, "run.name=b", "es.population=6", "es.noise=gaussian"]) == 0
    return out / "a", out / "b"


def copy_of(run, tmp_path):
    return shutil.copytree(run, tmp_path / "r")


def set_key(config: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    node = config
    for part in parents:
        node = node[part]
    node[last] = value


def refused(capsys, argv) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("esopt: error: ") and "Traceback" not in err[0], err
    return err[0]


def test_the_history_records_the_settings(runs):
    meta = json.loads((runs[0] / "history.json").read_text())["meta"]
    assert set(meta["settings"]) == set(EDITS) - set(TASK_SET_EDITS) | {"coevo.mode", "env.task_set",
                                                                         "coevo.library_hash"}
    assert meta["settings"]["coevo.library_hash"] is None  # weights only: no library
    assert meta["settings"]["es.population"] == 4 and meta["settings"]["model"] == "tiny-llama"
    assert meta["settings"]["env.task_set"] == {"max_turns": 3, "options": {"size": 4, "blanks": 2, "reward": "partial"},
                                                "free": []}


def recorded_value(settings: dict, key: str):
    if key not in TASK_SET_EDITS:
        return settings[key]
    task_set = settings["env.task_set"]
    return task_set["max_turns"] if key == "env.max_turns" else task_set["options"][key.split(".")[-1]]


@pytest.mark.parametrize("key", sorted(EDITS))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_hand_edited_key_is_refused(runs, tmp_path, capsys, key, command):
    run = copy_of(runs[0], tmp_path)
    config = yaml.safe_load((run / "config.yaml").read_text())
    recorded = recorded_value(json.loads((run / "history.json").read_text())["meta"]["settings"], key)
    if key == "env.id":
        config["env"] = {"id": "vowels", "max_turns": None, "options": None}
    else:
        set_key(config, key, EDITS[key])
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    line = refused(capsys, COMMANDS[command](run, tmp_path))
    assert f"says {key}={json.dumps(EDITS[key])}, but the run's record was made with {key}={json.dumps(recorded)}" \
        in line and f"put back {key}: {json.dumps(recorded)}" in line, line
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before  # nothing changed
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_swapped_config_is_refused(runs, tmp_path, capsys, command):
    run = copy_of(runs[0], tmp_path)
    shutil.copy(runs[1] / "config.yaml", run / "config.yaml")  # another run's config copied in
    line = refused(capsys, COMMANDS[command](run, tmp_path))
    assert "says es.noise=\"gaussian\", but the run's record was made with es.noise=\"table\"" in line, line


def test_the_untouched_run_still_works(runs, tmp_path, capsys):
    run = copy_of(runs[0], tmp_path)
    assert main(["report", str(run)]) == 0
    assert main(["train", "--resume", str(run), "es.generations=3"]) == 0
    history = json.loads((run / "history.json").read_text())
    assert [g["population"] for g in history["generations"]] == [4, 4, 4]


GRPO_EDITS = {"model": "tiny-qwen2", "runtime.dtype": "bfloat16", "run.seed": 7, "algo": "es"}


@pytest.fixture(scope="module")
def grpo_run(esopt_cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("authority-grpo")
    assert main(["train", "configs/demo.yaml", *TINY_OVERRIDES, "--algo", "grpo", "grpo.steps=1",
                 "grpo.puzzles_per_step=2", "grpo.group_size=2", f"run.out_dir={out}", "run.name=g"]) == 0
    return out / "g"


@pytest.mark.parametrize("key", sorted(GRPO_EDITS))
@pytest.mark.parametrize("command", ["resume", "eval", "export", "report"])
def test_a_grpo_checkpoint_is_the_authority_too(grpo_run, tmp_path, capsys, key, command):
    run = copy_of(grpo_run, tmp_path)
    config = yaml.safe_load((run / "config.yaml").read_text())
    set_key(config, key, GRPO_EDITS[key])
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    line = refused(capsys, COMMANDS[command](run, tmp_path))
    assert f"says {key}={json.dumps(GRPO_EDITS[key])}, but the run's record was made with" in line, line


def test_the_task_set_cannot_change_on_resume_but_how_episodes_are_run_can(runs, tmp_path, capsys):
    from esopt.config import load_config
    from esopt.train.resume_check import TASK_SET, get_key

    run = copy_of(runs[0], tmp_path)
    line = refused(capsys, ["train", "--resume", str(run), "env.options.blanks=3"])
    assert "env.options.blanks cannot change on resume (2 in" in line and "3 given" in line, line
    web = load_config("configs/miniwob.yaml", [])
    runs_otherwise = load_config("configs/miniwob.yaml", ["env.web.workers=4", "env.web.timeout_ms=9000",
                                                          "env.web.max_live=2", "env.web.headless=false"])
    assert get_key(web, TASK_SET) == get_key(runs_otherwise, TASK_SET)
    for other in ("env.web.observation=browsergym", "env.web.obs_max_chars=900", "env.task=miniwob.click-test"):
        assert get_key(web, TASK_SET) != get_key(load_config("configs/miniwob.yaml", [other]), TASK_SET), other


def test_another_skill_library_in_config_yaml_is_refused_before_the_model_loads(esopt_cache, tmp_path, capsys):
    skills = ["coevo.mode=both", "coevo.skills=[{name: A, text: alpha}, {name: B, text: bravo}]"]
    assert main(["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=1", *skills,
                 f"run.out_dir={tmp_path}", "run.name=c"]) == 0
    run = tmp_path / "c"
    recorded = json.loads((run / "history.json").read_text())["meta"]
    assert recorded["settings"]["coevo.library_hash"] == recorded["context"]["library_hash"]
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["coevo"]["skills"][1]["text"] = "charlie"
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    for command in ("eval", "report", "resume"):
        line = refused(capsys, COMMANDS[command](run, tmp_path))
        assert "gives another coevo.library_hash" in line and "than the run's record was made with" in line, line
