"""env.id=reasoning-gym: the env, its options and preflight, its task splits, and a CLI run."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("reasoning_gym")

from esopt.config import ConfigError, load_config  # noqa: E402
from esopt.envs.base import TextEnv  # noqa: E402
from esopt.envs.reasoning_gym.build import Item  # noqa: E402
from esopt.envs.reasoning_gym.env import ReasoningGymEnv, extract_answer  # noqa: E402
from esopt.envs.spec import resolve  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def cfg(*overrides):
    return load_config(None, ["env.id=reasoning-gym", "env.options.dataset=leg_counting", *overrides])


def source(*overrides, run_seed=0):
    c = cfg(*overrides)
    return resolve("reasoning-gym").task_source(c.env, c.tasks, run_seed)


def questions(envs):
    return [e.item.entry["question"] for e in envs]


def right(env):
    return f"Let me count.\n<answer>{env.item.entry['answer']}</answer>"


# -- the env ---------------------------------------------------------------------------------------

def test_protocol_and_spec():
    spec = resolve("reasoning-gym")
    assert spec.summary_keys == ("dataset", "level") and spec.description
    env = ReasoningGymEnv("leg_counting")
    assert isinstance(env, TextEnv) and env.max_turns == 1
    obs, info = env.reset(seed=5)
    assert isinstance(obs, str) and "legs" in obs and obs.endswith("between <answer> and </answer>.")
    assert info["task"] == "5+0" and info["dataset"] == "leg_counting"
    out = env.step("<answer>-1</answer>")
    assert isinstance(out, tuple) and len(out) == 5 and isinstance(out[0], str) and isinstance(out[-1], dict)
    assert out[2] is True and env.render_text() == out[0]
    with pytest.raises(RuntimeError):
        env.step("again")


def test_reset_is_deterministic_per_seed():
    a, b = ReasoningGymEnv("basic_arithmetic"), ReasoningGymEnv("basic_arithmetic")
    assert a.reset(seed=11)[0] == b.reset(seed=11)[0] != b.reset(seed=12)[0]
    assert a.reset(seed=11)[0] == a.reset(seed=11)[0]


def test_single_attempt_scoring():
    env = ReasoningGymEnv("leg_counting")
    env.reset(seed=3)
    obs, reward, terminated, truncated, info = env.step(right(env))
    assert (reward, terminated, truncated, info["solved"]) == (1.0, True, False, True)
    assert info["action"] == str(env.item.entry["answer"]) and "feedback" not in info
    env.reset(seed=3)
    obs, reward, terminated, _, info = env.step("<answer>99999</answer>")
    assert (reward, terminated, info["solved"]) == (0.0, True, False) and "feedback" not in info
    assert info["record"] == {"score": 0.0, "expected": str(env.item.entry["answer"])}


def test_attempts_feedback_then_success():
    env = ReasoningGymEnv("leg_counting", attempts=3)
    first, _ = env.reset(seed=4)
    assert env.max_turns == 3
    obs, reward, terminated, _, info = env.step("<answer>99999</answer>")
    assert (reward, terminated, info["solved"]) == (0.0, False, False)
    assert "'99999' is not correct (score 0.00). 2 attempts left." in info["feedback"]
    assert env.question in obs and info["feedback"] in obs  # self-contained: agent.history=window 0 works
    obs, reward, terminated, _, info = env.step("no idea")
    assert not terminated and "1 attempt left" in info["feedback"]
    obs, reward, terminated, _, info = env.step(right(env))
    assert (reward, terminated, info["solved"]) == (1.0, True, True) and obs == "Correct."


def test_attempts_used_up_and_max_turns_caps_them():
    env = ReasoningGymEnv("leg_counting", attempts=2)
    env.reset(seed=4)
    assert env.step("1")[2] is False
    obs, _, terminated, _, info = env.step("2")
    assert terminated and "feedback" not in info and "no attempts left" in obs
    capped = ReasoningGymEnv("leg_counting", attempts=5, max_turns=2)
    assert capped.max_turns == 2


class Scorer:
    def __init__(self, scores):
        self.scores = list(scores)

    def score_answer(self, answer, entry):
        if answer == "boom":
            raise ValueError("scorer choked")
        return self.scores.pop(0)


def test_reward_is_the_best_score_summed_over_steps():
    item = Item({"question": "q?", "answer": "a"}, Scorer([0.5, 0.2, 0.7, 1.0]), "t")
    env = ReasoningGymEnv("leg_counting", attempts=4, item=item)
    env.reset()
    rewards = [env.step(f"<answer>{k}</answer>")[1] for k in range(3)]
    assert rewards == pytest.approx([0.5, 0.0, 0.2]) and sum(rewards) == pytest.approx(0.7)
    out = env.step("x")
    assert out[1] == pytest.approx(0.3) and out[2] and out[4]["solved"]
    env = ReasoningGymEnv("leg_counting", item=item)
    env.reset()
    assert env.step("<answer>boom</answer>")[1] == 0.0  # a scorer that raises scores 0


@pytest.mark.parametrize("reply,answer", [
    ("<answer>42</answer>", "42"),
    ("think <answer> 1 </answer> then <answer>2</answer>", "2"),
    ("work...\n<answer>17", "17"),  # cut off by the token limit
    ("so:\n\nAnswer: 8\n", "8"),
    ("Final answer: dog", "dog"),
    ("first line\n  last line  ", "last line"),
    ("answer", "answer"),
    ("   \n", None),
])
def test_extract_answer(reply, answer):
    assert extract_answer(reply) == answer


def test_line_answer_format():
    env = ReasoningGymEnv("leg_counting", answer_format="line")
    obs, _ = env.reset(seed=1)
    assert obs.endswith("Reply with the final answer only.")
    assert env.step(f"{env.item.entry['answer']}\n")[1] == 1.0


# -- options and preflight ---------------------------------------------------------------------------

@pytest.mark.parametrize("override,needle", [
    ("env.options.datset=x", "unknown config key 'env.options.datset'; allowed here: dataset, config, level"),
    ("env.options.attempts=0", "bad value for 'env.options.attempts': 0"),
    ("env.options.level=-1", "bad value for 'env.options.level': -1"),
    ("env.options.answer_format=json", "bad value for 'env.options.answer_format'"),
    ("env.options.config.seed=3", "env.options.config.seed is set by esopt's task splits"),
])
def test_options_errors_are_one_line(override, needle):
    with pytest.raises(ConfigError) as err:
        cfg(override)
    assert needle in str(err.value) and len(str(err.value).splitlines()) == 1


def test_dataset_is_required():
    with pytest.raises(ConfigError, match=r"env.options.dataset is required"):
        load_config(None, ["env.id=reasoning-gym"])


def test_spec_module_does_not_import_reasoning_gym():
    code = ("import sys; from esopt.config import load_config; "
            "load_config(None, ['env.id=reasoning-gym', 'env.options.dataset=leg_counting']); "
            "assert 'reasoning_gym' not in sys.modules, 'imported'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("overrides,needle", [
    (["env.options.dataset=leg_countin"], "unknown reasoning-gym dataset env.options.dataset='leg_countin'; "
                                          "close names: leg_counting"),
    (["env.options.config.max_legs=3"], "unknown config key 'env.options.config.max_legs' for reasoning-gym "
                                        "dataset leg_counting; allowed here: min_animals, max_animals"),
    (["env.options.config.min_animals=0"], "bad env.options.config for reasoning-gym dataset leg_counting: "
                                           "min_animals must be positive"),
    (["env.options.config.min_animals=5", "env.options.level=0"], "leg_counting at level 0: max_animals must be"),
    (["env.options.level=36"], "env.options.level=36 is out of range: leg_counting's curriculum has levels 0..35"),
    (["env.options.dataset=gsm_symbolic", "env.options.level=1"], "gsm_symbolic has no curriculum"),
    (["env.options.level=0", "tasks.heldout=256", "tasks.validation=64"], "leg_counting repeats its questions"),
])
def test_preflight_refuses_with_one_line(overrides, needle):
    c = cfg(*overrides)
    with pytest.raises(ValueError) as err:
        resolve("reasoning-gym").check(c.env, c.tasks)
    assert needle in str(err.value) and len(str(err.value).splitlines()) == 1


def test_hash_dependent_datasets_need_a_fixed_hash_seed(monkeypatch):
    from esopt.envs.reasoning_gym.build import check_hashing

    check_hashing("word_ladder", {"PYTHONHASHSEED": "0"})
    check_hashing("leg_counting", {})
    with pytest.raises(ValueError, match="run with PYTHONHASHSEED=0"):
        check_hashing("word_ladder", {"PYTHONHASHSEED": "random"})
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    c = cfg("env.options.dataset=ransom_note")
    with pytest.raises(ValueError, match="reasoning-gym dataset ransom_note draws its questions in an order"):
        resolve("reasoning-gym").check(c.env)


def test_preflight_passes_and_level_shapes_the_config():
    c = cfg("env.options.level=1", "tasks.validation=16")
    resolve("reasoning-gym").check(c.env, c.tasks)
    from esopt.envs.reasoning_gym.build import config_kwargs

    assert config_kwargs("leg_counting", {}, 1)["max_animals"] == 2
    assert config_kwargs("leg_counting", {"max_animals": 1}, 1)["max_animals"] == 1  # config over level


# -- task splits -------------------------------------------------------------------------------------

def test_splits_are_deterministic():
    a, b = source("tasks.validation=8"), source("tasks.validation=8")
    for split in ("heldout", "validation"):
        (_, ids_a, obs_a), (_, ids_b, obs_b) = getattr(a, split)(), getattr(b, split)()
        assert ids_a == ids_b and obs_a == obs_b
    assert a.train(6, 2)[1:] == b.train(6, 2)[1:]
    assert a.train(6, 2)[1] != a.train(6, 3)[1]  # fresh each generation
    other = source("tasks.validation=8", run_seed=1)
    assert other.train(6, 2)[1] != a.train(6, 2)[1] and other.heldout()[1] == a.heldout()[1]
    still = source("tasks.fresh_each_generation=false")
    assert still.train(6, 2)[1] == still.train(6, 5)[1]


def test_splits_are_disjoint_even_with_few_distinct_questions():
    for level in ("env.options.level=0", "env.options.level=2"):
        s = source(level, "tasks.heldout=32", "tasks.validation=16")
        held, val = s.heldout()[0], s.validation()[0]
        train = [e for g in range(3) for e in s.train(16, g)[0]]
        ids = [set(s.heldout()[1]), set(s.validation()[1]), {e.item.task_id for e in train}]
        assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
        assert not set(questions(train)) & (set(questions(held)) | set(questions(val)))
        assert not set(questions(val)) & set(questions(held))


def test_split_sizes_repeats_and_groups():
    s = source("tasks.heldout=5", "tasks.heldout_repeats=2", "tasks.validation=0")
    envs, ids, obs = s.heldout()
    assert len(envs) == 10 and ids[:5] == ids[5:] and all(o == e.render_text() for o, e in zip(obs, envs))
    assert s.validation() == ([], [], [])
    envs, ids, obs = s.train(3, 0, repeat=2)
    assert len(envs) == 6 and ids[0] == ids[1] != ids[2] and envs[0] is not envs[1]
    assert right(envs[0]) and envs[0].step(right(envs[0]))[1] == 1.0


def test_env_max_turns_reaches_the_envs():
    s = source("env.options.attempts=3", "env.max_turns=2", "tasks.heldout=2")
    assert [e.max_turns for e in s.heldout()[0]] == [2, 2]


# -- through the CLI ---------------------------------------------------------------------------------

def test_train_then_eval_cli(esopt_cache, tmp_path, capsys):
    from conftest import TINY_OVERRIDES

    from esopt.cli import main

    args = ["train", "configs/reasoning-gym.yaml", *TINY_OVERRIDES, "es.generations=2", "env.options.attempts=2",
            f"run.out_dir={tmp_path}", "run.name=rg"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "RESULT heldout_reward_base=" in out and out.strip().splitlines()[-1].startswith("RESULT heldout_reward_es=")
    run = tmp_path / "rg"
    assert json.loads((run / "history.json").read_text())["generations"][1]["generation"] == 1
    assert main(["eval", "--run", str(run), "--out", str(tmp_path / "eval.jsonl")]) == 0
    assert "RESULT heldout_reward=" in capsys.readouterr().out
    episodes = [json.loads(line) for line in (tmp_path / "eval.jsonl").read_text().splitlines()]
    assert len(episodes) == 3 and all(1 <= len(ep["turns"]) <= 2 for ep in episodes)
    assert all("legs" in ep["observation0"] and 0.0 <= ep["reward"] <= 1.0 for ep in episodes)


def test_heldout_skip_gives_the_next_questions_and_keeps_them_out_of_training():
    first = source("tasks.heldout=12", "tasks.validation=8")
    fresh = source("tasks.heldout=4", "tasks.heldout_skip=8", "tasks.validation=8")
    assert fresh.heldout()[1] == first.heldout()[1][8:] and questions(fresh.heldout()[0]) == questions(first.heldout()[0])[8:]
    assert fresh.validation()[1] == first.validation()[1]  # validation clears all 12 either way
    every = set(questions(first.heldout()[0]))
    train = [e for g in range(3) for e in fresh.train(16, g)[0]]
    assert not set(questions(train)) & every and not set(questions(fresh.validation()[0])) & every
