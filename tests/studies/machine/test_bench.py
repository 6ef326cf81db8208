import json

import pytest

from esopt.studies.common import kept_from_earlier
from esopt.studies.machine.es_memory import main as es_memory

from conftest import TINY_OVERRIDES


@pytest.mark.slow  # process-heavy: the default tier stays under 5 minutes (docs/design.md)
def test_es_memory_bench_runs_and_reports(esopt_cache, tmp_path, capsys):
    out = tmp_path / "es-memory.json"
    peaks = es_memory("configs/demo.yaml", TINY_OVERRIDES + ["es.population=2", "es.episodes_per_member=2"], str(out), repeats=1)
    data = json.loads(out.read_text())
    ratio = data["results"]["es_over_inference_peak_rss"]
    assert ratio == peaks["es"] / peaks["inference"] and ratio > 0
    assert len(data["runs"]["es"]) == 1 and data["runs"]["es"][0]["correction_mb"] > 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("RESULT es_over_inference_peak_rss=")


def test_perturb_bench_runs_and_reports(esopt_cache, tmp_path, capsys):
    from esopt.studies.machine.perturb import main as perturb

    out = tmp_path / "perturb.json"
    res = perturb("tiny-llama", str(out), repeats=2, table_size=1 << 22)
    data = json.loads(out.read_text())
    assert data["results"] == res and res["perturb_restore_over_axpy"] > 0
    assert len(data["seconds"]["table"]) == 2
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert lines[-1].startswith("RESULT perturb_restore_over_axpy=")
    # a line per round (the warm-up round included) on stderr
    progress = [line for line in captured.err.splitlines() if line.startswith("[bench perturb]")]
    assert [line.split(" (")[0] for line in progress[:3]] == [f"[bench perturb] round {k}/3" for k in (1, 2, 3)]
    assert "s left)" in progress[1] and progress[3].startswith("[bench perturb] 3 rounds in ")
    assert set(data["seconds"]) == {"axpy2", "axpy2_hot", "gaussian", "gaussian_torch", "table", "table_torch"}


def test_throughput_bench_runs_and_reports(esopt_cache, tmp_path, capsys):
    from esopt.studies.machine.throughput import main as throughput

    out = tmp_path / "throughput.json"
    res = throughput("configs/demo.yaml", TINY_OVERRIDES + ["es.population=2", "es.episodes_per_member=2"], str(out))
    data = json.loads(out.read_text())
    assert data["results"] == res
    assert 0 < res["es_overhead_fraction"] < 1 and res["lowrank_batched_over_sequential"] > 0
    assert res["es_overhead_fraction"] == res["es_overhead_fraction_table"]  # the demo config's noise
    assert data["generations"]["lowrank"]["tokens"] > 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("RESULT es_overhead_fraction=")


def test_throughput_context_search_overhead(esopt_cache, tmp_path, capsys):
    import pytest

    from esopt.studies.machine.throughput import main as throughput
    from esopt.config import ConfigError

    out = tmp_path / "ctx.json"
    with pytest.raises(ConfigError, match="needs a config with a skill library"):
        throughput("configs/demo.yaml", TINY_OVERRIDES, str(out), context=True)
    assert not out.exists()
    res = throughput("configs/coevo-demo.yaml", TINY_OVERRIDES + ["es.population=2", "es.episodes_per_member=2"],
                     str(out), context=True)
    data = json.loads(out.read_text())
    rows = data["generations"]
    assert data["results"] == res and set(rows) == {"weights", "both", "context"}
    assert res["context_search_over_weights_generation_time"] == rows["both"]["wall"] / rows["weights"]["wall"]
    assert res["both_over_weights_prefill_tokens"] == rows["both"]["tokens_prefilled"] / rows["weights"]["tokens_prefilled"]
    assert all(r["tokens_prefilled"] > 0 for r in rows.values())
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("RESULT context_search_over_weights_generation_time=")


@pytest.mark.slow  # process-heavy: the default tier stays under 5 minutes (docs/design.md)
def test_memory_bench_three_phases_over_horizons(esopt_cache, tmp_path, capsys, monkeypatch):
    import esopt.studies.machine.memory as memory

    out = tmp_path / "memory.json"
    # the real path, each phase in its own process, for one horizon (three processes: the slow part)
    res = memory.main("configs/demo.yaml", TINY_OVERRIDES + ["es.population=2", "es.episodes_per_member=2",
                                                              "grpo.micro_batch=2"], str(out), tasks=["9x9-h15"])
    data = json.loads(out.read_text())
    assert data["results"] == res and data["grpo_update_sequences"] == 4
    table = data["median_peak_mb"]
    assert set(table) == {"9x9-h15"} and set(table["9x9-h15"]) == {"inference", "es", "grpo"}
    assert res["grpo_over_es_peak_at_15"] == table["9x9-h15"]["grpo"] / table["9x9-h15"]["es"]
    # (on a 1M-parameter model the interpreter dominates the peaks; no ordering is asserted here)
    assert data["runs"]["9x9-h15"]["grpo"][0]["trained_tokens"] > 0
    assert (tmp_path / "memory.png").stat().st_size > 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("RESULT grpo_over_es_peak_at_15=")

    # a later run of other tasks into the same file keeps these rows (same settings only); the
    # processes are stood in for here, with rows whose peaks are known
    settings = {k: data[k] for k in ("config", "overrides", "repeats", "grpo_update_sequences", "population",
                                     "episodes_per_member")}
    def earlier(path, settings, tasks):
        return kept_from_earlier(str(path), settings, "runs", memory.TASKS, tasks, "bench")

    assert set(earlier(out, settings, ["4x4-demo", "9x9-h5"])) == {"9x9-h15"}
    assert earlier(out, {**settings, "population": 4}, ["4x4-demo"]) == {}
    assert earlier(tmp_path / "missing.json", settings, ["4x4-demo"]) == {}
    peaks = {"inference": 100.0, "es": 110.0, "grpo": 300.0}
    monkeypatch.setattr(memory, "measure", lambda *a, **k: {p: [{"peak_rss_mb": v}] for p, v in peaks.items()})
    res2 = memory.main("configs/demo.yaml", data["overrides"], str(out), tasks=["9x9-h5"])
    data2 = json.loads(out.read_text())
    assert list(data2["median_peak_mb"]) == ["9x9-h5", "9x9-h15"] and data2["runs"]["9x9-h15"] == data["runs"]["9x9-h15"]
    assert res2["es_peak_growth_5_to_15"] == table["9x9-h15"]["es"] / 110.0 - 1
    assert res2["es_over_inference_peak_max"] == max(1.1, table["9x9-h15"]["es"] / table["9x9-h15"]["inference"])
    assert res2["grpo_over_es_peak_at_15"] == res["grpo_over_es_peak_at_15"]


def test_memory_bench_rejects_unknown_task(tmp_path):
    import pytest

    from esopt.studies.machine.memory import main as memory
    from esopt.config import ConfigError

    with pytest.raises(ConfigError, match="allowed: 4x4-demo"):
        memory("configs/demo.yaml", TINY_OVERRIDES, str(tmp_path / "m.json"), tasks=["9x9-h99"])


# the method benches (compare, horizon, settings, population, room): tests/studies/method/


def test_multiturn_bench_runs_and_reports(esopt_cache, tmp_path, capsys):
    from esopt.studies.machine.multiturn import main as multiturn

    out = tmp_path / "multiturn.json"
    res = multiturn("configs/demo.yaml", TINY_OVERRIDES + ["es.episodes_per_member=3", "env.size=4", "env.blanks=8",
                                                          "env.max_turns=4"], str(out), repeats=2)
    data = json.loads(out.read_text())
    assert data["results"] == res and res["outputs_equal"] is True
    assert res["kv_turn4_prefill_tokens"] < res["plain_turn4_prefill_tokens"] / 2  # only the new tokens
    assert res["kv_turn1_prefill_tokens"] == res["plain_turn1_prefill_tokens"]
    assert res["kv_cache_mb_at_turn4"] > 0 and len(data["repeats"]) == 2 and len(data["repeats"][0]["kv"]) == 4
    # the same rollout with transformers' DynamicCache layers: same replies, same tokens encoded
    assert all(r["dynamic_equal"] for r in data["repeats"]) and res["dynamic_turn4_seconds"] > 0
    assert [t["prefill_tokens"] for t in data["repeats"][0]["dynamic"]] == [t["prefill_tokens"] for t in data["repeats"][0]["kv"]]
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("RESULT turn4_over_turn1_cost=")


def test_decode_bench_times_both_caches_and_checks_replies(esopt_cache, tmp_path, capsys):
    from esopt.studies.machine.decode import main as decode

    out = tmp_path / "decode.json"
    res = decode("configs/demo.yaml", TINY_OVERRIDES, str(out), repeats=2, rows=3, max_new_tokens=12, prompt_words=60,
                 slice_tokens=5)
    data = json.loads(out.read_text())
    assert data["results"] == res and res["outputs_equal"] is True
    assert len(data["repeats"]) == 2 and all(r["growing"]["tokens"] == r["dynamic"]["tokens"] > 0 for r in data["repeats"])
    assert data["prompt_tokens"] > 60 and res["growing_seconds"] > 0 and res["dynamic_seconds"] > 0
    assert "RESULT growing_over_dynamic_seconds=" in capsys.readouterr().out
    # esopt serve's slices: the same greedy tokens, and a continued slice encodes one token per row
    assert res["sliced_outputs_equal"] is True and res["sliced_prefill_per_slice"] == 1.0
    assert res["sliced_seconds"] > 0 and res["whole_seconds"] > 0
