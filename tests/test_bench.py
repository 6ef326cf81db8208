import json

from esopt.bench.es_memory import main as es_memory

from conftest import TINY_OVERRIDES


def test_es_memory_bench_runs_and_reports(esopt_cache, tmp_path, capsys):
    out = tmp_path / "es-memory.json"
    peaks = es_memory("configs/demo.yaml", TINY_OVERRIDES + ["es.population=2", "es.episodes_per_member=2"], str(out), repeats=1)
    data = json.loads(out.read_text())
    ratio = data["results"]["es_over_inference_peak_rss"]
    assert ratio == peaks["es"] / peaks["inference"] and ratio > 0
    assert len(data["runs"]["es"]) == 1 and data["runs"]["es"][0]["correction_mb"] > 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("RESULT es_over_inference_peak_rss=")


def test_perturb_bench_runs_and_reports(esopt_cache, tmp_path, capsys):
    from esopt.bench.perturb import main as perturb

    out = tmp_path / "perturb.json"
    res = perturb("tiny-llama", str(out), repeats=2, table_size=1 << 22)
    data = json.loads(out.read_text())
    assert data["results"] == res and res["perturb_restore_over_axpy"] > 0
    assert len(data["seconds"]["table"]) == 2
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("RESULT perturb_restore_over_axpy=")
    assert set(data["seconds"]) == {"axpy2", "gaussian", "gaussian_torch", "table", "table_torch"}


def test_throughput_bench_runs_and_reports(esopt_cache, tmp_path, capsys):
    from esopt.bench.throughput import main as throughput

    out = tmp_path / "throughput.json"
    res = throughput("configs/demo.yaml", TINY_OVERRIDES + ["es.population=2", "es.episodes_per_member=2"], str(out))
    data = json.loads(out.read_text())
    assert data["results"] == res
    assert 0 < res["es_overhead_fraction"] < 1 and res["lowrank_batched_over_sequential"] > 0
    assert res["es_overhead_fraction"] == res["es_overhead_fraction_gaussian"]  # the demo config's noise
    assert data["generations"]["lowrank"]["tokens"] > 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("RESULT es_overhead_fraction=")
