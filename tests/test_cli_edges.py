"""The command line's first-hour edges (issue 29): bare `esopt train`, --version, examples in every
command's help, and config errors that name the key, suggest the right one and come before torch."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from esopt.cli import COMMANDS, main


@pytest.mark.parametrize("command", ["train", "serve"])
def test_a_bare_command_prints_usage_and_runs_nothing(tmp_path, capsys, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    assert main([command]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: esopt {command}") and f"{command} needs a config file" in err
    assert not list(tmp_path.iterdir())


def test_version_and_an_example_in_every_commands_help(capsys):
    from esopt import __version__

    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"esopt {__version__}"
    for name in COMMANDS:
        args = [name, "gepa", "--help"] if name == "baseline" else [name, "--help"]
        with pytest.raises(SystemExit):
            main(args)
        assert f"esopt {name} " in capsys.readouterr().out.split("example", 1)[1], name


@pytest.mark.parametrize("override, message", [
    ("es.popualtion=4", "unknown config key 'es.popualtion' (did you mean es.population?)"),
    ("es.sigma=0.01", "'es.sigma' is a section, not a value (its keys: start, end, schedule, warmup): set one "
                      "of them, e.g. es.sigma.start=0.01"),
    ("run.out_dir=/proc/esopt-nope", "run.out_dir=/proc/esopt-nope: cannot create the run folder"),
    ("es.scope=attn", "unknown es.scope 'attn': full, all_linear, norms, attention, mlp, last:N"),
    ("log.wandb=yes", "'log.wandb'"),
])
def test_config_mistakes_are_one_line_naming_the_key(esopt_cache, capsys, override, message):
    assert main(["train", "configs/demo.yaml", "model=tiny-llama", override]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_bad_yaml_names_its_file(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("es:\n  population: [1,\n")
    assert main(["train", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err.split("not valid YAML", 1)[1] and "<unicode string>" not in err


@pytest.mark.parametrize("text, message", [
    ("", "is empty: give at least the settings you mean"),
    ("# only a comment\n", "is empty: give at least the settings you mean"),
    ("- model: tiny-llama\n", "must hold a mapping of settings (key: value) at the top level, not a list"),
    ("tiny-llama\n", "must hold a mapping of settings (key: value) at the top level, not a str"),
])
def test_an_empty_or_non_mapping_config_is_one_line(tmp_path, capsys, text, message):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert main(["train", str(path), f"run.out_dir={tmp_path / 'runs'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"config file {path} {message}" in err[0], err
    assert not (tmp_path / "runs").exists()


def test_scope_patterns_need_no_shell_quotes():
    from esopt.config import load_config

    assert load_config("configs/demo.yaml", ["es.scope=[*.mlp.*, *.self_attn.*]"]).es.scope == ["*.mlp.*",
                                                                                             "*.self_attn.*"]


def test_a_config_error_comes_before_torch_is_imported():
    code = ("import sys; from esopt.cli import main; "
            "rc = main(['train', 'configs/demo.yaml', 'es.bogus=1']); print(rc, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["2", "False"], out.stderr
    assert "unknown config key 'es.bogus'" in out.stderr


def test_a_hub_id_out_of_reach_and_not_cached_is_one_line_at_once(tmp_path):
    """Offline, a mistyped hub id took 55 s of retries; now it is one line before torch is imported."""
    code = ("import sys; from esopt.cli import main; "
            f"rc = main(['train', 'configs/smoke.yaml', 'model=someone/no-such-model', 'run.out_dir={tmp_path}']); "
            "print(rc, 'torch' in sys.modules)")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.stdout.split() == ["2", "False"], out.stderr
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and "model 'someone/no-such-model' is not a local folder, not in the Hugging Face cache, " \
                               "and the hub cannot be reached from here" in err[0], err
    assert not list(tmp_path.iterdir())


def test_a_cached_hub_model_loads_from_the_cache_when_the_hub_is_out_of_reach(tmp_path, monkeypatch):
    from esopt.models.loading import hub_options

    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))  # read when looked up, not only at import
    snapshot = tmp_path / "models--someone--cached" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (tmp_path / "models--someone--cached" / "refs").mkdir()
    (tmp_path / "models--someone--cached" / "refs" / "main").write_text("abc123")
    assert hub_options("someone/cached") == {"local_files_only": True}


def test_a_local_model_path_is_kept_absolute(tmp_path, monkeypatch):
    from esopt.config import dump_config, load_config

    (tmp_path / "my-model").mkdir()
    monkeypatch.chdir(tmp_path)
    cfg = load_config(None, ["model=./my-model"])
    assert cfg.model == str(tmp_path / "my-model")
    assert f"model: {tmp_path / 'my-model'}" in dump_config(cfg)  # what the run folder's config.yaml says
    assert load_config(None, ["model=tiny-llama"]).model == "tiny-llama"  # aliases and hub ids stay as given


def _train_tiny(tmp_path, *extra):
    from conftest import TINY_OVERRIDES

    args = ["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=2", "es.sigma.start=0.05",
            "es.sigma.end=0.01", f"run.out_dir={tmp_path}", "run.name=r", *extra]
    assert main(args) == 0
    return tmp_path / "r"


def test_a_finished_run_resumed_says_so_and_changes_nothing(esopt_cache, tmp_path, capsys):
    run = _train_tiny(tmp_path)
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    capsys.readouterr()
    assert main(["train", "--resume", str(run)]) == 0
    out = capsys.readouterr().out
    assert "is finished: 2 of 2 generations done, nothing to do" in out
    assert f"esopt train --resume {run} es.generations=3" in out
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


def test_extending_a_run_keeps_its_schedule_unless_asked(esopt_cache, tmp_path, capsys):
    import json

    import yaml

    run = _train_tiny(tmp_path)
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "es.generations=4"]) == 0
    assert "sigma and alpha keep their 2-generation schedules" in capsys.readouterr().out
    sigmas = [g["sigma"] for g in json.loads((run / "history.json").read_text())["generations"]]
    assert sigmas[0] == 0.05 and sigmas[1:] == [0.01, 0.01, 0.01]  # never back up
    assert yaml.safe_load((run / "config.yaml").read_text())["es"]["schedule_generations"] == 2
    assert main(["train", "--resume", str(run), "es.generations=6", "es.schedule_generations=6"]) == 0
    sigmas = [g["sigma"] for g in json.loads((run / "history.json").read_text())["generations"]]
    assert 0.01 < sigmas[4] < 0.05 and sigmas[5] == 0.01  # asked: the plan stretched over 6


def test_settings_the_algorithm_never_reads_are_refused(esopt_cache, tmp_path, capsys):
    assert main(["train", "configs/demo.yaml", "model=tiny-llama", f"run.out_dir={tmp_path}", "--algo", "grpo",
                 "es.generations=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["esopt: error: es.generations does not set the length of an algo=grpo run: give grpo.steps=N "
                   "(the number of GRPO steps)"]
    assert not list(tmp_path.iterdir())


def test_eval_of_a_folder_given_as_the_config_says_to_use_run(tmp_path, capsys):
    assert main(["eval", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"esopt: error: {tmp_path} is a folder, not a config file: evaluate a run with "
                                       f"esopt eval --run {tmp_path}\n")
