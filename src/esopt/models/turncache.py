"""Per-episode KV caches kept across the turns of one rollout (agent.kv_reuse).

With full history, turn t's prompt is turn t-1's prompt, its reply and the
next observation: re-encoding all of it every turn makes an episode's cost
grow quadratically with its length. A TurnCache keeps, for each episode, the
keys/values of the tokens it has seen (prompt and reply, padding removed) and
lays them out again in the next turn's batch, so that only the tokens after
the longest common prefix of the cached tokens and the new prompt are encoded.

Validity: keys/values are a function of the weights. A TurnCache lives inside
one rollout() call (the episodes of one member, or of one batch of low-rank
members, each row always under its own member) and is dropped when it ends;
it must never be kept across perturbations, updates or generations.

Batch layout (one row per episode, different lengths):
    [padding][cached tokens of this row][padding][new tokens of this row]
The attention mask is 0 on padding; position ids come from the mask's cumsum
(transformers' generate), so each row's positions continue exactly where its
cached tokens end, whatever the padding. Cached keys already carry their
rotary position. Only plain DynamicCache layers are kept (no sliding-window,
static, quantized or recurrent caches): with any other layer type the cache
turns itself off for the rest of the rollout and every turn takes the plain
path.
"""
from __future__ import annotations

import torch

from .kvgrow import GrowingLayer
from .prefix import common_prefix_len


class TurnCache:
    """Keys/values of each episode's tokens so far, under the weights of one rollout."""

    def __init__(self):
        self.rows: dict = {}  # episode key -> (token ids, [(keys (H, L, D), values (H, L, D)) per layer])
        self.enabled = True
        self.why_off = ""
        self.stats = {"reused_tokens": 0, "prefilled_tokens": 0, "partial_matches": 0, "misses": 0,
                      "peak_bytes": 0}

    # ------------------------------------------------------------------ matching
    def reusable(self, key, ids: list[int]) -> int:
        """Leading tokens of `ids` whose keys/values are cached for this episode (0: none).

        The cache holds the episode's last prompt and reply; a prompt that extends them
        reuses them all. One that departs earlier (a chat template that rewrites past
        turns, a reply whose text re-tokenizes differently, windowed history) reuses the
        common prefix only: keys/values of a causal model's first k tokens depend on those
        k tokens alone. At least one token is always left to encode.
        """
        entry = self.rows.get(key) if self.enabled else None
        if entry is None:
            return 0
        n = min(common_prefix_len([entry[0], ids]), len(ids) - 1)
        if n < len(entry[0]):
            self.stats["partial_matches" if n > 0 else "misses"] += 1
        return max(n, 0)

    # ------------------------------------------------------------------ layout
    def assemble(self, keys: list, rows: list[list[int]], reuse: list[int], pad_id: int, reserve: int = 0):
        """(input ids, attention mask, DynamicCache of the cached part) for one batch.

        input ids are the whole layout [pad][cached][pad][new] (generate encodes only the
        columns after the cache); rows with reuse 0 have an all-padding cached part.
        reserve > 0: each layer is a GrowingLayer (models/kvgrow.py) whose buffer also has room
        for the new tokens and `reserve` generated ones, so neither is appended by a copy.
        """
        from transformers import DynamicCache

        past, new = max(reuse), max(len(r) - n for r, n in zip(rows, reuse))
        b = len(rows)
        ids = torch.full((b, past + new), pad_id, dtype=torch.long)
        mask = torch.zeros((b, past + new), dtype=torch.long)
        for i, (r, n) in enumerate(zip(rows, reuse)):
            ids[i, past - n : past] = torch.tensor(r[:n], dtype=torch.long)
            mask[i, past - n : past] = 1
            tail = r[n:]
            ids[i, past + new - len(tail) :] = torch.tensor(tail, dtype=torch.long)
            mask[i, past + new - len(tail) :] = 1
        # this batch's rows leave the store (store() puts them back after the generation), and each
        # row's layer is freed once copied: the keys/values are held once, not twice, while assembling
        taken = [self.rows.pop(k)[1] if n else None for k, n in zip(keys, reuse)]
        for k in keys:
            self.rows.pop(k, None)
        template = next(t for t in taken if t is not None)
        width = past + (new + reserve if reserve else 0)
        cache, nbytes = DynamicCache(), 0
        for layer, (k0, v0) in enumerate(template):
            k_all = k0.new_zeros((b, k0.shape[0], width, k0.shape[-1]))
            v_all = v0.new_zeros((b, v0.shape[0], width, v0.shape[-1]))
            for i, (row, n) in enumerate(zip(taken, reuse)):
                if n:
                    k_i, v_i = row[layer]
                    k_all[i, :, past - n : past] = k_i[:, :n]
                    v_all[i, :, past - n : past] = v_i[:, :n]
                    row[layer] = None
            if reserve:
                grown = GrowingLayer(reserve)
                grown.adopt(k_all, v_all, past)
                cache.layers.append(grown)
            else:
                cache.update(k_all, v_all, layer)  # (a copy: one layer's transient)
            nbytes += _bytes([(k_all, v_all)])
            del k_all, v_all
        self.stats["peak_bytes"] = max(self.stats["peak_bytes"], self.nbytes() + nbytes)
        self.stats["reused_tokens"] += sum(reuse)
        return ids, mask, cache

    def store(self, keys: list, rows: list[list[int]], mask: torch.Tensor, replies: list[list[int]], cache) -> None:
        """Keep each row's keys/values after a generation: its prompt tokens (mask == 1),
        then its reply tokens that were fed back (all but the last generated one)."""
        from transformers.cache_utils import DynamicLayer, StaticLayer

        if not self.enabled:
            return
        layers = getattr(cache, "layers", None)
        if not layers or any(type(layer) not in (DynamicLayer, GrowingLayer, StaticLayer) for layer in layers):
            kinds = sorted({type(layer).__name__ for layer in layers or []}) or [type(cache).__name__]
            self.disable(f"cache layers {', '.join(kinds)} are not plain DynamicLayer or StaticLayer")
            return
        width = mask.shape[1]
        fed = int(layers[0].get_seq_length()) - width  # generated tokens whose keys/values were computed
        positions, ids = [], []
        for r, m, reply in zip(rows, mask, replies):
            g = max(min(len(reply), fed), 0)
            positions.append(torch.cat([m.nonzero().flatten().cpu(), width + torch.arange(g)]))
            ids.append(list(r) + list(reply[:g]))
        per_row = [[] for _ in rows]
        for layer in layers:
            for i, pos in enumerate(positions):
                pos = pos.to(layer.keys.device)
                per_row[i].append((layer.keys[i].index_select(1, pos), layer.values[i].index_select(1, pos)))
            layer.reset()  # free the batch's copy layer by layer (a GrowingLayer's buffer too)
        for key, i_ids, kv in zip(keys, ids, per_row):
            self.rows[key] = (i_ids, kv)
        self.stats["peak_bytes"] = max(self.stats["peak_bytes"], self.nbytes())

    # ------------------------------------------------------------------ bookkeeping
    def drop(self, keys) -> None:
        for k in keys:
            self.rows.pop(k, None)

    def disable(self, why: str) -> None:
        self.enabled, self.why_off = False, why
        self.rows.clear()

    def nbytes(self) -> int:
        """Bytes of keys/values held between turns."""
        return sum(_bytes(kv) for _, kv in self.rows.values())

    def tokens(self) -> int:
        return sum(len(ids) for ids, _ in self.rows.values())


def _bytes(layers) -> int:
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
