"""The LLM judge for WebArena's ``fuzzy_match``: any OpenAI-compatible chat endpoint (utils/chat_endpoint.py).

``env.options.web.judge`` names it: ``base_url`` (e.g. ``https://api.openai.com/v1``
or a local ``http://127.0.0.1:8000/v1``), ``model``, and ``api_key_env``, the
name of the environment variable holding the API key (none: no key is sent).
Each question is one ``POST {base_url}/chat/completions`` at temperature 0;
the reply must contain a verdict word, else the grading fails with
:class:`JudgeError` (an episode is never silently scored 0 because the judge
said something else). Nothing here runs at import.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from ....utils.chat_endpoint import ChatEndpointError, chat_completion

_SYSTEM = "You grade the answers of an assistant that carried out tasks on websites. Be strict and brief."
_ANSWER = ("A user gave an assistant this task:\n{question}\n\nThe correct answer is:\n{reference}\n\n"
           "The assistant answered:\n{answer}\n\nDoes the assistant's answer say the same as the correct answer? "
           "Wording and format may differ; extra detail is fine if nothing contradicts the correct answer; "
           "'N/A' means the task cannot be done. Reply with one word: correct, partially or incorrect.")
_REASON = ("A user gave an assistant this task:\n{question}\n\nThe task cannot be done, because:\n{reference}\n\n"
           "The assistant replied:\n{answer}\n\nDoes the assistant give the same reason why the task cannot be "
           "done (even if only implicitly)? Reply with one word: same or different.")


class JudgeError(RuntimeError):
    """The judge could not be asked, or its reply held no verdict."""


@dataclass(frozen=True)
class Judge:
    base_url: str
    model: str
    api_key_env: str | None = None
    timeout_s: float = 60.0

    @classmethod
    def from_config(cls, cfg) -> "Judge | None":
        """A judge from ``env.options.web.judge`` (a dict or an object with the same fields; None: no judge)."""
        if cfg is None:
            return None
        get = cfg.get if isinstance(cfg, dict) else (lambda k, d=None: getattr(cfg, k, d))
        return cls(get("base_url"), get("model"), get("api_key_env"), float(get("timeout_s", 60.0)))

    def problem(self) -> str | None:
        """What keeps this judge from being asked (checked before a run), or None."""
        parts = urlsplit(self.base_url or "")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return f"env.options.web.judge.base_url={self.base_url!r} is not an http(s) URL (e.g. https://api.openai.com/v1)"
        if not self.model:
            return "env.options.web.judge.model is empty: name the judge model"
        if self.api_key_env and not os.environ.get(self.api_key_env):
            return f"env.options.web.judge.api_key_env={self.api_key_env} but that environment variable is not set"
        return None

    def same_answer(self, question: str, reference: str, answer: str) -> bool:
        reply = self._ask(_ANSWER.format(question=question, reference=reference, answer=answer))
        return _verdict(reply, yes="correct", no=("incorrect", "partially"))

    def same_reason(self, question: str, reason: str, answer: str) -> bool:
        reply = self._ask(_REASON.format(question=question, reference=reason, answer=answer))
        return _verdict(reply, yes="same", no=("different",))

    def _ask(self, prompt: str) -> str:
        problem = self.problem()
        if problem:
            raise JudgeError(problem)
        messages = [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": prompt}]
        try:
            return chat_completion(self.base_url, self.model, messages, max_tokens=16, temperature=0,
                                   timeout_s=self.timeout_s, api_key_env=self.api_key_env).text
        except ChatEndpointError as err:
            raise JudgeError(f"judge {err}") from None


def _verdict(reply: str, yes: str, no: tuple[str, ...]) -> bool:
    words = re.findall(r"[a-z]+", reply.lower())
    if any(w in no for w in words):
        return False
    if yes in words:
        return True
    raise JudgeError(f"the judge's reply holds no verdict ({yes} or {'/'.join(no)}): {reply[:200]!r}")
