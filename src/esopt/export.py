"""Rebuild a run's final weights from its history and write a Hugging Face folder."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from .es.build import make_perturber
from .es.history import fsync_path
from .es.perturb import weights_hash
from .models import load_model
from .train.rundir import RunDir


def load_run_weights(run_dir: str | Path, upto: int | None = None):
    """(model, tokenizer, cfg) with the run's weights after `upto` generations (default: all)."""
    run = RunDir(Path(run_dir))
    cfg = run.load_config()
    model, tok = load_model(cfg.model, cfg.runtime.dtype, _usable(cfg.runtime.device))
    if cfg.algo == "grpo":  # a gradient run keeps its weights, not a seed history
        from .rl.checkpoint import load_weights

        if upto is not None:
            raise ValueError("a GRPO run keeps only its last checkpoint: weights after `upto` steps are not available")
        return model, tok, cfg, int(load_weights(run.path, model)["step"])
    start_from(run, model)
    n = run.history().replay(make_perturber(model, cfg.es), upto=upto)
    return model, tok, cfg, n


def start_from(run: RunDir, model) -> None:
    """A run that started from another run's final weights (esopt adapt --from) names it in
    RUN/init.json: load those weights into `model` (replayed, hash-verified) before its own history."""
    path = run.path / "init.json"
    if not path.exists():
        return
    info = json.loads(path.read_text())
    es = RunDir(Path(info["from"])).load_config().algo == "es"  # a GRPO run keeps only its last weights
    src, _, _, _ = load_run_weights(info["from"], upto=info.get("generations") if es else None)
    model.load_state_dict(src.state_dict())
    if weights_hash(model) != info["weights_hash"]:
        raise RuntimeError(f"{run.path} started from {info['from']} with weights {info['weights_hash'][:12]}; "
                           f"replaying that run now gives {weights_hash(model)[:12]}")


def _usable(device: str) -> str:
    """The run's device, or the CPU where this machine lacks it: replay gives the same bits on
    either (tests/es/test_cuda.py), so a GPU run exports and evaluates on a CPU-only machine."""
    from .config import ConfigError
    from .train.preflight import check_device

    try:
        check_device(device)
        return device
    except ConfigError:
        print(f"[esopt] the run used runtime.device={device}, not available here: loading it on the CPU", flush=True)
        return "cpu"


def export_run(run_dir: str | Path, out_dir: str | Path, force: bool = False) -> dict:
    """Write the run's final weights, tokenizer and esopt_export.json into out_dir.

    Never destroys: a non-empty out_dir is refused unless force; the export is written
    into a temporary folder beside out_dir and renamed into place once complete, so a
    failed export leaves out_dir as it was (absent, empty, or the old export with force).
    """
    out = Path(out_dir)
    check_destination(run_dir, out, force)  # before anything is loaded or written
    model, tok, cfg, n = load_run_weights(run_dir)
    info = {"run_dir": str(run_dir), "base_model": cfg.model, "generations": n, "weights_hash": weights_hash(model)}

    def write(folder: Path) -> None:
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
        if cfg.algo == "es":  # a context run (coevo) also gets its final context: SKILL.md, context.yaml
            from .agent.rollout import AgentContext
            from .coevo.export import write_context_files

            chosen = write_context_files(folder, RunDir(Path(run_dir)).history(), AgentContext.from_config(cfg.agent))
            if chosen is not None:
                info["context"] = chosen
        (folder / "esopt_export.json").write_text(json.dumps(info, indent=1))

    write_folder(out, write)
    return info


def check_destination(run_dir: str | Path, out: Path, force: bool) -> None:
    """Refuse (FileExistsError, one line) an output that is not a folder, holds the run, or
    is a non-empty folder without force."""
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"export destination {out} exists and is not a folder")
    if not _is_empty_dir(out):
        run = Path(run_dir).resolve()
        if run == out.resolve() or out.resolve() in run.parents:
            raise FileExistsError(f"export destination {out} holds the run {run_dir}: choose another folder")
        if not force:
            raise FileExistsError(f"export destination {out} is not empty: pass --force to replace it "
                                  f"(replaced only once the new export is complete)")


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
