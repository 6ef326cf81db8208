"""esopt export --format gguf: a tiny model written as GGUF and read back through transformers' GGUF
loader gives the logits of the folder export (exactly in f32; in f16 and q8_0 exactly those of the
folder model with its matrices rounded to that type); the tokenizer travels in the file's metadata;
what the export cannot write is refused in one line before anything is."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")

from esopt.models import gguf as esopt_gguf  # noqa: E402
from esopt.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TEXT = "the quick brown fox 123 Sudoku <|im_end|>"


def bpe_tokenizer(pre: str = "gpt-2"):
    """A byte-level BPE tokenizer of ~300 tokens trained here (SmolLM2's kind: chat specials, chat template)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from esopt.models.tiny import CHAT_TEMPLATE

    tok = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
                         if pre == "smollm" else byte_level)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(["the quick brown fox jumps over the lazy dog 123 456 " * 5, "row column value"], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                   unk_token="<|endoftext|>", pad_token="<|im_end|>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny(arch: str, pre: str = "gpt-2", seed: int = 0):
    """A 2-layer random model of `arch` with the BPE tokenizer (Qwen3 with its usual 128-wide heads: the
    width transformers' GGUF loader assumes for qwen3)."""
    import transformers

    tok = bpe_tokenizer(pre)
    names = {"llama": "Llama", "qwen2": "Qwen2", "qwen3": "Qwen3"}[arch]
    extra = {"head_dim": 128} if arch == "qwen3" else {}
    cfg = getattr(transformers, f"{names}Config")(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=True, initializer_range=0.5,
        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id, **extra)
    torch.manual_seed(seed)
    return getattr(transformers, f"{names}ForCausalLM")(cfg).eval(), tok


def read_back(folder: Path, file: str = "model.gguf"):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file).eval()
    return model, AutoTokenizer.from_pretrained(folder, gguf_file=file)


def logits(model, ids):
    with torch.no_grad():
        return model(ids).logits


def rounded(model, gguf_type: str):
    """The model with every matrix the export writes in gguf_type replaced by its value in that type."""
    q = gguf.GGMLQuantizationType.Q8_0
    state = model.state_dict()
    for name, w in state.items():
        if w.ndim != 2:
            continue
        a = w.numpy()
        if gguf_type == "f16":
            state[name] = torch.from_numpy(a.astype(np.float16).astype(np.float32))
        elif a.shape[1] % 32 == 0:
            state[name] = torch.from_numpy(gguf.quants.dequantize(gguf.quants.quantize(a, q), q).astype(np.float32))
    model.load_state_dict(state)
    return model


@pytest.mark.parametrize("arch, pre", [("llama", "gpt-2"), ("llama", "smollm"), ("qwen2", "gpt-2"), ("qwen3", "gpt-2")])
def test_f32_round_trip_is_exact_and_carries_the_tokenizer(tmp_path, arch, pre):
    model, tok = tiny(arch, pre)
    info = esopt_gguf.write(model, tok, tmp_path / "model.gguf", "f32", name="tiny")
    assert info["pre_tokenizer"] == pre and info["tensor_types"] == {"F32": info["tensors"]}
    assert info["tensors"] == len(model.state_dict()) - 1  # the tied output matrix written once
    back, back_tok = read_back(tmp_path)
    ids = tok(TEXT, return_tensors="pt").input_ids
    assert back_tok(TEXT)["input_ids"] == ids[0].tolist()  # the vocabulary, merges and split travel
    assert torch.equal(logits(model, ids), logits(back, ids))
    meta = gguf.GGUFReader(tmp_path / "model.gguf")
    field = lambda k: meta.fields[k].contents()  # noqa: E731
    assert field("general.architecture") == arch and field("tokenizer.ggml.pre") == pre
    assert field("tokenizer.chat_template") == tok.chat_template
    assert (field("tokenizer.ggml.bos_token_id"), field("tokenizer.ggml.eos_token_id")) == (tok.bos_token_id,
                                                                                           tok.eos_token_id)
    types = field("tokenizer.ggml.token_type")
    assert [types[i] for i in tok.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"])] == [3, 3]  # control
    assert field("tokenizer.ggml.add_bos_token") is False


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("gguf_type", ["f16", "q8_0"])
def test_f16_and_q8_0_read_back_as_the_rounded_weights(tmp_path, arch, gguf_type):
    """Read back, the file is the folder model with its matrices rounded to the type (bit for bit, so its
    logits are those of that model), and rounding moved no weight by more than the type's step."""
    model, tok = tiny(arch)
    info = esopt_gguf.write(model, tok, tmp_path / "model.gguf", gguf_type)
    assert set(info["tensor_types"]) == {"F32", "F16" if gguf_type == "f16" else "Q8_0"}
    back, _ = read_back(tmp_path)
    original = {k: v.clone() for k, v in model.state_dict().items()}
    expected = rounded(model, gguf_type)
    for name, w in back.state_dict().items():
        assert torch.equal(w, expected.state_dict()[name]), name
        step = original[name].abs().max() * (2.0 ** -10 if gguf_type == "f16" else 1 / 127)
        assert (w - original[name]).abs().max() <= step, name
    ids = tok(TEXT, return_tensors="pt").input_ids
    assert torch.equal(logits(back, ids), logits(expected, ids))


def test_rows_are_reordered_for_llama_cpp_rotary_layout():
    w = np.arange(2 * 8 * 3).reshape(16, 3)  # 2 heads of 8 rows: halves [0..3], [4..7] -> pairs (0,4), (1,5), ...
    p = esopt_gguf.permute_rows(w, 2)
    assert [r[0] // 3 for r in p[:8]] == [0, 4, 1, 5, 2, 6, 3, 7] and [r[0] // 3 for r in p[8:]] == [8, 12, 9, 13,
                                                                                                      10, 14, 11, 15]


def test_what_gguf_cannot_carry_is_refused_before_any_file(tmp_path):
    from tokenizers.models import BPE
    from transformers import GPT2Config, GPT2LMHeadModel

    from esopt.models.tiny import build_tiny

    model, tok = tiny("llama")
    with pytest.raises(esopt_gguf.GGUFRefused, match=r"^--type q4_0: a GGUF export is written as one of f32, f16, "):
        esopt_gguf.write(model, tok, tmp_path / "a.gguf", "q4_0")
    char_model, char_tok = build_tiny("llama")  # esopt's test tokenizer: one token per character
    with pytest.raises(esopt_gguf.GGUFRefused, match=r"^a WordLevel tokenizer \(decoder Fuse\): the GGUF export "
                                                      r"writes byte-level BPE"):
        esopt_gguf.write(char_model, char_tok, tmp_path / "b.gguf")
    no_merges = bpe_tokenizer()
    no_merges.backend_tokenizer.model = BPE(vocab=no_merges.get_vocab(), merges=[])  # characters only
    with pytest.raises(esopt_gguf.GGUFRefused, match=r"^a BPE tokenizer with no merges \(a character vocabulary, "
                                                      r"as esopt's tiny models have\): llama.cpp cannot load"):
        esopt_gguf.write(model, no_merges, tmp_path / "m.gguf")  # gguf's writer would drop the empty list
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=len(tok)))
    with pytest.raises(esopt_gguf.GGUFRefused, match=r"^model_type 'gpt2': the GGUF export writes llama, qwen2, qwen3"):
        esopt_gguf.write(gpt2, tok, tmp_path / "c.gguf")
    model.config.rope_parameters = {"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0}
    with pytest.raises(esopt_gguf.GGUFRefused, match="rope_type 'llama3'"):
        esopt_gguf.write(model, tok, tmp_path / "d.gguf")
    assert not list(tmp_path.iterdir())
    from esopt.export import check_format

    with pytest.raises(esopt_gguf.GGUFRefused, match="give it with --format gguf"):
        check_format("hf", "q8_0")  # a type for a Hugging Face folder: said, not ignored


def test_tiny_models_are_refused_before_anything_is_written(esopt_cache, tmp_path, capsys):
    """esopt's tiny models, through the command line: tiny-qwen2 loads as a BPE without merges (the file
    was written, and llama.cpp refused it: 'cannot find tokenizer merges'), tiny-llama as WordLevel; each
    is refused in one line with nothing written, and before its weights load."""
    from esopt.models.loading import load_head

    for alias, said in [("tiny-qwen2", "a BPE tokenizer with no merges"), ("tiny-llama", "a WordLevel tokenizer")]:
        config = tmp_path / f"{alias}.yaml"
        config.write_text(f"model: {alias}\n")
        load_head(alias)  # built into the cache first: its progress bars are not the export's output
        capsys.readouterr()
        assert main(["export", str(config), str(tmp_path / alias), "--format", "gguf"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"esopt: error: {said}"), err
        assert not (tmp_path / alias).exists() and not list(tmp_path.glob(f".{alias}.*"))


def test_the_types_are_one_list():
    """The command line's --type choices, export.py's check and the writer take models/gguf.py's TYPES."""
    import argparse

    from esopt.cli import args_export
    from esopt.export import check_format

    parser = argparse.ArgumentParser()
    args_export(parser)
    assert tuple(next(a for a in parser._actions if a.dest == "type").choices) == esopt_gguf.TYPES
    for t in esopt_gguf.TYPES:
        check_format("gguf", t)
    with pytest.raises(esopt_gguf.GGUFRefused, match=r"^--type q4_0: a GGUF export is written as one of f32, f16, "
                                                     r"q8_0$"):
        check_format("gguf", "q4_0")


def test_cli_exports_a_run_and_a_configs_model(esopt_cache, tmp_path, capsys):
    """Through the command line: a run trained from a local model folder, exported as q8_0, reads back as the
    run's final weights rounded to q8_0 (the folder export's); a config's model exports untrained; a run
    whose tokenizer GGUF cannot carry is refused in one line with nothing written."""
    from conftest import TINY_OVERRIDES

    model, tok = tiny("llama")
    base = tmp_path / "base"
    model.save_pretrained(base)
    tok.save_pretrained(base)
    train = ["train", "configs/demo.yaml", *TINY_OVERRIDES, f"model={base}", "es.generations=1", "tasks.heldout=2",
             f"run.out_dir={tmp_path}", "run.name=r"]
    assert main(train) == 0
    run = tmp_path / "r"
    assert main(["export", str(run), str(tmp_path / "hf")]) == 0
    assert main(["export", str(run), str(tmp_path / "q8"), "--format", "gguf", "--type", "q8_0"]) == 0
    out = capsys.readouterr().out
    assert f"to {tmp_path / 'q8' / 'model.gguf'}" in out and "MiB q8_0" in out, out
    info = json.loads((tmp_path / "q8" / "esopt_export.json").read_text())
    assert info["generations"] == 1 and info["gguf"]["type"] == "q8_0" and info["gguf"]["file"] == "model.gguf"
    from transformers import AutoModelForCausalLM

    trained = AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert info["weights_hash"] == json.loads((tmp_path / "hf" / "esopt_export.json").read_text())["weights_hash"]
    back, _ = read_back(tmp_path / "q8")
    expected = rounded(trained, "q8_0")
    assert all(torch.equal(w, expected.state_dict()[k]) for k, w in back.state_dict().items())

    config = tmp_path / "base.yaml"
    config.write_text(f"model: {base}\n")
    assert main(["export", str(config), str(tmp_path / "b32"), "--format", "gguf"]) == 0
    back, _ = read_back(tmp_path / "b32")
    ids = tok(TEXT, return_tensors="pt").input_ids
    assert torch.equal(logits(back, ids), logits(model, ids))

    # a co-evolution run: its chosen context goes beside the file, as in the folder export
    assert main(["train", "configs/coevo-demo.yaml", *TINY_OVERRIDES, f"model={base}", "es.generations=1",
                 "tasks.heldout=2", f"run.out_dir={tmp_path}", "run.name=co"]) == 0
    assert main(["export", str(tmp_path / "co"), str(tmp_path / "cog"), "--format", "gguf"]) == 0
    files = sorted(p.name for p in (tmp_path / "cog").iterdir())
    assert files == ["SKILL.md", "context.yaml", "esopt_export.json", "model.gguf"], files
    assert "context" in json.loads((tmp_path / "cog" / "esopt_export.json").read_text())

    capsys.readouterr()
    char_run = ["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=1", f"run.out_dir={tmp_path}",
                "run.name=chars"]
    assert main(char_run) == 0
    capsys.readouterr()
    assert main(["export", str(tmp_path / "chars"), str(tmp_path / "g"), "--format", "gguf"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("esopt: error: a WordLevel tokenizer"), err
    assert not (tmp_path / "g").exists() and not list(tmp_path.glob(".g.*"))
