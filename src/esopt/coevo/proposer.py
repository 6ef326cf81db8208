"""Who writes candidate skills: the model being tuned (its current, unperturbed weights, greedy,
through the trainer's HFPolicy), or an OpenAI-compatible chat endpoint (coevo.proposer).

A proposer answers a list of prompts with one Reply each: the text, and whether it stopped
because it hit the token limit (truncated). Replies are screened (coevo/screen.py) and gated
(coevo/gate.py) before anything joins the library; the proposer is never asked again on
resume or replay (the admitted skills are read from history.json).
"""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..config import ConfigError


@dataclass(frozen=True)
class Reply:
    text: str
    truncated: bool  # stopped at the token limit, not at the end of its turn


class ProposerError(RuntimeError):
    """The proposer could not be asked, or sent no reply (the growth step records it and the run goes on)."""


class ModelProposer:
    """The policy being tuned: greedy replies, one user message per prompt, decoded in one batch."""

    def __init__(self, policy, max_new_tokens: int, name: str):
        self.policy, self.max_new_tokens = policy, max_new_tokens
        self.name = f"model {name} (the weights being tuned, greedy)"

    def propose(self, prompts: list[str], seed: int) -> list[Reply]:
        from ..models.policy import Sampling

        ids: list = []
        texts = self.policy.generate([[{"role": "user", "content": p}] for p in prompts], self.max_new_tokens,
                                     Sampling(), seed=seed, token_ids=ids)
        eos = self.policy.tokenizer.eos_token_id
        # the reply ids end with the end-of-turn token when the model stopped by itself
        return [Reply(t, not (reply and reply[-1] == eos) and len(reply) >= self.max_new_tokens)
                for t, (_, reply) in zip(texts, ids)]


def chat_url(url: str) -> str:
    """POST target: `url` itself if it ends with /chat/completions, else <url>/chat/completions."""
    url = url.rstrip("/")
    return url if url.endswith("/chat/completions") else url + "/chat/completions"


def proposer_problem(pcfg) -> str | None:
    """What keeps coevo.proposer from being asked (checked before a run writes anything), or None."""
    if pcfg is None:
        return None
    parts = urlsplit(pcfg.url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return (f"coevo.proposer.url={pcfg.url!r} is not an http(s) URL (e.g. http://127.0.0.1:8000/v1, "
                "an OpenAI-compatible API)")
    if not pcfg.model.strip():
        return "coevo.proposer.model is empty: name the model the endpoint should use"
    if pcfg.api_key_env is not None and not os.environ.get(pcfg.api_key_env):
        return (f"coevo.proposer.api_key_env={pcfg.api_key_env} but that environment variable is not set "
                "(export it, or leave api_key_env out for an endpoint without a key)")
    return None


def check_proposer(pcfg) -> None:
    problem = proposer_problem(pcfg)
    if problem:
        raise ConfigError(problem)


class EndpointProposer:
    """An OpenAI-compatible chat endpoint: one POST <url>/chat/completions per prompt, temperature 0,
    max_tokens = coevo.grow.max_new_tokens; finish_reason "length" means truncated."""

    def __init__(self, pcfg, max_new_tokens: int):
        check_proposer(pcfg)
        self.url, self.model, self.key_env = chat_url(pcfg.url), pcfg.model, pcfg.api_key_env
        self.timeout, self.max_new_tokens = pcfg.timeout_s, max_new_tokens
        self.name = f"endpoint {self.model} at {self.url}"

    def propose(self, prompts: list[str], seed: int) -> list[Reply]:
        return [self._ask(p, seed) for p in prompts]

    def _ask(self, prompt: str, seed: int) -> Reply:
        body = {"model": self.model, "temperature": 0, "max_tokens": self.max_new_tokens, "seed": seed % (1 << 31),
                "messages": [{"role": "user", "content": prompt}]}
        headers = {"Content-Type": "application/json"}
        if self.key_env:
            key = os.environ.get(self.key_env)
            if not key:
                raise ProposerError(f"coevo.proposer.api_key_env={self.key_env} is no longer set")
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode("utf-8"), headers=headers,
                                         method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - the user's endpoint
                data = json.loads(response.read().decode("utf-8"))
            choice = data["choices"][0]
            return Reply(str(choice["message"]["content"] or ""), choice.get("finish_reason") == "length")
        except urllib.error.HTTPError as err:
            raise ProposerError(f"proposer {self.url} answered HTTP {err.code}: {err.read()[:200]!r}") from None
        except (urllib.error.URLError, OSError) as err:
            raise ProposerError(f"proposer {self.url} unreachable: {err}") from None
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as err:
            raise ProposerError(f"proposer {self.url} sent no chat completion ({type(err).__name__}: {err})") from None


def make_proposer(cfg, policy):
    """coevo.proposer's endpoint, or the trainer's policy (the model being tuned)."""
    if cfg.coevo.proposer is not None:
        return EndpointProposer(cfg.coevo.proposer, cfg.coevo.grow.max_new_tokens)
    return ModelProposer(policy, cfg.coevo.grow.max_new_tokens, cfg.model)
