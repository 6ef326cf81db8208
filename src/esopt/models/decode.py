"""What a decode is asked for, as three small objects passed whole down the decode path.

- DecodeOptions: how replies are decoded (token budget, sampling, seed, stops). Frozen and
  hashable: built once (from the config, or from a served request) and passed unchanged from the
  trainer or the server through the rollout to the policy; ``but(...)`` gives a changed copy (a
  turn's seed, a slice's budget).
- RowWeights: the rows of one batch run under different weights (low-rank members, one per row):
  ``context(row indices)`` enters their weights for a forward of those rows, ``groups`` says which
  rows share weights (they may then share one encoding of a common prompt prefix).
- Caches: keys/values kept across calls under one set of weights: per-episode turn caches
  (models/turncache.py, keyed by ``keys``, one per conversation) and shared prompt prefixes
  (models/prefix.py).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = 0


@dataclass(frozen=True)
class DecodeOptions:
    """How replies are decoded. stop: strings, a reply ends after the first of them appears (the text is
    kept up to that token); stop_when(reply so far) -> bool: a test of the reply instead (e.g. a code
    block's closing fence); ignore_eos: every row decodes max_new_tokens tokens."""

    max_new_tokens: int = 16
    sampling: Sampling = Sampling()
    seed: int = 0
    stop: tuple[str, ...] = ()
    stop_when: Callable[[str], bool] | None = None
    ignore_eos: bool = False

    @classmethod
    def of_agent(cls, agent_cfg, sampling: Sampling | None = None) -> "DecodeOptions":
        """An AgentConfig's (cfg.agent) decoding: its max_new_tokens and sampling (or `sampling` instead)."""
        s = agent_cfg.sampling
        return cls(agent_cfg.max_new_tokens, sampling or Sampling(s.temperature, s.top_p, s.top_k))

    def but(self, **changes) -> "DecodeOptions":
        """A copy with these fields changed."""
        return dataclasses.replace(self, **changes)

    def stopper(self) -> Callable[[str], bool] | None:
        """stop and stop_when as one test of a reply so far (None: neither is set)."""
        if not self.stop:
            return self.stop_when
        stops, other = self.stop, self.stop_when
        return lambda text: any(s in text for s in stops) or (other is not None and bool(other(text)))


@dataclass(frozen=True)
class RowWeights:
    """Rows of one batch under different weights: context(row indices) -> a context manager that puts
    those rows' weights in place for a forward of them; groups: one id per row, equal for rows that
    share weights (None: no two rows may share an encoding)."""

    context: Callable
    groups: list | None = None

    def rows(self, start: int, n: int) -> "RowWeights":
        """The same weights for rows start..start+n-1 of this batch, numbered from 0."""
        outer = self.context
        return RowWeights(lambda local: outer([start + i for i in local]),
                          None if self.groups is None else list(self.groups[start : start + n]))

    def of(self, picked: list[int]) -> "RowWeights":
        """The same weights for the rows `picked` of this batch (in that order), numbered from 0."""
        outer = self.context
        return RowWeights(lambda local: outer([picked[i] for i in local]),
                          None if self.groups is None else [self.groups[i] for i in picked])


@dataclass
class Caches:
    """Keys/values a decode may reuse and extend, all under the weights of this moment: turns (a TurnCache,
    from policy.new_turn_cache()) with keys (one id per conversation: an episode, a served reply), and
    prefixes (a PrefixStore, from policy.new_prefix_store())."""

    turns: object = None
    keys: list | None = None
    prefixes: object = None

    def rows(self, start: int, n: int) -> "Caches":
        return Caches(self.turns, None if self.keys is None else list(self.keys[start : start + n]), self.prefixes)
