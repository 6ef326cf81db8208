"""Policy: batched chat generation with a Hugging Face causal LM."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = 0


class HFPolicy:
    def __init__(self, model, tokenizer, batch_size: int = 64):
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.device = next(model.parameters()).device
        self.tokens_generated = 0

    def prompt_texts(self, conversations: list[list[dict]]) -> list[str]:
        return [self.tokenizer.apply_chat_template(c, add_generation_prompt=True, tokenize=False) for c in conversations]

    @torch.inference_mode()
    def generate(self, conversations: list[list[dict]], max_new_tokens: int, sampling: Sampling = Sampling(), seed: int = 0) -> list[str]:
        """One reply per conversation; left-padded batches, KV cache, stop at end of turn."""
        texts = self.prompt_texts(conversations)
        out: list[str] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(self._generate_batch(texts[start : start + self.batch_size], max_new_tokens, sampling, seed + start))
        return out

    def _generate_batch(self, texts, max_new_tokens, sampling, seed):
        tok = self.tokenizer
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        kwargs = dict(max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
        if sampling.temperature > 0:
            kwargs.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k or None)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        # sampling draws from a forked, locally seeded RNG: the global RNG is left as it was
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            torch.manual_seed(seed)
            ids = self.model.generate(**enc, **kwargs)
        new = ids[:, enc["input_ids"].shape[1] :]
        self.tokens_generated += int((new != tok.pad_token_id).sum())
        return tok.batch_decode(new, skip_special_tokens=True)
