"""WebArena-Verified through its CLI, out of process: a stand-in CLI (written here, speaking the
interface esopt uses: agent-input-get, eval-tasks with --task-ids/--output-dir/--config and the
files it reads and writes) checks the plumbing without a browser, and in a real browser (-m browser)
that the episode's Playwright trace holds its requests. With ESOPT_TEST_WEBARENA_VERIFIED_CLI set to
a real webarena-verified executable, the real grader grades local-shop episodes too."""
from __future__ import annotations

import json
import os
import sys
import zipfile
from pathlib import Path

import pytest

from esopt.envs.browser.webarena import verified

FAKE_CLI = '''#!{python}
import json, pathlib, sys, zipfile
here = pathlib.Path(__file__).parent
data = json.loads((here / "fake_tasks.json").read_text())
cmd, rest = sys.argv[1], sys.argv[2:]
opts = dict(zip(rest[0::2], rest[1::2]))
(here / "calls.log").open("a").write(" ".join(sys.argv[1:]) + "\\n")
if cmd == "agent-input-get":
    keep = ("task_id", "intent_template_id", "sites", "start_urls", "intent")
    pathlib.Path(opts["--output"]).write_text(json.dumps([{{k: t[k] for k in keep}} for t in data]))
elif cmd == "eval-tasks":
    cfg = json.loads(pathlib.Path(opts["--config"]).read_text())
    tid = int(opts["--task-ids"])
    task = next(t for t in data if t["task_id"] == tid)
    folder = pathlib.Path(opts["--output-dir"]) / str(tid)
    answer = (folder / cfg["agent_response_file_name"]).read_text()
    with zipfile.ZipFile(folder / cfg["trace_file_name"]) as z:
        events = [json.loads(line) for line in z.read("trace.network").decode().splitlines() if line]
    urls = [e["snapshot"]["request"]["url"] for e in events if e.get("type") == "resource-snapshot"]
    base = cfg["environments"]["__SHOPPING__"]["urls"][0]
    ok = task["want_url"].replace("__SHOPPING__", base) in urls and task["want_answer"] in answer
    result = {{"task_id": tid, "status": "success" if ok else "failure", "score": 1.0 if ok else 0.0}}
    if task.get("error"):
        result = {{"task_id": tid, "status": "error", "score": 0.0, "error_msg": "grader broke"}}
    (folder / cfg["eval_result_file_name"]).write_text(json.dumps(result))
else:
    sys.exit("unknown command " + cmd)
'''
TASKS = [{"task_id": 7, "intent_template_id": 70, "sites": ["shopping"], "start_urls": ["__SHOPPING__/"],
          "intent": "Open the forum.", "want_url": "__SHOPPING__/forum", "want_answer": '"NAVIGATE"'},
         {"task_id": 8, "intent_template_id": 80, "sites": ["shopping"], "start_urls": ["__SHOPPING__/"],
          "intent": "Anything.", "want_url": "", "want_answer": "", "error": True}]
NAVIGATED = '{"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": null, "error_details": null}'


@pytest.fixture
def fake_cli(tmp_path, monkeypatch):
    folder = tmp_path / "wav"
    folder.mkdir()
    (folder / "fake_tasks.json").write_text(json.dumps(TASKS))
    cli = folder / "webarena-verified"
    cli.write_text(FAKE_CLI.format(python=sys.executable))
    cli.chmod(0o755)
    monkeypatch.setenv("ESOPT_WEBARENA_VERIFIED", str(cli))
    monkeypatch.delenv("ESOPT_WEBARENA_VERIFIED_DATA", raising=False)
    verified._dataset.cache_clear()
    yield folder
    verified._dataset.cache_clear()


def trace_zip(path: Path, urls: list[str]) -> Path:
    lines = [json.dumps({"type": "resource-snapshot", "snapshot": {"request": {"url": u}}}) for u in urls]
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("trace.network", "\n".join(lines))
    return path


def test_cli_missing_is_one_clear_line(monkeypatch, tmp_path):
    monkeypatch.delenv("ESOPT_WEBARENA_VERIFIED", raising=False)
    with pytest.raises(ValueError, match="set ESOPT_WEBARENA_VERIFIED to its webarena-verified executable"):
        verified.cli()
    monkeypatch.setenv("ESOPT_WEBARENA_VERIFIED", str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match="is not an executable"):
        verified.cli()


def test_task_list_ids_and_preflight(fake_cli, monkeypatch):
    from esopt.envs.browser.tasks import expand, task_hosts, task_settings, task_split

    assert expand(["webarena-verified.*"]) == ["webarena-verified.7", "webarena-verified.8"]
    kwargs, _ = task_settings("webarena-verified.7")
    assert kwargs["task"]["intent"] == "Open the forum." and "want_url" not in kwargs["task"]  # agent fields only
    assert task_split("webarena-verified.7") in ("train", "validation", "heldout")
    monkeypatch.delenv("WA_SHOPPING", raising=False)
    with pytest.raises(ValueError, match="webarena-verified.7: WA_SHOPPING is not set"):
        task_hosts("webarena-verified.7")
    monkeypatch.setenv("WA_SHOPPING", "http://shop.internal:7770")
    assert task_hosts("webarena-verified.7") == ("shop.internal",)
    with pytest.raises(ValueError, match="no task '9'"):
        expand(["webarena-verified.9"])


def test_grade_runs_the_cli_on_the_episode_files(fake_cli, tmp_path):
    urls = {"SHOPPING": "http://127.0.0.1:5"}
    good = trace_zip(tmp_path / "good.zip", ["http://127.0.0.1:5/", "http://127.0.0.1:5/forum"])
    bad = trace_zip(tmp_path / "bad.zip", ["http://127.0.0.1:5/", "http://127.0.0.1:5/cart"])
    kept = tmp_path / "kept"
    assert verified.grade(7, NAVIGATED, good, urls, keep=kept)["score"] == 1.0
    assert (kept / "7" / "agent_response.json").read_text() == NAVIGATED
    config = json.loads((kept / "config.json").read_text())
    assert config["environments"] == {"__SHOPPING__": {"urls": ["http://127.0.0.1:5"]}}
    assert verified.grade(7, NAVIGATED, bad, urls)["score"] == 0.0
    assert verified.grade(7, "I opened it.", good, urls)["score"] == 0.0
    with pytest.raises(RuntimeError, match="could not grade task 8: grader broke"):
        verified.grade(8, NAVIGATED, good, urls)
    with pytest.raises(RuntimeError, match=r"eval-tasks for task 9 failed \(exit 1\)"):
        verified.grade(9, NAVIGATED, good, urls)
    calls = (fake_cli / "calls.log").read_text().splitlines()
    assert calls[0].startswith("eval-tasks --task-ids 7 --output-dir ") and calls[0].endswith("config.json")


@pytest.mark.browser
def test_a_verified_episode_is_graded_from_its_trace(fake_cli, monkeypatch):
    pytest.importorskip("browsergym.core")
    from esopt.envs import make
    from esopt.envs.browser.browser import close_shared_browsers
    from esopt.envs.browser.webshop import ShopSite

    with ShopSite(0) as site:
        monkeypatch.setenv("WA_SHOPPING", site.base_url)
        env = make("browsergym", task="webarena-verified.7", seed=0, timeout_ms=10000)
        try:
            results = []
            for page in ("forum", "cart"):
                obs, _ = env.reset()
                assert "Open the forum." in obs and '"task_type"' in obs  # the answer format is in the goal
                env.step(f"goto('{site.base_url}/{page}')")
                _, reward, done, _, info = env.step(f"send_msg_to_user({NAVIGATED!r})")
                results.append((reward, done))
            assert results == [(1.0, True), (0.0, True)]
        finally:
            env.close()
            close_shared_browsers()


@pytest.mark.browser
@pytest.mark.skipif(not os.environ.get("ESOPT_TEST_WEBARENA_VERIFIED_CLI"),
                    reason="set ESOPT_TEST_WEBARENA_VERIFIED_CLI to a webarena-verified executable (its own venv)")
def test_the_real_verified_cli_grades_local_shop_episodes(tmp_path, monkeypatch):
    from esopt.envs import make
    from esopt.envs.browser.browser import close_shared_browsers
    from esopt.envs.browser.webshop import ShopSite

    dataset = [
        {"sites": ["shopping"], "task_id": 0, "intent_template_id": 1, "start_urls": ["__SHOPPING__/account"],
         "intent": "What email address is on my account?", "intent_template": "x", "instantiation_dict": {},
         "eval": [{"evaluator": "AgentResponseEvaluator",
                   "results_schema": {"type": "array", "items": {"type": "string"}},
                   "expected": {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": ["EMAIL"]}}],
         "revision": 1},
        {"sites": ["shopping"], "task_id": 1, "intent_template_id": 2, "start_urls": ["__SHOPPING__/"],
         "intent": "Open the forum.", "intent_template": "y", "instantiation_dict": {},
         "eval": [{"evaluator": "AgentResponseEvaluator", "results_schema": {"type": "null"},
                   "expected": {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}},
                  {"evaluator": "NetworkEventEvaluator", "expected": {"url": "__SHOPPING__/forum"}}],
         "revision": 1}]
    import subprocess

    cli = os.environ["ESOPT_TEST_WEBARENA_VERIFIED_CLI"]
    full = tmp_path / "full.json"  # the CLI wants all 812 tasks in a dataset: replace two in a copy of its own
    subprocess.run([cli, "dataset-get", "--output", str(full)], check=True, capture_output=True, timeout=120)
    with ShopSite(0) as site:
        email = site.db_query("SELECT email FROM users WHERE id = 1")[0][0]
        dataset[0]["eval"][0]["expected"]["retrieved_data"] = [email]
        data = tmp_path / "dataset.json"
        data.write_text(json.dumps(dataset + [t for t in json.loads(full.read_text()) if t["task_id"] > 1]))
        monkeypatch.setenv("ESOPT_WEBARENA_VERIFIED", cli)
        monkeypatch.setenv("ESOPT_WEBARENA_VERIFIED_DATA", str(data))
        monkeypatch.setenv("WA_SHOPPING", site.base_url)
        verified._dataset.cache_clear()
        retrieved = json.dumps({"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": [email],
                                "error_details": None})
        wrong = retrieved.replace(email, "nobody@example.com")
        plays = [("webarena-verified.0", [], retrieved, 1.0), ("webarena-verified.0", [], wrong, 0.0),
                 ("webarena-verified.1", [f"goto('{site.base_url}/forum')"], NAVIGATED, 1.0),
                 ("webarena-verified.1", [f"goto('{site.base_url}/cart')"], NAVIGATED, 0.0)]
        try:
            for task, moves, answer, want in plays:
                env = make("browsergym", task=task, seed=0, timeout_ms=10000)
                env.reset()
                for move in moves:
                    env.step(move)
                _, reward, done, _, info = env.step(f"send_msg_to_user({answer!r})")
                env.close()
                assert (reward, done) == (want, True), (task, answer, info)
        finally:
            close_shared_browsers()
            verified._dataset.cache_clear()
