"""esopt serve: a harness driving the openai client through real HTTP trains the run that esopt would
train in-process on the same episodes (history, weights hash, evaluations); bad requests are one JSON
error line and change nothing."""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import threading
from pathlib import Path

import pytest

pytest.importorskip("openai")
pytest.importorskip("uvicorn")

from conftest import TINY_OVERRIDES  # noqa: E402
from esopt.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
# Letters grades the reply's text, so tiny random members differ in reward and every generation moves
SETTINGS = [*TINY_OVERRIDES, "es.generations=2", "es.episodes_per_member=2", "env.id=golden_env:Letters",
            "es.sigma.start=0.05", "es.sigma.end=0.02", "es.alpha.start=0.01", "es.alpha.end=0.01",
            "agent.max_new_tokens=3", "agent.batch_size=1"]


def harness():
    spec = importlib.util.spec_from_file_location("serve_harness", ROOT / "examples" / "serve_harness.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def served(out: Path, name: str, extra=()) -> tuple[int, list]:
    """esopt serve in this thread, the example harness in another; (exit code, harness errors)."""
    errors = []

    def play():
        try:
            harness().main(str(out / name))
        except BaseException as err:  # noqa: BLE001 (reported by the test)
            errors.append(err)
            os.kill(os.getpid(), signal.SIGINT)  # the server would wait for it forever: stop it

    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    rc = main(["serve", "configs/demo.yaml", *SETTINGS, *extra, f"run.out_dir={out}", f"run.name={name}",
               "--port", "0"])
    thread.join(30)
    return rc, errors


def record(run: Path) -> dict:
    history = json.loads((run / "history.json").read_text())
    evals = [m for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if m.get("kind") == "eval"]
    # timings and the process's peak memory (peak_rss_mb) measure the machine, not what was trained
    drop = lambda d: {k: v for k, v in d.items() if not any(w in k for w in ("time", "seconds", "peak_rss"))}  # noqa: E731
    return {"generations": history["generations"], "settings": history["meta"]["settings"],
            "base": history["meta"]["base_weights_hash"], "evals": [drop(e) for e in evals],
            "final": json.loads((run / "summary.json").read_text())["final"]["reward"]}


@pytest.mark.parametrize("noise", [["es.noise=table"], ["es.noise=lowrank"],  # switched in place / as rows
                                   pytest.param(["es.noise=lowrank", "es.lowrank_others=full"],  # both
                                                marks=pytest.mark.slow)],  # the default tier stays near 5 minutes
                         ids=["table", "lowrank", "lowrank-others-full"])
def test_a_harness_through_the_server_trains_what_esopt_trains_in_process(esopt_cache, tmp_path, monkeypatch, noise):
    monkeypatch.syspath_prepend(str(GOLDEN))
    assert main(["train", "configs/demo.yaml", *SETTINGS, *noise, f"run.out_dir={tmp_path}", "run.name=local"]) == 0
    rc, errors = served(tmp_path, "served", noise)
    assert rc == 0 and not errors, errors
    local, remote = record(tmp_path / "local"), record(tmp_path / "served")
    assert len(remote["generations"]) == 2
    assert any(c != 0 for g in remote["generations"] for c in g["coefficients"])  # the weights really moved
    assert remote == local
    posted = (tmp_path / "served" / "serve" / "gen0000.jsonl").read_text().splitlines()
    assert len(posted) == 4 * 2  # every reward the harness posted is on disk


# -- bad input and faults, through real HTTP --------------------------------------------------------------
def test_evaluations_the_harness_plays_are_the_runs_figures(esopt_cache, tmp_path, monkeypatch):
    """serve.evaluations=harness: the example harness plays every evaluation (base and final, held-out and
    validation) with center on the same tasks esopt would, and the run's figures are those it posted."""
    monkeypatch.syspath_prepend(str(GOLDEN))
    both = ["tasks.validation=2"]
    assert main(["train", "configs/demo.yaml", *SETTINGS, *both, f"run.out_dir={tmp_path}", "run.name=local"]) == 0
    rc, errors = served(tmp_path, "served", [*both, "serve.evaluations=harness"])
    assert rc == 0 and not errors, errors
    local, remote = record(tmp_path / "local"), record(tmp_path / "served")
    assert remote["evals"] == local["evals"] and remote["final"] == local["final"]
    assert remote["generations"] == local["generations"]
    run = tmp_path / "served"
    episodes = [json.loads(x) for x in (run / "trajectories" / "eval_gen0002.jsonl").read_text().splitlines()]
    assert {e["player"] for e in episodes} == {"harness"} and len(episodes) == 3
    assert sorted(p.name for p in (run / "serve").iterdir()) == [
        "gen0000.jsonl", "gen0001.jsonl", "heldout-gen0000.jsonl", "heldout-gen0002.jsonl",
        "validation-gen0000.jsonl", "validation-gen0002.jsonl"]


QUICK = [*SETTINGS, "es.generations=1", "eval.at_start=false"]


def wait_for(run: Path) -> str:
    import time

    while not (run / "serve.json").exists():
        time.sleep(0.05)
    return json.loads((run / "serve.json").read_text())["url"]


def drive(tmp_path, monkeypatch, client, extra=(), argv=None):
    """esopt serve (1 generation) in this thread; client(http, run) in another; returns serve's exit code."""
    import httpx

    monkeypatch.syspath_prepend(str(GOLDEN))
    run = tmp_path / "s"
    errors = []

    def play():
        try:
            with httpx.Client(base_url=wait_for(run), timeout=120) as http:
                client(http, run)
        except BaseException as err:  # noqa: BLE001
            errors.append(err)
            os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    rc = main(argv or ["serve", "configs/demo.yaml", *QUICK, *extra, f"run.out_dir={tmp_path}", "run.name=s",
                       "--port", "0"])
    thread.join(30)
    if errors:
        raise errors[0]
    return rc


def serve_process(*args: str, **popen):
    """`python -m esopt serve ARGS` in a process of its own (golden_env importable), in the repository root."""
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(GOLDEN), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-m", "esopt", "serve", *args, "--port", "0"], env=env, cwd=ROOT,
                            text=True, **popen)


def one_error(response, status: int, *words) -> str:
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    message = body["error"]["message"]
    assert set(body) == {"error"} and "\n" not in message and all(w in message for w in words), message
    return message


def play_all(http, gen, reward=0.5):
    for episode in gen["episodes"]:
        if episode["id"] not in gen.get("rewarded", []):
            assert http.post("/es/reward", json={"episode": episode["id"], "reward": reward}).status_code == 200


def test_bad_requests_get_one_json_error_line_and_change_nothing(esopt_cache, tmp_path, monkeypatch):
    def client(http, run):
        gen = http.post("/es/generation/start").json()
        chat = {"model": "member-0", "messages": [{"role": "user", "content": "hi"}]}
        one_error(http.post("/v1/chat/completions", content=b"{not json"), 400, "not JSON")
        one_error(http.post("/v1/chat/completions", json={"model": "member-0"}), 400, "messages")
        one_error(http.post("/v1/chat/completions", json={**chat, "temperature": -1}), 400, "temperature")
        one_error(http.post("/v1/chat/completions", json={**chat, "model": "member-99"}), 404, "member-99", "0 to 3")
        one_error(http.post("/v1/chat/completions", json={**chat, "model": "gpt-4"}), 404, "'gpt-4'")
        one_error(http.post("/v1/chat/completions", json={**chat, "messages": [{"role": "function", "content": "x"}]}),
                  400, "role")
        one_error(http.post("/v1/chat/completions", json={**chat, "messages": [{"role": "tool", "content": "x"}]}),
                  400, "tool_call_id")
        one_error(http.post("/v1/chat/completions", json={**chat, "logprobs": True}), 400, "logprobs", "not served")
        one_error(http.post("/v1/chat/completions", json={**chat, "top_k": 5}), 400, "top_k", "not a field")
        one_error(http.post("/v1/chat/completions", json={**chat, "seed": 2 ** 80}), 400, "seed")
        one_error(http.post("/v1/chat/completions", content=b'{"model": "member-0", "messages": [{"role": "user", '
                            b'"content": "\\ud800"}]}'), 400, "lone surrogate")
        one_error(http.post("/v1/chat/completions", content=b"[" * 5000 + b"]" * 5000), 400, "nests deeper")
        one_error(http.post("/es/reward", content=b'{"episode": "g0-m0-e0", "reward": 1, "metadata": '
                            + b'{"a": ' * 40 + b"1" + b"}" * 41), 400, "nests deeper")
        one_error(http.get("/v1/nope"), 404, "no route")
        one_error(http.post("/es/reward", json={"episode": "g0-m9-e0", "reward": 1}), 404, "not assigned")
        one_error(http.post("/es/reward", json={"episode": "g7-m0-e0", "reward": 1}), 404, "not assigned")
        one_error(http.post("/es/reward", json={"episode": "g0-m0-e0", "reward": "high"}), 400, "reward")
        one_error(http.post("/es/reward", content=b'{"episode": "g0-m0-e0", "reward": NaN}'), 400, "finite")
        for word in ("1", " 2.5 ", "1e3", True):  # served rewards are JSON numbers (docs/serve.md)
            one_error(http.post("/es/reward", json={"episode": "g0-m0-e0", "reward": word}), 400, "reward",
                      "must be a JSON number")
        one_error(http.post("/es/reward", json={"episode": "g0-m0-e0", "reward": 1, "member": "member-1"}), 400,
                  "belongs to member-0")
        one_error(http.post("/es/reward", json={"episode": "g0-m0-e0", "reward": 1, "code": "import os"}), 400,
                  "code")
        assert http.post("/es/reward", json={"episode": "g0-m0-e0", "reward": 1.0}).status_code == 200
        one_error(http.post("/es/reward", json={"episode": "g0-m0-e0", "reward": 0.0}), 409, "already has a reward")
        one_error(http.post("/es/generation/finish", json={"missing": "fail"}), 409, "7 of 8", "no reward yet")
        one_error(http.post("/es/generation/finish", json={"missing": "sometimes"}), 400, "missing")
        assert not (run / "history.json").exists() or not json.loads((run / "history.json").read_text())["generations"]
        status = http.get("/es/status").json()
        assert (status["state"], status["generation"], status["missing"]) == ("playing", 0, 7)
        got = http.post("/v1/chat/completions", json={**chat, "max_tokens": 2, "n": 2}).json()
        assert len(got["choices"]) == 2 and got["usage"]["completion_tokens"] <= 4
        # streamed (OpenAI's chunks, the whole reply once decoded): the same replies and usage
        import openai

        llm = openai.OpenAI(base_url=json.loads((run / "serve.json").read_text())["base_url"], api_key="none")
        texts, usage = ["", ""], None
        for chunk in llm.chat.completions.create(**chat, max_tokens=2, n=2, stream=True,
                                                 stream_options={"include_usage": True}):
            for c in chunk.choices:
                texts[c.index] += c.delta.content or ""
            usage = chunk.usage or usage
        assert texts == [c["message"]["content"] for c in got["choices"]]
        assert usage.completion_tokens == got["usage"]["completion_tokens"]
        play_all(http, http.get("/es/generation").json())
        done = http.post("/es/generation/finish", json={}).json()
        assert done["generations_done"] == 1 and done["finished"], done

    assert drive(tmp_path, monkeypatch, client) == 0
    posted = [json.loads(x) for x in (tmp_path / "s" / "serve" / "gen0000.jsonl").read_text().splitlines()]
    assert [p["reward"] for p in posted] == [1.0] + [0.5] * 7  # the refused ones left no trace


def test_requests_past_the_admission_limits_are_refused_before_any_decoding(esopt_cache, tmp_path, monkeypatch):
    """serve.* limits (serve/limits.py): an oversized body (declared or streamed), a reply ceiling, n, stop
    strings, a prompt past the model's positions and oversized reward metadata are one error line each, and
    the run goes on as if they had not been sent."""
    def client(http, run):
        gen = http.post("/es/generation/start").json()
        chat = {"model": "member-0", "messages": [{"role": "user", "content": "hi"}]}
        big = json.dumps({**chat, "messages": [{"role": "user", "content": "x" * 70_000}]}).encode()
        one_error(http.post("/v1/chat/completions", content=big), 413, "65536 bytes", "serve.max_body_bytes")
        streamed = (big[i:i + 4096] for i in range(0, len(big), 4096))  # chunked: no Content-Length to go by
        one_error(http.post("/v1/chat/completions", content=streamed), 413, "serve.max_body_bytes")
        # tiny-llama: 4096 positions; agent.max_new_tokens=3 -> a ceiling of 256 tokens per reply
        one_error(http.post("/v1/chat/completions", json={**chat, "max_tokens": 100_000}), 400,
                  "max_tokens", "100000", "256", "serve.max_tokens")
        one_error(http.post("/v1/chat/completions", json={**chat, "max_completion_tokens": 257}), 400,
                  "max_completion_tokens", "serve.max_tokens")
        one_error(http.post("/v1/chat/completions", json={**chat, "n": 17}), 400, "n: 17", "serve.max_n")
        one_error(http.post("/v1/chat/completions", json={**chat, "stop": ["y" * 300]}), 400, "serve.max_stop_chars")
        long = {**chat, "messages": [{"role": "user", "content": "ab" * 2500}], "max_tokens": 2}  # 5000 chars
        one_error(http.post("/v1/chat/completions", json=long), 400, "messages", "4096 positions")
        episode = gen["episodes"][0]["id"]
        one_error(http.post("/es/reward", json={"episode": episode, "reward": 1, "metadata": {"log": "z" * 40_000}}),
                  413, "metadata", "serve.max_metadata_bytes")
        ok = http.post("/v1/chat/completions", json={**chat, "max_tokens": 256}).json()  # at the ceiling: served
        assert ok["choices"] and ok["usage"]["completion_tokens"] <= 256
        status = http.get("/es/status").json()
        assert (status["generation"], status["missing"]) == (0, 8)  # nothing refused was taken
        play_all(http, gen)
        assert http.post("/es/generation/finish", json={}).json()["finished"]

    limits = ["serve.max_body_bytes=65536", "serve.max_metadata_bytes=32768"]
    assert drive(tmp_path, monkeypatch, client, extra=limits) == 0
    assert not (tmp_path / "s" / "serve.json").exists()  # the address goes with the server
    posted = [json.loads(x) for x in (tmp_path / "s" / "serve" / "gen0000.jsonl").read_text().splitlines()]
    assert [p["reward"] for p in posted] == [0.5] * 8


LONG = ["serve.max_tokens=4000", "agent.batch_size=1"]  # tiny-llama (4096 positions, ~1 ms a token)


def idle(http, within: float) -> None:
    """No chat request waits or is decoded any longer, within this many seconds."""
    import time

    t0 = time.monotonic()
    while http.get("/es/status").json()["chats_waiting"]:
        assert time.monotonic() - t0 < within, "a request nobody waits for is still being decoded"
        time.sleep(0.02)


def test_a_request_past_its_deadline_or_whose_client_left_stops_decoding(esopt_cache, tmp_path, monkeypatch):
    import time

    import httpx

    def client(http, run):
        gen = http.post("/es/generation/start").json()
        # 4000 tokens (ignore_eos: never the end of turn) take seconds: far past the 1 s deadline
        chat = {"model": "member-0", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4000,
                "ignore_eos": True}
        t0 = time.monotonic()
        one_error(http.post("/v1/chat/completions", json=chat), 504, "serve.request_timeout_s")
        overdue = time.monotonic() - t0
        assert overdue < 1.0 + 1.0, overdue  # the deadline and a few decode steps
        idle(http, within=0.5)
        ok = http.post("/v1/chat/completions", json={**chat, "max_tokens": 2})
        assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 2
        play_all(http, gen)
        assert http.post("/es/generation/finish", json={}).json()["finished"]

    assert drive(tmp_path, monkeypatch, client, extra=[*LONG, "serve.request_timeout_s=1"]) == 0


def test_requests_whose_clients_left_stop_decoding_and_never_pile_up(esopt_cache, tmp_path, monkeypatch):
    """Clients that give up after 0.3 s on 4000-token replies (seconds each), their sockets closed by their
    HTTP library as it does on a timeout: the server sees each leave and drops its decoding (the deadline is
    the default 300 s, so only the disconnect can end them)."""
    import httpx

    def client(http, run):
        gen = http.post("/es/generation/start").json()
        chat = {"model": "member-0", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4000,
                "ignore_eos": True}
        impatient = httpx.Client(base_url=str(http.base_url), timeout=0.3)  # kept open, as a harness's would be
        for k in range(5):
            with pytest.raises(httpx.ReadTimeout):
                impatient.post("/v1/chat/completions", json={**chat, "model": f"member-{k % 2}"})
        idle(http, within=1.5)  # all five dropped, none decoded to its end (5 x seconds)
        impatient.close()
        play_all(http, gen)
        assert http.post("/es/generation/finish", json={}).json()["finished"]

    assert drive(tmp_path, monkeypatch, client, extra=LONG) == 0


def test_a_long_reply_yields_the_model_to_other_requests_and_is_the_same_reply(esopt_cache, tmp_path, monkeypatch):
    """Decoding in slices (serve/runner.py SLICE_TOKENS): a short request sent while a long reply decodes is
    answered long before that reply ends, and the long reply (sampled, with its seed) is the one decoded with
    nobody between its slices."""
    import time

    def client(http, run):
        gen = http.post("/es/generation/start").json()
        long = {"model": "member-0", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2000,
                "ignore_eos": True, "stop": ["never in a reply"], "temperature": 1.0, "seed": 7}
        t0 = time.monotonic()
        alone = http.post("/v1/chat/completions", json=long).json()
        took = time.monotonic() - t0
        answer = {}
        asker = threading.Thread(target=lambda: answer.update(r=http.post("/v1/chat/completions", json=long)))
        asker.start()
        time.sleep(took / 4)  # well into the long reply
        t0 = time.monotonic()
        short = http.post("/v1/chat/completions", json={**long, "model": "member-1", "max_tokens": 2})
        waited = time.monotonic() - t0
        asker.join(120)
        assert short.status_code == 200 and waited < took / 3, (waited, took)
        again = answer["r"].json()
        assert again["choices"] == alone["choices"] and again["usage"] == alone["usage"]
        assert alone["usage"]["completion_tokens"] == 2000 and alone["choices"][0]["finish_reason"] == "length"
        play_all(http, gen)
        assert http.post("/es/generation/finish", json={}).json()["finished"]

    assert drive(tmp_path, monkeypatch, client, extra=LONG) == 0


def test_serve_limits_follow_the_config():
    from esopt.config import load_config
    from esopt.serve.limits import Limits

    cfg = load_config("configs/demo.yaml", ["agent.max_new_tokens=64"])
    assert Limits.of(cfg, positions=8192).max_tokens == 512  # 8 x agent.max_new_tokens
    assert Limits.of(cfg, positions=600).max_tokens == 300  # at most half the positions
    assert Limits.of(cfg, positions=None).max_tokens == 512
    assert Limits.of(load_config("configs/demo.yaml", ["agent.max_new_tokens=4"]), 8192).max_tokens == 256  # floor
    assert Limits.of(load_config("configs/demo.yaml", ["serve.max_tokens=6000"]), 8192).max_tokens == 6000  # as set


def test_a_prompt_too_long_for_any_tokenizer_is_refused_before_tokenizing(monkeypatch):
    """16 characters a position: past that (text averages 3-5 a token), a prompt is refused without tokenizing
    (30 concurrent ~1 MB prompts grew the server by 0.85 GB when each was tokenized first)."""
    import pytest as _pytest

    from esopt.config import load_config
    from esopt.serve.desk import Desk
    from esopt.serve.limits import Limits
    from esopt.serve.protocol import ServeError, chat_request

    limits = Limits.of(load_config("configs/demo.yaml", []), positions=100)
    fits = chat_request({"model": "center", "messages": [{"role": "user", "content": "c" * 1600}]})
    limits.check_chars(fits)  # 1,600 characters: tokenized, then judged by its tokens
    huge = chat_request({"model": "center", "messages": [{"role": "user", "content": "c" * 1601}]})
    with _pytest.raises(ServeError, match="1,601 characters are too many for the model's 100 positions"):
        limits.check_chars(huge)

    class Desk_(Desk):  # check_prompt calls check_chars before the tokenizer is touched
        def __init__(self):
            self.limits, self.counter = limits, None

    with _pytest.raises(ServeError, match="refused untokenized"):
        Desk_().check_prompt(huge)


def test_the_harness_evaluations_are_what_the_summary_and_result_lines_report(esopt_cache, tmp_path, monkeypatch,
                                                                              capsys):
    """A harness whose task esopt does not have (env.id=external: no env is built): it posts 0.25 for every
    base episode and 0.75 after training, so those are the run's figures; members are not served during an
    evaluation; esopt eval --run refuses to put a figure of esopt's own env in their place."""
    def client(http, run):
        base = http.post("/es/generation/start").json()
        assert (base["kind"], base["split"], base["generation"], base["members"]) == ("evaluation", "heldout", 0, [])
        assert [e["member"] for e in base["episodes"]] == ["center"] * 3
        assert not any("task" in e for e in base["episodes"])  # esopt has no tasks of its own here
        chat = {"model": "member-0", "messages": [{"role": "user", "content": "hi"}]}
        one_error(http.post("/v1/chat/completions", json=chat), 409, "evaluation", "center")
        assert http.post("/v1/chat/completions", json={**chat, "model": "center"}).status_code == 200
        one_error(http.post("/es/reward", json={"episode": base["episodes"][0]["id"], "reward": 1, "member": "member-0"}),
                  400, "center")
        play_all(http, base, reward=0.25)
        done = http.post("/es/generation/finish", json={}).json()
        assert (done["evaluation"], done["reward"], done["finished"]) == ("heldout", 0.25, False)
        gen = http.post("/es/generation/start").json()
        assert "kind" not in gen and gen["generation"] == 0 and len(gen["members"]) == 4
        play_all(http, gen)
        assert not http.post("/es/generation/finish", json={}).json()["finished"]  # the final evaluation is to come
        final = http.post("/es/generation/start").json()
        assert (final["kind"], final["generation"]) == ("evaluation", 1)
        assert [e["seed"] for e in final["episodes"]] == [e["seed"] for e in base["episodes"]]  # the same tasks
        play_all(http, final, reward=0.75)
        assert http.post("/es/generation/finish", json={}).json()["reward"] == 0.75
        one_error(http.post("/es/generation/start"), 409, "training is over")

    assert drive(tmp_path, monkeypatch, client, extra=["eval.at_start=true", "env.id=external",
                                                       "serve.evaluations=harness"]) == 0
    out = capsys.readouterr().out
    assert "RESULT heldout_reward_base=0.2500" in out and "RESULT heldout_reward_es=0.7500" in out, out
    summary = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert (summary["base"]["reward"], summary["final"]["reward"], summary["improvement"]["mean"]) == (0.25, 0.75, 0.5)
    assert main(["eval", "--run", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "played by its harness" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("command, config, extra, words", [
    ("train", "configs/demo.yaml", [*QUICK, "env.id=external"], "only a harness plays"),
    ("serve", "configs/demo.yaml", [*QUICK, "env.id=external"], "add serve.evaluations=harness"),
    ("serve", "configs/coevo-demo.yaml", TINY_OVERRIDES, "the harness owns the prompt")])
def test_what_esopt_would_have_to_play_or_serve_without_a_harness_is_refused_in_one_line(esopt_cache, tmp_path, capsys,
                                                                                         command, config, extra, words):
    """An external env where esopt would play it; co-evolution, whose context the harness owns."""
    assert main([command, config, *extra, f"run.out_dir={tmp_path}", "run.name=x"]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "x").exists()


def test_missing_episodes_wait_or_count_as_the_failure_reward(esopt_cache, tmp_path, monkeypatch):
    def client(http, run):
        gen = http.post("/es/generation/start").json()
        first, *rest = gen["episodes"]
        play_all(http, {"episodes": rest})
        box = {}
        waiter = threading.Thread(target=lambda: box.update(r=http.post("/es/generation/finish",
                                                                        json={"missing": "wait"}).json()))
        waiter.start()
        waiter.join(1.0)
        assert waiter.is_alive()  # waits for the last reward
        assert http.post("/es/reward", json={"episode": first["id"], "reward": 0.25}).status_code == 200
        waiter.join(60)
        assert box["r"]["generations_done"] == 1

    assert drive(tmp_path, monkeypatch, client) == 0

    def skip_one(http, run):
        gen = http.post("/es/generation/start").json()
        play_all(http, {"episodes": gen["episodes"][1:]})
        assert http.post("/es/generation/finish", json={"missing": "failure_reward"}).json()["finished"]

    other = tmp_path / "f"
    other.mkdir()
    assert drive(other, monkeypatch, skip_one, extra=["run.failure_reward=-1"]) == 0
    history = json.loads((other / "s" / "history.json").read_text())
    assert history["generations"][0]["rewards"][0] == pytest.approx((-1 + 0.5) / 2)


def test_a_harness_that_died_picks_the_generation_up_again(esopt_cache, tmp_path, monkeypatch):
    def client(http, run):
        gen = http.post("/es/generation/start").json()
        play_all(http, {"episodes": gen["episodes"][:3]})
        # a new harness: start again gives the same generation and says what is rewarded already
        again = http.post("/es/generation/start").json()
        assert again["generation"] == 0 and again["rewarded"] == sorted(e["id"] for e in gen["episodes"][:3])
        assert again["missing"] == 5
        play_all(http, again)
        assert http.post("/es/generation/finish", json={}).json()["finished"]

    assert drive(tmp_path, monkeypatch, client) == 0


def test_off_this_machine_a_token_is_required(esopt_cache, tmp_path, monkeypatch, capsys):
    assert main(["serve", "configs/demo.yaml", *QUICK, f"run.out_dir={tmp_path}", "--host", "0.0.0.0"]) == 2
    assert "--token" in capsys.readouterr().err and not any(tmp_path.iterdir())  # nothing written
    for bad, words in [("coevo.mode=both", "coevo.mode=both"), ("algo=grpo", "algo=grpo")]:
        assert main(["serve", "configs/demo.yaml", *QUICK, bad, f"run.out_dir={tmp_path}"]) == 2
        err = capsys.readouterr().err.strip()
        assert words in err and len(err.splitlines()) == 1 and not any(tmp_path.iterdir()), err
    monkeypatch.setenv("ESOPT_SERVE_TOKEN", "s3cret")

    def client(http, run):
        one_error(http.get("/es/status"), 401, "token")
        one_error(http.get("/es/status", headers={"Authorization": "Bearer nope"}), 401, "token")
        http.headers["Authorization"] = "Bearer s3cret"
        gen = http.post("/es/generation/start").json()
        play_all(http, gen)
        assert http.post("/es/generation/finish", json={}).json()["finished"]

    assert drive(tmp_path, monkeypatch, client) == 0


@pytest.mark.slow  # subprocesses / two runs: the default tier stays near 5 minutes
def test_a_server_killed_mid_generation_resumes_with_the_rewards_it_took(esopt_cache, tmp_path):
    import subprocess

    import httpx

    run = tmp_path / "s"
    first = serve_process("configs/demo.yaml", *QUICK, "es.generations=2", "eval.at_start=true", f"run.out_dir={tmp_path}",
                          "run.name=s", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with httpx.Client(base_url=wait_for(run), timeout=120) as http:
            gen = http.post("/es/generation/start").json()
            play_all(http, {"episodes": gen["episodes"][:5]})
    finally:
        first.kill()  # SIGKILL: no clean-up of any kind
        first.wait()
    (run / "serve.json").unlink()
    second = serve_process("--resume", str(run), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with httpx.Client(base_url=wait_for(run), timeout=120) as http:
            gen = http.post("/es/generation/start").json()
            assert gen["generation"] == 0 and len(gen["rewarded"]) == 5 and gen["missing"] == 3
            for t in (0, 1):
                play_all(http, gen)
                done = http.post("/es/generation/finish", json={}).json()
                assert done["generations_done"] == t + 1, done
                if t == 0:
                    gen = http.post("/es/generation/start").json()
        assert second.wait(120) == 0, second.stderr.read()
        assert "recorded before the resume, not played again" in second.stdout.read()  # the base evaluation
    finally:
        second.kill()
    assert len(json.loads((run / "history.json").read_text())["generations"]) == 2
    evals = [m["generation"] for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
             if m.get("kind") == "eval"]
    assert evals == [0, 2]  # one line per evaluation: the resume did not play the base one again


def test_members_asked_at_once_answer_as_when_asked_one_by_one(esopt_cache, tmp_path, monkeypatch):
    """Full-rank members switched in place while requests of several members come concurrently: each reply
    is the one its member gives alone (and center's the unperturbed model's)."""
    from concurrent.futures import ThreadPoolExecutor

    def client(http, run):
        gen = http.post("/es/generation/start").json()
        asks = [(m, f"say {k}") for k in range(3) for m in ["center", *gen["members"]]]

        def ask(a):
            body = {"model": a[0], "messages": [{"role": "user", "content": a[1]}], "max_tokens": 3}
            return http.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]["content"]

        alone = [ask(a) for a in asks]
        with ThreadPoolExecutor(8) as pool:
            together = list(pool.map(ask, asks * 2))
        assert together == alone * 2
        assert len({alone[k] for k in range(5)}) > 1  # the members really differ
        play_all(http, gen)
        assert http.post("/es/generation/finish", json={}).json()["finished"]

    assert drive(tmp_path, monkeypatch, client) == 0


@pytest.mark.slow  # the default tier stays near 5 minutes
def test_a_member_keeps_the_weights_while_its_clients_play_their_turns(esopt_cache, tmp_path, monkeypatch):
    """Full-rank: every episode of every member played at once, turn by turn. Without stickiness the members
    take turns and each turn switches the weights (about members x turns switches); with it, a member whose
    clients come back within a switch's time (STICKY_S at least) keeps the weights until its episodes are over."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    turns = 3

    def client(http, run):
        gen = http.post("/es/generation/start").json()

        def episode(e):
            for k in range(turns):
                time.sleep(0.02)  # the harness's own work between turns (an env step): longer than BATCH_WAIT_S
                body = {"model": e["member"], "messages": [{"role": "user", "content": f"turn {k}"}], "max_tokens": 2}
                assert http.post("/v1/chat/completions", json=body).status_code == 200
            assert http.post("/es/reward", json={"episode": e["id"], "reward": 0.5}).status_code == 200

        with ThreadPoolExecutor(len(gen["episodes"])) as pool:
            list(pool.map(episode, gen["episodes"]))
        assert http.post("/es/generation/finish", json={}).json()["finished"]

    assert drive(tmp_path, monkeypatch, client) == 0
    line = next(m for m in map(json.loads, (tmp_path / "s" / "metrics.jsonl").read_text().splitlines())
                if m.get("kind") == "train")
    members = 4
    assert line["served_batches"] == members * 2 * turns  # agent.batch_size=1: one request a batch
    assert members <= line["served_switches"] <= members * turns // 2, line


@pytest.mark.slow  # subprocesses / two runs: the default tier stays near 5 minutes
def test_ctrl_c_while_the_client_plays_stops_with_the_serve_resume_command(esopt_cache, tmp_path):
    import subprocess
    import time

    proc = serve_process("configs/demo.yaml", *QUICK, f"run.out_dir={tmp_path}", "run.name=s",
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for(tmp_path / "s")
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 130
        assert f"continue with: esopt serve --resume {tmp_path / 's'}" in proc.stdout.read()
    finally:
        proc.kill()


@pytest.mark.slow  # subprocesses / two runs: the default tier stays near 5 minutes
def test_sigterm_mid_decode_stops_the_server_within_5_seconds(esopt_cache, tmp_path):
    import subprocess
    import time

    import httpx

    run = tmp_path / "s"
    proc = serve_process("configs/demo.yaml", *QUICK, *LONG, "serve.request_timeout_s=600", f"run.out_dir={tmp_path}",
                         "run.name=s", stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = wait_for(run)
        with httpx.Client(base_url=url, timeout=60) as http:
            http.post("/es/generation/start")
            answer = {}
            chat = {"model": "member-0", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4000,
                    "ignore_eos": True}
            asker = threading.Thread(target=lambda: answer.update(r=http.post("/v1/chat/completions", json=chat)))
            asker.start()
            time.sleep(1.0)  # decoding now; other members' requests wait behind it in the queue
            waiting = [threading.Thread(target=lambda k=k: answer.update({k: http.post("/v1/chat/completions",
                                                                                        json={**chat, "model": f"member-{k}"})}))
                       for k in (1, 2, 3)]
            for t in waiting:
                t.start()
            time.sleep(0.5)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(5) == 130 and time.monotonic() - t0 < 5
            for t in [asker, *waiting]:
                t.join(5)
        out = proc.stdout.read()
        assert "SIGTERM" in out and f"continue with: esopt serve --resume {run}" in out, out
        assert answer["r"].status_code == 503 and "stopping" in answer["r"].json()["error"]["message"]
        for k in (1, 2, 3):  # the waiting clients are told to retry after the resume, not that training is over
            assert answer[k].status_code == 503 and "retry once the run is resumed" in answer[k].json()["error"]["message"]
        assert (run / "config.yaml").exists() and not (run / "serve.json").exists()
    finally:
        proc.kill()


@pytest.mark.slow  # subprocesses / two runs: the default tier stays near 5 minutes
def test_bench_serve_times_concurrent_clients_against_the_in_process_rollout(esopt_cache, tmp_path, capsys):
    out = tmp_path / "serve.json"
    assert main(["bench", "serve", "configs/demo.yaml", *TINY_OVERRIDES, "es.episodes_per_member=2",
                 "--clients", "1,4", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    res = data["results"]
    assert [r["clients"] for r in data["served"]] == [1, 4] and len(data["inprocess"]) == 2
    assert all(r["episodes"] == 8 and r["requests"] >= 8 and r["served_switches"] >= 1 for r in data["served"])
    assert res["serve_requests_per_s_c4"] > 0 and res["serve_over_inprocess_episodes_per_s_c1"] > 0
    assert res["serve_tokens_per_s_c1"] > 0 and res["inprocess_episodes_per_s"] > 0
    # the hostile section: the same generations with 2 attacking threads beside the clients
    assert [r["clients"] for r in data["hostile"]] == [1, 4] and data["hostile_threads"] == 2
    assert res["serve_hostile_over_clean_episodes_per_s_c4"] > 0 and res["serve_hostile_peak_rss_mb"] > 0
    assert 0 <= res["serve_hostile_rss_growth_mb"] <= res["serve_hostile_peak_rss_mb"]
    assert set(data["attacks"]["oversized_body"]) <= {"413", "reset"}
    assert set(data["attacks"]["huge_max_tokens"]) == {"400"}
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("RESULT serve_")


def test_a_fresh_held_out_set_reaches_the_harness_as_the_seeds_after_the_skipped_ones():
    """tasks.heldout_skip: the held-out seeds a harness picks its tasks by are those after the first skip ones
    (the same derivation, shifted), with esopt's own ids of the fresh tasks; validation is unchanged."""
    from types import SimpleNamespace

    from esopt.config import load_config
    from esopt.serve.runner import ServeRunner
    from esopt.utils.seeding import derive_seed

    def rows(skip, split):
        cfg = load_config("configs/demo.yaml", ["tasks.heldout=3", "tasks.validation=2", f"tasks.heldout_skip={skip}"])
        tasks = SimpleNamespace(heldout=lambda: (None, [f"h{skip + j}" for j in range(3)], None),
                                validation=lambda: (None, ["v0", "v1"], None))
        runner = SimpleNamespace(trainer=SimpleNamespace(cfg=cfg, tasks=tasks))
        return ServeRunner._eval_tasks(runner, split, 3 if split == "heldout" else 2)

    plain, fresh = rows(0, "heldout"), rows(4, "heldout")
    seed = load_config("configs/demo.yaml").run.seed
    assert [r["seed"] for r in fresh] == [derive_seed("serve-eval", seed, "heldout", 4 + j) for j in range(3)]
    assert not {r["seed"] for r in fresh} & {r["seed"] for r in plain}
    assert [r["task"] for r in fresh] == ["h4", "h5", "h6"]
    assert rows(4, "validation") == rows(0, "validation")
