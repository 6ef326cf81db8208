"""Issue 41 items 6 and 7: an env's agent context travels with the env (a switched env.id drops the
file's prompt and examples, with a notice), and a run of an env registered in-process stays usable
from the command line (RUN/env.json names where to import it, or the run says why it cannot)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import TINY_OVERRIDES

from esopt.config import load_config

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
GUESS = "guess_env:GuessEnv"
ESOPT = str(Path(sys.executable).with_name("esopt"))


def test_a_switched_env_id_drops_the_files_agent_context_with_a_notice(capsys):
    demo = yaml.safe_load((ROOT / "configs/demo.yaml").read_text())["agent"]
    assert demo["system_prompt"] and demo["examples"]  # the file has a Sudoku context to drop
    cfg = load_config(ROOT / "configs/demo.yaml", [f"env.id={GUESS}"])
    assert (cfg.agent.system_prompt, cfg.agent.examples) == ("", [])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"env.id={GUESS} replaces" in err and "agent.system_prompt and " \
        "agent.examples, written for sudoku, are dropped" in err
    load_config(ROOT / "configs/demo.yaml", [f"env.id={GUESS}"])
    assert capsys.readouterr().err == ""  # said once per process
    kept = load_config(ROOT / "configs/demo.yaml", [f"env.id={GUESS}", "agent.system_prompt=Guess well."])
    assert (kept.agent.system_prompt, kept.agent.examples) == ("Guess well.", [])  # the command line's own stays
    assert "its agent.examples, written for sudoku, is dropped (set it on" in capsys.readouterr().err
    same = load_config(ROOT / "configs/demo.yaml", ["env.id=sudoku"])  # the file's own env: nothing dropped
    assert same.agent.system_prompt == demo["system_prompt"] and same.agent.examples == demo["examples"]
    assert "dropped" not in capsys.readouterr().err


def _script(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "make_run.py"
    overrides = [*TINY_OVERRIDES, "es.generations=1", f"run.out_dir={tmp_path}", "run.name=run"]
    fit = f"esopt.fit({str(ROOT / 'configs/demo.yaml')!r}, {overrides + ['env.id=myguess', 'env.options.high=4']!r})"
    script.write_text("import sys\nimport esopt\nfrom esopt.envs import register\n" + textwrap.dedent(body)
                      + fit + "\n")
    return script


def _run(args, cwd, timeout=300):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing on the path but what the run says
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_a_run_of_an_env_registered_in_process_is_evaluated_resumed_and_exported_from_the_cli(esopt_cache,
                                                                                            tmp_path):
    script = _script(tmp_path, f"""
        sys.path.insert(0, {str(HERE)!r})
        from guess_env import GuessEnv
        register("myguess", GuessEnv)
        """)
    made = _run([sys.executable, str(script)], tmp_path)
    assert made.returncode == 0, made.stderr
    assert "registered in this process only" not in made.stderr
    run = tmp_path / "run"
    record = json.loads((run / "env.json").read_text())
    assert record["id"] == "myguess" and record["import"] == GUESS and record["path"] == str(HERE)
    # another process, in another folder, with nothing on its path: the run's record finds the env
    evaluated = _run([ESOPT, "eval", "--run", str(run)], tmp_path)
    assert evaluated.returncode == 0 and "RESULT heldout_reward=" in evaluated.stdout, evaluated.stderr
    resumed = _run([ESOPT, "train", "--resume", str(run), "es.generations=2"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert len(json.loads((run / "history.json").read_text())["generations"]) == 2
    exported = _run([ESOPT, "export", str(run), str(tmp_path / "hf")], tmp_path)
    assert exported.returncode == 0 and (tmp_path / "hf" / "model.safetensors").exists(), exported.stderr
    reported = _run([ESOPT, "report", str(run)], tmp_path)
    assert reported.returncode == 0, reported.stderr


def test_a_run_of_an_env_defined_in_main_says_so_at_start_and_on_the_cli_in_one_line(esopt_cache, tmp_path):
    script = _script(tmp_path, f"""
        sys.path.insert(0, {str(HERE)!r})
        import guess_env

        class MyGuess(guess_env.GuessEnv):
            pass

        register("myguess", MyGuess)
        """)
    made = _run([sys.executable, str(script)], tmp_path)
    assert made.returncode == 0, made.stderr
    notice = [line for line in made.stderr.splitlines() if "registered in this process only" in line]
    assert len(notice) == 1 and "defined in __main__" in notice[0] and "env.id=module:attr" in notice[0]
    assert json.loads((tmp_path / "run" / "env.json").read_text())["import"] is None
    evaluated = _run([ESOPT, "eval", "--run", str(tmp_path / "run")], tmp_path)
    assert evaluated.returncode == 2 and evaluated.stderr.count("\n") == 1, evaluated.stderr
    assert "was registered in the process that made the run (in __main__)" in evaluated.stderr
