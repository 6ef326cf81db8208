"""Rows of env.options.source: a JSONL, JSON, CSV or Parquet file, or ``hf:<name or folder>`` (a
``datasets`` dataset saved with ``save_to_disk``, a folder of data files, or a Hub dataset already in
the local cache; the Hub is not asked). Heavy packages are imported only here, only when needed."""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

FILE_KINDS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet",
              ".pq": "parquet"}


class SourceError(ValueError):
    """The source cannot be read (one line, naming env.options.source)."""


@dataclass(frozen=True)
class Table:
    rows: list[dict]
    split_of: list[str] | None = None  # a datasets DatasetDict: each row's split name (else None)

    @property
    def columns(self) -> list[str]:
        seen: dict[str, None] = {}
        for row in self.rows:
            seen.update(dict.fromkeys(row))
        return list(seen)


_CACHE: dict[tuple, Table] = {}


def load_table(source: str, subset: str | None = None) -> Table:
    """The rows of ``source`` (kept per process while the file is unchanged)."""
    where = f"env.options.source={source}"
    if source.startswith("hf:"):
        name = source[3:].strip()
        if not name:
            raise SourceError(f"{where}: name a dataset after hf: (a save_to_disk folder or a cached Hub dataset)")
        folder = Path(name)
        key = ("hf", name, subset, _stamp(folder) if folder.exists() else None)
        loader = lambda: _load_hf(name, subset, where)  # noqa: E731
    else:
        path = Path(source)
        kind = FILE_KINDS.get(path.suffix.lower())
        if kind is None:
            raise SourceError(f"{where}: unknown file type {path.suffix or '(none)'!r}; use .jsonl, .json, .csv, "
                              f".parquet, or hf:<dataset>")
        if not path.is_file():
            raise SourceError(f"{where}: no such file (relative paths start at the working directory {Path.cwd()})")
        if subset is not None:
            raise SourceError(f"env.options.subset={subset} applies to hf: sources only")
        key = ("file", str(path.resolve()), _stamp(path))
        loader = lambda: Table(_READERS[kind](path, where))  # noqa: E731
    if key not in _CACHE:
        table = loader()
        if not table.rows:
            raise SourceError(f"{where}: the source holds no rows")
        _CACHE[key] = table
    return _CACHE[key]


def _stamp(path: Path) -> tuple:
    st = path.stat()
    return st.st_mtime_ns, st.st_size


def _objects(rows, where: str, what: str) -> list[dict]:
    for k, row in enumerate(rows):
        if not isinstance(row, dict):
            raise SourceError(f"{where}: {what} {k + 1} is {type(row).__name__}, not an object with column names")
    return list(rows)


def _read_jsonl(path: Path, where: str) -> list[dict]:
    rows = []
    with path.open(encoding="utf-8-sig") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise SourceError(f"{where}: line {n} is not valid JSON ({err.msg})") from None
            if not isinstance(row, dict):
                raise SourceError(f"{where}: line {n} is {type(row).__name__}, not a JSON object")
            rows.append(row)
    return rows


def _read_json(path: Path, where: str) -> list[dict]:
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as err:
        raise SourceError(f"{where}: not valid JSON ({err.msg}, line {err.lineno})") from None
    if not isinstance(data, list):
        raise SourceError(f"{where}: a .json source holds a list of objects, got {type(data).__name__} "
                          f"(one object per line: use .jsonl)")
    return _objects(data, where, "item")


def _read_csv(path: Path, where: str) -> list[dict]:
    with path.open(encoding="utf-8-sig", newline="") as f:
        try:
            rows = list(csv.DictReader(f))
        except csv.Error as err:
            raise SourceError(f"{where}: not valid CSV ({err})") from None
    for n, row in enumerate(rows, 2):
        if None in row:
            raise SourceError(f"{where}: line {n} has more fields than the header")
    return rows


def _read_parquet(path: Path, where: str) -> list[dict]:
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path).to_pylist()
    except Exception as err:  # pyarrow's errors (ArrowInvalid, OSError) on a broken file
        raise SourceError(f"{where}: not a readable Parquet file ({type(err).__name__}: {_first_line(err)})") from None


_READERS = {"jsonl": _read_jsonl, "json": _read_json, "csv": _read_csv, "parquet": _read_parquet}


def _load_hf(name: str, subset: str | None, where: str) -> Table:
    import datasets

    folder = Path(name)
    try:
        if folder.is_dir() and ((folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file()):
            if subset is not None:
                raise SourceError(f"env.options.subset={subset}: {name} is a save_to_disk folder, which has no subsets")
            data = datasets.load_from_disk(str(folder))
        else:
            offline = datasets.config.HF_HUB_OFFLINE
            datasets.config.HF_HUB_OFFLINE = True  # a dataset available here; never a download
            try:
                data = datasets.load_dataset(name, subset)
            finally:
                datasets.config.HF_HUB_OFFLINE = offline
    except SourceError:
        raise
    except Exception as err:
        raise SourceError(f"{where}: cannot load it offline ({type(err).__name__}: {_first_line(err)}); give a "
                          f"save_to_disk folder, or load it once with datasets.load_dataset while online") from None
    if isinstance(data, datasets.DatasetDict):
        rows, split_of = [], []
        for split, part in data.items():
            got = part.to_list()
            rows += got
            split_of += [split] * len(got)
        return Table(rows, split_of)
    return Table(data.to_list())


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
