"""The GGUF export read by llama.cpp itself (node-llama-cpp's prebuilt CPU build, make install-llamacpp):
tiny Llama and Qwen2 models exported as f32 give, token for token, the greedy replies esopt gives when
llama.cpp computes in float32 throughout (an f32 KV cache, no flash attention: its defaults round keys,
values and, on the CPU, queries to f16, which flips a near tie of these random models' logits: 0.018 of
~15 on one prompt), and llama.cpp tokenizes the chat-templated prompts to esopt's ids.
Marked: pytest -m llamacpp."""
from pathlib import Path

import pytest

pytestmark = pytest.mark.llamacpp

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ["Fill row 1: 1 2 _ 4.", "How many r's are in strawberry?", "the quick brown fox 123", "Say: row column value"]


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_llama_cpp_replies_as_esopt_does(tmp_path, arch):
    from test_gguf_export import tiny

    from esopt.models import gguf as esopt_gguf
    from esopt.models.decode import DecodeOptions
    from esopt.models.policy import HFPolicy
    from esopt.studies.machine.llamacpp import EXACT, check_tool, compare, llamacpp_replies

    tool = check_tool(ROOT / "tools" / "llamacpp")
    model, tok = tiny(arch)
    esopt_gguf.write(model, tok, tmp_path / "m.gguf", "f32")
    policy = HFPolicy(model, tok, batch_size=1)  # one prompt at a time, as llama.cpp decodes them
    convs = [[{"role": "system", "content": "You answer."}, {"role": "user", "content": p}] for p in PROMPTS]
    ids: list = []
    replies = policy.generate(convs, DecodeOptions(12), token_ids=ids)
    prompts = [{"task": str(k), "text": text, "tokens": list(p), "reply": said, "max_tokens": 12,
                "reply_tokens": [t for t in r if t != tok.eos_token_id]}
               for k, (text, (p, r), said) in enumerate(zip(policy.prompt_texts(convs), ids, replies))]
    assert all(p["reply_tokens"] for p in prompts)  # something to compare
    llama = llamacpp_replies(tool, tmp_path / "m.gguf", [{k: p[k] for k in ("text", "tokens", "max_tokens")}
                                                          for p in prompts], settings=EXACT)
    row = compare(prompts, llama)
    assert row["same_prompt_tokens"] == len(PROMPTS), row
    assert row["same_replies"] == len(PROMPTS), row["differ"]
