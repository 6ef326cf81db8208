"""Preallocated (static) KV caches for every generate path, and a compiled decode step on CUDA.

`agent.decode` picks how HFPolicy decodes:
- `dynamic` (default): caches that grow as tokens are decoded (models/kvgrow.py);
- `static`: transformers' StaticCache, preallocated for the prompt plus the reply (capacity rounded
  up to a multiple of BUCKET positions) with fixed shapes at every step; the keys/values of a shared
  prompt prefix or of an episode's earlier turns (models/turncache.py) are copied into its head;
- `compiled`: static caches, and on CUDA transformers compiles the model's forward with
  torch.compile(mode="reduce-overhead"), whose CUDA graphs replay a whole decode step with one
  launch. Caches are then kept and reused per (batch, capacity), reset in place, so a captured graph
  keeps reading the same buffers; the weights are read at replay, so a member's in-place
  perturbation is what the graph computes with. Batches under low-rank side terms (forward hooks
  whose factors change every generation) decode with static caches but without compilation.

Attention over a static cache runs over its whole capacity with the unused positions masked out:
greedy replies equal the dynamic path's (tests/models/test_static_cache.py), the logits agree to float
rounding.
"""
from __future__ import annotations

from collections import OrderedDict


DECODES = ("dynamic", "static", "compiled")
BUCKET = 64  # capacity granularity: fewer distinct shapes (each shape is one compilation and graph on CUDA)
POOL = 4  # static caches kept for reuse with compiled decoding (the least recently used is dropped)


def capacity(length: int) -> int:
    return -(-int(length) // BUCKET) * BUCKET


class StaticCaches:
    """Static caches for one model: a fresh one per call, or (keep=True) one kept per (batch, capacity)
    and reset in place on reuse."""

    def __init__(self, config, keep: bool = False):
        self.config, self.keep = config, keep
        self._pool: OrderedDict = OrderedDict()

    def get(self, batch: int, length: int):
        """A static cache for `batch` rows of up to `length` positions, empty."""
        from transformers import StaticCache

        key = (int(batch), capacity(length))
        if not self.keep:
            return StaticCache(config=self.config, max_cache_len=key[1])
        cache = self._pool.pop(key, None)
        if cache is None:
            cache = StaticCache(config=self.config, max_cache_len=key[1])
            while len(self._pool) >= POOL:
                self._pool.popitem(last=False)
        else:
            cache.reset()
        self._pool[key] = cache
        return cache


def load(cache, layers, length: int) -> None:
    """Copy the first `length` positions of each layer's (keys, values) into an empty static cache."""
    if len(layers) != len(cache.layers):
        raise ValueError(f"{len(layers)} layers of keys/values for a cache of {len(cache.layers)}")
    for layer, (k, v) in zip(cache.layers, layers):
        if not layer.is_initialized:
            layer.lazy_initialization(k, v)
        if k.shape[0] != layer.keys.shape[0]:
            raise ValueError(f"keys for {k.shape[0]} rows, static cache of {layer.keys.shape[0]}")
        layer.keys[:, :, :length].copy_(k[:, :, :length])
        layer.values[:, :, :length].copy_(v[:, :, :length])
        layer.cumulative_length.fill_(length)
