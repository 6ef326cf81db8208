"""The run folder: config, history, metrics JSONL, TensorBoard scalars, trajectories."""
from __future__ import annotations

import json
import time
from pathlib import Path

from ..config import Config, dump_config, load_config
from ..es.history import History, atomic_write_text


class RunDir:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.trajectories = self.path / "trajectories"
        self._tb = None

    @classmethod
    def create(cls, cfg: Config) -> "RunDir":
        name = cfg.run.name or f"{cfg.env.id}-{time.strftime('%Y%m%d-%H%M%S')}"
        path = Path(cfg.run.out_dir) / name
        if holds_run(path):
            raise FileExistsError(f"run folder {path} already holds a run: use --resume {path} or another run.name")
        run = cls(path)
        run.trajectories.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path / "config.yaml", dump_config(cfg))
        return run

    @property
    def config_path(self) -> Path:
        return self.path / "config.yaml"

    def load_config(self, overrides=None) -> Config:
        if not self.config_path.exists():
            raise FileNotFoundError(f"{self.path} is not an esopt run folder (no config.yaml)")
        return load_config(self.config_path, overrides)

    def history(self, meta: dict | None = None) -> History:
        p = self.path / "history.json"
        return History.load(p) if p.exists() else History(p, meta=meta)

    def log(self, record: dict) -> None:
        record = {"time": time.time(), **record}
        with open(self.path / "metrics.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")
        tb = self.tensorboard()
        if tb is not None:
            step = record.get("generation", 0)
            for k, v in record.items():
                if isinstance(v, (int, float)) and k not in ("time", "generation"):
                    tb.add_scalar(f"{record.get('kind', 'train')}/{k}", v, step)
            tb.flush()

    def metrics(self) -> list[dict]:
        return _read_jsonl(self.path / "metrics.jsonl")

    def truncate_metrics(self, generations_done: int) -> None:
        """On resume: drop lines of generations that did not reach the history."""
        keep = [m for m in self.metrics() if m.get("generation", 0) < generations_done
                or (m.get("kind") == "eval" and m.get("generation", 0) <= generations_done)]
        atomic_write_text(self.path / "metrics.jsonl", "".join(json.dumps(m) + "\n" for m in keep))

    def tensorboard(self):
        if self._tb is None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is optional at run time
                self._tb = False
                return None
            self._tb = SummaryWriter(str(self.path / "tb"))
        return self._tb or None

    def write_trajectories(self, name: str, rows: list[dict]) -> None:
        self.trajectories.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.trajectories / f"{name}.jsonl", "".join(json.dumps(r) + "\n" for r in rows))

    def read_trajectories(self, name: str) -> list[dict]:
        return _read_jsonl(self.trajectories / f"{name}.jsonl")

    def write_json(self, name: str, data) -> None:
        atomic_write_text(self.path / name, json.dumps(data, indent=1))

    def close(self) -> None:
        if self._tb:
            self._tb.close()


def holds_run(path: Path) -> bool:
    """Whether the folder holds a resumable run: an ES history or a complete GRPO checkpoint."""
    from ..rl.checkpoint import exists  # imported when used: importing esopt.rl loads torch

    return (Path(path) / "history.json").exists() or exists(path)


def _read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
