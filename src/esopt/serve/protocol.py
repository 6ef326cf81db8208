"""What esopt serve reads and writes: OpenAI's chat-completions schema (the part an agent harness
uses) and the bodies of the /es routes. Every bad body is one error line naming the field."""
from __future__ import annotations

import json
import math
import re
import time
import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..agent.tools import chat

CENTER = "center"
_MEMBER = re.compile(r"member-(\d+)")


class ServeError(Exception):
    """A request that changes nothing: its HTTP status and one line."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "code": self.status}}


class FunctionCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: str | dict  # OpenAI sends a JSON string; a JSON object is taken too


class CallIn(BaseModel):
    """A tool call of an earlier assistant message, as OpenAI's responses carry it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(BaseModel):
    # every field reaches the chat template or is refused by name; a field set to null counts as not sent (a client
    # echoing a response message sends refusal, audio, function_call ... as null)
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant", "developer", "tool"]
    content: str | list | None = None
    name: str | None = None
    tool_calls: list[CallIn] | None = None  # an assistant message's calls
    tool_call_id: str | None = None  # a tool message: the call it answers

    @model_validator(mode="before")
    @classmethod
    def _nulls(cls, v):
        return {k: x for k, x in v.items() if x is not None or k == "content"} if isinstance(v, dict) else v

    @field_validator("content")
    @classmethod
    def _text(cls, v):
        if isinstance(v, list):  # [{"type": "text", "text": ...}, ...]: the text parts, joined
            parts = [p.get("text") for p in v if isinstance(p, dict) and p.get("type") == "text"]
            if len(parts) != len(v) or not all(isinstance(p, str) for p in parts):
                raise ValueError("only text content parts are served")
            return "".join(parts)
        return v

    @model_validator(mode="after")
    def _roles(self):
        if self.tool_calls and self.role != "assistant":
            raise ValueError("tool_calls: only an assistant message has tool calls")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("tool_call_id: a tool message names the call it answers (tool_call_id)")
        if self.tool_call_id is not None and self.role != "tool":
            raise ValueError("tool_call_id: only a tool message answers a call")
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError("content: required (null only in an assistant message with tool_calls)")
        return self

    def as_chat(self) -> dict:
        """The message as the chat template is given it (before agent/tools.py chat()): a tool call's arguments
        as a JSON object, as Hugging Face templates expect them."""
        out = {"role": "system" if self.role == "developer" else self.role, "content": self.content}
        if self.name is not None:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.function.name, "arguments": _args(c.function.arguments)}}
                                 for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


def _args(arguments):
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments  # the template shows it as it came
    return arguments


class FunctionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict | None = None
    strict: bool | None = None

    @field_validator("strict")
    @classmethod
    def _not_strict(cls, v):
        if v:
            raise ValueError("strict schemas are not enforced by esopt serve (the model's reply is returned as "
                             "decoded); send strict false or leave it out")
        return v


class ToolIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["function"]
    function: FunctionIn

    def schema(self) -> dict:
        """OpenAI's function tool, as the chat template (or esopt's system block) is given it."""
        fn = {"name": self.function.name}
        if self.function.description is not None:
            fn["description"] = self.function.description
        fn["parameters"] = self.function.parameters or {"type": "object", "properties": {}}
        return {"type": "function", "function": fn}


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    include_usage: bool = False


class ChatRequest(BaseModel):
    # no field is ignored: chat_request() refuses by name what is not served (docs/serve.md "Request fields")
    model_config = ConfigDict(extra="forbid")

    model: str
    messages: list[Message] = Field(min_length=1)
    temperature: float = Field(0.0, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    n: int = Field(1, ge=1)  # at most serve.max_n (serve/limits.py)
    seed: int | None = Field(None, ge=-(1 << 63), lt=1 << 64)  # torch's seed range; past it: a 400 naming seed
    ignore_eos: bool = False  # vLLM's extension: decode max_tokens tokens, never the end-of-turn token (benchmarks)
    stream: bool = False  # answered as server-sent events once the whole reply is decoded (chunks())
    stream_options: StreamOptions | None = None  # include_usage: a last chunk with the usage counts
    tools: list[ToolIn] | None = None  # function tools: in the prompt as agent.tools.format says (serve/tools.py)
    tool_choice: str | None = None  # auto (the default) or none; required and a named function are refused
    parallel_tool_calls: bool = True  # false: a reply's first call only
    user: str | None = None  # an end user's id (OpenAI's abuse monitoring): nothing here depends on it

    @field_validator("tool_choice", mode="before")
    @classmethod
    def _choice(cls, v):
        if v in (None, "auto", "none"):
            return v
        what = json.dumps(v)[:80]
        raise ValueError(f"{what} is not served (only \"auto\" and \"none\": the model decides whether to call; "
                         "nothing forces a call)")

    def stops(self) -> list[str]:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if len(stops) > 4 or any(not s for s in stops):
            raise ServeError(400, "stop: at most 4 non-empty strings")
        return stops

    def calls_tools(self) -> bool:
        """Whether the reply may call the request's tools (and is read for calls)."""
        return bool(self.tools) and self.tool_choice != "none"

    def conversation(self, fmt: str) -> list[dict]:
        """The messages and the request's tools as the chat template is given them under agent.tools.format ``fmt``
        (template or system; agent/tools.py chat): a Conversation whose ``tools`` the template renders."""
        schemas = [t.schema() for t in self.tools] if self.calls_tools() else None
        return chat([m.as_chat() for m in self.messages], schemas, fmt)


# OpenAI request fields esopt serve does not serve, with the values that ask for nothing (taken; null is too)
UNSERVED = {"logprobs": [False], "top_logprobs": [0], "response_format": [{"type": "text"}], "presence_penalty": [0],
            "frequency_penalty": [0], "logit_bias": [{}], "store": [False], "metadata": [{}], "functions": [[]],
            "function_call": ["none"], "modalities": [["text"]], "prediction": [], "audio": [], "service_tier": [],
            "reasoning_effort": [], "web_search_options": []}
FIELDS_DOC = 'docs/serve.md "Request fields"'


def chat_request(body) -> ChatRequest:
    """A chat body as a ChatRequest. A field set to null counts as not sent; a field esopt serve does not serve
    (UNSERVED, at a value that asks for something, or a field it does not know) is refused by name, never ignored."""
    if isinstance(body, dict):
        for key, value in body.items():
            if value is None or (key in UNSERVED and value in UNSERVED[key]):
                continue
            if key in UNSERVED:
                raise ServeError(400, f"{key}: {json.dumps(value)[:80]} is not served by esopt serve (it refuses "
                                      f"what it would otherwise ignore; {FIELDS_DOC})")
            if key not in ChatRequest.model_fields:
                raise ServeError(400, f"{key}: not a field esopt serve serves (it refuses what it would otherwise "
                                      f"ignore; {FIELDS_DOC})")
        body = {k: v for k, v in body.items() if v is not None and k in ChatRequest.model_fields}
    return parse(ChatRequest, body)


class RewardPost(BaseModel):
    model_config = ConfigDict(extra="forbid")

    episode: str
    reward: float = Field(allow_inf_nan=False)  # NaN or infinity: no number to learn from, and not JSON
    member: str | None = None  # optional: checked against the episode's member
    metadata: dict | None = None

    @field_validator("reward", mode="before")
    @classmethod
    def _number(cls, v):  # a JSON number only: "1", " 2.5 ", true are not taken as numbers
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"must be a JSON number, not {type(v).__name__} {json.dumps(v)[:40]}")
        return v

    @field_validator("reward")
    @classmethod
    def _finite(cls, v):
        if not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v


class FinishPost(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # episodes without a reward: fail (refuse, nothing changes), wait (until they come), or failure_reward
    # (each counts as run.failure_reward)
    missing: Literal["fail", "wait", "failure_reward"] | None = None


def parse(model: type[BaseModel], body) -> BaseModel:
    """``body`` as ``model``; a ServeError naming the first bad field otherwise."""
    if not isinstance(body, dict):
        raise ServeError(400, "the request body must be a JSON object")
    try:
        return model.model_validate(body)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            msg = "not a field esopt serve serves (it refuses what it would otherwise ignore)"
        raise ServeError(400, f"{where}: {msg}") from None


def member_index(name: str) -> int | None:
    """K of ``member-K``; None for ``center``; a ServeError for anything else."""
    if name == CENTER:
        return None
    m = _MEMBER.fullmatch(name)
    if m is None:
        raise ServeError(404, f"unknown model {name!r}: this server serves 'center' and 'member-K'")
    return int(m.group(1))


def completion(model: str, replies: list[tuple[dict, str]], prompt_tokens: int, completion_tokens: int) -> dict:
    """An OpenAI chat.completion object; replies: per choice its message and finish reason (serve/tools.py reply)."""
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": i, "message": message, "finish_reason": f, "logprobs": None}
                        for i, (message, f) in enumerate(replies)],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


def chunks(done: dict, include_usage: bool = False):
    """A chat.completion as OpenAI's stream of chat.completion.chunk events (server-sent-event lines):
    per choice its whole text in one chunk, its tool calls (if any) in the next, then its finish reason; the
    usage last, if asked; [DONE]."""
    head = {"id": done["id"], "object": "chat.completion.chunk", "created": done["created"], "model": done["model"]}

    def event(**fields) -> str:
        return f"data: {json.dumps({**head, **fields})}\n\n"

    def delta(c, **d) -> str:
        return event(choices=[{"index": c["index"], "delta": d, "finish_reason": None, "logprobs": None}])

    for c in done["choices"]:
        message = c["message"]
        yield delta(c, role="assistant", content=message["content"])
        if message.get("tool_calls"):  # OpenAI's deltas: each call with its index, here whole in one chunk
            yield delta(c, tool_calls=[{"index": k, **call} for k, call in enumerate(message["tool_calls"])])
        yield event(choices=[{"index": c["index"], "delta": {}, "finish_reason": c["finish_reason"], "logprobs": None}])
    if include_usage:
        yield event(choices=[], usage=done["usage"])
    yield "data: [DONE]\n\n"


def cut_at_stop(text: str, stops: list[str]) -> tuple[str, bool]:
    """``text`` up to the first stop string (not included), and whether one was found."""
    hits = [text.find(s) for s in stops if s in text]
    return (text[: min(hits)], True) if hits else (text, False)
