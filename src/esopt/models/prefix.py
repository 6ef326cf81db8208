"""Shared-prompt-prefix helpers for batched forward passes: find the prefix
every row shares, lay rows out as [prefix][padding][own suffix], and copy an
encoded prefix's keys/values to every row. Used by generation (models/policy.py)
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
