"""esopt adapt --merge: tables of the same settings, budgets and starting weights over other tasks
merge into the table one adapt command over all the tasks gives; tables that do not fit are one
line each, and nothing is written."""
import json

import pytest

from esopt.cli import main
from esopt.studies.adapt import grid as adapt_mod
from esopt.studies.adapt.merge import merge
from esopt.config import ConfigError

from test_adapt import write_config

TASKS = {"s0": {"run.seed": 0}, "s1": {"run.seed": 1}}
QUIET = {"log": lambda *a: None}


def run(tmp_path, name, tasks):
    path = write_config(tmp_path, budgets=[4], settings=["none", "context", "weights"], tasks=tasks, name=name)
    adapt_mod.run_adapt(path, [], **QUIET)
    return tmp_path / "out" / name / "adapt.json"


def figures(rows):
    """The rows without what differs between two runs of the same sub-run (folders, seconds)."""
    return [(r["task"], r["budget"], r["comparisons"],
             {s: (c["reward"], c["reward_se"], c["n"]) for s, c in r["settings"].items()}) for r in rows]


@pytest.mark.slow  # process-heavy: the default tier stays under 5 minutes (docs/design.md)
def test_merged_tables_equal_one_adapt_over_all_tasks(esopt_cache, tmp_path, capsys):
    whole = json.loads(run(tmp_path, "whole", TASKS).read_text())
    a = run(tmp_path, "part0", {"s0": TASKS["s0"]})
    b = run(tmp_path, "part1", {"s1": TASKS["s1"]})
    out = tmp_path / "merged" / "seeds.json"
    assert main(["adapt", "--merge", str(out), str(a), str(b)]) == 0
    merged = json.loads(out.read_text())
    assert figures(merged["rows"]) == figures(whole["rows"])
    assert merged["totals"] == whole["totals"] and sum(merged["totals"]["weights vs none @ 4"].values()) == 2
    assert merged["tasks"] == whole["tasks"] and merged["merged_from"] == [str(a), str(b)]
    text = capsys.readouterr().out
    for key, v in whole["totals"].items():
        name = key.replace(" vs ", "_vs_").replace(" @ ", "_b")
        assert f"RESULT adapt_{name}=W{v['win']}/T{v['tie']}/L{v['loss']}" in text
    md = out.with_suffix(".md").read_text()
    assert "| s0 | 4 |" in md and "| s1 | 4 |" in md and "context vs none" in md


def table(tmp_path, name, **change):
    data = {"config": "c.yaml", "start": {"model": "m", "from": None, "weights_hash": "abc123"},
            "settings": ["none", "weights"], "budgets": [4], "tasks": {name: {}}, "failed": [],
            "rows": [{"task": name, "budget": 4, "settings": {},
                      "comparisons": [{"a": "weights", "b": "none", "diff": 0.1, "se": 0.01, "outcome": "win"}]}]}
    data.update(change)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def test_constructed_tables_sum_their_totals(tmp_path):
    a, b = table(tmp_path, "x"), table(tmp_path, "y")
    got = merge(tmp_path / "m.json", [a, b])
    assert got["totals"] == {"weights vs none @ 4": {"win": 2, "tie": 0, "loss": 0}}
    assert [r["task"] for r in got["rows"]] == ["x", "y"]


@pytest.mark.parametrize("second, message", [
    ({"settings": ["none", "context"]}, "has settings"),
    ({"budgets": [8]}, "has budgets"),
    ({"start": {"model": "m", "from": None, "weights_hash": "fff000"}}, "other weights"),
    ({"tasks": {"x": {}}}, "task 'x' is in both"),
])
def test_tables_that_do_not_fit_are_one_line_and_write_nothing(tmp_path, capsys, second, message):
    a, b = table(tmp_path, "x"), table(tmp_path, "y", **second)
    out = tmp_path / "m.json"
    assert main(["adapt", "--merge", str(out), str(a), str(b)]) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not out.exists() and not out.with_suffix(".md").exists()


def test_bad_files_and_arguments_are_one_line(tmp_path):
    a = table(tmp_path, "x")
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"rows": []}))
    cases = [([a, tmp_path / "missing.json"], "no such file"), ([a, junk], "not readable JSON"),
             ([a, other], "not an esopt adapt.json"), ([a], "at least two")]
    for inputs, message in cases:
        with pytest.raises(ConfigError, match=message):
            merge(tmp_path / "m.json", inputs)
    with pytest.raises(ConfigError, match="ending in .json"):
        merge(tmp_path / "m.md", [a, table(tmp_path, "y")])
    with pytest.raises(ConfigError, match="one of the inputs"):
        merge(a, [a, table(tmp_path, "y")])
    assert not (tmp_path / "m.json").exists()


def test_merge_takes_no_run_options(tmp_path, capsys):
    a, b = table(tmp_path, "x"), table(tmp_path, "y")
    with pytest.raises(SystemExit, match="--merge takes adapt.json files only, not --env"):
        main(["adapt", "--merge", str(tmp_path / "m.json"), str(a), str(b), "--env", "ahd-tsp"])
