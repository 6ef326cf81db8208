"""Policy: batched chat generation with a Hugging Face causal LM."""
from __future__ import annotations

import contextlib

import torch

from .kvgrow import growing_cache
from .decode import Caches, DecodeOptions, RowWeights, Sampling  # noqa: F401 (Sampling: its import path before decode.py)
from .prefix import CACHE_KWARG, MIN_SHARED_PREFIX, PrefixStore, common_prefix_len, expand_cache, pad_between, pad_left
from .static import DECODES, StaticCaches, load
from .turncache import TurnCache


def chat_text(tokenizer, conversation: list[dict]) -> str:
    """A conversation through the chat template, ready for the reply (with its tools, if it carries any:
    agent/tools.py Conversation): what the policy decodes from, and what esopt serve counts."""
    tools = getattr(conversation, "tools", None)
    return tokenizer.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False,
                                         **({"tools": tools} if tools else {}))


class DecodeAborted(Exception):
    """generate's ``abort()`` became true: its decoding stopped there and returned nothing."""


class HFPolicy:
    def __init__(self, model, tokenizer, batch_size: int = 64, prefix_cache: bool = True, grow_cache: bool = True,
                 decode: str = "dynamic"):
        if decode not in DECODES:
            raise ValueError(f"unknown agent.decode {decode!r}; allowed: {', '.join(DECODES)}")
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.prefix_cache = prefix_cache
        # agent.decode static/compiled: preallocated caches (models/static.py), kept for reuse when compiled
        self.decode = decode
        self.static = None if decode == "dynamic" else StaticCaches(model.config, keep=decode == "compiled")
        # keys/values decoded into spare room of their buffer instead of transformers' copy per token
        # (models/kvgrow.py); only where generate would make a plain dynamic cache itself
        self.grow_cache = grow_cache and self.static is None and self._cache_implementation() in (None, "dynamic")
        self.device = next(model.parameters()).device
        self.tokens_generated = 0
        self.tokens_prefilled = 0  # prompt tokens encoded (a shared prefix once per batch; cached tokens not at all)

    @classmethod
    def for_agent(cls, model, tokenizer, agent) -> "HFPolicy":
        """The policy an AgentConfig (cfg.agent) asks for: its batch size and decode mode."""
        return cls(model, tokenizer, agent.batch_size, decode=agent.decode)

    def prompt_texts(self, conversations: list[list[dict]]) -> list[str]:
        return [chat_text(self.tokenizer, c) for c in conversations]

    def past_positions(self, conversations: list[list[dict]], reserve: int) -> list[str | None]:
        """Per conversation, why its prompt and a reply of `reserve` tokens do not fit the model's positions
        (None: they fit). A prompt of no more UTF-8 bytes than fit is not tokenized (a token is at least a byte
        of text, and a tokenizer may add one); a longer one is, once (observations are capped in characters,
        agent.max_observation_chars, so this cannot stall)."""
        limit = getattr(self.model.config, "max_position_embeddings", None)
        out: list[str | None] = []
        for text in self.prompt_texts(conversations) if limit else []:
            if len(text.encode("utf-8")) + 1 + reserve <= limit:
                out.append(None)
                continue
            n = len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            out.append(None if n + reserve <= limit else
                       f"the prompt is {n:,} tokens: with a reply of up to {reserve:,} (agent.max_new_tokens) it "
                       f"passes the model's {limit:,} positions (shorten the observations, or keep fewer turns: "
                       "agent.history=window)")
        return out or [None] * len(conversations)

    @torch.inference_mode()
    def generate(self, conversations: list[list[dict]], options: DecodeOptions, rows: RowWeights | None = None,
                 caches: Caches | None = None, tails: list | None = None, token_ids: list | None = None,
                 abort=None) -> list[str]:
        """One reply per conversation, decoded as ``options`` says (models/decode.py); left-padded batches of
        at most batch_size rows, KV cache, stop at end of turn.

        rows (RowWeights), if given: the rows run under different weights (e.g. low-rank side terms with one
        member per row); the shared-prefix cache is then off, unless rows.groups says which rows share
        weights: the prefix is then encoded once per group, under the weights of one row of that group.
        caches (Caches): caches.turns with caches.keys (one episode id per conversation): each conversation's
        keys/values are kept there after its reply, and the next call encodes only the tokens after what it
        has cached for that episode (models/turncache.py); a batch where some row reuses a cache does not use
        the shared-prefix cache. caches.prefixes (one per rollout: the weights must not change while it lives):
        a shared prefix encoded by an earlier call is reused instead of encoded again.
        tails, if given, are token ids appended to each conversation's prompt (a reply decoded so far, which
        this call continues; with caches.turns, its keys/values are reused).
        token_ids, if a list is given, receives one (prompt ids, reply ids) pair per conversation: the exact
        tokens decoded from and generated (up to and including the end-of-turn token), for training on them.
        abort() -> bool, if given, is asked at every decode step: once it is true, decoding stops there and
        DecodeAborted is raised (a server's cancelled or overdue request, a stop asked for mid-decode).
        """
        texts = self.prompt_texts(conversations)
        out: list[str] = []
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start : start + self.batch_size]
            if abort is not None and abort():
                raise DecodeAborted
            out.extend(self._generate_batch(chunk, options.but(seed=options.seed + start),
                                            None if rows is None else rows.rows(start, len(chunk)),
                                            None if caches is None else caches.rows(start, len(chunk)),
                                            None if tails is None else tails[start : start + len(chunk)],
                                            token_ids, abort))
        return out

    def new_prefix_store(self) -> PrefixStore | None:
        """An empty store of encoded shared prefixes for one rollout (None: this policy never shares one)."""
        return PrefixStore() if self.prefix_cache and self.grow_cache else None

    def new_turn_cache(self) -> TurnCache | None:
        """An empty per-episode KV cache for one rollout (None where this model cannot keep one:
        a generation config asking for a static or quantized cache)."""
        return TurnCache() if self._cache_implementation() in (None, "dynamic") else None

    def _cache_implementation(self):
        return getattr(getattr(self.model, "generation_config", None), "cache_implementation", None)

    def _empty_cache(self, reserve: int) -> dict:
        """The cache keyword for a forward or generate call: a growing cache with `reserve` spare positions
        (or nothing: transformers makes its own)."""
        return {CACHE_KWARG: growing_cache(self.model.config, reserve)} if self.grow_cache else {}

    def _generate_batch(self, texts, options: DecodeOptions, weights: RowWeights | None, caches: Caches | None,
                        tails, token_ids, abort):
        """One batch of generate's (its arguments, for these rows, numbered from 0)."""
        row_context, groups = (None, None) if weights is None else (weights.context, weights.groups)
        turn_cache, keys, prefix_store = (None, None, None) if caches is None else \
            (caches.turns, caches.keys, caches.prefixes)
        max_new_tokens, sampling, seed = options.max_new_tokens, options.sampling, options.seed
        stop, ignore_eos = options.stopper(), options.ignore_eos
        tok = self.tokenizer
        rows = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        if tails is not None:
            rows = [r + list(tail) for r, tail in zip(rows, tails)]
        reuse = [turn_cache.reusable(k, r) for k, r in zip(keys, rows)] if turn_cache is not None else [0] * len(rows)
        can_share = (self.prefix_cache and len(rows) > 1 and (row_context is None or groups is not None)
                     and not any(reuse))
        shared = common_prefix_len(rows) if can_share else 0
        shared = min(shared, min(len(r) for r in rows) - 1)  # every row keeps >= 1 token to decode from
        kwargs = dict(max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
        if ignore_eos:
            kwargs["min_new_tokens"] = max_new_tokens
        if sampling.temperature > 0:
            kwargs.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k or None)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        loaded = 0  # positions of a shared prefix or earlier turns already in the cache (copied into a static one)
        if any(reuse):  # each row continues from its own cached tokens (models/turncache.py)
            ids, mask, kwargs[CACHE_KWARG] = turn_cache.assemble(keys, rows, reuse, tok.pad_token_id,
                                                                 reserve=max_new_tokens if self.grow_cache else 0)
            loaded = kwargs[CACHE_KWARG].get_seq_length()
            self.tokens_prefilled += sum(len(r) - n for r, n in zip(rows, reuse))
        elif shared >= MIN_SHARED_PREFIX:
            # The system prompt, examples and fixed text are shared by every row: encode them
            # once and give all rows a copy of that KV cache; padding sits between prefix and suffix.
            ids, mask = pad_between(rows, shared, tok.pad_token_id)
            prefix = ids[:1, :shared].to(self.device)
            # expand_cache's copy for every row is adopted by the first update, which leaves room for the reply
            grow = self._empty_cache(max_new_tokens)
            if row_context is None:
                known, stored = prefix_store.longest(rows[0][:shared]) if prefix_store is not None else (0, None)
                if stored is None:
                    cache = self.model(input_ids=prefix, use_cache=True, **grow)[CACHE_KWARG]
                else:  # encoded by an earlier turn of this rollout, under the same weights: only the rest now
                    cache = grow[CACHE_KWARG]
                    PrefixStore.fill(cache, stored)
                    if known < shared:
                        cache = self.model(input_ids=prefix[:, known:], use_cache=True, **{CACHE_KWARG: cache})[CACHE_KWARG]
                    self.tokens_prefilled -= known
                if prefix_store is not None and known < shared:
                    prefix_store.put(rows[0][:shared], cache)
                expand_cache(cache, torch.zeros(len(rows), dtype=torch.long, device=self.device))
            else:  # one prefix per weight group, encoded under the context of its first row
                first = {}
                for i, g in enumerate(groups):
                    first.setdefault(g, i)
                with row_context(list(first.values())):
                    cache = self.model(input_ids=prefix.expand(len(first), -1), use_cache=True, **grow)[CACHE_KWARG]
                slot = {g: k for k, g in enumerate(first)}
                expand_cache(cache, torch.tensor([slot[g] for g in groups], device=self.device))
            kwargs[CACHE_KWARG] = cache
            loaded = cache.get_seq_length()
            self.tokens_prefilled += shared + sum(len(r) - shared for r in rows)
        else:
            ids, mask = pad_left(rows, tok.pad_token_id)
            kwargs.update(self._empty_cache(max_new_tokens))
            self.tokens_prefilled += sum(len(r) for r in rows)
        if self.static is not None:  # the same keys/values in the head of a preallocated cache
            static = self.static.get(len(rows), ids.shape[1] + max_new_tokens)
            if loaded:
                load(static, [(layer.keys, layer.values) for layer in kwargs[CACHE_KWARG].layers], int(loaded))
            kwargs[CACHE_KWARG] = static
            # transformers compiles the forward on CUDA for a static cache (CUDA graphs); not under side terms,
            # whose hooks change with every generation's members
            kwargs["disable_compile"] = self.decode != "compiled" or row_context is not None
        ids, mask = ids.to(self.device), mask.to(self.device)
        if stop is not None or abort is not None:
            from transformers import StoppingCriteriaList

            kwargs["stopping_criteria"] = StoppingCriteriaList(
                ([_text_stop(stop, tok, ids.shape[1])] if stop is not None else [])
                + ([_abort_stop(abort)] if abort is not None else []))
        # sampling draws from a forked, locally seeded RNG: the global RNG is left as it was
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            # torch takes [-2**63, 2**64): a seed past it (a served request's, plus a turn's offset) wraps
            torch.manual_seed(seed if -(1 << 63) <= seed < (1 << 64) else seed % (1 << 63))
            with row_context(list(range(len(rows)))) if row_context else contextlib.nullcontext():
                gen = self.model.generate(input_ids=ids, attention_mask=mask, return_dict_in_generate=True, **kwargs)
        if abort is not None and abort():
            raise DecodeAborted
        new = gen.sequences[:, ids.shape[1] :]
        self.tokens_generated += int((new != tok.pad_token_id).sum())
        replies = [_until_eos(n, tok.eos_token_id) for n in new.tolist()]
        if turn_cache is not None:
            turn_cache.stats["prefilled_tokens"] += sum(len(r) - n for r, n in zip(rows, reuse))
            turn_cache.store(keys, rows, mask, replies, getattr(gen, CACHE_KWARG, None))
        del gen, kwargs  # the batch's keys/values are not kept past this call (turn_cache holds its own copy)
        if token_ids is not None:
            token_ids.extend(zip(rows, replies))
        return tok.batch_decode(new, skip_special_tokens=True)


def _text_stop(stop, tokenizer, prompt_len: int):
    """A stopping criterion that ends each row whose decoded reply so far satisfies ``stop``."""
    from transformers import StoppingCriteria

    class TextStop(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            texts = tokenizer.batch_decode(input_ids[:, prompt_len:], skip_special_tokens=True)
            return torch.tensor([bool(stop(t)) for t in texts], dtype=torch.bool, device=input_ids.device)

    return TextStop()


def _abort_stop(abort):
    """A stopping criterion that ends every row at once when ``abort()`` is true (nothing is decoded to ask)."""
    from transformers import StoppingCriteria

    class Abort(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            return torch.full((input_ids.shape[0],), bool(abort()), dtype=torch.bool, device=input_ids.device)

    return Abort()


def _until_eos(ids: list[int], eos: int) -> list[int]:
    """Generated ids up to and including the first end-of-turn token (the rest is padding)."""
    return ids[: ids.index(eos) + 1] if eos in ids else ids
