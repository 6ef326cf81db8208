"""env.id=gem: GEM's envs through the TextEnv adapter, its options, its preflight and the CLI (offline)."""
import json
import random
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("gem")

from esopt.config import ConfigError, load_config  # noqa: E402
from esopt.envs import make, resolve  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GUESS = "game:GuessTheNumber-v0-easy"


def env_cfg(max_turns=None, **options):
    return SimpleNamespace(id="gem", max_turns=max_turns, options=resolve("gem").validate_options(options))


def secret(env) -> int:
    return env._env.game_number  # GEM's GuessTheNumberEnv keeps the target here


def test_config_imports_no_gem_and_gem_leaves_logging_alone():
    import subprocess

    code = ("import sys, logging; from esopt.config import load_config; c = load_config('configs/gem.yaml');"
            "print(c.env.options.task, 'gem' in sys.modules); from esopt.envs import make;"
            "make('gem', task=c.env.options.task).reset(seed=0);"
            "print('gem' in sys.modules, logging.getLogger().handlers)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    # validating the config imports no GEM; GEM's import leaves the root logger as it was (no basicConfig)
    assert out.split() == [GUESS, "False", "True", "[]"]


def test_protocol_multi_turn_and_win():
    env = make("gem", task=GUESS)
    assert env.max_turns == 4  # GEM's own limit for the easy variant
    obs, info = env.reset(seed=7)
    assert "Guess The Number" in obs and "\\boxed{}" in obs and isinstance(info, dict)
    wrong = 1 if secret(env) != 1 else 2
    obs, reward, terminated, truncated, info = env.step(f"my guess: \\boxed{{{wrong}}}")
    assert (reward, terminated, truncated) == (0.0, False, False) and isinstance(reward, float)
    assert info["action"] == str(wrong) and info["feedback"].startswith("At turn 1, you guessed")
    assert "Guess The Number" in obs and info["feedback"] in obs  # concat: rules + hints so far
    assert env.render_text() == obs
    obs, reward, terminated, truncated, info = env.step(f"\\boxed{{{secret(env)}}}")
    assert (reward, terminated, truncated, info["solved"]) == (1.0, True, False, True)


def test_bad_format_ends_unsolved_and_last_observation():
    env = make("gem", task=GUESS, observation="last")
    first, _ = env.reset(seed=3)
    obs, reward, terminated, _, info = env.step("five")
    assert reward == -0.1 and terminated and info["solved"] is False and info["action"] is None
    assert "Guess The Number" not in obs  # last: the newest observation only


def test_timeout_partial_reward_is_not_solved():
    env = make("gem", task=GUESS, max_turns=2)  # env.max_turns reaches GEM (its rules say 2 turns)
    obs, _ = env.reset(seed=11)
    assert env.max_turns == 2 and "within 2 turns" in obs
    picks = [n for n in range(1, 11) if n != secret(env)]
    env.step(f"\\boxed{{{picks[0]}}}")
    _, reward, terminated, truncated, info = env.step(f"\\boxed{{{picks[1]}}}")
    assert terminated and truncated and 0 < reward < 1 and info["solved"] is False


def test_reset_is_deterministic_per_seed_and_leaves_global_rng():
    state, np_state = random.getstate(), np.random.get_state()
    a, b = make("gem", task="game:Minesweeper-v0-easy"), make("gem", task="game:Minesweeper-v0-easy")
    assert a.reset(seed=5)[0] == b.reset(seed=5)[0]
    assert a.reset(seed=5)[0] != make("gem", task="game:Minesweeper-v0-easy").reset(seed=6)[0]
    other = make("gem", task="game:Minesweeper-v0-easy")
    other.reset(seed=99)
    # mines are laid at the first reveal, from GEM's global generator: episodes stepped in between
    # (other) must not change what a seed plays
    ra = a.step("\\boxed{reveal 2 2}")
    other.step("\\boxed{reveal 0 0}")
    rb = b.step("\\boxed{reveal 2 2}")
    assert ra[:4] == rb[:4]
    assert random.getstate() == state and np.all(np.random.get_state()[1] == np_state[1])
    guesses = [make("gem", task=GUESS) for _ in range(2)]
    assert guesses[0].reset(seed=123)[0] == guesses[1].reset(seed=123)[0]
    assert secret(guesses[0]) == secret(guesses[1])


def test_single_turn_reasoning_gym_id_is_shared_and_deterministic():
    a, b = make("gem", task="rg:basic_arithmetic"), make("gem", task="rg:basic_arithmetic")
    qa, qb = a.reset(seed=1)[0], b.reset(seed=2)[0]
    assert qa != qb and a.reset(seed=1)[0] == qa
    _, reward, terminated, truncated, info = a.step("\\boxed{0}")  # a's own question, after b's reset
    assert terminated and info["solved"] == (reward >= 1.0) and "feedback" not in info


def test_options_validation_one_line():
    with pytest.raises(ConfigError, match=r"unknown config key 'env\.options\.bogus'") as err:
        load_config(str(ROOT / "configs/gem.yaml"), ["env.options.bogus=1"])
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"env\.options\.task is required"):
        load_config(None, ["env.id=gem"])
    with pytest.raises(ConfigError, match="env.max_turns"):
        load_config(str(ROOT / "configs/gem.yaml"), ["env.options.make_kwargs={max_turns: 3}"])


@pytest.mark.parametrize("task, words", [
    ("game:Wordle-v0-easy", ["game:Wordle-v0-easy", "nltk.download('words')"]),
    ("game:WordSearch-v0-easy", ["game:WordSearch-v0-easy", "'words' corpus"]),
    ("math:GSM8K", ["math:GSM8K", "axon-rl/GSM-8k", "datasets.load_dataset"]),
    ("game:NoSuchGame-v0", ["not a GEM env id", GUESS]),
    ("game:GuessTheNumber-v0-eazy", ["did you mean game:GuessTheNumber-v0-easy"]),
])
def test_preflight_refuses_downloads_and_unknown_ids(task, words, tmp_path, monkeypatch):
    import socket

    nltk = pytest.importorskip("nltk")
    if any(Path(p).joinpath("corpora", "words").exists() or Path(p).joinpath("corpora", "words.zip").exists()
           for p in nltk.data.path) and "words" in " ".join(words):
        pytest.skip("NLTK's words corpus is installed here")
    empty_hf_cache(monkeypatch, tmp_path)
    monkeypatch.setattr(socket.socket, "connect", lambda *a: pytest.fail("preflight went to the network"))
    with pytest.raises(ValueError) as err:
        resolve("gem").preflight(env_cfg(task=task))
    msg = str(err.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


def empty_hf_cache(monkeypatch, tmp_path) -> Path:
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    return tmp_path / "hf"


def test_preflight_accepts_a_cached_dataset_without_loading_it(tmp_path, monkeypatch):
    import socket

    hf = empty_hf_cache(monkeypatch, tmp_path)
    monkeypatch.setattr(socket.socket, "connect", lambda *a: pytest.fail("preflight went to the network"))
    with pytest.raises(ValueError, match="axon-rl/HotpotQA"):
        resolve("gem").preflight(env_cfg(task="qa:HotpotQA"))
    (hf / "hub" / "datasets--axon-rl--HotpotQA" / "snapshots").mkdir(parents=True)
    resolve("gem").preflight(env_cfg(task="qa:HotpotQA"))  # in the hub cache: the run may load it


def test_preflight_accepts_offline_games_and_checks_make_kwargs():
    preflight = resolve("gem").preflight
    preflight(env_cfg(task=GUESS))
    preflight(env_cfg(task=GUESS, make_kwargs={"max_number": 20}))
    with pytest.raises(ValueError, match=r"^env\.options\.make_kwargs\.max_numbr is not a setting of .*max_number"):
        preflight(env_cfg(task=GUESS, make_kwargs={"max_numbr": 20}))
    with pytest.raises(ValueError, match="GEM could not build and reset it"):  # a GEM 0.1.0 bug
        preflight(env_cfg(task="game:FifteenPuzzle-v0-random"))


def test_local_word_list_is_used_without_download(tmp_path, monkeypatch):
    nltk = pytest.importorskip("nltk")
    words = tmp_path / "corpora" / "words"
    words.mkdir(parents=True)
    (words / "en-basic").write_text("cat\ndog\nsun\nhat\n")
    (words / "en").write_text("cat\ndog\nsun\nhat\n")
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)] + list(nltk.data.path))
    monkeypatch.setattr(nltk, "download", lambda *a, **k: pytest.fail("GEM went to nltk.download"))
    resolve("gem").preflight(env_cfg(task="game:Wordle-v0-easy"))
    env = make("gem", task="game:Wordle-v0-easy")
    obs, _ = env.reset(seed=4)
    assert "Wordle" in obs and "3-letter" in obs


@pytest.mark.parametrize("task, make_kwargs, n", [
    (GUESS, {}, 10), (GUESS, {"max_number": 40}, 40), ("game:Mastermind-v0-easy", {}, 30),
    ("game:Mastermind-v0-easy", {"duplicate_numbers": True}, 36), ("game:GuessTheNumber-v0-random", {}, None)])
def test_games_with_few_distinct_tasks_say_so(task, make_kwargs, n):
    """GEM's small games declare how many different games they have; configs/gem.yaml's splits (128 held-out,
    64 validation) cannot all differ among 10, and the preflight says so in one line."""
    assert resolve("gem").task_count(env_cfg(task=task, make_kwargs=make_kwargs)) == n
    from esopt.train.preflight import overlap_warning

    cfg = load_config(ROOT / "configs" / "gem.yaml")
    assert overlap_warning(cfg) == (f"[esopt] warning: env.id=gem has 10 distinct tasks under these options, fewer "
                                    "than the splits ask for (held-out 128 + validation 64 + the training tasks): they "
                                    "must share tasks, so held-out reward partly measures tasks trained on")
    assert overlap_warning(cfg, ("heldout",)) == ("[esopt] warning: env.id=gem has 10 distinct tasks under these "
                                                  "options, fewer than the splits ask for (held-out 128): they must "
                                                  "share tasks, so the same tasks count more than once")


def test_train_and_eval_cli(esopt_cache, tmp_path, capsys, monkeypatch):
    from conftest import TINY_OVERRIDES

    from esopt.cli import main

    monkeypatch.chdir(ROOT)
    args = ["train", "configs/gem.yaml", *TINY_OVERRIDES, "es.generations=2", f"run.out_dir={tmp_path}", "run.name=g"]
    assert main(args) == 0
    assert "RESULT heldout_reward_es=" in capsys.readouterr().out
    run = tmp_path / "g"
    history = json.loads((run / "history.json").read_text())
    assert len(history["generations"]) == 2
    rewards = [r for g in history["generations"] for r in g["rewards"]]
    assert len(rewards) == 8 and all(-0.1 - 1e-9 <= r <= 1.0 for r in rewards)  # GEM's reward range
    trajectory = [json.loads(line) for line in (run / "trajectories" / "eval_gen0002.jsonl").read_text().splitlines()]
    assert len(trajectory) == 3 and all("reward" in ep for ep in trajectory)
    assert main(["eval", "--run", str(run), "--out", str(tmp_path / "eval.jsonl")]) == 0
    assert "RESULT heldout_reward=" in capsys.readouterr().out
    episodes = [json.loads(line) for line in (tmp_path / "eval.jsonl").read_text().splitlines()]
    assert len(episodes) == 3 and all(ep["error"] is None and ep["turns"] for ep in episodes)
    assert all(ep["reward"] == sum(t["reward"] for t in ep["turns"]) for ep in episodes)
    assert "Guess The Number" in episodes[0]["observation0"]
    from esopt.envs.gem.offline import nltk_has

    if not nltk_has("words"):  # refused before the model loads, and before a run folder exists
        assert main(["train", "configs/gem.yaml", *TINY_OVERRIDES, f"run.out_dir={tmp_path}", "run.name=bad",
                     "env.options.task=game:Wordle-v0-easy"]) == 2
        assert "nltk.download('words')" in capsys.readouterr().err and not (tmp_path / "bad").exists()


def test_code_ids_need_a_sandbox():
    """Model-written code is untrusted: GEM's default sandbox_type=none is refused with one line."""
    from esopt.config import ConfigError, load_config
    from esopt.train.preflight import check_env

    cfg = load_config("configs/gem.yaml", ["env.options.task=code:CodeContest"])
    with pytest.raises(ConfigError, match=r"runs the model's code.*sandbox_type=bwrap") as err:
        check_env(cfg.env, cfg.tasks)
    assert "\n" not in str(err.value)
