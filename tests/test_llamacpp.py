"""The GGUF export read by llama.cpp itself (node-llama-cpp's prebuilt CPU build, make install-llamacpp):
tiny Llama, Qwen2 and Qwen3 models exported as f32 give, token for token, the greedy replies esopt gives
when llama.cpp computes in float32 throughout (an f32 KV cache, no flash attention: its defaults round
keys, values and, on the CPU, queries to f16, which flips a near tie of these random models' logits: 0.018
of ~15 on one prompt), and llama.cpp tokenizes the chat-templated prompts to esopt's ids. Through the
command line, a trained run's export loads and replies the same; esopt's tiny models (tokenizers llama.cpp
cannot read) are refused. Marked: pytest -m llamacpp."""
from pathlib import Path

import pytest

pytestmark = pytest.mark.llamacpp

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ["Fill row 1: 1 2 _ 4.", "How many r's are in strawberry?", "the quick brown fox 123", "Say: row column value"]


def same_in_llama_cpp(model, tok, gguf_file: Path) -> None:
    """llama.cpp, given gguf_file, tokenizes PROMPTS (chat-templated) to esopt's ids and replies as esopt does."""
    from esopt.models.decode import DecodeOptions
    from esopt.models.policy import HFPolicy
    from esopt.studies.machine.llamacpp import EXACT, check_tool, compare, llamacpp_replies

    tool = check_tool(ROOT / "tools" / "llamacpp")
    policy = HFPolicy(model, tok, batch_size=1)  # one prompt at a time, as llama.cpp decodes them
    convs = [[{"role": "system", "content": "You answer."}, {"role": "user", "content": p}] for p in PROMPTS]
    ids: list = []
    replies = policy.generate(convs, DecodeOptions(12), token_ids=ids)
    prompts = [{"task": str(k), "text": text, "tokens": list(p), "reply": said, "max_tokens": 12,
                "reply_tokens": [t for t in r if t != tok.eos_token_id]}
               for k, (text, (p, r), said) in enumerate(zip(policy.prompt_texts(convs), ids, replies))]
    assert all(p["reply_tokens"] for p in prompts)  # something to compare
    llama = llamacpp_replies(tool, gguf_file, [{k: p[k] for k in ("text", "tokens", "max_tokens")} for p in prompts],
                             settings=EXACT)
    row = compare(prompts, llama)
    assert row["same_prompt_tokens"] == len(PROMPTS), row
    assert row["same_replies"] == len(PROMPTS), row["differ"]


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_llama_cpp_replies_as_esopt_does(tmp_path, arch):
    from test_gguf_export import tiny

    from esopt.models import gguf as esopt_gguf

    model, tok = tiny(arch)
    esopt_gguf.write(model, tok, tmp_path / "m.gguf", "f32")
    same_in_llama_cpp(model, tok, tmp_path / "m.gguf")


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_a_run_exported_through_the_cli_loads_in_llama_cpp(esopt_cache, tmp_path, capsys, arch):
    """A run trained one generation from a byte-level BPE model folder, exported with esopt export --format
    gguf, loads in llama.cpp and replies as the run's final weights do in esopt; a run of esopt's tiny model
    of the same architecture (its character vocabulary: no merges for qwen2, WordLevel for llama) is refused
    in one line, exit 2, with no folder written (the tiny-qwen2 file was written, and llama.cpp refused it:
    'cannot find tokenizer merges in model file')."""
    from conftest import TINY_OVERRIDES
    from test_gguf_export import tiny

    from esopt.cli import main
    from esopt.train.weights import load_run_weights

    model, tok = tiny(arch)
    model.save_pretrained(tmp_path / "base")
    tok.save_pretrained(tmp_path / "base")
    train = ["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=1", "tasks.heldout=2",
             f"run.out_dir={tmp_path}"]
    assert main([*train, f"model={tmp_path / 'base'}", "run.name=bpe"]) == 0
    assert main(["export", str(tmp_path / "bpe"), str(tmp_path / "out"), "--format", "gguf"]) == 0
    trained, trained_tok, _, n = load_run_weights(tmp_path / "bpe")
    assert n == 1
    same_in_llama_cpp(trained, trained_tok, tmp_path / "out" / "model.gguf")

    assert main([*train, f"model=tiny-{arch}", "run.name=chars"]) == 0
    capsys.readouterr()
    assert main(["export", str(tmp_path / "chars"), str(tmp_path / "g"), "--format", "gguf"]) == 2
    err = capsys.readouterr().err
    said = {"qwen2": "a BPE tokenizer with no merges", "llama": "a WordLevel tokenizer"}[arch]
    assert err.count("\n") == 1 and err.startswith(f"esopt: error: {said}"), err
    assert not (tmp_path / "g").exists() and not list(tmp_path.glob(".g.*"))
