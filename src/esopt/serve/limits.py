"""Admission limits of esopt serve: what a request may ask for, decided before the model thread sees it.

Every limit is a ``serve.*`` setting (config.py ServeConfig, docs/serve.md). A request past one gets one
JSON error line (protocol.ServeError) and changes nothing:
- a body larger than ``serve.max_body_bytes``: 413, found from Content-Length or while the body is read,
  before it is parsed (app.py);
- ``max_tokens`` above the reply ceiling (``serve.max_tokens``; 0 derives it from the config), ``n`` above
  ``serve.max_n``, a stop string longer than ``serve.max_stop_chars`` (at most 4, as OpenAI's): 400;
- a prompt whose tokens plus the reply's budget exceed the model's positions: 400 (counted by the
  tokenizer in an HTTP thread, not the model's);
- reward ``metadata`` larger than ``serve.max_metadata_bytes`` as JSON: 413.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from ..models.decode import DecodeOptions, Sampling
from .protocol import ChatRequest, RewardPost, ServeError

# serve.max_tokens=0: this many times agent.max_new_tokens (a harness's turn may be longer than esopt's own), at
# least FLOOR_TOKENS
TIMES_AGENT = 8
FLOOR_TOKENS = 256
CHARS_PER_POSITION = 16  # above this many characters a model position, a prompt is refused before it is tokenized


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int
    max_tokens: int
    max_n: int
    max_stop_chars: int
    max_metadata_bytes: int
    timeout_s: float = 300.0  # a chat not answered by then: 504, its decoding stopped
    positions: int | None = None  # the model's positions (None: not known, no prompt-length check)
    default_tokens: int = 16  # a request without max_tokens: agent.max_new_tokens

    @classmethod
    def of(cls, cfg, positions: int | None = None) -> "Limits":
        s, agent_tokens = cfg.serve, cfg.agent.max_new_tokens
        ceiling = s.max_tokens  # as set; derived (0): TIMES_AGENT x the agent's, FLOOR_TOKENS at least, and
        if not ceiling:  # at most half the model's positions, so a prompt keeps the other half
            ceiling = max(TIMES_AGENT * agent_tokens, FLOOR_TOKENS)
            if positions:
                ceiling = min(ceiling, max(positions // 2, agent_tokens))
        return cls(s.max_body_bytes, ceiling, s.max_n, s.max_stop_chars, s.max_metadata_bytes,
                   s.request_timeout_s, positions, agent_tokens)

    def reply_tokens(self, req: ChatRequest) -> int:
        return req.max_completion_tokens or req.max_tokens or self.default_tokens

    def decode_options(self, req: ChatRequest) -> DecodeOptions:
        """How a request's replies are decoded (its seed aside: a batch decodes with its first request's)."""
        return DecodeOptions(self.reply_tokens(req), Sampling(req.temperature, req.top_p), stop=tuple(req.stops()),
                             ignore_eos=req.ignore_eos)

    def check_chat(self, req: ChatRequest) -> None:
        """The request's own fields against the limits (no tokenizing)."""
        asked = self.reply_tokens(req)
        if asked > self.max_tokens:
            field = "max_completion_tokens" if req.max_completion_tokens else "max_tokens"
            raise ServeError(400, f"{field}: {asked} is above this server's ceiling of {self.max_tokens} tokens "
                                  "per reply (serve.max_tokens)")
        if req.n > self.max_n:
            raise ServeError(400, f"n: {req.n} is above this server's limit of {self.max_n} (serve.max_n)")
        if any(len(s) > self.max_stop_chars for s in req.stops()):
            raise ServeError(400, f"stop: a string longer than {self.max_stop_chars} characters "
                                  "(serve.max_stop_chars)")

    def check_chars(self, req: ChatRequest) -> None:
        """Before any tokenizing: a prompt of more characters than CHARS_PER_POSITION x the model's positions is
        refused without being tokenized (text averages 3-5 characters a token, so such a prompt would not fit);
        tokenizing a megabyte takes seconds and holds memory the server keeps."""
        if self.positions is None:
            return
        chars = sum(len(m.content or "") for m in req.messages)
        chars += len(json.dumps([t.schema() for t in req.tools])) if req.tools else 0
        bound = CHARS_PER_POSITION * self.positions
        if chars > bound:
            raise ServeError(400, f"messages: {chars:,} characters are too many for the model's {self.positions} "
                                  f"positions (refused untokenized above {bound:,}: {CHARS_PER_POSITION} a position)")

    def check_prompt(self, req: ChatRequest, prompt_tokens: int) -> None:
        """The tokenized prompt and the reply's budget against the model's positions."""
        if self.positions is None:
            return
        room = self.positions - self.reply_tokens(req)
        if prompt_tokens > room:
            raise ServeError(400, f"messages: the prompt is {prompt_tokens} tokens; with a reply of "
                                  f"{self.reply_tokens(req)} the model's {self.positions} positions leave room "
                                  f"for {room}")

    def check_reward(self, post: RewardPost) -> None:
        if post.metadata is None:
            return
        size = len(json.dumps(post.metadata).encode())
        if size > self.max_metadata_bytes:
            raise ServeError(413, f"metadata: {size} bytes as JSON, at most {self.max_metadata_bytes} "
                                  "(serve.max_metadata_bytes)")

    def check_length(self, content_length: str | None) -> None:
        """A declared Content-Length past the body limit (before anything is read)."""
        if content_length is not None and content_length.isdigit() and int(content_length) > self.max_body_bytes:
            self.too_large()

    def too_large(self):
        raise ServeError(413, f"the request body is larger than {self.max_body_bytes} bytes (serve.max_body_bytes)")


def model_positions(model) -> int | None:
    """The positions a model's config allows (max_position_embeddings), if it says."""
    n = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return n if isinstance(n, int) and n > 0 else None
