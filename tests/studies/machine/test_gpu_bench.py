"""esopt bench gpu at tiny shapes on the CPU: every section and phase runs, the figures come from
the measured rows, and --sections keeps the others (the GPU run is the same code at real shapes)."""
import json

import pytest

from esopt.studies.machine import gpu
from esopt.config import ConfigError

ISSUE_FIGURES = ("gpu_es_over_inference_time", "gpu_es_episodes_per_s_over_grpo",
                 "gpu_lowrank_over_fullrank_episodes_per_s", "gpu_4b_es_over_inference_peak",
                 "gpu_27b_es_peak_gb", "gpu_27b_grpo_peak_gb")


def test_bench_gpu_tiny_runs_every_section_and_phase(esopt_cache, tmp_path, capsys):
    out = tmp_path / "gpu.json"
    results = gpu.main("configs/demo.yaml", [], str(out), tiny=True)
    data = json.loads(out.read_text())
    assert list(data["sections"]) == list(gpu.SECTIONS) and data["tiny"] and not data.get("partial")
    for name, section in data["sections"].items():
        assert list(section["phases"]) == list(gpu.PHASES[name])
        episodes = section["population"] * section["episodes_per_member"]
        for phase, row in section["phases"].items():
            assert row["episodes"] == episodes and row["seconds"] > 0 and row["episodes_per_s"] > 0, (name, phase)
            assert row["peak_mb"] is None  # memory is a CUDA figure
            assert "error" not in row, (name, phase, row.get("error"))
        assert section["device"] == "cpu"
    demo = data["sections"]["demo-float32"]["phases"]
    assert demo["es-table"]["time_perturb"] > 0 and demo["grpo"]["time_update"] > 0  # the update really ran
    assert data["sections"]["4b"]["params"] < 10**6  # tiny shapes
    assert results["gpu_es_over_inference_time"] == pytest.approx(demo["es-table"]["seconds"] / demo["inference"]["seconds"])
    assert results["gpu_es_episodes_per_s_over_grpo"] == pytest.approx(
        demo["es-table"]["episodes_per_s"] / demo["grpo"]["episodes_per_s"])
    comp = data["sections"]["compiled"]["phases"]
    assert comp["inference+compiled"]["warmup_seconds"] > 0  # the compiled decode: a warm-up run, then timed
    assert data["sections"]["compiled"]["dtype"] == "float32"
    assert results["gpu_compiled_over_dynamic_inference_time"] == pytest.approx(
        comp["inference+compiled"]["seconds"] / comp["inference"]["seconds"])
    for name in ISSUE_FIGURES:
        assert name in results
    assert set(data["not_measured"]) >= {"gpu_4b_es_over_inference_peak", "gpu_27b_es_peak_gb"}
    printed = capsys.readouterr().out
    assert "RESULT gpu_es_over_inference_time=" in printed and "RESULT gpu_lowrank_over_fullrank_episodes_per_s=" in printed

    # one section again, its tokenizer from a folder holding only a tokenizer: the others are kept from OUT
    # (same settings), the figures recomputed over all of them
    from esopt.models.tiny import char_tokenizer

    char_tokenizer().save_pretrained(tmp_path / "tok")
    before = data["sections"]["demo-bfloat16"]
    gpu.main("configs/demo.yaml", [], str(out), sections=["4b"], tiny=True, tokenizer=str(tmp_path / "tok"))
    again = json.loads(out.read_text())
    assert list(again["sections"]) == list(gpu.SECTIONS) and again["sections"]["demo-bfloat16"] == before
    assert again["sections"]["4b"]["phases"]["es-table"]["episodes"] == data["sections"]["4b"]["population"] * 2


def test_bench_gpu_figures_read_memory_and_oom():
    row = lambda **kw: {"seconds": 2.0, "episodes_per_s": 4.0, "peak_mb": 1000.0, **kw}  # noqa: E731
    sections = {"4b": {"phases": {"inference": row(peak_mb=8000.0), "es-table": row(peak_mb=8400.0)}},
                "27b": {"phases": {"es-table": row(peak_mb=56 * 1024.0), "grpo": {"error": "oom", "peak_mb": 1.0}}}}
    got = gpu.figures(sections)
    assert got["gpu_4b_es_over_inference_peak"] == pytest.approx(1.05)
    assert got["gpu_27b_es_peak_gb"] == pytest.approx(56.0) and got["gpu_27b_grpo_peak_gb"] == "oom"
    assert got["gpu_es_over_inference_time"] is None  # no demo section measured


def test_bench_gpu_refuses_unknown_sections(tmp_path):
    with pytest.raises(ConfigError, match="unknown section"):
        gpu.main("configs/demo.yaml", [], str(tmp_path / "g.json"), sections=["8b"], tiny=True)
    assert not (tmp_path / "g.json").exists()
