"""env.id=dataset: prompts from a file or a datasets dataset, scored by a reward function."""
import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from esopt.agent.rollout import AgentContext, RolloutSettings, rollout
from esopt.config import ConfigError, EnvConfig, TasksConfig, load_config
from esopt.envs.dataset.tasks import DatasetTasks
from esopt.models.decode import DecodeOptions
from esopt.train.preflight import check_env

ROOT = Path(__file__).resolve().parents[2]
REWARD = "esopt.envs.dataset.rewards:exact_answer"
ROWS = [{"prompt": f"What is {i} + 1?", "answer": i + 1} for i in range(20)]


class FakePolicy:
    """Replies reply(last user message) to each conversation."""

    def __init__(self, reply):
        self.reply, self.seen = reply, []

    def generate(self, convs, options, **kw):
        self.seen.append([c[-1]["content"] for c in convs])
        return [self.reply(c[-1]["content"]) for c in convs]


def right(prompt: str) -> str:  # answers "What is i + 1?" correctly
    return str(int(prompt.split("What is ")[-1].split(" +")[0]) + 1)


def env_cfg(source, **options):
    return EnvConfig(id="dataset", options={"source": str(source), "reward": REWARD, **options})


def tasks(env, heldout=2, validation=0, fresh=True, seed=0):
    return DatasetTasks(env, TasksConfig(heldout=heldout, validation=validation, fresh_each_generation=fresh), seed)


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_sources(tmp_path, rows) -> dict:
    """The same rows as JSONL, JSON, CSV, Parquet and a save_to_disk folder."""
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = {"jsonl": write_jsonl(tmp_path / "d.jsonl", rows), "json": tmp_path / "d.json", "csv": tmp_path / "d.csv",
           "parquet": tmp_path / "d.parquet", "hf": tmp_path / "hf"}
    out["json"].write_text(json.dumps(rows))
    with out["csv"].open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    pq.write_table(pa.Table.from_pylist(rows), out["parquet"])
    datasets.Dataset.from_list(rows).save_to_disk(str(out["hf"]))
    out["hf"] = f"hf:{out['hf']}"
    return out


def test_every_source_kind_gives_the_same_tasks(tmp_path):
    for kind, source in write_sources(tmp_path, ROWS).items():
        src = tasks(env_cfg(source, heldout_rows=4, validation_rows=3), heldout=4, validation=3)
        envs, ids, obs = src.heldout()
        assert ids == ["16", "17", "18", "19"] and obs[0] == "What is 16 + 1?", kind
        assert src.validation()[1] == ["13", "14", "15"], kind
        assert envs[0].step("17")[1] == 1.0, kind  # CSV's answer is the text "17": still equal
        assert envs[1].step("no idea")[1:3] == (0.0, True), kind


def test_hf_dataset_dict_splits_and_ids(tmp_path):
    import datasets

    dd = datasets.DatasetDict({"train": datasets.Dataset.from_list(ROWS[:10]),
                               "test": datasets.Dataset.from_list(ROWS[10:14]),
                               "validation": datasets.Dataset.from_list(ROWS[14:])})
    dd.save_to_disk(str(tmp_path / "dd"))
    src = tasks(env_cfg(f"hf:{tmp_path / 'dd'}"), heldout=4, validation=2)
    envs, ids, obs = src.heldout()
    assert ids == ["test/0", "test/1", "test/2", "test/3"] and obs[0] == "What is 10 + 1?"
    assert src.validation()[1] == ["validation/0", "validation/1"]
    assert set(src.train(10, 0)[1]) == {f"train/{i}" for i in range(10)}
    with pytest.raises(ValueError, match="DatasetDict"):
        check_env(env_cfg(f"hf:{tmp_path / 'dd'}", split_column="split"))


def test_split_column_disjoint_in_file_order(tmp_path):
    names = ["tr", "dev", "eval"]
    rows = [dict(r, id=f"q{i}", part=names[i % 3]) for i, r in enumerate(ROWS)]
    cfg = env_cfg(write_jsonl(tmp_path / "s.jsonl", rows), split_column="part",
                  split_values={"train": "tr", "validation": "dev", "heldout": "eval"})
    src = tasks(cfg, heldout=3, validation=2)
    held, val = src.heldout()[1], src.validation()[1]
    assert held == ["q2", "q5", "q8"] and val == ["q1", "q4"]  # the id column names the tasks
    train = {t for g in range(5) for t in src.train(6, g)[1]}
    assert train <= {f"q{i}" for i in range(0, 20, 3)} and not train & (set(held) | set(val))
    with pytest.raises(ConfigError, match="tasks.heldout=9 but the heldout split .* has 6 row"):
        tasks(cfg, heldout=9)
    with pytest.raises(ConfigError, match="split_column=part: no row .* has the value 'train'"):
        check_env(env_cfg(tmp_path / "s.jsonl", split_column="part"))


def test_row_splits_and_deterministic_training_draws(tmp_path):
    cfg = env_cfg(write_jsonl(tmp_path / "r.jsonl", ROWS), heldout_rows=0.25, validation_rows=3)
    src = tasks(cfg, heldout=5, validation=3)
    assert src.heldout()[1] == ["15", "16", "17", "18", "19"] and src.validation()[1] == ["12", "13", "14"]
    a, b = src.train(8, 0)[1], src.train(8, 1)[1]
    assert a == tasks(cfg, heldout=5)._envs(src.draw(8, 0))[1] and a != b  # by (seed, generation)
    assert len(set(a)) == 8 and {int(t) for t in a + b} <= set(range(12))
    assert tasks(cfg, heldout=5, seed=1).train(8, 0)[1] != a
    fixed = tasks(cfg, heldout=5, fresh=False)
    assert fixed.train(8, 0)[1] == fixed.train(8, 3)[1]
    many = src.train(30, 0)[1]  # more than the 12 training rows: each once before any repeats
    assert sorted(int(t) for t in many[:12]) == list(range(12)) and len(many) == 30
    envs, ids, obs = src.train(2, 0, repeat=3)
    assert ids[:3] == [ids[0]] * 3 and len(envs) == 6 and envs[0] is not envs[1]
    assert src.heldout()[1] == tasks(cfg, heldout=5, seed=7).heldout()[1]  # the same for every run seed


def test_float_reward_through_the_rollout(tmp_path):
    src = tasks(env_cfg(write_jsonl(tmp_path / "r.jsonl", ROWS)), heldout=2)
    envs, ids, obs = src.heldout()
    eps = rollout(FakePolicy(right), envs, ids, obs, AgentContext(), RolloutSettings(DecodeOptions(4), max_turns=(None, 1)))
    assert [(ep.reward, ep.solved, len(ep.turns), ep.error) for ep in eps] == [(1.0, True, 1, None)] * 2
    envs, ids, obs = src.heldout()
    eps = rollout(FakePolicy(lambda p: "7"), envs, ids, obs, AgentContext(), RolloutSettings(DecodeOptions(4)))
    assert [ep.reward for ep in eps] == [0.0, 0.0] and all(ep.done and not ep.truncated for ep in eps)


def test_feedback_gives_another_attempt(tmp_path):
    reward = "esopt.envs.dataset.rewards:exact_answer_retry"
    replies = iter(["5", "six", "7"])
    policy = FakePolicy(lambda p: next(replies))
    src = tasks(env_cfg(write_jsonl(tmp_path / "r.jsonl", ROWS), reward=reward, turns=3), heldout=1)
    envs, ids, obs = src.heldout()  # task 18 (the held-out rows: 18 and 19): "What is 18 + 1?"
    ep = rollout(policy, envs, ids, obs, AgentContext(history="full"), RolloutSettings(DecodeOptions(4), max_turns=(None, 1)))[0]
    assert len(ep.turns) == 3 and ep.turns[0]["feedback"].startswith("Your answer (5) is wrong")
    assert policy.seen[1] == [ep.turns[0]["feedback"]] and "What is 18 + 1?" in policy.seen[1][0]
    assert ep.reward == 0.0 and ep.truncated and not ep.solved  # three wrong attempts, turns=3
    replies = iter(["1", "19"])
    envs, ids, obs = src.heldout()
    ep = rollout(FakePolicy(lambda p: next(replies)), envs, ids, obs, AgentContext(), RolloutSettings(DecodeOptions(4)))[0]
    assert len(ep.turns) == 2 and ep.reward == 1.0 and ep.solved and not ep.truncated
    assert [t["score"] for t in ep.turns] == [0.0, 1.0]


REWARDS = """
def partial(completion, answer, **_):  # dict form: the episode's reward is its last reply's
    score = 0.5 if completion == "half" else float(completion == str(answer))
    return {"reward": score, "feedback": None if score == 1.0 else "closer", "done": completion == "stop"}


def silent(completion, **_):  # forgot its return
    completion.strip()


def boom(completion, **_):
    if completion == "crash":
        raise ZeroDivisionError("bad row")
    return "not a number"


def trl_reward(completions, answer, **kwargs):  # TRL's form: lists in, a list out
    assert kwargs["prompts"] == ["What is 18 + 1?"] and "prompt" not in kwargs
    return [float(c.strip() == str(a)) for c, a in zip(completions, answer)]
"""


def test_dict_form_raising_and_bad_returns_fail_the_episode_only(tmp_path):
    mod = tmp_path / "myrewards.py"
    mod.write_text(REWARDS)
    data = write_jsonl(tmp_path / "r.jsonl", ROWS)
    src = tasks(env_cfg(data, reward=f"{mod}:partial", turns=4), heldout=2)  # a file.py:function reward
    replies = iter(["half", "half", "19", "stop"])
    envs, ids, obs = src.heldout()
    eps = rollout(FakePolicy(lambda p: next(replies)), envs, ids, obs, AgentContext(), RolloutSettings(DecodeOptions(4)))
    assert [t["score"] for t in eps[0].turns] == [0.5, 1.0] and eps[0].reward == 1.0 and eps[0].solved
    assert [t["score"] for t in eps[1].turns] == [0.5, 0.0] and eps[1].reward == 0.0  # done: no more tries
    assert not any(ep.truncated or ep.error for ep in eps)
    src = tasks(env_cfg(data, reward=f"{mod}:boom"), heldout=2)
    envs, ids, obs = src.heldout()
    eps = rollout(FakePolicy(lambda p: "crash" if "18" in p else "ok"), envs, ids, obs, AgentContext(),
                  RolloutSettings(DecodeOptions(4), failure_reward=-1.0))
    assert eps[0].reward == -1.0 and "raised ZeroDivisionError: bad row (task 18)" in eps[0].error
    assert "returned 'not a number'" in eps[1].error and eps[1].reward == -1.0


def test_trl_style_reward_function(tmp_path):
    mod = tmp_path / "trlrewards.py"
    mod.write_text(REWARDS)
    src = tasks(env_cfg(write_jsonl(tmp_path / "r.jsonl", ROWS), reward=f"{mod}:trl_reward"), heldout=1)
    envs, ids, obs = src.heldout()
    assert envs[0].step(" 19 ")[1] == 1.0
    with pytest.raises(RuntimeError, match="is over"):  # turns=1: one reply per episode
        envs[0].step("19")
    envs[0].reset()
    assert envs[0].step("x")[1] == 0.0


def test_template_and_chat_prompts(tmp_path):
    rows = [{"q": f"{i} + 1", "answer": i + 1, "chat": [{"role": "user", "content": f"c{i}"}]} for i in range(6)]
    data = write_jsonl(tmp_path / "t.jsonl", rows)
    src = tasks(env_cfg(data, template="Compute {q}. {{braces}}", heldout_rows=1), heldout=1)
    assert src.heldout()[2] == ["Compute 5 + 1. {braces}"]
    assert tasks(env_cfg(data, prompt="chat", heldout_rows=1), heldout=1).heldout()[2] == ["c5"]
    rows[0]["chat"].insert(0, {"role": "system", "content": "s"})
    write_jsonl(data, rows)
    with pytest.raises(ConfigError, match="prompt=chat: row 0 holds a chat of 2 message"):
        check_env(env_cfg(data, prompt="chat"))
    with pytest.raises(ConfigError, match=r"template names \{nope\}"):
        check_env(env_cfg(data, template="{nope}"))


@pytest.mark.parametrize("options, message", [
    ({"source": "x.jsonl", "reward": REWARD, "shuffle": True}, "unknown config key 'env.options.shuffle'"),
    ({"reward": REWARD}, "env.options.source is required"),
    ({"source": "x.jsonl", "reward": REWARD, "heldout_rows": 1.5}, "env.options.heldout_rows"),
    ({"source": "x.jsonl", "reward": REWARD, "turns": 0}, "env.options.turns"),
    ({"source": "x.jsonl", "reward": REWARD, "split_column": "s", "validation_rows": 5}, "set one"),
    ({"source": "x.jsonl", "reward": REWARD, "template": "no fields"}, "env.options.template"),
])
def test_options_are_one_liners(options, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, ["env.id=dataset"] + [f"env.options.{k}={v}" for k, v in options.items()])
    assert message in str(err.value) and "\n" not in str(err.value)


def test_preflight_names_the_key(tmp_path):
    data = write_jsonl(tmp_path / "r.jsonl", ROWS)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a"}\n{oops\n')
    (tmp_path / "empty.csv").write_text("prompt,answer\n")
    cases = [
        (env_cfg(tmp_path / "missing.jsonl"), "env.options.source=.*missing.jsonl: no such file"),
        (env_cfg(tmp_path / "data.txt"), "unknown file type '.txt'"),
        (env_cfg(bad), "bad.jsonl: line 2 is not valid JSON"),
        (env_cfg(tmp_path / "empty.csv"), "holds no rows"),
        (env_cfg(data, prompt="question"), "env.options.prompt=question: row 0 .* has no such column"),
        (env_cfg(data, reward="no_such_module_x:f"), "env.options.reward=no_such_module_x:f: cannot import"),
        (env_cfg(data, reward="esopt.envs.dataset.rewards:nothing"), "has no nothing"),
        (env_cfg(data, reward="esopt.envs.dataset.rewards:_NUMBER"), "not a function"),
        (env_cfg(data, reward="esopt.envs.dataset.rewards"), "write package.module:function"),
        (env_cfg(data, reward="json:dumps"), None),  # callable with (completion, **columns): accepted
        (env_cfg(data, reward="os.path:join"), "cannot be called as join"),
        (env_cfg(data, heldout_rows=20), "leave 0 training row"),
        (env_cfg(data, id_column="answer"), None),
        (env_cfg(write_jsonl(tmp_path / "dup.jsonl", [{"id": 1, "prompt": "a", "answer": 1}] * 3)),
         "id '1' appears twice"),
    ]
    for cfg, message in cases:
        if message is None:
            check_env(cfg)
            continue
        with pytest.raises(ConfigError, match=message) as err:
            check_env(cfg)
        assert "\n" not in str(err.value)


def test_example_data_reward_and_config():
    import random

    rng, rows = random.Random(0), []  # how configs/data/arith.jsonl was made
    for _ in range(300):
        a, b = rng.randint(1, 49), rng.randint(1, 49)
        rows.append({"prompt": f"What is {a} + {b}? Reply with the number only.", "answer": a + b})
    path = ROOT / "configs" / "data" / "arith.jsonl"
    assert path.read_text() == "".join(json.dumps(r) + "\n" for r in rows) and path.stat().st_size < 30_000
    from esopt.envs.dataset.rewards import exact_answer, last_number

    assert exact_answer("The sum is 1,234.", answer="1234") == 1.0 and exact_answer("12 or 13", answer=12) == 0.0
    assert last_number("no digits") is None and exact_answer("", answer=3) == 0.0
    cfg = load_config(ROOT / "configs" / "dataset.yaml")
    assert cfg.env.options.reward == REWARD
    out = subprocess.run([sys.executable, "-c", "import sys, esopt.envs.dataset.spec, esopt.envs.dataset.rewards; "
                          "print([m for m in ('pandas', 'pyarrow', 'datasets', 'torch') if m in sys.modules])"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"  # the spec imports nothing heavy


def test_make_one_row():
    from esopt.envs import make

    env = make("dataset", source=str(ROOT / "configs/data/arith.jsonl"), reward=REWARD, row=1)
    obs, _ = env.reset()
    assert obs == "What is 27 + 3? Reply with the number only." and env.step("30")[1:3] == (1.0, True)


def test_train_and_eval_cli(esopt_cache, tmp_path, capsys, monkeypatch):
    from conftest import TINY_OVERRIDES

    from esopt.cli import main

    monkeypatch.chdir(ROOT)  # the config's source is relative to the working directory
    args = ["train", "configs/dataset.yaml", *TINY_OVERRIDES, "es.generations=2", f"run.out_dir={tmp_path}",
            "run.name=ds"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "RESULT heldout_reward_es=" in out
    run = tmp_path / "ds"
    history = json.loads((run / "history.json").read_text())
    assert len(history["generations"]) == 2
    assert main(["eval", "--run", str(run), "--out", str(tmp_path / "eval.jsonl")]) == 0
    assert "RESULT heldout_reward=" in capsys.readouterr().out
    episodes = [json.loads(line) for line in (tmp_path / "eval.jsonl").read_text().splitlines()]
    assert [ep["task"] for ep in episodes] == ["250", "251", "252"]  # the first 3 held-out rows
    assert main(["train", "configs/dataset.yaml", *TINY_OVERRIDES, f"run.out_dir={tmp_path}", "run.name=bad",
                 "tasks.heldout=51"]) == 2
    assert "tasks.heldout=51 but the heldout split" in capsys.readouterr().err


def test_a_reward_function_that_returns_none_is_one_line_before_any_run_folder(esopt_cache, tmp_path, capsys,
                                                                                monkeypatch):
    """The preflight plays one row with an empty reply: a reward function that returns None is named in one
    line (what it returned, what a reward is), and nothing is written."""
    from conftest import TINY_OVERRIDES

    from esopt.cli import main

    mod = tmp_path / "myrewards.py"
    mod.write_text(REWARDS)
    monkeypatch.chdir(ROOT)
    out = tmp_path / "runs"
    assert main(["train", "configs/dataset.yaml", *TINY_OVERRIDES, f"env.options.reward={mod}:silent",
                 f"run.out_dir={out}", "run.name=bad"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("esopt: error: env.id=dataset (train split): step('')"), err
    assert "returned None" in err and "Traceback" not in err, err
    assert not out.exists()


def test_heldout_skip_takes_the_rows_after_the_first(tmp_path):
    cfg = env_cfg(write_jsonl(tmp_path / "r.jsonl", ROWS), heldout_rows=0.25, validation_rows=3)
    skipped = DatasetTasks(cfg, TasksConfig(heldout=2, heldout_skip=3), 0)
    assert skipped.heldout()[1] == ["18", "19"]
    with pytest.raises(ConfigError, match=r"tasks.heldout_skip \+ tasks.heldout=6 but the heldout split .* has 5"):
        DatasetTasks(cfg, TasksConfig(heldout=2, heldout_skip=4), 0)
