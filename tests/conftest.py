import pytest
import torch


def tiny_llama(seed: int = 0, vocab: int = 256, hidden: int = 64, layers: int = 2):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=True,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(cfg)
    model.eval().requires_grad_(False)
    return model


@pytest.fixture
def tiny_model():
    return tiny_llama()
