"""Tiny random causal LMs with a character-level tokenizer, built offline.

For tests and smoke runs: no download, seconds to build, same code paths as a
real Hugging Face model (chat template, left padding, KV cache, save/load).
"""
from __future__ import annotations

import string
from pathlib import Path

SPECIALS = ["<pad>", "<|im_start|>", "<|im_end|>", "<unk>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TINY_ARCHS = {"tiny-llama": "llama", "tiny-qwen2": "qwen2"}


def char_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    from transformers import PreTrainedTokenizerFast

    chars = sorted(set(string.printable) - {"\x0b", "\x0c"})
    vocab = {tok: i for i, tok in enumerate(SPECIALS + chars)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<|im_end|>", bos_token="<|im_start|>", unk_token="<unk>"
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny(arch: str, hidden: int = 64, layers: int = 2, seed: int = 0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    tok = char_tokenizer()
    common = dict(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id,
        initializer_range=0.5,  # large random weights: varied, input-dependent text (tests can tell rows apart)
    )
    cfg_cls, model_cls = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM)}[arch]
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = model_cls(cfg_cls(**common))
    return model, tok


def write_tiny(alias: str, folder: Path) -> None:
    model, tok = build_tiny(TINY_ARCHS[alias])
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
