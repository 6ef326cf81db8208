"""esopt export never destroys: refuses a non-empty folder unless --force, and writes
into a temporary folder renamed into place only once the export is complete."""
import json

import pytest
from transformers import PreTrainedModel

from esopt.cli import main

from conftest import TINY_OVERRIDES


@pytest.fixture(scope="module")
def run(esopt_cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    args = ["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=1", "eval.at_start=false",
            f"run.out_dir={out}", "run.name=r"]
    assert main(args) == 0
    return out / "r"


def contents(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_export_refuses_a_non_empty_folder_unless_force(run, tmp_path, capsys):
    out = tmp_path / "hf"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    capsys.readouterr()
    assert main(["export", str(run), str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(out) in err and "--force" in err, err
    assert contents(out) == {"keep.txt": b"mine"} and sorted(p.name for p in tmp_path.iterdir()) == ["hf"]

    (tmp_path / "file").write_text("x")  # not a folder: refused, even with --force
    assert main(["export", str(run), str(tmp_path / "file"), "--force"]) == 2
    assert "is not a folder" in capsys.readouterr().err and (tmp_path / "file").read_text() == "x"
    before = contents(run)  # the run folder itself (or one above it): refused, even with --force
    for dest in (run, run.parent):
        assert main(["export", str(run), str(dest), "--force"]) == 2
        assert "holds the run" in capsys.readouterr().err
    assert contents(run) == before

    (tmp_path / "empty").mkdir()  # an empty folder is fine
    assert main(["export", str(run), str(tmp_path / "empty")]) == 0
    assert (tmp_path / "empty" / "model.safetensors").exists()

    capsys.readouterr()
    assert main(["export", str(run), str(out), "--force"]) == 2  # --force never replaces a folder of the user's
    err = capsys.readouterr().err
    assert "is not an earlier export" in err and len(err.strip().splitlines()) == 1
    assert contents(out) == {"keep.txt": b"mine"}
    (tmp_path / "empty" / "note.txt").write_text("beside an earlier export")
    assert main(["export", str(run), str(tmp_path / "empty"), "--force"]) == 0  # an earlier export is replaced
    done = tmp_path / "empty"
    info = json.loads((done / "esopt_export.json").read_text())
    assert not (done / "note.txt").exists() and (done / "config.json").exists() and info["generations"] == 1
    assert info["weights_hash"] == json.loads((run / "summary.json").read_text())["weights_hash"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "file", "hf"]  # no temporary folder left


def test_a_failed_export_leaves_nothing_half_written(run, tmp_path, monkeypatch, capsys):
    old = tmp_path / "old"
    assert main(["export", str(run), str(old)]) == 0
    (old / "note.txt").write_text("an earlier export")
    want = contents(old)
    save = PreTrainedModel.save_pretrained
    written = []

    def fail_midway(self, folder, *args, **kwargs):
        save(self, folder, *args, **kwargs)
        written.extend(p.name for p in folder.iterdir())
        raise OSError("simulated: disk full")

    monkeypatch.setattr(PreTrainedModel, "save_pretrained", fail_midway)
    capsys.readouterr()
    assert main(["export", str(run), str(tmp_path / "new")]) == 2  # a disk error is one line, no traceback
    assert capsys.readouterr().err.strip().splitlines()[-1] == "esopt: error: simulated: disk full"
    assert "model.safetensors" in written  # it did fail midway
    assert not (tmp_path / "new").exists()
    assert main(["export", str(run), str(old), "--force"]) == 2
    assert contents(old) == want  # the old export is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old"]  # and no temporary folder is left behind
