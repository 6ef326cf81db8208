"""Tool calls through esopt serve (serve/tools.py, docs/serve.md "Tool calls"): a request's tools reach the
member's prompt as esopt's rollout gives an env's tools to the chat template, the reply's calls come back as
OpenAI's tool_calls (whole or streamed) to an openai-client harness whose tool messages are taken; request
fields the server does not serve are refused by name, never ignored."""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from esopt.serve.protocol import ServeError, chat_request, chunks, completion
from esopt.serve.tools import reply

ROOT = Path(__file__).resolve().parents[2]
ADD = {"type": "function", "function": {"name": "add", "description": "Add two integers.",
                                        "parameters": {"type": "object", "properties": {"a": {"type": "integer"},
                                                                                        "b": {"type": "integer"}}}}}
HISTORY = [{"role": "user", "content": "What is 1 + 2?"},
           {"role": "assistant", "content": None,
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]},
           {"role": "tool", "tool_call_id": "call_1", "content": "3"}]


def request(**fields):
    return chat_request({"model": "member-0", "messages": HISTORY, "tools": [ADD], **fields})


def refused(body_fields: dict, *words) -> str:
    with pytest.raises(ServeError) as err:
        chat_request({"model": "member-0", "messages": [{"role": "user", "content": "hi"}], **body_fields})
    assert err.value.status == 400 and "\n" not in err.value.message, err.value.message
    assert all(w in err.value.message for w in words), err.value.message
    return err.value.message


def test_fields_not_served_are_refused_by_name_and_their_neutral_values_taken():
    for field, value in [("logprobs", True), ("top_logprobs", 2), ("response_format", {"type": "json_object"}),
                         ("presence_penalty", 0.5), ("logit_bias", {"1": 5}), ("store", True),
                         ("metadata", {"a": "b"})]:
        refused({field: value}, f"{field}: ", "not served", 'docs/serve.md "Request fields"')
    refused({"frobnicate": 1}, "frobnicate: not a field esopt serve serves")
    refused({"stream_options": {"include_usage": True, "continuous_usage_stats": True}},
            "stream_options.continuous_usage_stats: not a field")
    refused({"tool_choice": "required"}, "tool_choice", '"auto" and "none"')
    refused({"tool_choice": {"type": "function", "function": {"name": "add"}}}, "tool_choice", "not served")
    refused({"tools": [{"type": "function", "function": {"name": "add", "strict": True}}]}, "tools.0.function.strict")
    refused({"messages": [{"role": "tool", "content": "3"}]}, "messages.0", "tool_call_id")
    refused({"messages": [{"role": "user", "content": None}]}, "messages.0", "content")
    refused({"messages": [{"role": "user", "content": "x", "tool_call_id": "c"}]}, "messages.0", "tool_call_id")
    refused({"messages": [{"role": "user", "content": "x", "reasoning": "y"}]}, "messages.0.reasoning: not a field")
    # what asks for nothing is taken: OpenAI's defaults, nulls, an end user's id, an echoed message's empty fields
    ok = chat_request({"model": "member-0", "messages": [{"role": "user", "content": "hi", "refusal": None,
                                                          "audio": None}],
                       "logprobs": False, "top_logprobs": None, "response_format": {"type": "text"},
                       "presence_penalty": 0, "temperature": None, "user": "u-1", "stream_options": None})
    assert ok.temperature == 0.0 and ok.user == "u-1"


def test_tools_and_the_history_reach_the_template_in_either_format():
    system = request().conversation("system")
    assert system.tools is None and '"name": "add"' in system[0]["content"]  # esopt's block in the system prompt
    assert system[1:] == [HISTORY[0], {"role": "assistant", "content": '<tool_call>\n{"name": "add", "arguments": '
                                                                      '{"a": 1, "b": 2}}\n</tool_call>'},
                          {"role": "user", "content": "<tool_response>\n3\n</tool_response>"}]
    template = request().conversation("template")
    assert template.tools == [ADD]
    assert template[1]["tool_calls"][0]["function"]["arguments"] == {"a": 1, "b": 2}  # an object, as HF templates want
    assert template[2] == {"role": "tool", "content": "3", "tool_call_id": "call_1"}
    assert request(tool_choice="none").conversation("template").tools is None  # none: the tools are not offered
    # the counting side (desk) renders what the policy decodes from: tools in the template's slot
    from esopt.models.policy import HFPolicy, chat_text
    from esopt.models.tiny import char_tokenizer

    tok = char_tokenizer()
    tok.chat_template = ("{% if tools %}TOOLS:{{ tools | tojson }}\n{% endif %}{% for m in messages %}{{ m['role'] }}:"
                         "{{ m['content'] }}{% if m.tool_calls %}{{ m.tool_calls | tojson }}{% endif %}\n{% endfor %}")
    text = chat_text(tok, template)
    assert text.startswith("TOOLS:") and '"add"' in text and '"a": 1' in text
    policy = HFPolicy.__new__(HFPolicy)
    policy.tokenizer = tok
    assert policy.prompt_texts([template]) == [text]


def test_a_reply_with_calls_is_openais_tool_calls_and_a_malformed_one_is_plain_content():
    req = request()
    message, finish = reply('Let me add.\n<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'
                            '<tool_call>{"name": "add", "arguments": {"a": 3, "b": 4}}</tool_call>', "stop", req)
    assert finish == "tool_calls" and message["content"] == "Let me add."
    calls = message["tool_calls"]
    assert [(c["type"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("function", "add", {"a": 1, "b": 2}), ("function", "add", {"a": 3, "b": 4})]
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", c["id"]) for c in calls) and calls[0]["id"] != calls[1]["id"]
    only, _ = reply('<tool_call>{"name": "add", "arguments": {}}</tool_call>', "stop", req)
    assert only["content"] is None
    first, _ = reply('<tool_call>{"name": "add", "arguments": {}}</tool_call>' * 2, "stop",
                     request(parallel_tool_calls=False))
    assert len(first["tool_calls"]) == 1
    bad = 'x <tool_call>{"name": "add", "arguments": {"a": 1</tool_call>'
    assert reply(bad, "stop", req) == ({"role": "assistant", "content": bad}, "stop")  # the harness decides
    call = '<tool_call>{"name": "add", "arguments": {}}</tool_call>'
    assert reply(call, "stop", request(tool_choice="none"))[0] == {"role": "assistant", "content": call}
    no_tools = chat_request({"model": "member-0", "messages": HISTORY})
    assert reply(call, "length", no_tools) == ({"role": "assistant", "content": call}, "length")
    # streamed: the content, then the calls in one delta, then the finish reason
    events = [json.loads(e[6:]) for e in chunks(completion("member-0", [(message, finish)], 5, 9))
              if e != "data: [DONE]\n\n"]
    deltas = [e["choices"][0]["delta"] for e in events]
    assert deltas[0] == {"role": "assistant", "content": "Let me add."}
    assert [c["index"] for c in deltas[1]["tool_calls"]] == [0, 1]
    assert deltas[1]["tool_calls"][0]["function"] == calls[0]["function"]
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"


# -- through real HTTP, with an openai-client harness -------------------------------------------------------------
def scripted(seen: list):
    """HFPolicy.generate replaced by a script (tiny random models never write a call): the first reply of an
    episode calls add with the question's numbers, a reply after a tool result answers with it. The tokens are
    the script's, decoded by the server as any reply's (token_ids, slices and the end of turn honoured)."""
    def generate(self, conversations, options, rows=None, caches=None, tails=None, token_ids=None, abort=None):
        texts = self.prompt_texts(conversations)
        seen.extend(texts)
        out = []
        for k, text in enumerate(texts):
            result = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", text)
            if result:
                full = f"The answer is {result[-1]}."
            else:
                a, b = re.findall(r"What is (\d+) \+ (\d+)", text)[-1]
                full = f'<tool_call>{{"name": "add", "arguments": {{"a": {a}, "b": {b}}}}}</tool_call>'
            ids = self.tokenizer(full, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
            done = len(tails[k]) if tails else 0
            piece = ids[done: done + options.max_new_tokens]
            out.append(self.tokenizer.decode(piece, skip_special_tokens=True))
            if token_ids is not None:
                token_ids.append((self.tokenizer(text, add_special_tokens=False)["input_ids"], piece))
        return out
    return generate


def test_an_openai_client_harness_gets_tool_calls_and_its_tool_messages_are_taken(esopt_cache, tmp_path, monkeypatch):
    """examples/serve_tools_harness.py trains through the server: every episode's first reply reaches it as
    tool_calls, it runs them and sends tool messages back, the member answers from the result, and the rewards
    it posts are the run's. Streamed, the same calls arrive as OpenAI's chunk deltas."""
    import openai

    from esopt.models.policy import HFPolicy
    from test_serve import drive, one_error

    seen: list = []
    monkeypatch.setattr(HFPolicy, "generate", scripted(seen))
    spec = importlib.util.spec_from_file_location("serve_tools_harness", ROOT / "examples" / "serve_tools_harness.py")
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    totals = {}

    def client(http, run):
        base_url = json.loads((run / "serve.json").read_text())["base_url"]
        llm = openai.OpenAI(base_url=base_url, api_key="none")
        first = http.post("/es/generation/start").json()
        question, answer = harness.task(1)
        messages = [{"role": "user", "content": question}]
        deltas, finish = [], None
        for chunk in llm.chat.completions.create(model="center", messages=messages, tools=harness.TOOLS,
                                                 max_tokens=80, stream=True):
            for c in chunk.choices:
                deltas.append(c.delta)
                finish = c.finish_reason or finish
        calls = [call for d in deltas for call in (d.tool_calls or [])]
        assert finish == "tool_calls" and len(calls) == 1 and calls[0].function.name == "add"
        assert harness.add(**json.loads(calls[0].function.arguments)) == answer
        chat = {"model": "center", "messages": messages, "tools": harness.TOOLS}
        one_error(http.post("/v1/chat/completions", json={**chat, "logprobs": True}), 400, "logprobs", "not served")
        one_error(http.post("/v1/chat/completions", json={**chat, "tool_choice": "required"}), 400, "tool_choice")
        one_error(http.post("/v1/chat/completions", json={**chat, "response_format": {"type": "json_object"}}), 400,
                  "response_format")
        assert first["kind"] == "evaluation"
        totals.update(harness.main(str(run), max_turns=3, max_tokens=80))

    assert drive(tmp_path, monkeypatch, client, extra=["env.id=external", "serve.evaluations=harness",
                                                       "eval.at_start=true"]) == 0
    # base and final held-out evaluations (3 episodes each) and one generation of 4 members x 2 episodes
    assert totals["episodes"] == 3 + 4 * 2 + 3 and totals["calls"] == totals["episodes"]
    assert totals["rewards"] == [1.0] * totals["episodes"]  # each called add rightly and answered with its result
    assert any("<tools>" in t and '"name": "add"' in t for t in seen)  # the tools reached the prompt (system format)
    assert any("<tool_response>" in t for t in seen)  # and the tool messages did
    posted = [json.loads(x) for x in (tmp_path / "s" / "serve" / "gen0000.jsonl").read_text().splitlines()]
    assert [p["reward"] for p in posted] == [1.0] * 8 and all(p["metadata"]["calls"] == 1 for p in posted)
