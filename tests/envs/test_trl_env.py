"""TRL environment classes, unchanged (envs/trl/): tests/envs/trl_guess_env.py is written as TRL's docs write
one; esopt trains and evaluates it over a dataset's rows."""
import json
import re
from pathlib import Path

import pytest

from esopt.agent.rollout import AgentContext, RolloutSettings, rollout
from esopt.config import ConfigError, EnvConfig, TasksConfig, load_config
from esopt.envs.spec import resolve
from esopt.envs.trl.methods import tool_names
from esopt.models.decode import DecodeOptions
from esopt.train.preflight import check_env

ROOT = Path(__file__).resolve().parents[2]
GUESS = "trl_guess_env:GuessEnv"
ROWS = [{"prompt": f"Find the secret number {i}.", "answer": i} for i in range(10)]


def call(name, **args):
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'


class Script:
    """Replies by turn number (the count of assistant messages so far), recording each conversation."""

    def __init__(self, replies):
        self.replies, self.seen = replies, []

    def generate(self, convs, options, **kw):
        self.seen.extend(convs)
        return [self.replies[min(sum(m["role"] == "assistant" for m in c), len(self.replies) - 1)] for c in convs]


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "guess.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def cfg_of(data, env_id=GUESS, **options):
    return EnvConfig(id=env_id, options={"source": str(data), "reward": "trl_guess_env:reward", "heldout_rows": 3,
                                         **options})


def heldout(env_cfg, n=3):
    return resolve(env_cfg.id).task_source(env_cfg, TasksConfig(heldout=n, validation=0), 0).heldout()


def play(env_cfg, replies, n=1, max_turns=4):
    envs, ids, obs = heldout(env_cfg, n)
    policy = Script(replies)
    eps = rollout(policy, envs, ids, obs, AgentContext(history="full"),
                  RolloutSettings(DecodeOptions(8), max_turns=max_turns))
    return eps, policy, envs


def test_a_trl_class_is_read_as_one_and_its_public_methods_are_the_tools(data):
    spec = resolve(GUESS)
    assert spec.default_max_turns == 6 and spec.options.__name__ == "TrlOptions"
    assert tool_names(resolve("trl_guess_env:ScoredEnv").factory.args[0]) == ["guess", "hint"]
    envs, ids, obs = heldout(cfg_of(data))
    assert ids == ["7", "8", "9"] and obs == [None] * 3  # the last rows held out; each env reset when it starts
    text, info = envs[0].reset()
    assert text == "Find the secret number 7.\n\nGuess with the guess tool; hint tells you the parity."
    assert [t.name for t in envs[0].tools()] == ["guess", "hint"]
    assert envs[0].tools()[0].parameters["required"] == ["number"]


def test_scripted_policy_calls_both_tools_and_the_reward_reads_the_environment(data):
    eps, policy, envs = play(cfg_of(data), [call("hint") + call("guess", number=3), call("guess", number=7), "done"])
    ep = eps[0]
    assert ep.error is None and ep.done and ep.reward == 1.0 and ep.solved and len(ep.turns) == 3
    assert [c["name"] for c in ep.turns[0]["tool_calls"]] == ["hint", "guess"]
    assert [c["result"] for c in ep.turns[0]["tool_calls"]] == ["odd", "higher"]
    assert ep.turns[1]["tool_calls"][0]["result"] == "correct"
    assert ep.turns[2]["rewards"] == {"trl_guess_env:reward": 1.0} and "tool_calls" not in ep.turns[2]
    assert "<tools>" in policy.seen[0][0]["content"] and '"name": "guess"' in policy.seen[0][0]["content"]
    assert envs[0].completion[0]["tool_calls"][0]["function"] == {"name": "hint", "arguments": {}}


def test_the_last_allowed_turn_is_scored_even_when_it_calls_a_tool(data):
    eps, _, _ = play(cfg_of(data), [call("guess", number=1)], max_turns=2)
    ep = eps[0]
    assert ep.done and ep.error is None and len(ep.turns) == 2 and ep.reward == 0.0
    assert "tool_calls" in ep.turns[0] and ep.turns[1]["rewards"] == {"trl_guess_env:reward": 0.0}


def test_several_reward_functions_are_weighted_and_summed(data):
    cfg = cfg_of(data, reward=["trl_guess_env:reward", "trl_guess_env:guesses_penalty"], reward_weights=[2.0, 1.0])
    eps, _, _ = play(cfg, [call("guess", number=5), call("guess", number=7), "7"])
    assert eps[0].reward == pytest.approx(2.0 - 0.2)
    assert eps[0].turns[-1]["rewards"] == {"trl_guess_env:reward": 1.0, "trl_guess_env:guesses_penalty": -0.2}


def test_get_reward_alone(data):
    cfg = cfg_of(data, env_id="trl_guess_env:ScoredEnv", reward=None)
    check_env(cfg, TasksConfig(heldout=3, validation=0))
    eps, _, _ = play(cfg, ["I give up"])
    assert eps[0].reward == 0.5 and eps[0].turns[-1]["rewards"] == {"get_reward": 0.5}


def test_a_raising_reward_function_fails_only_its_episode(data):
    cfg = cfg_of(data, reward="trl_guess_env:raising")
    envs, ids, obs = heldout(cfg, 2)

    class Two(Script):
        def generate(self, convs, options, **kw):
            return ["boom" if "7." in c[-1]["content"] else "fine" for c in convs]

    eps = rollout(Two([]), envs, ids, obs, AgentContext(history="full"), RolloutSettings(DecodeOptions(8), max_turns=3))
    assert "reward function trl_guess_env:raising raised RuntimeError: cannot score this one" in eps[0].error
    assert eps[1].error is None and eps[1].reward == 0.25


def test_a_raising_reset_fails_its_episode(tmp_path):
    path = tmp_path / "g.jsonl"  # reset reads int(answer): row 0 raises, row 1 (held out) does not
    path.write_text(json.dumps({"prompt": "p", "answer": "x"}) + "\n" + json.dumps({"prompt": "q", "answer": 2}) + "\n")
    cfg = EnvConfig(id=GUESS, options={"source": str(path), "reward": "trl_guess_env:reward", "heldout_rows": 1})
    source = resolve(GUESS).task_source(cfg, TasksConfig(heldout=1, validation=0), 0)
    (bad,), _, _ = source.train(1, 0)
    (good,), _, _ = source.heldout()
    eps = rollout(Script(["1"]), [bad, good], ["0", "1"], [None, None], AgentContext(history="full"),
                  RolloutSettings(DecodeOptions(8), max_turns=3))
    assert "ValueError" in eps[0].error and eps[0].done and eps[0].turns == []
    assert eps[1].error is None and eps[1].done and eps[1].reward == 0.0


@pytest.mark.parametrize("env_id, options, message", [
    ("trl_guess_env:NoTools", {}, "NoTools has no public methods for the agent to call as tools"),
    ("trl_guess_env:Undocumented", {}, "tool method Undocumented.peek:"),
    (GUESS, {"reward": None}, "nothing rewards GuessEnv: give env.options.reward"),
    (GUESS, {"reward": "trl_guess_env:nope"}, "reward=trl_guess_env:nope: module trl_guess_env has no nope"),
    (GUESS, {"reward": ["trl_guess_env:reward"], "reward_weights": [1, 2]}, "reward_weights has 2 weight(s) for 1"),
    (GUESS, {"reward": "os.path:join"}, "cannot be called as a TRL reward function"),
])
def test_preflight_lines(data, env_id, options, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        cfg = load_config(None, [f"env.id={env_id}"] + [f"env.options.{k}={json.dumps(v)}" for k, v in
                                                         {"source": str(data), "reward": "trl_guess_env:reward",
                                                          **options}.items()])
        check_env(cfg.env, cfg.tasks)
    assert "\n" not in str(err.value)


def test_example_config_and_class():
    cfg = load_config(ROOT / "configs" / "trl-env.yaml")
    assert cfg.env.id == "examples.trl_env:CapitalsEnv" and cfg.model == "smollm2-135m-instruct"
    from examples.trl_env import CapitalsEnv, correct_answer, looked_up

    assert tool_names(CapitalsEnv) == ["lookup_capital", "list_countries"]
    env = CapitalsEnv()
    env.reset(country="Peru", answer="Lima")
    assert env.lookup_capital("peru") == "Lima" and env.list_countries("p") == ["Portugal", "Poland", "Peru"]
    assert correct_answer([[{"role": "assistant", "content": "It is lima."}]], ["Lima"]) == [1.0]
    assert looked_up([env]) == [0.1]


def test_train_and_eval_cli_with_tool_calls(esopt_cache, tmp_path, capsys, monkeypatch):
    """esopt train and esopt eval on configs/trl-env.yaml with the tiny random model; its first reply in each
    episode is replaced by a lookup call (a random model writes none), so the records carry real tool calls."""
    from conftest import TINY_OVERRIDES

    from esopt.cli import main
    from esopt.models.policy import HFPolicy

    real = HFPolicy.generate
    prompts = []

    def generate(self, conversations, options, *args, **kwargs):
        replies = real(self, conversations, options, *args, **kwargs)
        prompts.extend(c[0]["content"] for c in conversations)
        return [call("lookup_capital", country="Japan") if not any(m["role"] == "assistant" for m in c) else r
                for c, r in zip(conversations, replies)]

    monkeypatch.setattr(HFPolicy, "generate", generate)
    monkeypatch.chdir(ROOT)
    args = ["train", "configs/trl-env.yaml", *TINY_OVERRIDES, "es.generations=1", "es.population=2",
            "es.episodes_per_member=2", "tasks.heldout=2", f"run.out_dir={tmp_path}", "run.name=trl"]
    assert main(args) == 0
    assert "RESULT heldout_reward_es=" in capsys.readouterr().out
    trained = [json.loads(line) for line in (tmp_path / "trl" / "trajectories" / "gen0000.jsonl").open()]
    assert trained and all(ep["turns"][0]["tool_calls"][0]["name"] == "lookup_capital" for ep in trained)
    assert any("<tools>" in p and "lookup_capital" in p and "list_countries" in p for p in prompts)
    assert main(["eval", "--run", str(tmp_path / "trl"), "--out", str(tmp_path / "eval.jsonl")]) == 0
    assert "RESULT heldout_reward=" in capsys.readouterr().out
    episodes = [json.loads(line) for line in (tmp_path / "eval.jsonl").read_text().splitlines()]
    assert [ep["task"] for ep in episodes] == ["18", "19"]
    for ep in episodes:
        assert ep["error"] is None and ep["turns"][0]["tool_calls"][0]["result"] == "Tokyo"
        assert ep["turns"][-1]["rewards"]["examples.trl_env:looked_up"] == 0.1
    assert episodes[0]["reward"] >= 0.1  # row 18 asks for Japan's capital
