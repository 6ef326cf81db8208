"""The run folder: config, history, metrics JSONL (and the sinks of cfg.log: TensorBoard, W&B), trajectories."""
from __future__ import annotations

import fcntl
import os
import sys
import re
import time
from pathlib import Path

from ..config import Config, dump_config, load_config
from ..envs.origin import FILE as ORIGIN_FILE
from ..envs.origin import origin, recall_run, unreachable_notice
from ..es.history import History, RunFolderError, atomic_write_text
from ..utils.jsonl import read_jsonl, strict_dumps


def env_slug(env_id: str) -> str:
    """env.id as part of a folder name (package.module:attr -> its attr)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", env_id.rpartition(":")[2] or env_id).strip("-.") or "env"


class RunDir:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.trajectories = self.path / "trajectories"
        self._sinks = None  # opened on the first record (train/sinks.py)
        self._cfg = None  # the config whose log settings choose the sinks (none: TensorBoard only)

    @classmethod
    def create(cls, cfg: Config) -> "RunDir":
        name = cfg.run.name or f"{env_slug(cfg.env.id)}-{time.strftime('%Y%m%d-%H%M%S')}"
        path = Path(cfg.run.out_dir) / name
        if holds_run(path):
            raise FileExistsError(f"run folder {path} already holds a run: use --resume {path} or another run.name")
        run = cls(path)
        try:
            run.trajectories.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise RunFolderError(f"run.out_dir={cfg.run.out_dir}: cannot create the run folder {path} "
                                 f"({err.strerror or err}); choose a writable folder") from None
        run.lock()  # before the config: a second writer of the same name must not overwrite it
        if holds_run(path):  # another writer finished a generation between the check and the lock
            run.unlock()
            raise FileExistsError(f"run folder {path} already holds a run: use --resume {path} or another run.name")
        atomic_write_text(path / "config.yaml", dump_config(cfg))
        run._record_env(cfg.env.id)
        run.use_config(cfg)
        return run

    def _record_env(self, env_id: str) -> None:
        """An env registered in this process: where other processes find it (RUN/env.json, envs/origin.py)."""
        record = origin(env_id)
        if record is None:
            return
        atomic_write_text(self.path / ORIGIN_FILE, strict_dumps(record) + "\n")
        if record["import"] is None:
            print(unreachable_notice(record), file=sys.stderr, flush=True)

    def use_config(self, cfg: Config) -> None:
        """The config this process runs under: its log section chooses where records go besides metrics.jsonl."""
        self._cfg = cfg

    # ------------------------------------------------------------------ one writer
    def lock(self) -> None:
        """Take the run folder's writer lock: an OS lock on RUN/.lock that the kernel releases when
        this process ends, however it ends. A second writer gets a RunFolderError naming the holder."""
        if getattr(self, "_lock_fd", None) is not None:
            return
        fd = os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            if holder == str(os.getpid()):
                raise RunFolderError(f"{self.path} is already open for writing in this process: close the earlier "
                                     "RunDir (or let its run finish) first") from None
            raise RunFolderError(f"{self.path} is being written by another esopt process (pid {holder}): "
                                 "wait for it to finish or stop it (report and eval work meanwhile)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd
        self.remove_leftovers()

    def remove_leftovers(self) -> list[Path]:
        """Delete the temporary files of atomic writes that a killed writer left behind (.NAME.*.tmp in the
        folder and trajectories/: only the lock holder writes there). Called under the lock; returns them."""
        found = [p for folder in (self.path, self.trajectories) if folder.is_dir()
                 for p in folder.glob(".*.tmp") if p.is_file()]
        for p in found:
            p.unlink(missing_ok=True)
        return found

    def __del__(self):  # a RunDir dropped without close() releases its lock too
        self.unlock()

    def unlock(self) -> None:
        fd = getattr(self, "_lock_fd", None)
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the lock
            self._lock_fd = None

    @property
    def config_path(self) -> Path:
        return self.path / "config.yaml"

    def load_config(self, overrides=None) -> Config:
        if not self.config_path.exists():
            raise FileNotFoundError(f"{self.path} is not an esopt run folder (no config.yaml)")
        recall_run(self.path)  # an env registered in the process that made the run: found again
        return load_config(self.config_path, overrides)

    def history(self, meta: dict | None = None) -> History:
        p = self.path / "history.json"
        return History.load(p) if p.exists() else History(p, meta=meta)

    def log(self, record: dict) -> None:
        record = {"time": time.time(), **record}
        with open(self.path / "metrics.jsonl", "ab+") as f:
            if f.seek(0, os.SEEK_END):
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":  # a torn last line (full disk, kill mid-write) stays a line of its own
                    f.write(b"\n")
            f.write((strict_dumps(record) + "\n").encode())
        for sink in self.sinks():
            sink.log(record)

    def metrics(self) -> list[dict]:
        return _read_jsonl(self.path / "metrics.jsonl")

    def truncate_metrics(self, generations_done: int) -> None:
        """On resume: drop lines of generations that did not reach the history."""
        keep = [m for m in self.metrics() if m.get("generation", 0) < generations_done
                or (m.get("kind") == "eval" and m.get("generation", 0) <= generations_done)]
        atomic_write_text(self.path / "metrics.jsonl", "".join(strict_dumps(m) + "\n" for m in keep))

    def drop_eval_lines(self, generation: int) -> None:
        """Remove the evaluation lines of `generation` (one that a resume completes with more splits)."""
        keep = [m for m in self.metrics() if not (m.get("kind") == "eval" and m.get("generation") == generation)]
        atomic_write_text(self.path / "metrics.jsonl", "".join(strict_dumps(m) + "\n" for m in keep))

    def sinks(self) -> list:
        if self._sinks is None:
            from .sinks import open_sinks

            self._sinks = open_sinks(self.path, self._cfg or Config())
        return self._sinks

    def write_trajectories(self, name: str, rows: list[dict]) -> None:
        self.trajectories.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.trajectories / f"{name}.jsonl", "".join(strict_dumps(r) + "\n" for r in rows))

    def read_trajectories(self, name: str) -> list[dict]:
        return _read_jsonl(self.trajectories / f"{name}.jsonl")

    def write_json(self, name: str, data) -> None:
        atomic_write_text(self.path / name, strict_dumps(data, indent=1))

    def close(self) -> None:
        for sink in self._sinks or ():
            sink.close()
        self._sinks = None
        self.unlock()


def holds_run(path: Path) -> bool:
    """Whether the folder holds a resumable run: the record of any algorithm (an ES history, a
    complete GRPO checkpoint, ...)."""
    from .algorithm import of_run

    return of_run(Path(path)) is not None


def _read_jsonl(path: Path) -> list[dict]:
    """The JSON objects of a run's JSONL file; torn, garbage or non-object lines are skipped with
    a warning: a damaged line never blocks resume, eval or report."""
    if not path.exists():
        return []
    rows, bad = read_jsonl(path)
    if bad:
        print(f"[esopt] warning: skipped {bad} unreadable line(s) of {path}", file=sys.stderr)
    return rows
