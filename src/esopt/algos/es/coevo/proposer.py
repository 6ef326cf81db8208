"""Who writes candidate skills: the model being tuned (its current, unperturbed weights, greedy,
through the trainer's HFPolicy), or an OpenAI-compatible chat endpoint (coevo.proposer).

A proposer answers a list of prompts with one Reply each: the text, and whether it stopped
because it hit the token limit (truncated). Replies are screened (algos/es/coevo/screen.py) and gated
(algos/es/coevo/gate.py) before anything joins the library; the proposer is never asked again on
resume or replay (the admitted skills are read from history.json).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from ....config import ConfigError
from ....utils.chat_endpoint import ChatEndpointError, chat_completion, chat_url


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
        from ....models.decode import DecodeOptions

        ids: list = []
        texts = self.policy.generate([[{"role": "user", "content": p}] for p in prompts],
                                     DecodeOptions(self.max_new_tokens, seed=seed), token_ids=ids)
        eos = self.policy.tokenizer.eos_token_id
        # the reply ids end with the end-of-turn token when the model stopped by itself
        return [Reply(t, not (reply and reply[-1] == eos) and len(reply) >= self.max_new_tokens)
                for t, (_, reply) in zip(texts, ids)]


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
        try:
            reply = chat_completion(self.url, self.model, [{"role": "user", "content": prompt}],
                                    max_tokens=self.max_new_tokens, temperature=0, timeout_s=self.timeout,
                                    api_key_env=self.key_env, seed=seed)
        except ChatEndpointError as err:
            raise ProposerError(f"proposer: {err}") from None
        return Reply(reply.text, reply.truncated)


def make_proposer(cfg, policy):
    """coevo.proposer's endpoint, or the trainer's policy (the model being tuned)."""
    if cfg.coevo.proposer is not None:
        return EndpointProposer(cfg.coevo.proposer, cfg.coevo.grow.max_new_tokens)
    return ModelProposer(policy, cfg.coevo.grow.max_new_tokens, cfg.model)
