"""Tool calls in the agent loop (agent/tools.py, agent/rollout.py)."""
import json
import time

import pytest

from esopt.agent.rollout import AgentContext, RolloutSettings, rollout
from esopt.agent.tools import (Tool, ToolError, ToolSettings, chat, check_arguments, parse_calls, result_text,
                               run_calls, system_block, tools_of)
from esopt.models.decode import DecodeOptions


class CalcEnv:
    """Asks for a product; its tool multiplies; the answer is the reply's last number."""

    max_turns = 4

    def __init__(self, a=12, b=34):
        self.a, self.b, self.calls = a, b, 0

    def reset(self, seed=None):
        return f"What is {self.a} * {self.b}?", {}

    def multiply(self, x: int, y: int) -> int:
        """Multiply two integers.

        Args:
            x: the first factor
            y: the second factor
        """
        self.calls += 1
        return x * y

    def slow(self, seconds: float) -> str:
        """Wait.

        Args:
            seconds: how long
        """
        time.sleep(seconds)
        return "done"

    def boom(self) -> str:
        """Raise."""
        raise SystemExit(3)

    def tools(self):
        return [self.multiply, self.slow, self.boom]

    def step(self, action):
        ok = action.strip().split()[-1] == str(self.a * self.b) if action.strip() else False
        return "", float(ok), True, False, {"solved": ok}

    def render_text(self):
        return ""


def call(name, **args):
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'


class Script:
    """Replies by turn number (the count of assistant messages so far), recording each conversation."""

    def __init__(self, replies):
        self.replies, self.seen = replies, []

    def generate(self, convs, options, token_ids=None, **kw):
        self.seen.extend(convs)
        out = [self.replies[sum(m["role"] == "assistant" for m in c)] for c in convs]
        if token_ids is not None:
            token_ids.extend(([1, 2], [3]) for _ in convs)
        return out


def test_parse_calls_reads_hermes_blocks_and_says_what_is_wrong():
    calls = parse_calls('x <tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call> '
                        '<tool_call>{"name": "g", "arguments": "{\\"b\\": 2}"}</tool_call>'
                        '<tool_call>{oops</tool_call><tool_call>[1]</tool_call><tool_call>{"name": "h"')
    assert [(c.name, c.arguments) for c in calls[:2]] == [("f", {"a": 1}), ("g", {"b": 2})]
    assert "not valid JSON" in calls[2].error and "JSON object" in calls[3].error
    assert calls[4].error and "not valid JSON" in calls[4].error  # cut off mid-object


def test_tool_from_a_method_and_argument_checks():
    env = CalcEnv()
    tool = Tool.of(env.multiply)
    assert tool.name == "multiply" and tool.parameters["required"] == ["x", "y"]
    assert check_arguments(tool, {"x": 1, "y": 2}) is None
    assert "needs the argument y" in check_arguments(tool, {"x": 1})
    assert "no argument z" in check_arguments(tool, {"x": 1, "y": 2, "z": 3})
    assert "must be integer" in check_arguments(tool, {"x": "1", "y": 2})
    assert "must be integer" in check_arguments(tool, {"x": True, "y": 2})

    def undocumented(x: int):
        return x

    with pytest.raises(ToolError, match="undocumented.*docstring"):
        Tool.of(undocumented)

    class Twice:
        def tools(self):
            return [env.multiply, env.multiply]

    with pytest.raises(ToolError, match="twice"):
        tools_of(Twice())


def test_every_tool_failure_is_an_error_the_model_reads():
    env = CalcEnv()
    settings = ToolSettings(call_timeout=0.2, max_calls=5)
    replies = (call("multiply", x=2, y=3) + call("nope") + call("multiply", x=1) + call("boom")
               + call("slow", seconds=5) + call("multiply", x=1, y=1) + "<tool_call>{bad</tool_call>")
    records = run_calls(tools_of(env), parse_calls(replies), settings)
    assert records[0]["result"] == "6"
    assert "no tool nope" in records[1]["error"]
    assert "needs the argument y" in records[2]["error"]
    assert "raised SystemExit" in records[3]["error"]
    assert "longer than 0.2 s" in records[4]["error"] and records[4]["seconds"] < 2
    assert "at most 5 tool calls" in records[5]["error"] and "not valid JSON" in records[6]["error"]
    assert result_text("x" * 50, 10).startswith("x" * 10) and "40 more characters cut" in result_text("x" * 50, 10)


def test_rollout_runs_calls_feeds_results_and_records_them():
    env = CalcEnv()
    policy = Script([call("multiply", x=12, y=34), "The answer is 408", "unused"])
    eps = rollout(policy, [env], ["t"], [None], AgentContext("Be brief.", history="full"),
                  RolloutSettings(DecodeOptions(8), record_ids=True, max_turns=4))
    ep = eps[0]
    assert ep.done and ep.solved and ep.reward == 1.0 and len(ep.turns) == 2 and env.calls == 1
    assert ep.turns[0]["tool_calls"][0] | {"seconds": 0} == {"name": "multiply", "arguments": {"x": 12, "y": 34},
                                                             "result": "408", "seconds": 0}
    assert ep.turns[0]["token_ids"] == [3]  # tool turns keep their ids (GRPO trains on the model's own tokens)
    second = policy.seen[1]  # system format: tools in the system prompt, the result as a tool_response user turn
    assert "<tools>" in second[0]["content"] and "Be brief." in second[0]["content"]
    assert second[-1] == {"role": "user", "content": "<tool_response>\n408\n</tool_response>"}
    assert json.loads(json.dumps(ep.to_json()))["turns"][0]["tool_calls"][0]["result"] == "408"


def test_last_allowed_turn_is_stepped_even_with_calls_and_errors_never_end_episodes():
    env = CalcEnv()
    policy = Script([call("nope"), "<tool_call>{bad", call("multiply", x=1, y=2)])
    ep = rollout(policy, [env], ["t"], [None], AgentContext(history="full"),
                 RolloutSettings(DecodeOptions(8), max_turns=3))[0]
    assert ep.error is None and len(ep.turns) == 3 and ep.done
    assert "no tool nope" in ep.turns[0]["tool_calls"][0]["error"]
    assert "not valid JSON" in ep.turns[1]["tool_calls"][0]["error"]
    assert "tool_calls" not in ep.turns[2] and ep.reward == 0.0 and env.calls == 0  # stepped as the answer


def test_template_format_passes_tools_to_the_chat_template():
    schemas = [Tool.of(CalcEnv().multiply).schema()]
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "c"},
            {"role": "tool", "content": "r"}]
    conv = chat(msgs, schemas, "template")
    assert conv.tools == schemas and conv == msgs
    sys_conv = chat(msgs + [{"role": "tool", "content": "s"}], schemas, "system")
    assert sys_conv[0]["content"] == system_block(schemas) and sys_conv.tools is None
    assert sys_conv[-1]["content"] == "<tool_response>\nr\n</tool_response>\n<tool_response>\ns\n</tool_response>"
    served = chat([{"role": "assistant", "content": None,
                    "tool_calls": [{"id": "1", "type": "function",
                                    "function": {"name": "multiply", "arguments": '{"x": 1, "y": 2}'}}]}],
                  None, "system")
    assert json.loads(parse_calls(served[0]["content"])[0].raw) == {"name": "multiply", "arguments": {"x": 1, "y": 2}}


def test_an_env_without_tools_plays_as_before():
    class Plain(CalcEnv):
        tools = None

    policy = Script([call("multiply", x=1, y=2)])
    ep = rollout(policy, [Plain()], ["t"], [None], AgentContext(), RolloutSettings(DecodeOptions(8)))[0]
    assert len(ep.turns) == 1 and "tool_calls" not in ep.turns[0]
    assert policy.seen[0] == [{"role": "user", "content": "What is 12 * 34?"}]


def test_report_turn_table_shows_calls_and_results():
    from esopt.report.episodes import turn_table

    html = turn_table({"turns": [{"response": "<tool_call>x</tool_call>", "action": None, "feedback": None,
                                  "reward": 0.0, "tool_calls": [{"name": "multiply", "arguments": {"x": 1},
                                                                 "result": "408"},
                                                                {"name": "nope", "arguments": {}, "error": "no <b>"}]}]})
    assert "multiply" in html and "408" in html and "error: no &lt;b&gt;" in html


def test_a_template_with_its_own_call_form_is_read_in_that_form():
    """Under format template, a tokenizer that declares its replies' form (transformers' response_template)
    has its calls read in that form (here [CALL]{json}[/CALL], not Hermes); its tools reach the template."""
    from esopt.models.tiny import build_tiny

    _, tok = build_tiny("llama")
    tok.chat_template = ("{% if tools %}TOOLS:{{ tools | tojson }}\n{% endif %}{% for m in messages %}"
                         "{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant: ")
    tok.response_template = {"start_anchor": "assistant: ", "fields": {
        "content": {}, "tool_calls": {"open": "[CALL]", "close": "[/CALL]", "content": "json", "repeats": True,
                                      "transform": {"type": "function", "function": "{content}"}}}}
    env = CalcEnv()

    class Templated(Script):
        tokenizer = tok

    policy = Templated(['[CALL]{"name": "multiply", "arguments": {"x": 12, "y": 34}}[/CALL]', "[CALL]{oops[/CALL]",
                        "408"])
    ep = rollout(policy, [env], ["t"], [None], AgentContext(history="full"),
                 RolloutSettings(DecodeOptions(8), max_turns=4))[0]
    assert ep.solved and env.calls == 1 and ep.turns[0]["tool_calls"][0]["result"] == "408"
    assert "model's tool-call form" in ep.turns[1]["tool_calls"][0]["error"]
    assert policy.seen[0].tools[0]["function"]["name"] == "multiply"  # the template's tools slot
    assert policy.seen[1][-1] == {"role": "tool", "name": "multiply", "content": "408"}
