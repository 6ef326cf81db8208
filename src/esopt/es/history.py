"""The run's seed log: one record per generation, written atomically.

Replaying it on the base model reproduces the weights bit for bit, so it is
the checkpoint: no weight files are needed to resume.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file of its own in the same folder, then rename over `path`.

    A unique temporary name, so two writers (two processes, or a report built
    while the run writes) never rename each other's half-written file; a reader
    sees the old file or the new one, never half of one.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; run files are meant to be shared
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def fsync_path(path: Path) -> None:
    """Flush a file's data (or a folder's entries) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class RunFolderError(ValueError):
    """A run folder that cannot be used as asked (a damaged history, another writer, ...): one line."""


_RECORD_KEYS = ("generation", "seeds", "coefficients", "alpha", "population", "weights_hash")


class History:
    def __init__(self, path: Path, records: list[dict] | None = None, meta: dict | None = None):
        self.path = Path(path)
        self.records = records or []
        self.meta = meta or {}

    @classmethod
    def load(cls, path: Path) -> "History":
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"no history at {path}: not a run folder, or no generation finished yet")
        try:
            data = json.loads(path.read_text())
        except ValueError as err:
            raise RunFolderError(f"{path} is not valid JSON ({err}): truncated or damaged; restore it from a "
                                 "backup, or start a new run") from None
        if not isinstance(data, dict) or not isinstance(data.get("generations", []), list) \
                or not isinstance(data.get("meta") or {}, dict):
            raise RunFolderError(f"{path} is not an esopt history (expected an object with a 'generations' list)")
        records = data.get("generations", [])
        for i, rec in enumerate(records):
            if not isinstance(rec, dict) or any(k not in rec for k in _RECORD_KEYS):
                raise RunFolderError(f"{path}: record {i} is not a generation record (needs {', '.join(_RECORD_KEYS)})")
            if rec["generation"] != i:
                raise RunFolderError(f"{path}: record {i} is generation {rec['generation']!r}; a history holds "
                                     "generations 0..n-1 in order")
        return cls(path, records, data.get("meta") or {})

    def append(self, record: dict) -> None:
        expected = len(self.records)
        if record.get("generation") != expected:
            raise ValueError(f"history expects generation {expected}, got {record.get('generation')}")
        self.records.append(record)
        self.save()

    def save(self) -> None:
        atomic_write_text(self.path, json.dumps({"meta": self.meta, "generations": self.records}, indent=1))

    def __len__(self) -> int:
        return len(self.records)

    def replay(self, perturber, upto: int | None = None, on_generation=None) -> int:
        """Apply the recorded updates to the base weights behind `perturber`, verified by hash.

        The weights must hash to the run's recorded base weights before, and to the
        last replayed generation's recorded hash after; returns the generations replayed.
        on_generation(done, total), if given, is called after each generation (progress).
        """
        from .perturb import weights_hash

        base = self.meta.get("base_weights_hash")
        if base is not None and weights_hash(perturber.model) != base:
            raise RuntimeError(f"the loaded model is not the base model of this run (weights hash differs from {base[:12]})")
        records = self.records[:upto]
        for k, rec in enumerate(records):
            perturber.apply_update(rec["seeds"], rec["coefficients"], rec["alpha"], rec["population"])
            if on_generation is not None:
                on_generation(k + 1, len(records))
        if records:
            got, want = weights_hash(perturber.model), records[-1]["weights_hash"]
            if got != want:
                raise RuntimeError(
                    f"replaying {len(records)} generations gave weights hash {got[:12]}, history says {want[:12]}: "
                    "different base model, dtype or esopt version"
                )
        return len(records)
