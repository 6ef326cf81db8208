"""Tool calls: what an agent may call, how the calls reach its prompt, and how its reply's calls are
read, run and answered (docs/envs.md "Tools").

An env declares tools with a ``tools()`` method returning callables (a type-hinted function or bound
method whose docstring has an ``Args:`` section, the form TRL and transformers read) or :class:`Tool`s.
The prompt carries them one of two ways (``agent.tools.format``):

- ``template``: through the chat template's own tools slot (``apply_chat_template(..., tools=...)``);
  tool results are ``tool`` role messages;
- ``system``: esopt's documented block appended to the system prompt (:func:`system_block`): the tools'
  JSON schemas in ``<tools></tools>`` and the Hermes/Qwen call form; tool results come back as a user
  message of ``<tool_response>`` blocks (what such templates render a ``tool`` message as), so any
  template takes them.

``auto`` picks template when the tokenizer's template mentions tools, else system. A reply calls tools
with ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (one block per call), or, under format
template with a tokenizer that declares how its replies read (transformers' ``response_template``), in
whatever form that declares (:func:`read_calls`). Every way a call
can go wrong (malformed JSON, an unknown tool, arguments that do not fit its schema, a tool that raises
or overruns its time limit) becomes an error message the model reads in its next turn; none ends the
episode.
"""
from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
FORMATS = ("auto", "template", "system")
_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)
_JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list,
               "object": dict, "null": type(None)}


class ToolError(ValueError):
    """A tool that cannot be declared (one line naming it)."""


@dataclass(frozen=True)
class Tool:
    """One tool: its name, description and JSON-schema parameters (an object schema), and the callable
    that runs it with the parameters as keywords."""

    name: str
    description: str
    parameters: dict
    fn: Callable = field(compare=False)

    @classmethod
    def of(cls, obj: Any) -> "Tool":
        """A Tool as is, or a callable's Tool from its type hints and docstring (transformers'
        get_json_schema: a description line, then ``Args:`` with one line per parameter)."""
        if isinstance(obj, Tool):
            return obj
        if not callable(obj):
            raise ToolError(f"a tool is a function or an esopt Tool, not {type(obj).__name__}")
        from transformers.utils import get_json_schema

        name = getattr(obj, "__name__", type(obj).__name__)
        try:
            schema = get_json_schema(obj)["function"]
        except Exception as err:  # transformers' DocstringParsingException / TypeHintParsingException
            raise ToolError(f"tool {name}: {err} (a tool needs type hints and a docstring with an Args: line "
                            f"per parameter)") from None
        return cls(schema["name"], schema.get("description", ""), schema.get("parameters") or
                   {"type": "object", "properties": {}}, obj)

    def schema(self) -> dict:
        """The OpenAI / chat-template form: {"type": "function", "function": {name, description, parameters}}."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


@dataclass(frozen=True)
class ToolSettings:
    """How tool calls are run (agent.tools): format (auto | template | system), call_timeout (seconds a
    call may take), max_result_chars (a longer result is cut, saying so), max_calls (calls run per reply;
    more are answered with an error)."""

    format: str = "auto"
    call_timeout: float = 10.0
    max_result_chars: int = 2000
    max_calls: int = 4


def tools_of(env) -> list[Tool]:
    """The tools an env declares (its ``tools()``; none without one), as Tools with distinct names."""
    declare = getattr(env, "tools", None)
    if not callable(declare):
        return []
    found = [Tool.of(t) for t in (declare() or [])]
    names = [t.name for t in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ToolError(f"the env declares the tool {twice[0]} twice; tool names must differ")
    return found


def has_tools_slot(tokenizer) -> bool:
    """Whether the tokenizer's chat template renders a ``tools`` argument."""
    template = getattr(tokenizer, "chat_template", None)
    return isinstance(template, str) and "tools" in template


def resolve_format(fmt: str, tokenizer) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"agent.tools.format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt != "auto":
        return fmt
    return "template" if has_tools_slot(tokenizer) else "system"


def system_block(schemas: list[dict]) -> str:
    """esopt's system-prompt form of the tools (format system), appended to the system prompt."""
    lines = "\n".join(json.dumps(s, ensure_ascii=False) for s in schemas)
    return ("You may call one or more functions to help with the task. The functions are listed in JSON "
            f"within <tools></tools>:\n<tools>\n{lines}\n</tools>\n"
            "To call a function, reply with a JSON object holding its name and arguments within "
            f'{CALL_OPEN}{CALL_CLOSE} tags, one block per call:\n'
            f'{CALL_OPEN}\n{{"name": <function-name>, "arguments": <args-json-object>}}\n{CALL_CLOSE}\n'
            "Each result comes back within <tool_response></tool_response> tags.")


class Conversation(list):
    """Chat messages, and the tool schemas the chat template renders with them (``tools``; None: none)."""

    tools: list[dict] | None = None


def chat(messages: list[dict], schemas: list[dict] | None, fmt: str) -> Conversation:
    """OpenAI-style messages (assistant ``tool_calls``, ``tool`` role results) as the chat template is given
    them under format ``fmt`` (template or system): see the module's docstring."""
    conv = Conversation()
    if fmt == "template":
        conv.extend(dict(m) for m in messages)
        conv.tools = list(schemas) if schemas else None
        return conv
    msgs = [dict(m) for m in messages]
    if schemas:
        block = system_block(schemas)
        if msgs and msgs[0].get("role") == "system":
            msgs[0]["content"] = (msgs[0].get("content") or "").rstrip() + "\n\n" + block
        else:
            msgs.insert(0, {"role": "system", "content": block})
    for m in msgs:
        if m.get("role") == "assistant" and m.get("tool_calls"):
            calls = "\n".join(f"{CALL_OPEN}\n{json.dumps(_call_json(c), ensure_ascii=False)}\n{CALL_CLOSE}"
                              for c in m.pop("tool_calls"))
            m["content"] = ((m.get("content") or "").rstrip() + "\n" + calls).lstrip("\n")
        if m.get("role") == "tool":
            block = f"<tool_response>\n{m.get('content') or ''}\n</tool_response>"
            if conv and conv[-1].get("role") == "user" and conv[-1].get("_tool"):
                conv[-1]["content"] += "\n" + block
            else:
                conv.append({"role": "user", "content": block, "_tool": True})
            continue
        conv.append(m)
    for m in conv:
        m.pop("_tool", None)
    return conv


def _call_json(call: dict) -> dict:
    """An OpenAI tool call (or its function part) as {"name", "arguments"}, arguments as an object when
    they are a JSON string."""
    fn = call.get("function", call)
    args = fn.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            pass
    return {"name": fn.get("name"), "arguments": args}


@dataclass
class ToolCall:
    """One call read from a reply: its name and arguments, or why it could not be read (error)."""

    name: str | None
    arguments: dict | None
    raw: str
    error: str | None = None


def parse_calls(text: str) -> list[ToolCall]:
    """The reply's tool calls, in order; a block that is not a JSON object with a string ``name`` and an
    object ``arguments`` is a ToolCall with an error. A last block cut off before ``</tool_call>`` (the
    reply ended) is read too."""
    calls = []
    for m in _CALL.finditer(text):
        raw = m.group(1).strip()
        try:
            obj = json.loads(raw)
        except ValueError as err:
            calls.append(ToolCall(None, None, raw, f"the tool call is not valid JSON ({err.msg} at char {err.pos})"))
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            calls.append(ToolCall(None, None, raw, 'a tool call is a JSON object {"name": ..., "arguments": {...}}'))
            continue
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):  # some models write the arguments as a JSON string, as OpenAI's API does
            try:
                args = json.loads(args)
            except ValueError:
                pass
        if not isinstance(args, dict):
            calls.append(ToolCall(obj["name"], None, raw, f"the arguments of {obj['name']} are not a JSON object"))
            continue
        calls.append(ToolCall(obj["name"], args, raw))
    return calls


def read_calls(text: str, tokenizer=None, fmt: str = "system") -> list[ToolCall]:
    """A reply's tool calls (none: the reply is an answer). Under format template, a tokenizer with a
    ``response_template`` (transformers' declared reply parser: the model's own call form) reads them;
    otherwise the Hermes/Qwen blocks (:func:`parse_calls`). A reply its template cannot parse is one call
    with the error."""
    template = getattr(tokenizer, "response_template", None) if fmt == "template" else None
    if template is None:
        return parse_calls(text)
    try:
        message = tokenizer.parse_response(text, prefix="")
    except Exception as err:  # transformers' parser raises ValueError on a region it cannot read
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return [ToolCall(None, None, text, f"the reply does not parse as the model's tool-call form ({first})")]
    calls = []
    for c in message.get("tool_calls") or []:
        fn = c.get("function", c) if isinstance(c, dict) else {}
        parsed = parse_calls(f"{CALL_OPEN}{json.dumps(_call_json(fn)) if isinstance(fn, dict) else 'null'}"
                             f"{CALL_CLOSE}")
        calls.append(parsed[0])
    return calls


def check_arguments(tool: Tool, args: dict) -> str | None:
    """Why ``args`` do not fit the tool's parameters (missing, unknown or ill-typed), or None."""
    props = tool.parameters.get("properties", {}) or {}
    missing = [p for p in tool.parameters.get("required", []) if p not in args]
    if missing:
        return f"{tool.name} needs the argument {missing[0]}"
    unknown = [a for a in args if a not in props]
    if unknown:
        return f"{tool.name} has no argument {unknown[0]} (its arguments: {', '.join(props) or 'none'})"
    for name, value in args.items():
        types = props[name].get("type")
        wanted = types if isinstance(types, list) else [types] if types else []
        allowed = tuple(t for w in wanted for t in _as_tuple(_JSON_TYPES.get(w)))
        if allowed and not (isinstance(value, allowed) and not (isinstance(value, bool) and bool not in allowed)):
            return f"argument {name} of {tool.name} must be {' or '.join(wanted)}, got {json.dumps(value)[:60]}"
    return None


def _as_tuple(t) -> tuple:
    return () if t is None else t if isinstance(t, tuple) else (t,)


def run_calls(tools: list[Tool], calls: list[ToolCall], settings: ToolSettings) -> list[dict]:
    """Run a reply's calls in order; one record per call: name, arguments, and result (a string) or error
    (a string the model reads), and seconds."""
    by_name = {t.name: t for t in tools}
    out = []
    for k, call in enumerate(calls):
        rec: dict = {"name": call.name, "arguments": call.arguments}
        start = time.perf_counter()
        tool = by_name.get(call.name)
        if call.error:
            rec["error"] = call.error
        elif k >= settings.max_calls:
            rec["error"] = f"at most {settings.max_calls} tool calls are run per reply"
        elif tool is None:
            rec["error"] = f"there is no tool {call.name} (tools: {', '.join(by_name) or 'none'})"
        elif (why := check_arguments(tool, call.arguments)) is not None:
            rec["error"] = why
        else:
            rec.update(_run(tool, call.arguments, settings))
        rec["seconds"] = round(time.perf_counter() - start, 4)
        out.append(rec)
    return out


def _run(tool: Tool, args: dict, settings: ToolSettings) -> dict:
    """The tool run under the time limit in a daemon thread (a call that overruns is left to finish on its
    own and cannot keep the process alive); its result as text, cut to max_result_chars."""
    box: dict = {}

    def call():
        try:
            box["value"] = tool.fn(**args)
        except BaseException as err:  # SystemExit and KeyboardInterrupt from a tool are its errors too
            box["error"] = f"{tool.name} raised {type(err).__name__}: {err}"

    worker = threading.Thread(target=call, name=f"tool-{tool.name}", daemon=True)
    worker.start()
    worker.join(settings.call_timeout)
    if worker.is_alive():
        return {"error": f"{tool.name} took longer than {settings.call_timeout:g} s and was abandoned"}
    if "error" in box:
        return {"error": box["error"]}
    return {"result": result_text(box.get("value"), settings.max_result_chars)}


def result_text(value, limit: int) -> str:
    """A tool's return value as the text the model reads: strings as they are, other values as JSON (or
    repr), cut to ``limit`` characters with a note saying how much was cut."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(value)
    if len(text) > limit:
        text = text[:limit] + f"\n[... {len(text) - limit} more characters cut]"
    return text


def result_messages(records: list[dict]) -> list[dict]:
    """A turn's call records as ``tool`` role messages (an error reads ``error: ...``)."""
    return [{"role": "tool", "name": r.get("name") or "", "content": r["result"] if "result" in r
             else f"error: {r['error']}"} for r in records]
