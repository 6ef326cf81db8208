"""`esopt bench NAME` (studies/bench.py over machine/benches.py and method/benches.py): each bench takes
its own flags, refuses another bench's in one line, and calls its study with the defaults and output
paths the benches have always had."""
from __future__ import annotations

import re
import types
from pathlib import Path

import pytest

from esopt.cli import main
from esopt.studies import bench

ROOT = Path(__file__).resolve().parents[2]
C = "configs/demo.yaml"


def calls(monkeypatch, argv: list[str]) -> list[tuple]:
    """What `esopt bench ...` calls its study's module with (a stand-in module records it)."""
    log = []
    fake = types.SimpleNamespace(main=lambda *a, **k: log.append(("main", a, k)),
                                 parity=lambda *a, **k: log.append(("parity", a, k)))
    monkeypatch.setattr(bench, "importlib", types.SimpleNamespace(import_module=lambda name: fake))
    assert main(["bench", *argv]) == 0
    return log


def _perturb_defaults():
    from esopt.config import load_config

    cfg = load_config(C, [])
    return (cfg.model, "bench-results/perturb.json", 3, cfg.es.sigma.start, cfg.es.table_size, cfg.runtime.threads)


EXPECTED = {  # argv after `esopt bench`: the call the bench makes (as before the flags were split by bench)
    ("es-memory",): ("main", (C, [], "bench-results/es-memory.json", 3), {"optimizers": None}),
    ("memory",): ("main", (C, [], "bench-results/memory.json", 1), {"tasks": None, "grpo_sequences": None}),
    ("perturb",): ("main", _perturb_defaults, {}),
    ("throughput",): ("main", (C, [], "bench-results/throughput.json"), {"context": False}),
    ("throughput", "--context"): ("main", (C, [], "bench-results/throughput-context.json"), {"context": True}),
    ("precision",): ("main", (C, [], "bench-results/precision.json"), {}),
    ("multiturn",): ("main", (C, [], "bench-results/multiturn.json", 3), {}),
    ("decode",): ("main", (C, [], "bench-results/decode.json", 3), {}),
    ("web",): ("main", ("bench-results/web.json",), {"episodes": 12, "sections": None}),
    ("serve",): ("main", (C, [], "bench-results/serve.json"), {"clients": [1, 8, 32], "hostile": 2}),
    ("ray",): ("main", (C, [], "bench-results/ray.json"), {"cores": 2, "repeats": 2}),
    ("gpu",): ("main", (C, [], "bench-results/gpu.json"), {"sections": None, "tiny": False, "tokenizer": None}),
    ("gpu", "--tiny"): ("main", (C, [], "bench-results/gpu-tiny.json"), {"sections": None, "tiny": True,
                                                                         "tokenizer": None}),
    ("dtype",): ("main", (C, [], "bench-results/dtype.json", 3), {}),
    ("dtype", "--seeds", "0,1"): ("parity", (C, [], "bench-results/dtype-parity.json", [0, 1]), {"jobs": 1}),
    ("llamacpp",): ("main", (C, [], "bench-results/llamacpp.json"), {"run": None, "types": None,
                                                                     "tool": "tools/llamacpp"}),
    ("compare",): ("main", (C, [], "bench-results/compare.json", [0, 1, 2]),
                   {"grpo_lrs": None, "es_sigmas": None, "tune_seeds": None, "jobs": 1, "budget_seconds": None,
                    "arms": None, "final_overrides": None, "tune_only": False, "unseen_by_seeds": None}),
    ("settings",): ("main", (C, [], "bench-results/settings.json", None, [0]), {"jobs": 1, "unseen_by_seeds": None}),
    ("population",): ("main", (C, [], "bench-results/population.json", [], [8, 16]), {"seed": 0}),
    ("horizon",): ("main", (C, [], "bench-results/horizon.json", [0, 1]),
                   {"tasks": None, "grpo_lr": None, "jobs": 1, "es_sigma": None}),
    ("room",): ("main", ([], [], "bench-results/room.json"), {"train": 0, "seeds": [0, 1, 2], "runs": "runs/room"}),
}


def test_every_bench_is_still_there_and_nothing_else():
    assert {argv[0] for argv in EXPECTED} == set(bench.BENCHES)
    machine = {n for n, row in bench.BENCHES.items() if row[0].startswith("esopt.studies.machine.")}
    method = {n for n, row in bench.BENCHES.items() if row[0].startswith("esopt.studies.method.")}
    assert method == {"compare", "settings", "population", "horizon", "room"}
    assert machine | method == set(bench.BENCHES)


@pytest.mark.parametrize("argv", list(EXPECTED), ids=" ".join)
def test_each_bench_calls_its_study_with_the_defaults_it_always_had(monkeypatch, argv):
    kind, args, kwargs = EXPECTED[argv]
    assert calls(monkeypatch, list(argv)) == [(kind, args() if callable(args) else args, kwargs)]


def test_flags_reach_the_study(monkeypatch):
    assert calls(monkeypatch, ["compare", C, "runtime.threads=1", "--seeds", "3,4", "--grpo-lrs", "1e-5",
                               "--es-sigmas", "0.01", "--jobs", "2", "es.generations=2", "--out", "x.json",
                               "--final-override", "tasks.heldout_skip=64", "--final-override", "eval.pass_at=[1,4]",
                               "--tune-only", "--unseen-by-seeds", "0,5"]) == [
        ("main", (C, ["runtime.threads=1", "es.generations=2"], "x.json", [3, 4]),
         {"grpo_lrs": [1e-5], "es_sigmas": [0.01], "tune_seeds": None, "jobs": 2, "budget_seconds": None,
          "arms": None, "final_overrides": ["tasks.heldout_skip=64", "eval.pass_at=[1,4]"], "tune_only": True,
          "unseen_by_seeds": [0, 5]})]
    assert calls(monkeypatch, ["settings", C, "--arms", "a.yaml", "--seeds", "0,1", "--unseen-by-seeds", "0,10"]) == [
        ("main", (C, [], "bench-results/settings.json", "a.yaml", [0, 1]), {"jobs": 1, "unseen_by_seeds": [0, 10]})]
    assert calls(monkeypatch, ["population", "--seed", "5", "--models", "a,b"]) == [
        ("main", (C, [], "bench-results/population.json", ["a", "b"], [8, 16]), {"seed": 5})]
    assert calls(monkeypatch, ["es-memory", "--optimizers", "sgd,adam"]) == [
        ("main", (C, [], "bench-results/es-memory.json", 3), {"optimizers": ["sgd", "adam"]})]


def test_a_bench_help_lists_only_its_own_flags(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "compare", "--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: esopt bench compare")
    for flag in ("--out", "--seeds", "--grpo-lrs", "--es-sigmas", "--tune-seeds", "--budget-seconds", "--arms", "--jobs"):
        assert flag in out
    for flag in ("--tiny", "--sections", "--context", "--repeats", "--grpo-lr ", "--tasks", "--train", "--seed "):
        assert flag not in out


@pytest.mark.parametrize("argv, needle", [
    (["compare", C, "--tiny"], "bench compare does not take --tiny (--tiny is a flag of gpu)"),
    (["compare", C, "--seed", "3"], "bench compare does not take --seed (--seed is a flag of population)"),
    (["room", "--repeats=2"], "bench room does not take --repeats (--repeats is a flag of es-memory, memory"),
    (["gpu", "--no-such-flag"], "bench gpu does not take --no-such-flag; its flags: --out, --sections, --tiny"),
])
def test_a_flag_the_bench_does_not_take_is_refused_in_one_line(capsys, argv, needle):
    """An abbreviation is no way round it: --seed is not read as compare's --seeds."""
    with pytest.raises(SystemExit) as e:
        main(["bench", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and err[0].startswith("esopt: error: ") and needle in err[0]


def test_documented_bench_commands_use_flags_their_bench_takes():
    """Every `esopt bench NAME ... --flag` in the docs, the README and the Makefile is a flag NAME takes."""
    flags = {n: {"--out", *(f for f, _ in row[2])} for n, row in bench.BENCHES.items()}
    texts = [*(ROOT / "docs").glob("*.md"), ROOT / "README.md", ROOT / "Makefile"]
    wrong, seen = [], 0
    for path in texts:
        for m in re.finditer(r"esopt bench ([a-z-]+)([^`\n]*)", path.read_text(encoding="utf-8")):
            if m.group(1) not in flags:
                continue
            for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]*", m.group(2)):
                seen += 1
                if flag not in flags[m.group(1)]:
                    wrong.append(f"{path.name}: esopt bench {m.group(1)} {flag}")
    assert seen > 20 and wrong == []


def test_a_stopped_bench_names_the_file_it_writes(monkeypatch, capsys):
    """The stop line names the bench's own JSON: bench dtype --seeds writes dtype-parity.json, not dtype.json."""
    def stopped(*a, **k):
        raise KeyboardInterrupt

    fake = types.SimpleNamespace(main=stopped, parity=stopped)
    monkeypatch.setattr(bench, "importlib", types.SimpleNamespace(import_module=lambda name: fake))
    assert main(["bench", "dtype", C, "--seeds", "0,1"]) == 130
    assert "bench-results/dtype-parity.json was not written" in capsys.readouterr().err
    assert main(["bench", "dtype", C]) == 130
    assert "bench-results/dtype.json was not written" in capsys.readouterr().err
