import json
import re
import shutil

import pytest

import esopt.envs.registry as registry
from esopt.cli import main
from esopt.report import default_report_path, load_run, write_report

from report_helpers import ScriptedPolicy, copy_run, make_run, truncate

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def finished(esopt_cache, tmp_path_factory):
    """A finished tiny run; its report was written by Trainer.finish."""
    lines = []
    path, summary = make_run(tmp_path_factory.mktemp("runs"), "finished", log=lines.append)
    return path, summary, lines


def test_trainer_writes_the_report_at_the_end(finished):
    path, _, lines = finished
    page = default_report_path(path)
    assert page.exists() and f"[esopt] report: {page}" in lines
    html = page.read_text()
    for key in ("rewards", "heldout", "seconds", "schedules", "signal", "time", "memory"):  # it records its memory
        png = page.parent / f"report-{key}.png"
        assert png.read_bytes().startswith(PNG), key
        assert f'id="plot-{key}"' in html
    assert html.count('<img class="plot"') == 7 and html.count("data:image/png;base64,") == 7
    assert "not recorded by this run" not in html
    assert 'id="missing"' not in html  # nothing is missing from a finished run
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # self-contained: nothing fetched
    assert "finished: 3 of 3 generations" in html and "tiny-llama" in html and "run seed" in html


def test_trajectory_viewer_shows_boards_turn_by_turn(finished):
    html = default_report_path(finished[0]).read_text()
    options = re.findall(r'<option (?:selected )?value="([^"]+)"', html)
    assert options == ["eval-0", "train-0", "eval-1", "train-1", "eval-2", "train-2", "eval-3"]
    assert '<option selected value="eval-3"' in html
    assert html.count('class="traj-view"') == len(options)
    assert "<b>best</b>" in html and "<b>worst</b>" in html
    assert 'class="sdk sdk4"' in html and 'class="sdk-legend"' in html
    assert re.search(r'<td class="[^"]*\bnew\b', html)  # a cell a move filled
    assert re.search(r'<td class="[^"]*\brej\b', html)  # a cell a refused move tried
    assert "accepted." in html and "rejected:" in html
    assert "I think &lt;b&gt;this&lt;/b&gt; &amp; that" in html and "<b>this</b>" not in html


def test_cli_report_refresh_and_out(finished, tmp_path, capsys):
    run = copy_run(finished[0], tmp_path / "run")
    assert main(["report", str(run)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [f"[esopt] report: {default_report_path(run).resolve()} (open it in a browser; plots also as "
                   "PNG files beside it)"]
    out_file = tmp_path / "elsewhere" / "mine.html"
    assert main(["report", str(run), "--out", str(out_file)]) == 0
    assert out_file.exists() and (out_file.parent / "mine-rewards.png").read_bytes().startswith(PNG)


def test_not_a_run_folder_exits_2_with_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is not an esopt run folder" in err and len(err.strip().splitlines()) == 1
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_truncated_run_yields_a_page_naming_what_is_missing(finished, tmp_path):
    run = copy_run(finished[0], tmp_path / "killed")
    truncate(run)
    report = write_report(run)
    html = report.path.read_text()
    assert 'id="missing"' in html
    for needle in ("only 2 of 3 generations recorded", "no held-out evaluation yet", "trajectories/gen0000.jsonl missing",
                   "summary.json is missing", "metrics.jsonl: 1 unreadable line(s) skipped",
                   "metrics.jsonl lacks generation(s) 2", "no training episodes for generation(s) 1 "):
        assert needle in html, needle
        assert any(needle in m for m in report.missing), needle
    assert "not finished (no summary.json): 2 of 3 generations recorded" in html
    assert 'id="plot-rewards"' in html and html.count('<img class="plot"') == 5  # rewards, schedules, signal, time,
    # memory
    assert re.search(r'id="plot-heldout">.*?no held-out evaluation yet', html)
    assert re.findall(r'<option (?:selected )?value="([^"]+)"', html) == ["train-1"]


def test_damaged_or_nearly_empty_run_folders_still_give_a_page(finished, tmp_path):
    run = copy_run(finished[0], tmp_path / "damaged")
    text = (run / "history.json").read_text()
    (run / "history.json").write_text(text[: len(text) // 2])
    (run / "metrics.jsonl").unlink()
    shutil.rmtree(run / "trajectories")
    html = write_report(run).path.read_text()
    assert "history.json could not be read" in html and "metrics.jsonl is missing" in html
    assert "No recorded episodes" in html

    fresh = tmp_path / "just-started"
    fresh.mkdir()
    shutil.copy(finished[0] / "config.yaml", fresh / "config.yaml")
    html = write_report(fresh).path.read_text()
    assert "history.json is missing" in html and "no generation recorded yet" in html
    assert "only 0 of 3 generations recorded" in html


def test_heldout_figures_recomputed_from_episodes_without_metrics(finished, tmp_path):
    run = copy_run(finished[0], tmp_path / "nometrics")
    (run / "metrics.jsonl").unlink()
    data = load_run(run)
    assert [e["generation"] for e in data.evals] == [0, 1, 2, 3]
    assert data.evals[-1]["heldout_reward"] == pytest.approx(finished[1]["final"]["reward"])
    assert [r["generation"] for r in data.train] == [0, 1, 2] and all("reward_mean" in r for r in data.train)


def test_compare_overlays_runs(finished, tmp_path):
    other, _ = make_run(tmp_path, "other", "es.generations=2", "es.noise=lowrank")
    out = tmp_path / "cmp" / "a-vs-b.html"
    assert main(["report", str(finished[0]), "--compare", str(other), "--out", str(out)]) == 0
    html = out.read_text()
    assert 'id="compare"' in html and "finished" in html and "other" in html
    for key in ("compare-reward", "compare-heldout", "compare-heldout-episodes", "compare-sigma", "compare-alpha",
                "compare-time"):
        assert (out.parent / f"a-vs-b-{key}.png").read_bytes().startswith(PNG), key
    assert "lowrank rank 1" in html


def test_other_environments_get_the_fallback_or_their_renderer(finished, tmp_path, monkeypatch):
    run = copy_run(finished[0], tmp_path / "web")
    cfg = (run / "config.yaml").read_text()
    (run / "config.yaml").write_text(cfg.replace("id: sudoku", "id: web"))
    history = json.loads((run / "history.json").read_text())
    history["meta"]["settings"]["env.id"] = "web"  # a run made on env "web" (else the report refuses the config)
    (run / "history.json").write_text(json.dumps(history))
    html = write_report(run).path.read_text()
    assert 'class="turns"' in html and 'class="sdk' not in html  # plain turn table

    monkeypatch.setattr(registry, "_RENDERERS", dict(registry._RENDERERS))

    def web(ep):
        return f'<div class="web-step">{len(ep["turns"])} steps</div>'

    web.css = ".web-step{color:teal}"
    registry.register_renderer("web", web)
    html = write_report(run).path.read_text()
    assert 'class="web-step"' in html and ".web-step{color:teal}" in html

    def broken(ep):
        raise KeyError("url")

    registry.register_renderer("web", broken, overwrite=True)
    report = write_report(run)
    html = report.path.read_text()
    assert "the web renderer failed (KeyError" in html and 'class="turns"' in html
    with pytest.raises(ValueError, match="already has a renderer"):
        registry.register_renderer("web", web)


def test_a_report_failure_never_breaks_the_run(esopt_cache, tmp_path, monkeypatch):
    import esopt.report

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(esopt.report, "write_report", boom)
    lines = []
    _, summary = make_run(tmp_path, "noreport", log=lines.append)
    assert "final" in summary
    assert any(ln.startswith("[esopt] report not written (RuntimeError: disk full); retry with: esopt report")
               for ln in lines)


def test_demo_prints_the_report_path_before_the_result_lines(esopt_cache, tmp_path, monkeypatch, capsys):
    import esopt.demo
    from conftest import TINY_OVERRIDES

    class ScriptedTrainer(esopt.demo.Trainer):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.policy = ScriptedPolicy()

    monkeypatch.setattr(esopt.demo, "Trainer", ScriptedTrainer)
    assert esopt.demo.main(["configs/demo.yaml", *TINY_OVERRIDES, f"run.out_dir={tmp_path}", "run.name=demo"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-2].startswith("RESULT heldout_reward_base=") and out[-1].startswith("RESULT heldout_reward_es=")
    page = default_report_path(tmp_path / "demo").resolve()
    assert out[-3] == f"[esopt] report: {page} (open it in a browser)" and page.exists()


def test_viewer_offers_evenly_spaced_generations_beyond_its_cap(finished, tmp_path, monkeypatch):
    import esopt.report.episodes as episodes

    monkeypatch.setattr(episodes, "MAX_VIEWS", 3)
    report = write_report(copy_run(finished[0], tmp_path / "capped"))
    html = report.path.read_text()
    assert re.findall(r'<option (?:selected )?value="([^"]+)"', html) == ["eval-0", "train-1", "eval-3"]
    assert "the trajectory viewer offers 3 of 7 episode files" in html


def test_memory_is_plotted_where_recorded(finished, tmp_path):
    run = copy_run(finished[0], tmp_path / "mem")
    rows = [json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines()]
    for i, r in enumerate(rows):
        r["peak_rss_mb"] = 500.0 + i
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = write_report(run)
    png = report.path.parent / "report-memory.png"
    assert png.read_bytes().startswith(PNG) and report.path.read_text().count('<img class="plot"') == 7
    bare = [{k: v for k, v in r.items() if k != "peak_rss_mb"} for r in rows]  # a run from before memory was recorded
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bare))
    write_report(run)  # refreshed without memory: no stale plot stays behind
    assert not png.exists()


def test_compare_warns_when_runs_play_other_tasks(esopt_cache, tmp_path, capsys):
    """--compare of runs on different environments says so on the command line and on the page."""
    from conftest import TINY_OVERRIDES

    base = ["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=1", f"run.out_dir={tmp_path}"]
    assert main(base + ["run.name=a"]) == 0
    assert main(base + ["run.name=b", "env.options.blanks=3"]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "a"), "--compare", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "[esopt] warning: --compare: b plays another env setting than a" in out and "not comparable" in out
    assert "plays another env setting" in (tmp_path / "a" / "report" / "report.html").read_text()
    assert main(["report", str(tmp_path / "a"), "--compare", str(tmp_path / "a")]) == 0
    assert "warning" not in capsys.readouterr().out


def memory_row(html: str) -> str:
    return re.search(r"<tr><td>memory</td><td>(.*?)</td></tr>", html).group(1)


def test_the_report_shows_the_runs_memory(finished):
    """Every training and evaluation line records the process's peak RSS: the summary's memory line gives
    the peak while training beside the one before the first generation (inference only)."""
    path, _, _ = finished
    metrics = [json.loads(ln) for ln in (path / "metrics.jsonl").read_text().splitlines()]
    assert all(m["peak_rss_mb"] > 0 for m in metrics)  # kind train and eval alike
    line = memory_row(default_report_path(path).read_text())
    assert "not recorded" not in line
    train = max(m["peak_rss_mb"] for m in metrics if m["kind"] == "train")
    start = next(m["peak_rss_mb"] for m in metrics if m["kind"] == "eval" and m["generation"] == 0)
    assert line.startswith("peak RSS of the esopt process")
    assert (f"{train:,.0f} MB while training (3 generation(s) recorded) vs {start:,.0f} MB before the first "
            "generation: the model loaded") in line and "the base evaluation played (inference only" in line and f"training / inference {train / start:.2f}" in line


def test_a_run_without_memory_shows_the_benchmarks_figure_labelled(finished, tmp_path, monkeypatch):
    """A run recorded before memory was: the es-memory benchmark's figure, said to be a benchmark's, with
    its machine and date; without one, a plain 'not recorded'."""
    import esopt.report.plots as plots

    run = copy_run(finished[0], tmp_path / "old")
    rows = [json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines()]
    (run / "metrics.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "peak_rss_mb"}) + "\n"
                                               for r in rows))
    bench = tmp_path / "es-memory.json"
    bench.write_text(json.dumps({"benchmark": "es-memory", "machine": {"platform": "Linux-x", "cpus": 2,
                                                                        "torch": "2.13.0+cpu", "date": "2026-11-30"},
                                 "config": "configs/demo.yaml", "repeats": 3,
                                 "median_peak_rss_mb": {"inference": 1608.9, "es": 1664.7}}))
    monkeypatch.setattr(plots, "BENCH_FILES", (str(bench),))
    line = memory_row(write_report(run).path.read_text())
    assert line.startswith("not recorded by this run") and "a benchmark&#x27;s figure, not this run&#x27;s" in line
    assert "one ES generation at a peak RSS of 1,665 MB vs 1,609 MB for inference of the same episodes" in line
    assert "2 CPUs, torch 2.13.0+cpu, 2026-11-30" in line
    monkeypatch.setattr(plots, "BENCH_FILES", (str(tmp_path / "none.json"),))
    assert memory_row(write_report(run).path.read_text()) == "not recorded by this run (no memory field in metrics.jsonl)"


def test_generations_are_numbered_from_1_as_the_status_counts_them(finished):
    """'finished: 3 of 3 generations': the viewer, the weights hash and the notes say generations 1-3."""
    html = default_report_path(finished[0]).read_text()
    labels = re.findall(r'<option (?:selected )?value="[^"]+">([^<]+)</option>', html)
    assert [x for x in labels if "training" in x] == [f"generation {g} (training)" for g in (1, 2, 3)]
    assert "held-out, after 0 generation(s)" in labels and "held-out, after 3 generation(s)" in labels
    assert "(after generation 3)" in html and "generation 0" not in html


def test_the_noise_settings_are_a_table(finished):
    html = default_report_path(finished[0]).read_text()
    noise = re.search(r"<tr><td>noise</td><td>(.*?)</table></td></tr>", html).group(1)
    assert noise.startswith('<table class="kv settings"><tr><th>name</th><th>value</th></tr>')
    assert "<tr><td>kind</td><td>" in noise and "{" not in noise
