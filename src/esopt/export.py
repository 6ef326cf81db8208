"""Rebuild a run's final weights from its history and write them as a Hugging Face folder, or as a
GGUF file in a folder (models/gguf.py writes it) for llama.cpp, Ollama and LM Studio; the same for the
model a config names."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from .es.history import fsync_path
from .es.perturb import weights_hash
from .train.algorithm import algorithm
from .train.rundir import RunDir
from .train.weights import load_run_weights


FORMATS = ("hf", "gguf")
GGUF_FILE = "model.gguf"  # the file a GGUF export's folder holds


def export_run(run_dir: str | Path, out_dir: str | Path, force: bool = False, fmt: str = "hf",
               gguf_type: str = "f32") -> dict:
    """Write the run's final weights, tokenizer and esopt_export.json into out_dir: a Hugging Face
    folder (fmt="hf"), or OUT/model.gguf (fmt="gguf", in gguf_type) with the same files beside it.

    Never destroys: a non-empty out_dir is refused unless force; the export is written
    into a temporary folder beside out_dir and renamed into place once complete, so a
    failed export leaves out_dir as it was (absent, empty, or the old export with force).
    """
    out = Path(out_dir)
    check_format(fmt, gguf_type)
    check_destination(run_dir, out, force)  # before anything is loaded or written
    if fmt == "gguf":
        check_gguf(RunDir(Path(run_dir)).load_config().model, gguf_type)
    model, tok, cfg, n = load_run_weights(run_dir)
    info = {"run_dir": str(run_dir), "base_model": cfg.model, "generations": n, "weights_hash": weights_hash(model)}

    def extra(folder: Path) -> None:
        # what the algorithm adds (an ES context run: its final context, SKILL.md and context.yaml)
        chosen = algorithm(cfg.algo).export_files(folder, RunDir(Path(run_dir)), cfg)
        if chosen is not None:
            info["context"] = chosen

    write_model(out, model, tok, info, fmt, gguf_type, extra, name=f"{cfg.model} after {n} updates ({Path(run_dir).name})")
    return info


def export_model(config: str | Path, out_dir: str | Path, force: bool = False, fmt: str = "hf",
                 gguf_type: str = "f32") -> dict:
    """The model a config names (its `model` and runtime.dtype), untrained, written as export_run writes a run's."""
    from .config import load_config
    from .models import load_model

    out = Path(out_dir)
    check_format(fmt, gguf_type)
    cfg = load_config(config)
    check_destination(config, out, force)
    if fmt == "gguf":
        check_gguf(cfg.model, gguf_type)
    model, tok = load_model(cfg.model, cfg.runtime.dtype, "cpu")
    info = {"config": str(config), "base_model": cfg.model, "generations": 0, "weights_hash": weights_hash(model)}
    write_model(out, model, tok, info, fmt, gguf_type, name=cfg.model)
    return info


def check_format(fmt: str, gguf_type: str) -> None:
    from .models.gguf import GGUFRefused, check_type

    if fmt not in FORMATS:
        raise GGUFRefused(f"--format {fmt}: exports are written as {' or '.join(FORMATS)}")
    if fmt == "gguf":
        check_type(gguf_type)
    if fmt == "hf" and gguf_type != "f32":
        raise GGUFRefused("--type sets a GGUF export's tensor type: give it with --format gguf")


def check_gguf(model_name: str, gguf_type: str) -> None:
    """Whether the model can be written as GGUF, from its config and tokenizer (before its weights load)."""
    from .models.gguf import check
    from .models.loading import load_head

    check(*load_head(model_name), gguf_type)


def write_model(out: Path, model, tok, info: dict, fmt: str, gguf_type: str, extra=None, name: str = "") -> None:
    """The export folder: the model (a Hugging Face folder, or model.gguf), what `extra(folder)` adds and
    esopt_export.json; a GGUF the model or tokenizer cannot be written as is refused before anything is."""
    from .models import gguf

    if fmt == "gguf":
        gguf.check(model.config, tok, gguf_type)

    def write(folder: Path) -> None:
        if fmt == "gguf":
            info["gguf"] = {"file": GGUF_FILE, **gguf.write(model, tok, folder / GGUF_FILE, gguf_type, name)}
        else:
            model.save_pretrained(folder)
            tok.save_pretrained(folder)
        if extra is not None:
            extra(folder)
        (folder / "esopt_export.json").write_text(json.dumps(info, indent=1))

    write_folder(out, write)


def check_destination(run_dir: str | Path, out: Path, force: bool) -> None:
    """Refuse (FileExistsError, one line) an output that is not a folder, holds the run, is a
    non-empty folder without force, or (with force) a non-empty folder that is not an earlier export."""
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"export destination {out} exists and is not a folder")
    if not _is_empty_dir(out):
        run = Path(run_dir).resolve()
        if run == out.resolve() or out.resolve() in run.parents:
            raise FileExistsError(f"export destination {out} holds the run {run_dir}: choose another folder")
        if not force:
            raise FileExistsError(f"export destination {out} is not empty: pass --force to replace it "
                                  f"(replaced only once the new export is complete)")
        if not (out / "esopt_export.json").is_file():  # --force on a working folder would delete the user's files
            raise FileExistsError(f"export destination {out} is not an earlier export (it has no "
                                  f"esopt_export.json): --force replaces only an export; choose a new or empty folder")


def write_folder(out: Path, write) -> None:
    """write(tmp) into a fresh temporary folder beside out, then swap it in for out.

    On any failure the temporary folder is removed and out is untouched. An existing
    out (empty, or replaced with force) is renamed aside only after write has returned,
    and deleted only once the new folder is in place.
    """
    out = out.absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".export-tmp"))
    try:
        write(tmp)
        for f in tmp.rglob("*"):
            if f.is_file():
                fsync_path(f)
        os.chmod(tmp, 0o755)  # mkdtemp makes 0700; an export is meant to be shared
        aside = None
        if out.exists():
            aside = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".export-old"))
            os.replace(out, aside)  # aside is an empty folder: replaced by out
        try:
            os.replace(tmp, out)
        except BaseException:
            if aside is not None:
                os.replace(aside, out)  # put the old one back
            raise
        fsync_path(out.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def _is_empty_dir(path: Path) -> bool:
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))
