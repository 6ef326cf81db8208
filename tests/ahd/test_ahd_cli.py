"""esopt adapt --env ahd-<problem>: every method x budget x seed in its own folder with a tiny
model (replies turned into toy heuristics), the X+ES vs X table, skipping finished runs on a
re-run, a failing run recorded while the others go on, a changed config refused; the W/T/L
rule on constructed numbers."""
import json

import pytest
import yaml

from esopt import cli
from esopt.studies.ahd import run as ahd_run
from esopt.studies.ahd import table as ahd_table

from ahd_search_fakes import CodeFromModel, FakeEvaluator, ToyProblem

CONFIG = {
    "model": "tiny-llama",
    "runtime": {"threads": 1},
    "es": {"population": 2, "sigma": {"start": 0.05, "end": 0.0, "schedule": "cosine"},
           "alpha": {"start": 0.05, "end": 0.05, "schedule": "constant"}},
    "search": {"population": 2, "validation": 2, "heldout": 3, "max_new_tokens": 4},
    "grid": {"budgets": [2, 4], "seeds": [0, 1]},
}


@pytest.fixture
def hooks(monkeypatch, esopt_cache):
    made = {"proposers": [], "loads": 0}
    real_make, real_get = ahd_run.make_proposer, ahd_run.StartModel.get

    def make(start, cfg, perturber, entry=None):
        made["proposers"].append(perturber is not None)
        return CodeFromModel(real_make(start, cfg, perturber, entry))

    def get(self):
        if self.model is None:
            made["loads"] += 1
        return real_get(self)

    monkeypatch.setattr(ahd_run, "load_problem", lambda name: ToyProblem())
    monkeypatch.setattr(ahd_run, "make_evaluator", lambda cfg: FakeEvaluator())
    monkeypatch.setattr(ahd_run, "make_proposer", make)
    monkeypatch.setattr(ahd_run.StartModel, "get", get)
    return made


def write(tmp_path, **changes):
    cfg = yaml.safe_load(yaml.safe_dump(CONFIG))
    for k, v in changes.items():
        cfg[k].update(v)
    path = tmp_path / "ahd.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_grid_table_skip_and_failure(tmp_path, hooks, capsys, monkeypatch):
    out = tmp_path / "out"
    path = write(tmp_path)
    assert cli.main(["adapt", "--env", "ahd-toy", str(path), "--out", str(out)]) == 0
    folders = sorted(p.name for p in (out / "toy").iterdir() if p.is_dir())
    assert folders == sorted(f"{m}-b{b}-s{s}" for m in ("eoh", "eoh-es", "sample", "sample-es")
                             for b in (2, 4) for s in (0, 1))
    for name in folders:
        f = out / "toy" / name
        summary = json.loads((f / "summary.json").read_text())
        lines = (f / "proposals.jsonl").read_text().splitlines()
        assert len(lines) == summary["calls"] == summary["budget"]
        assert (f / "best.py").read_text() == summary["best"]["code"]
        assert (f / "history.json").exists() == name.startswith(("eoh-es", "sample-es"))
    assert hooks["proposers"].count(True) == 8 and hooks["proposers"].count(False) == 8
    assert hooks["loads"] == 1  # one model for the whole grid, restored per run
    result = json.loads((out / "ahd.json").read_text())
    assert [(r["problem"], r["budget"]) for r in result["rows"]] == [("toy", 2), ("toy", 4)]
    for row in result["rows"]:
        assert {(c["a"], c["b"]) for c in row["comparisons"]} == {("eoh+es", "eoh"), ("sample+es", "sample")}
        assert all(c["win"] + c["tie"] + c["loss"] == 2 for c in row["comparisons"])
        assert row["reference"] == 5.0
        assert {m: sum(c.values()) for m, c in row["proposals"].items()} == \
            {m: 2 * row["budget"] for m in ("eoh", "eoh+es", "sample", "sample+es")}  # every call, both seeds
    page = (out / "toy" / "eoh-es-b4-s0" / "report" / "report.html").read_text()
    best = json.loads((out / "toy" / "eoh-es-b4-s0" / "summary.json").read_text())["best"]
    assert "Heuristic search" in page and "ES steps" in page and "def entry(x):" in page
    assert (out / "toy" / "eoh-es-b4-s0" / "report" / "report-best.png").exists() and best["id"] in page
    md = (out / "ahd.md").read_text()
    assert "eoh+es vs eoh" in md and "| toy | 4 |" in md
    assert "Proposals, summed over seeds" in md and "| toy | 4 | sample+es | 8 |" in md
    printed = capsys.readouterr().out
    assert "RESULT ahd_toy_eoh_es_vs_eoh_b2=W" in printed
    assert json.loads((out / "toy" / "reference.json").read_text()).keys() == {"0", "1"}

    # a re-run skips every finished run and loads no model; one removed summary is run again
    (out / "toy" / "sample-b4-s1" / "summary.json").unlink()
    hooks["loads"] = 0
    hooks["proposers"].clear()

    def failing(start, cfg, perturber, entry=None):
        raise RuntimeError("proposer broke")

    monkeypatch.setattr(ahd_run, "make_proposer", failing)
    assert cli.main(["adapt", "--env", "ahd-toy", str(path), "--out", str(out)]) == 1
    assert hooks["loads"] == 0
    result = json.loads((out / "ahd.json").read_text())
    assert result["statuses"]["sample-b4-s1"] == "failed"
    assert sum(v == "skipped" for v in result["statuses"].values()) == 15
    assert "proposer broke" in result["failed"][0]["error"]
    assert "proposer broke" in (out / "toy" / "sample-b4-s1" / "error.txt").read_text()
    row4 = [r for r in result["rows"] if r["budget"] == 4][0]
    sample = [c for c in row4["comparisons"] if c["b"] == "sample"][0]
    assert sample["seeds"] == [0]  # the failed seed is not paired
    assert sum(row4["proposals"]["sample"].values()) == 4  # only the finished seed's proposals

    # a changed config is refused in one line, before anything runs
    changed = write(tmp_path, search={"validation": 3})
    assert cli.main(["adapt", "--env", "ahd-toy", str(changed), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "made with another config" in err and len(err.strip().splitlines()) == 1


def test_flags_and_bad_input(tmp_path, hooks, capsys):
    path = write(tmp_path)
    out = tmp_path / "o"
    assert cli.main(["adapt", "--env", "ahd-toy", str(path), "--out", str(out), "--budgets", "2",
                     "--seeds", "3", "--methods", "sample"]) == 0
    assert sorted(p.name for p in (out / "toy").iterdir() if p.is_dir()) == ["sample-b2-s3"]
    assert cli.main(["adapt", "--env", "tsp", str(path)]) == 2
    assert "ahd-<problem>" in capsys.readouterr().err
    assert cli.main(["adapt", "--env", "ahd-toy", str(path), "--budgets", "3", "--out", str(out)]) == 2
    assert "whole numbers of batches" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="go with --env"):
        cli.main(["adapt", "configs/adapt-demo.yaml", "--budgets", "2"])


def test_seed_outcomes_and_cells_on_known_numbers():
    assert ahd_table.seed_outcome(1.0, 2.0) == "win" and ahd_table.seed_outcome(2.0, 1.0) == "loss"
    assert ahd_table.seed_outcome(1.0, 1.0) == "tie" and ahd_table.seed_outcome(None, None) == "tie"
    assert ahd_table.seed_outcome(None, 1.0) == "loss" and ahd_table.seed_outcome(1.0, None) == "win"

    def s(obj):
        return {"best": {"heldout": {"objective": obj}}}

    runs = {("eoh+es", 0): s(1.0), ("eoh", 0): s(2.0), ("eoh+es", 1): s(3.0), ("eoh", 1): s(4.0),
            ("eoh+es", 2): s(5.0), ("eoh", 2): s(6.0)}
    c = ahd_table.cell(runs, "eoh+es", "eoh")
    assert (c["win"], c["tie"], c["loss"]) == (3, 0, 0)
    assert c["diff"] == pytest.approx(1.0) and c["se"] == 0.0 and c["outcome"] == "win"
    runs[("eoh", 2)] = s(2.0)  # differences 1, 1, -3: mean -1/3, a tie at 2 SE
    c = ahd_table.cell(runs, "eoh+es", "eoh")
    assert (c["win"], c["loss"]) == (2, 1) and c["outcome"] == "tie"


def test_proposal_kinds():
    recs = [
        {"valid": True, "objective": 4.0, "parent_objective": 5.0},
        {"valid": True, "objective": 5.0, "parent_objective": 5.0},
        {"valid": True, "objective": 7.0, "parent_objective": 5.0},
        {"valid": False, "reason": "duplicate of ref", "duplicate_of": "ref"},
        {"valid": False, "reason": "duplicate of p3 (same batch)", "duplicate_of": "p3"},
        {"valid": False, "reason": "no 'def priority(' in the reply"},
        {"valid": False, "reason": "no top-level 'def priority(' in the code"},
        {"valid": False, "reason": "crash: priority raised TypeError: x (line 3)"},
        {"valid": False, "reason": "crash: killed by SIGKILL"},
        {"valid": False, "reason": "memory limit"},
        {"valid": False, "reason": None},
        {"valid": False, "reason": "odd | kind: detail"},
    ]
    assert ahd_table.kinds_of(recs) == {
        "better than its parent": 1, "valid, not better": 2, "copy of the reference": 1,
        "copy of another proposal": 1, "no function": 1, "no top-level function": 1, "crash": 2,
        "memory limit": 1, "no reason recorded": 1, "odd / kind": 1}
    row = {"problem": "p", "budget": 4, "reference": None, "methods": {}, "comparisons": [],
           "proposals": {"eoh": {"crash": 3, "better than its parent": 1}, "sample": {"no function": 4}}}
    md = ahd_table.markdown({"rows": [row], "totals": {}})
    # the two valid kinds first, then the rest by their count over the table
    assert "| method | proposals | better than its parent | valid, not better | no function | crash |" in md
    assert "| p | 4 | eoh | 4 | 1 | 0 | 0 | 3 |" in md and "| p | 4 | sample | 4 | 0 | 0 | 4 | 0 |" in md
