"""Tool calls through esopt serve: a request's ``tools`` reach the member's prompt the way esopt's own rollout
gives an env's tools to the chat template (agent/tools.py chat, under the run's ``agent.tools.format``
resolved against the tokenizer), and a reply's ``<tool_call>`` blocks come back as OpenAI's ``tool_calls``.

A reply whose blocks all read as calls (agent/tools.py parse_calls: a JSON object with a name and object
arguments) is answered with ``content`` (the text before the first block, or null), ``tool_calls`` and
finish_reason ``tool_calls``; a reply with a block that does not read as a call is returned as plain
content, for the harness to judge. Only requests with tools (and tool_choice other than none) are read for
calls.
"""
from __future__ import annotations

import json
import uuid

from ..agent.tools import CALL_OPEN, read_calls, resolve_format


def run_format(cfg, tokenizer) -> str:
    """agent.tools.format of the run, resolved against the tokenizer: template or system."""
    return resolve_format(cfg.agent.tools.format, tokenizer)


def reply(text: str, finish: str, request, reader=(None, "system")) -> tuple[dict, str]:
    """A reply as OpenAI's response message and finish reason (module docstring); reader: (tokenizer, format)
    for agent/tools.py read_calls (under format template, a tokenizer's own response_template reads calls)."""
    plain = {"role": "assistant", "content": text}
    if not request.calls_tools():
        return plain, finish
    calls = read_calls(text, *reader)
    if not calls or any(c.error for c in calls):
        return plain, finish
    if not request.parallel_tool_calls:
        calls = calls[:1]
    before = text[: text.index(CALL_OPEN)].strip() if CALL_OPEN in text else None
    return {"role": "assistant", "content": before or None,
            "tool_calls": [{"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
                           for c in calls]}, "tool_calls"
