"""A job for the model thread of esopt serve: a chat request to decode, a finish of the generation, or a
wake-up (a reward came in), with the future its HTTP thread waits on."""
from __future__ import annotations

import concurrent.futures
import math
import threading
import time
from dataclasses import dataclass, field

from .protocol import ServeError, completion, cut_at_stop
from .tools import reply


@dataclass
class Job:
    kind: str  # chat | finish | wake | stop
    request: object = None
    generation: int | None = None
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    since: float = field(default_factory=time.monotonic)
    deadline: float = math.inf  # a chat: answered by then (serve.request_timeout_s) or refused with 504
    gone: threading.Event = field(default_factory=threading.Event)  # a chat whose client disconnected
    parts: list | None = None  # a chat being decoded in slices: per reply, [token ids so far, finished]
    prompt_tokens: int = 0
    paused_at: float = 0.0  # when its last slice ended
    target: object = None  # a finish: the generation or evaluation it was sent for

    def dropped(self) -> bool:
        """Nobody waits for this chat's answer any longer (its client left, or its time is up)."""
        return self.gone.is_set() or time.monotonic() > self.deadline

    def drop(self) -> None:
        if not self.future.done():
            self.future.set_exception(ServeError(504, "the reply was not decoded within serve.request_timeout_s "
                                                      f"({self.deadline - self.since:g} s)", "server_error")
                                      if not self.gone.is_set() else ServeError(499, "the client disconnected"))

    # -- a chat decoded in slices (serve/scheduler.py) --------------------------------------------
    def extend(self, i: int, tail: list, ids: tuple, tok, options) -> None:
        """Reply i after one more slice: its tokens so far (tail) and this slice's (prompt ids, reply ids)."""
        if not tail:
            self.prompt_tokens = len(ids[0])
        made = (tail + ids[1])[: options.max_new_tokens]
        # ended: at the end-of-turn token, the token budget or a stop string; else more to come
        ended = bool(made and made[-1] == tok.eos_token_id) or len(made) >= options.max_new_tokens
        if options.stop and not ended:
            ended = cut_at_stop(tok.decode(made, skip_special_tokens=True), list(options.stop))[1]
        self.parts[i] = [made, ended]

    def finished(self) -> bool:
        return all(done for _, done in self.parts)

    def completion(self, tok, options, tools_format: str = "system") -> dict:
        """The OpenAI chat.completion of a chat whose replies all ended (tool calls read as serve/tools.py
        reply says, under the run's resolved agent.tools.format)."""
        replies, made = [], 0
        for r_ids, _ in self.parts:
            text, stopped = cut_at_stop(tok.decode(r_ids, skip_special_tokens=True), list(options.stop))
            ended = stopped or (r_ids and r_ids[-1] == tok.eos_token_id) or len(r_ids) < options.max_new_tokens
            replies.append(reply(text, "stop" if ended else "length", self.request, (tok, tools_format)))
            made += len(r_ids)
        return completion(self.request.model, replies, self.prompt_tokens, made)

