"""env.id=code-tool: its tasks (seeds, disjoint splits), boxed answers, the python tool through the sandbox
(right code, code that raises, loops, or reaches for the network or files outside), and a scripted rollout
that calls the tool and answers. No model."""
import json

import pytest

from esopt.agent.rollout import AgentContext, RolloutSettings, rollout
from esopt.sandbox.parent import protections
from esopt.envs.codetool.answer import as_int, boxed, correct
from esopt.envs.codetool.env import CodeToolEnv
from esopt.envs.codetool.problems import problem
from esopt.envs.spec import OptionsError, SeedTasks, resolve
from esopt.models.decode import DecodeOptions


@pytest.fixture(scope="module")
def sandbox():
    found = protections()
    if not found.get("available"):
        pytest.skip(f"no sandbox here: {found.get('refusal')}")


def test_problems_are_seeded_and_sized():
    assert problem(7) == problem(7) and problem(7) != problem(8)
    q, a = problem(3, "product", digits=3, terms=2)
    x, y = (int(t) for t in q.removeprefix("Compute ").rstrip(".").split(" * "))
    assert 100 <= x <= 999 and 100 <= y <= 999 and a == x * y
    q, a = problem(3, "sum", digits=4, terms=5)
    nums = [int(t) for t in q.removeprefix("Compute ").rstrip(".").split(" + ")]
    assert len(nums) == 5 and all(1000 <= n <= 9999 for n in nums) and a == sum(nums)
    with pytest.raises(ValueError, match="family must be one of"):
        problem(1, "power")


def test_splits_are_disjoint_seeds():
    from esopt.config import load_config

    cfg = load_config("configs/code-tool.yaml", ["tasks.validation=8", "tasks.heldout=8"])
    src = SeedTasks(cfg.env, cfg.tasks, 0)
    train, val, held = (set(src.seeds(s, 8)) for s in ("train", "validation", "heldout"))
    assert not (train & val or train & held or val & held)
    assert resolve("code-tool").task_count(cfg.env) == 900 ** 2


def test_options_are_checked():
    spec = resolve("code-tool")
    assert spec.validate_options({"family": "sum", "digits": 4}).digits == 4
    with pytest.raises(OptionsError, match="env.options.family"):
        spec.validate_options({"family": "power"})
    with pytest.raises(OptionsError, match="unknown config key 'env.options.level'"):
        spec.validate_options({"level": 2})


def test_boxed_answers():
    assert boxed(r"so \boxed{12} no, \boxed{ 1,234 }") == "1,234" and boxed("1234") is None
    assert as_int("1,234") == 1234 and as_int("1 234") == 1234 and as_int("-56.0") == -56 and as_int("$7$") == 7
    assert as_int("12*3") is None and as_int("abc") is None and as_int(None) is None
    assert correct(r"\boxed{94170}", 94170) and not correct("94170", 94170) and not correct(r"\boxed{9417}", 94170)


def test_step_rewards_the_final_answer_only():
    env = CodeToolEnv(family="sum", digits=3, terms=2)
    env.reset(seed=1)
    obs, reward, done, trunc, info = env.step(rf"\boxed{{{env.answer}}}")
    assert (reward, done, trunc, info["solved"], info["valid_tool_call"]) == (1.0, True, False, True, False)
    assert info["record"] == {"python_calls": 0, "python_ok": 0, "answer": env.answer}
    env.reset(seed=1)
    assert env.step(str(env.answer))[1] == 0.0  # not boxed
    assert CodeToolEnv(tool=False).tools() == []


def test_python_tool_in_the_sandbox(sandbox):
    env = CodeToolEnv(cpu_s=1, wall_s=4)
    env.reset(seed=0)
    assert env.python("print(215 * 438)") == "94170\n"
    assert env.python("x = 6\nx * 7") == "42\n"  # a last bare expression is shown
    assert env.python("x = 1") == "(no output: print the value you want to see)"
    raised = env.python("print('before')\n1 / 0")
    assert raised == "before\nerror: ZeroDivisionError: division by zero"
    assert env.python("print(1 +") == "error: SyntaxError: '(' was never closed (line 1)"
    assert env.python("while True:\n    pass") == "error: cpu limit (1 s)"
    assert env.python("import socket\nsocket.create_connection(('example.com', 80))") == "error: blocked: network"
    assert env.python("open('/tmp/esopt-codetool-escape', 'w').write('x')") == \
        "error: blocked: file write outside the working directory"
    assert env.python("open('mine.txt', 'w').write('ok')\nprint(open('mine.txt').read())") == "ok\n"
    info = env.step(r"\boxed{0}")[4]
    assert info["record"]["python_calls"] == 9 and info["record"]["python_ok"] == 4 and info["valid_tool_call"]


def call(code):
    return f'<tool_call>\n{json.dumps({"name": "python", "arguments": {"code": code}})}\n</tool_call>'


class Script:
    """Replies by turn (the count of assistant messages in the conversation past the examples)."""

    def __init__(self, replies):
        self.replies, self.seen = replies, []

    def generate(self, convs, options, token_ids=None, **kw):
        self.seen.extend(convs)
        return [self.replies[sum(m["role"] == "assistant" for m in c)] for c in convs]


def test_scripted_rollout_calls_python_then_answers(sandbox):
    env = CodeToolEnv(family="product", digits=3, terms=2)
    question, info = env.reset(seed=11)
    expr = question.removeprefix("Compute ").rstrip(".")
    policy = Script([call(f"print({expr})"), rf"\boxed{{{info['answer']}}}", "unused"])
    ep = rollout(policy, [env], ["t"], [question], AgentContext("Calculate.", history="full"),
                 RolloutSettings(DecodeOptions(8), max_turns=4))[0]
    assert ep.done and ep.solved and ep.reward == 1.0 and len(ep.turns) == 2
    assert ep.turns[0]["tool_calls"][0]["result"] == f"{info['answer']}\n"
    assert ep.turns[1]["python_ok"] == 1 and ep.turns[1]["python_calls"] == 1
    assert "<tools>" in policy.seen[1][0]["content"] and '"name": "python"' in policy.seen[1][0]["content"]
    assert policy.seen[1][-1]["content"] == f"<tool_response>\n{info['answer']}\n\n</tool_response>"


def test_records_give_the_tool_share_and_paired_figures(tmp_path):
    from esopt.envs.codetool import records

    def ep(task, reward, result=None):
        calls = [] if result is None else [{"name": "python", "arguments": {"code": "1"}, "result": result}]
        return {"task": task, "reward": reward, "solved": reward == 1.0,
                "turns": [{"response": "r", "tool_calls": calls}, {"response": "s"}]}

    base = [ep("a", 0.0), ep("b", 1.0, "5\n"), ep("c", 0.0, "error: blocked: network"), ep("d", 0.0)]
    after = [ep("a", 1.0, "3\n"), ep("b", 1.0, "5\n"), ep("c", 1.0, "7\n"), ep("d", 0.0)]
    f = records.figures(base)
    assert (f["n"], f["success"], f["valid_tool_call"]) == (4, 0.25, 0.25)
    p = records.paired(base, after)
    assert (p["tasks"], p["base"], p["after"], p["diff"]) == (4, 0.25, 0.75, 0.5)
    assert abs(p["diff_se"] - (1 / 12) ** 0.5) < 1e-9  # differences 1, 0, 1, 0
    paths = []
    for name, eps in (("base", base), ("none", [ep("x", 0.0)])):
        paths.append(tmp_path / f"{name}.jsonl")
        paths[-1].write_text("".join(json.dumps(e) + "\n" for e in eps))
    with pytest.raises(SystemExit, match="share no task"):
        records.main([str(p) for p in paths])
