"""A tool-using env through the CLI (tests/envs/tool_env.py): trained, evaluated and resumed, with
trajectories that record each call, its arguments and its result. The tiny random model never writes a
tool call on its own, so its first reply of every episode is replaced by a call to the env's tool
(HFPolicy.generate wrapped): everything after that (running the call, the result in the next prompt,
the records, ES updates, resume) is esopt's own path."""
from __future__ import annotations

import json
import re

from conftest import TINY_OVERRIDES

from esopt.cli import main
from esopt.models.policy import HFPolicy

ENV = ["env.id=tool_env:ProductEnv", "env.max_turns=3", "agent.history=full"]


def first_turn_calls_the_tool(monkeypatch, prompts: list):
    real = HFPolicy.generate

    def generate(self, conversations, options, **kw):
        replies = real(self, conversations, options, **kw)
        prompts.extend(self.prompt_texts(conversations))
        out = []
        for conv, reply in zip(conversations, replies):
            if not conv[-1]["content"].startswith("What is"):  # not the episode's first turn
                out.append(reply)
                continue
            a, b = re.findall(r"\d+", conv[-1]["content"])[-2:]
            out.append(f'<tool_call>\n{{"name": "multiply", "arguments": {{"x": {a}, "y": {b}}}}}\n</tool_call>')
        return out

    monkeypatch.setattr(HFPolicy, "generate", generate)


def test_a_tool_env_trains_evaluates_and_resumes_with_calls_recorded(esopt_cache, tmp_path, capsys, monkeypatch):
    prompts: list = []
    first_turn_calls_the_tool(monkeypatch, prompts)
    args = ["train", "configs/demo.yaml", *TINY_OVERRIDES, *ENV, "es.generations=2", f"run.out_dir={tmp_path}",
            "run.name=tools"]
    assert main(args) == 0
    out = capsys.readouterr().out  # the tiny model never answers a product: every member scores 0
    assert "[esopt] gen 1/2: reward mean 0.000" in out and "| no update: every member scored alike" in out, out
    run = tmp_path / "tools"
    flat = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m.get("no_update") for m in flat if m["kind"] == "train"] == [True, True]
    assert main(["train", "--resume", str(run), "es.generations=3"]) == 0
    assert len(json.loads((run / "history.json").read_text())["generations"]) == 3
    capsys.readouterr()
    assert main(["eval", "--run", str(run), "--out", str(tmp_path / "eval.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "RESULT heldout_tool_use=1.0000" in out and "RESULT heldout_tool_calls=1.0000" in out
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["heldout_tool_use"] for m in metrics if "heldout_reward" in m][:1] == [1.0]
    played = [json.loads(line) for line in (tmp_path / "eval.jsonl").read_text().splitlines()]
    assert played and all(ep["error"] is None for ep in played)
    for ep in played:
        call = ep["turns"][0]["tool_calls"][0]
        a, b = map(int, re.findall(r"\d+", ep["observation0"])[-2:])
        assert call["name"] == "multiply" and call["arguments"] == {"x": a, "y": b} and call["result"] == str(a * b)
        assert len(ep["turns"]) == 2 and "tool_calls" not in ep["turns"][1]  # the answer, stepped
    assert any("<tools>" in p and '"name": "digits_of"' in p for p in prompts)  # both tools in the prompt
    answered = [p for p in prompts if "<tool_response>\n" in p]
    assert answered and all(re.search(r"<tool_response>\n\d+\n</tool_response>", p) for p in answered)
    trained = [json.loads(line) for f in sorted((run / "trajectories").glob("gen*.jsonl"))
               for line in f.read_text().splitlines()]
    assert trained and all(ep["turns"][0]["tool_calls"][0]["result"] for ep in trained)


def test_tools_without_history_or_without_docstrings_are_refused_before_the_run(esopt_cache, tmp_path, capsys):
    base = ["train", "configs/demo.yaml", *TINY_OVERRIDES, "env.id=tool_env:ProductEnv", f"run.out_dir={tmp_path}",
            "run.name=refused"]
    assert main(base) == 2
    err = errors(capsys)
    assert len(err.splitlines()) == 1 and "declares tools (multiply, digits_of)" in err and "agent.history=full" in err
    assert main(base[:-1] + ["run.name=refused2", "agent.history=full", "env.id=tool_env:UndocumentedEnv"]) == 2
    err = errors(capsys)
    assert len(err.splitlines()) == 1 and "tools cannot be declared: tool add" in err and "docstring" in err
    assert not list(tmp_path.iterdir())  # nothing written


def errors(capsys) -> str:
    """stderr without the notes (lines starting [esopt]) a config change prints."""
    return "\n".join(line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("[esopt]"))


def test_grpo_and_context_coevolution_train_a_tool_env(esopt_cache, tmp_path, capsys, monkeypatch):
    """Tool turns work the same under GRPO (each turn's own tokens trained, tool results masked:
    tests/algos/grpo/test_grpo_masking.py) and with a co-evolved context (each member's context, with the
    tools block appended to its system prompt)."""
    prompts: list = []
    first_turn_calls_the_tool(monkeypatch, prompts)
    grpo = ["train", "configs/demo.yaml", *TINY_OVERRIDES, *ENV, "grpo.steps=2", "grpo.puzzles_per_step=2",
            "grpo.group_size=2", "grpo.lr=1e-4", "grpo.temperature=1.0", f"run.out_dir={tmp_path}", "run.name=g",
            "--algo", "grpo"]
    assert main(grpo) == 0
    trained = [json.loads(line) for line in (tmp_path / "g" / "trajectories" / "gen0001.jsonl").read_text().splitlines()]
    assert len(trained) == 4 and all(ep["turns"][0]["tool_calls"][0]["result"] for ep in trained)
    prompts.clear()
    coevo = ["train", "configs/coevo-demo.yaml", *TINY_OVERRIDES, *ENV, "es.generations=1",
             f"run.out_dir={tmp_path}", "run.name=c"]
    assert main(coevo) == 0
    trained = [json.loads(line) for line in (tmp_path / "c" / "trajectories" / "gen0000.jsonl").read_text().splitlines()]
    assert trained and all(ep["turns"][0]["tool_calls"][0]["result"] for ep in trained)
    assert prompts and all('"name": "multiply"' in p for p in prompts)
