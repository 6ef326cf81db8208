"""Where metrics go besides metrics.jsonl (train/sinks.py): Weights & Biases offline (no network),
one W&B run per run folder across a resume, TensorBoard on or off, and a missing wandb package
refused in one line before a run folder exists."""
from __future__ import annotations

import json
import struct
import sys

import pytest

from esopt.cli import main

SMALL = ["es.generations=2", "es.population=4", "es.episodes_per_member=2", "tasks.heldout=4"]


def wandb_history(path) -> list[dict]:
    """The history rows of an offline W&B run file (a LevelDB-style log of protobuf records)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, pos, buf, rows = path.read_bytes(), 7, b"", []  # 7: the file's own header
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        _crc, n, kind = struct.unpack("<IHB", data[pos : pos + 7]) if left >= 7 else (0, 0, 0)
        if left < 7 or (n == 0 and kind == 0):  # the rest of a block is padding
            pos += left
            continue
        buf, pos = buf + data[pos + 7 : pos + 7 + n], pos + 7 + n
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = pb.Record()
            record.ParseFromString(buf)
            buf = b""
            if record.WhichOneof("record_type") == "history":
                rows.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item})
    return rows


@pytest.fixture
def quiet_wandb(tmp_path, monkeypatch):
    pytest.importorskip("wandb")  # installed by `make test` (the wandb extra)
    for var in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_PROJECT", "WANDB_RUN_ID", "WANDB_RESUME"):
        monkeypatch.delenv(var, raising=False)
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))


def test_wandb_offline_gets_every_record_and_a_resume_continues_the_same_run(esopt_cache, tmp_path, quiet_wandb):
    run = tmp_path / "wb"
    assert main(["train", "configs/smoke.yaml", *SMALL, "log.wandb=offline", "log.tensorboard=false",
                 f"run.out_dir={tmp_path}", "run.name=wb"]) == 0
    assert not (run / "tb").exists()  # log.tensorboard=false
    (first,) = (run / "wandb").glob("offline-run-*/run-*.wandb")
    rows = wandb_history(first)
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [m for m in metrics if m["kind"] == "train"]
    assert [r["generation"] for r in rows if "train/reward_mean" in r] == [m["generation"] for m in train] == [0, 1]
    assert [r["train/reward_mean"] for r in rows if "train/reward_mean" in r] == [m["reward_mean"] for m in train]
    assert any("eval/heldout_reward" in r for r in rows)

    assert main(["train", "--resume", str(run), "es.generations=3"]) == 0
    runs = sorted((run / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(runs) == 2 and {p.name for p in runs} == {first.name}  # the same W&B run id, synced as one run
    second = next(p for p in runs if p.parent != first.parent)
    assert [r["generation"] for r in wandb_history(second) if "train/reward_mean" in r] == [2]


def test_wandb_missing_is_one_line_before_any_folder(esopt_cache, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    rc = main(["train", "configs/smoke.yaml", *SMALL, "log.wandb=online", f"run.out_dir={tmp_path}", "run.name=x"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err == ["esopt: error: log.wandb=online needs the wandb package: pip install 'esopt[wandb]' "
                               "(or log.wandb=off)"], err
    assert not (tmp_path / "x").exists()


def test_tensorboard_gets_the_records_by_default(esopt_cache, tmp_path):
    pytest.importorskip("tensorboard")
    assert main(["train", "configs/smoke.yaml", *SMALL, f"run.out_dir={tmp_path}", "run.name=tb"]) == 0
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tb" / "tb"))
    events.Reload()
    assert [e.step for e in events.Scalars("train/reward_mean")] == [0, 1]
