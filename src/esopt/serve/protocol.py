"""What esopt serve reads and writes: OpenAI's chat-completions schema (the part an agent harness
uses) and the bodies of the /es routes. Every bad body is one error line naming the field."""
from __future__ import annotations

import json
import math
import re
import time
import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

CENTER = "center"
_MEMBER = re.compile(r"member-(\d+)")


class ServeError(Exception):
    """A request that changes nothing: its HTTP status and one line."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "code": self.status}}


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")  # name, tool_call_id ... are accepted and not used

    role: Literal["system", "user", "assistant", "developer"]
    content: str | list

    @field_validator("content")
    @classmethod
    def _text(cls, v):
        if isinstance(v, list):  # [{"type": "text", "text": ...}, ...]: the text parts, joined
            parts = [p.get("text") for p in v if isinstance(p, dict) and p.get("type") == "text"]
            if len(parts) != len(v) or not all(isinstance(p, str) for p in parts):
                raise ValueError("only text content parts are served")
            return "".join(parts)
        return v


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")  # logprobs, tools ... are not served; said in docs/serve.md

    model: str
    messages: list[Message] = Field(min_length=1)
    temperature: float = Field(0.0, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    n: int = Field(1, ge=1)  # at most serve.max_n (serve/limits.py)
    seed: int | None = None
    ignore_eos: bool = False  # vLLM's extension: decode max_tokens tokens, never the end-of-turn token (benchmarks)
    stream: bool = False  # answered as server-sent events once the whole reply is decoded (chunks())
    stream_options: dict | None = None  # include_usage: a last chunk with the usage counts

    def stops(self) -> list[str]:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if len(stops) > 4 or any(not s for s in stops):
            raise ServeError(400, "stop: at most 4 non-empty strings")
        return stops

    def conversation(self) -> list[dict]:
        return [{"role": "system" if m.role == "developer" else m.role, "content": m.content} for m in self.messages]


class RewardPost(BaseModel):
    model_config = ConfigDict(extra="forbid")

    episode: str
    reward: float = Field(allow_inf_nan=False)  # NaN or infinity: no number to learn from, and not JSON
    member: str | None = None  # optional: checked against the episode's member
    metadata: dict | None = None

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
        raise ServeError(400, f"{where}: {msg}") from None


def member_index(name: str) -> int | None:
    """K of ``member-K``; None for ``center``; a ServeError for anything else."""
    if name == CENTER:
        return None
    m = _MEMBER.fullmatch(name)
    if m is None:
        raise ServeError(404, f"unknown model {name!r}: this server serves 'center' and 'member-K'")
    return int(m.group(1))


def completion(model: str, texts: list[str], finish: list[str], prompt_tokens: int, completion_tokens: int) -> dict:
    """An OpenAI chat.completion object."""
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": f,
                         "logprobs": None} for i, (t, f) in enumerate(zip(texts, finish))],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


def chunks(done: dict, include_usage: bool = False):
    """A chat.completion as OpenAI's stream of chat.completion.chunk events (server-sent-event lines):
    per choice its whole text in one chunk, then its finish reason; the usage last, if asked; [DONE]."""
    head = {"id": done["id"], "object": "chat.completion.chunk", "created": done["created"], "model": done["model"]}

    def event(**fields) -> str:
        return f"data: {json.dumps({**head, **fields})}\n\n"

    for c in done["choices"]:
        yield event(choices=[{"index": c["index"], "delta": {"role": "assistant", "content": c["message"]["content"]},
                              "finish_reason": None, "logprobs": None}])
        yield event(choices=[{"index": c["index"], "delta": {}, "finish_reason": c["finish_reason"], "logprobs": None}])
    if include_usage:
        yield event(choices=[], usage=done["usage"])
    yield "data: [DONE]\n\n"


def cut_at_stop(text: str, stops: list[str]) -> tuple[str, bool]:
    """``text`` up to the first stop string (not included), and whether one was found."""
    hits = [text.find(s) for s in stops if s in text]
    return (text[: min(hits)], True) if hits else (text, False)
