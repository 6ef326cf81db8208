"""Shared-prompt-prefix helpers for batched forward passes: find the prefix
every row shares, lay rows out as [prefix][padding][own suffix], copy an
encoded prefix's keys/values to every row, and keep an encoded prefix for the
next turns of one rollout (PrefixStore). Used by generation (models/policy.py)
and by the GRPO loss (algos/grpo/grpo.py)."""
from __future__ import annotations

import torch

MIN_SHARED_PREFIX = 16
try:  # transformers 5.x renamed `past_key_values` to `cache`
    from transformers.generation.utils import ALL_CACHE_NAMES as _  # noqa: F401

    CACHE_KWARG = "cache"
except ImportError:
    CACHE_KWARG = "past_key_values"


def common_prefix_len(rows: list[list[int]]) -> int:
    """Length of the token prefix all rows share."""
    first = rows[0]
    n = min(len(r) for r in rows)
    for i in range(n):
        v = first[i]
        if any(r[i] != v for r in rows):
            return i
    return n


def pad_left(rows, pad_id):
    """Rows right-aligned in one (B, width) tensor, with their attention mask."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = torch.tensor(r)
        mask[i, width - len(r) :] = 1
    return ids, mask


def pad_between(rows, shared, pad_id):
    """[shared prefix][padding][own suffix] per row."""
    ids, mask = pad_left([r[shared:] for r in rows], pad_id)
    prefix = torch.tensor(rows[0][:shared]).expand(len(rows), -1)
    return torch.cat([prefix, ids], 1), torch.cat([torch.ones_like(prefix), mask], 1)


def expand_cache(cache, source_row: torch.Tensor) -> None:
    """Row j of the batch gets a copy of row source_row[j] of the prefix cache."""
    for layer in cache.layers:
        layer.keys = layer.keys.index_select(0, source_row)
        layer.values = layer.values.index_select(0, source_row)


class PrefixStore:
    """Encoded shared prefixes (batch of one) by their token ids, for the turns of one rollout.

    Validity: keys/values are a function of the weights; a store lives inside one rollout() call,
    whose weights do not change (a member's perturbation is applied before and restored after it),
    and is dropped when the call returns. The stored tensors are never written: a batch gets
    copies (expand_cache). Only plain full-attention layers are stored."""

    MAX_ENTRIES = 2  # every entry serves the system prompt and examples; more would only cost memory

    def __init__(self):
        self.entries: dict[tuple, list] = {}
        self.hits = self.misses = 0

    def longest(self, ids) -> tuple[int, list | None]:
        """(n, keys/values of ids[:n]) for the longest n of at least MIN_SHARED_PREFIX tokens that a stored
        prefix shares with `ids` ((0, None): none). A causal model's keys/values of the first n tokens
        depend on those n tokens only, so a stored entry's head serves any prompt that starts the same."""
        ids = list(ids)
        best, n = None, 0
        for key in self.entries:
            m = common_prefix_len([list(key), ids])
            if m > n:
                best, n = key, m
        if n < MIN_SHARED_PREFIX:
            self.misses += 1
            return 0, None
        self.hits += 1
        return n, [(k[:, :, :n], v[:, :, :n]) for k, v in self.entries[best]]

    def put(self, ids, cache) -> None:
        from transformers.cache_utils import DynamicLayer

        if all(isinstance(layer, DynamicLayer) for layer in cache.layers) and tuple(ids) not in self.entries:
            if len(self.entries) >= self.MAX_ENTRIES:
                self.entries.pop(next(iter(self.entries)))
            self.entries[tuple(ids)] = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]

    @staticmethod
    def fill(cache, stored) -> None:
        """Make the empty `cache`'s layers hold the stored keys/values (read-only: expand_cache copies them)."""
        for layer, (keys, values) in zip(cache.layers, stored):
            layer.lazy_initialization(keys, values)
            layer.keys, layer.values = keys, values
