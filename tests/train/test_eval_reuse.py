"""A resumed run never plays an evaluation twice (train/summary.py record_eval): the base evaluation of
a run stopped before its first update, or the evaluation at the generation it resumes from, is read back
from its recorded episodes, and metrics.jsonl keeps one line per evaluation."""
from __future__ import annotations

import json

from conftest import TINY_OVERRIDES

from esopt.cli import main


def evals(run) -> list[dict]:
    return [m for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if m.get("kind") == "eval"]


def test_a_run_stopped_after_its_base_evaluation_resumes_without_playing_it_again(esopt_cache, tmp_path, capsys,
                                                                                monkeypatch):
    from esopt.algos.es import trainer as es_trainer
    from esopt.train import stop

    run, original = tmp_path / "r", es_trainer.Trainer.evaluate
    calls = []

    def evaluate_then_stop(self, generation, boundary=True):
        calls.append(generation)
        out = original(self, generation, boundary)
        stop._requested.set()  # as a Ctrl-C right after the base evaluation
        return out

    monkeypatch.setattr(es_trainer.Trainer, "evaluate", evaluate_then_stop)
    args = ["configs/demo.yaml", *TINY_OVERRIDES, "es.generations=1", "tasks.validation=3",
            f"run.out_dir={tmp_path}", "run.name=r"]
    assert main(["train", *args]) == 130 and calls == [0]
    base = evals(run)
    assert [e["generation"] for e in base] == [0] and "heldout_reward" in base[0]
    monkeypatch.setattr(es_trainer.Trainer, "evaluate", original)
    capsys.readouterr()
    from esopt.train import evaluate as evaluate_module

    played, counting = [], evaluate_module.evaluate

    def count(policy, tasks, cfg, seed=0, split="heldout", context=None, abort=None):
        played.append(split)
        return counting(policy, tasks, cfg, seed=seed, split=split, context=context, abort=abort)

    monkeypatch.setattr(evaluate_module, "evaluate", count)  # the runner imports it when it plays
    assert main(["train", "--resume", str(run)]) == 0
    out = capsys.readouterr().out
    assert out.count("recorded before the resume, not played again") == 2, out  # validation and held-out
    assert played == ["validation", "heldout"]  # the final evaluation only
    lines = evals(run)
    assert [e["generation"] for e in lines] == [0, 1]
    assert lines[0] == base[0]  # the base line as first recorded
    summary = json.loads((run / "summary.json").read_text())
    assert summary["base"]["reward"] == base[0]["heldout_reward"]


def test_a_resume_at_its_budget_completes_the_last_evaluation_in_one_line(esopt_cache, tmp_path, capsys):
    """Killed after an evaluation in the middle (validation only) once the budget was spent: the resume makes
    no update, plays only the held-out split, and the two splits end in one metrics line."""
    run = tmp_path / "r"
    args = ["configs/demo.yaml", *TINY_OVERRIDES, "es.generations=2", "tasks.validation=3", "eval.every=1",
            f"run.out_dir={tmp_path}", "run.name=r"]
    assert main(["train", *args]) == 0
    # as if killed after generation 1's (middle) evaluation: the record of generation 2 and the end never written
    history = json.loads((run / "history.json").read_text())
    history["generations"] = history["generations"][:1]
    (run / "history.json").write_text(json.dumps(history))
    (run / "summary.json").unlink()
    lines = [m for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
             if m.get("generation", 0) < 1 or (m.get("kind") == "eval" and m["generation"] == 1
                                                and "heldout_reward" not in m)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in lines))
    (run / "trajectories" / "eval_gen0001.jsonl").unlink(missing_ok=True)
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "es.generations=1"]) == 0
    out = capsys.readouterr().out
    assert "validation after 1 generations" in out and "recorded before the resume, not played again" in out, out
    at1 = [e for e in evals(run) if e["generation"] == 1]
    assert len(at1) == 1 and {"validation_reward", "heldout_reward"} <= set(at1[0]), at1


def test_a_resume_checks_the_record_once(esopt_cache, tmp_path, capsys, monkeypatch):
    """`train --resume` of a finished run (asking for more) and of an unfinished one: the config.yaml against
    the record, once each (the finished-run check and the resume shared it; issue 41 item 9)."""
    import esopt.train.session as session

    run = tmp_path / "r"
    assert main(["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=1", f"run.out_dir={tmp_path}",
                 "run.name=r"]) == 0
    calls, real = [], session.check_record
    monkeypatch.setattr(session, "check_record", lambda *a, **k: (calls.append(a[0]), real(*a, **k)))
    assert main(["train", "--resume", str(run), "es.generations=2"]) == 0  # finished: one more generation
    assert main(["train", "--resume", str(run), "es.generations=2"]) == 0  # finished, nothing asked: its summary
    assert len(calls) == 2, calls
    assert len(json.loads((run / "history.json").read_text())["generations"]) == 2
