"""The GEPA baseline: its adapter plays esopt's own episodes, proposals are picked up, the episode
budget holds, held-out tasks are played only at the end, and a missing gepa is one clear line."""
import json
import sys

import pytest
import yaml
from gepa_toy import MagicReflection, SpySource, ToyPolicy

from esopt.agent.rollout import AgentContext
from esopt.algos.gepa import components as comp
from esopt.algos.gepa.baseline import GepaBaseline, GepaOptions
from esopt.algos.gepa.requires import MissingPackage, require_gepa
from esopt.train.evaluate import evaluate
from esopt.train.rundir import RunDir

VAL = ["tasks.validation=6", "tasks.heldout=6"]


def quiet(*a, **k):
    pass


def make(tiny_cfg, tiny_model, name, *extra, reflection=None, **opts):
    pytest.importorskip("gepa")
    cfg = tiny_cfg(f"run.name={name}", *VAL, *extra)
    run = RunDir.create(cfg)
    options = GepaOptions(**{"train_tasks": 6, "minibatch": 3, **opts})
    return GepaBaseline(cfg, run, options, model=tiny_model, policy=ToyPolicy(),
                        reflection_lm=reflection or MagicReflection(), log=quiet)


def test_evaluate_scores_are_esopt_rollout_rewards(tiny_cfg, tiny_model):
    b = make(tiny_cfg, tiny_model, "ev", budget=100)
    seed = comp.seed_candidate(b.base, b.names)
    got = b.adapter.evaluate(b.pools.valset, seed, capture_traces=True)
    _, eps = evaluate(b.policy, b.tasks, b.cfg, seed=0, split="validation")
    assert got.scores == [ep["reward"] for ep in eps]
    assert [o["task"] for o in got.outputs] == [ep["task"] for ep in eps]
    assert 0 < sum(got.scores) < len(got.scores)  # the configured prompt solves some tasks, not all

    magic = {"system_prompt": "MAGIC"}
    better = b.adapter.evaluate(b.pools.valset, magic)
    _, eps = evaluate(b.policy, b.tasks, b.cfg, seed=0, split="validation", context=comp.apply(b.base, magic))
    assert better.scores == [ep["reward"] for ep in eps] and better.scores != got.scores
    assert better.trajectories is None and b.adapter.episodes == 2 * len(b.pools.valset)

    # the reflective dataset: every turn's observation, reply, feedback and reward
    data = b.adapter.make_reflective_dataset(seed, got, ["system_prompt"])
    records = data["system_prompt"]
    assert len(records) == len(b.pools.valset)
    long = next(r for r in records if len(r["Turns"]) >= 2)
    assert "Observation" not in long["Turns"][0]  # the first observation is the Task, not repeated
    assert long["Turns"][1]["Observation"] != long["Task"] and "Empty cells" in long["Turns"][1]["Observation"]
    assert {"Reply", "Feedback", "Reward"} <= set(long["Turns"][0]) and "Episode reward" in long["Feedback"]


def test_gepa_picks_up_a_better_prompt_and_writes_an_es_shaped_run(tiny_cfg, tiny_model):
    reflection = MagicReflection()
    b = make(tiny_cfg, tiny_model, "magic", budget=60, reflection=reflection)
    spy = SpySource(b.tasks)
    b.tasks = b.pools.source = spy
    summary = b.train()

    # GEPA accepted the reflection's prompt and chose it
    assert "MAGIC" in summary["gepa"]["best_texts"]["system_prompt"]
    assert summary["gepa"]["best_candidate"] > 0 and summary["gepa"]["best_val_score"] > summary["gepa"]["seed_val_score"]
    assert summary["final"]["reward"] > summary["base"]["reward"] and summary["improvement"]["mean"] > 0
    assert summary["validation"]["final"]["reward"] == pytest.approx(summary["gepa"]["best_val_score"])
    # an ES run's summary shape (adapt's tables read these)
    assert {"final", "base", "improvement", "validation", "generations", "weights_hash", "run_dir"} <= set(summary)
    assert summary["generations"] == summary["gepa"]["iterations"] > 0
    run = b.run.path
    assert (run / "trajectories" / f"eval_gen{summary['generations']:04d}.jsonl").exists()

    # held-out: played only after the optimisation, for the configured and the chosen context
    first_heldout = spy.calls.index("heldout")
    assert set(spy.calls[first_heldout:]) == {"heldout"} and spy.calls.count("heldout") == 2
    heldout_ids = set(spy.source.heldout()[1])
    assert not heldout_ids & {r.task for r in b.pools.trainset + b.pools.valset}

    # every reflection call counted and recorded, with the candidate history
    cands = json.loads((run / "candidates.json").read_text())
    proposed = [p for p in cands["proposals"] if p.get("components")]
    assert summary["lm_calls"]["reflection"]["calls"] == len(reflection.prompts) == len(proposed) > 0
    assert len((run / "reflections.jsonl").read_text().splitlines()) == len(reflection.prompts)
    assert any(p["outcome"] == "accepted" for p in cands["proposals"])
    assert cands["candidates"][0]["parents"] == [] and cands["candidates"][1]["parents"] == [0]
    assert summary["lm_calls"]["task_optimise"]["replies"] > 0 and summary["lm_calls"]["task_heldout"]["replies"] > 0
    # the chosen context, as SKILL.md and context.yaml
    assert "MAGIC" in (run / "SKILL.md").read_text()
    assert "MAGIC" in yaml.safe_load((run / "context.yaml").read_text())["system_prompt"]


@pytest.mark.parametrize("budget", [6, 13, 25, 40])
def test_the_episode_budget_holds(tiny_cfg, tiny_model, budget):
    b = make(tiny_cfg, tiny_model, f"budget{budget}", budget=budget, reflection=MagicReflection("MAGIC v2"))
    result = b.optimise()
    assert b.adapter.episodes <= budget
    assert result.total_metric_calls == b.adapter.episodes == sum(b.adapter.by_split.values())
    if budget < 6 + 2 * 3 + 6:  # the seed's valset pass plus one worst-case iteration does not fit
        assert b.recorder.iterations == 0 and len(result.candidates) == 1


def test_budget_below_one_valset_pass_is_one_error(tiny_cfg, tiny_model):
    from esopt.config import ConfigError

    with pytest.raises(ConfigError, match="less than one pass over GEPA's valset"):
        make(tiny_cfg, tiny_model, "small", budget=5)


def test_missing_gepa_is_one_line_naming_the_extra(monkeypatch, capsys, tmp_path):
    from esopt.cli import main

    monkeypatch.setitem(sys.modules, "gepa", None)  # import gepa now raises ImportError
    with pytest.raises(MissingPackage, match=r"esopt\[prompt-opt\]"):
        require_gepa()
    assert main(["baseline", "gepa", "configs/demo.yaml", f"run.out_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "prompt-opt" in err[0] and err[0].startswith("esopt: error:")
    assert not list(tmp_path.iterdir())  # nothing written


def test_components_round_trip_and_unknown_names():
    from esopt.config import ConfigError

    base = AgentContext("sys", ({"role": "user", "content": "puzzle"}, {"role": "assistant", "content": "r1c1=2"}))
    names = comp.choose(base, None)
    assert names == ["system_prompt", "example_0_user", "example_1_assistant"]
    seed = comp.seed_candidate(base, names)
    assert comp.apply(base, seed) == base
    changed = comp.apply(base, {**seed, "example_1_assistant": "r2c2=3"})
    assert changed.examples[1] == {"role": "assistant", "content": "r2c2=3"} and changed.system_prompt == "sys"
    assert comp.choose(base, ["system_prompt"]) == ["system_prompt"]
    with pytest.raises(ConfigError, match="example_9_user"):
        comp.choose(base, ["example_9_user"])


def test_reflection_flags_describe_malformed_replies():
    from esopt.algos.gepa.reflections import flags

    assert flags("```\nSolve one cell per turn.\n```", "Solve one cell per turn.", "old") == []
    assert set(flags("", "", "old")) >= {"empty", "no_code_block"}
    assert "unchanged" in flags("```\nold\n```", "old", "old")
    assert "prompt_echo" in flags("x", "I provided an assistant with the following instructions", "old")
    assert "task_copy" in flags("x", "r1 |  3  2 |  1  4 |\n   +-------+-------+", "old")
    assert "truncated" in flags("```\nabc", "abc", "old", truncated=True)


def test_the_task_model_reflects_and_its_replies_are_recorded(tiny_cfg):
    """The real path: a tiny random model plays the episodes and writes GEPA's reflections."""
    pytest.importorskip("gepa")
    cfg = tiny_cfg("run.name=local", "tasks.validation=3", "tasks.heldout=3")
    opts = GepaOptions(budget=8, train_tasks=3, minibatch=1, reflection_tokens=8, obs_chars=100)
    b = GepaBaseline(cfg, RunDir.create(cfg), opts, log=quiet)
    summary = b.train()
    calls = [json.loads(line) for line in (b.run.path / "reflections.jsonl").read_text().splitlines()]
    assert summary["lm_calls"]["reflection"]["calls"] == len(calls) >= 1
    assert all("reply" in c or "error" in c for c in calls)
    assert summary["episodes"]["used"] <= 8 and summary["lm_calls"]["task_optimise"]["replies"] > 0
    proposals = json.loads((b.run.path / "candidates.json").read_text())["proposals"]
    replies = [c["raw_reply"] for p in proposals for c in (p.get("components") or {}).values()]
    assert replies and "no_code_block" in summary["gepa"]["reflection_flags"]  # random text has no ``` block


def test_a_reflection_prompt_over_the_context_fails_with_the_reason(tiny_model):
    from esopt.models.tiny import char_tokenizer
    from esopt.models import HFPolicy
    from esopt.algos.gepa.lms import LocalReflectionLM, ReflectionError

    lm = LocalReflectionLM(HFPolicy(tiny_model, char_tokenizer()), max_new_tokens=4)
    with pytest.raises(ReflectionError, match="exceeds the model's context of 512"):
        lm("x" * 600)
    assert lm.calls == 0


def test_without_a_validation_split_the_valset_is_further_training_tasks(tiny_cfg):
    from esopt.algos.gepa.tasks import TaskPools
    from esopt.train.tasks import TaskSource

    cfg = tiny_cfg("tasks.validation=0", "tasks.heldout=6")
    source = TaskSource(cfg.env, cfg.tasks, cfg.run.seed)
    pools = TaskPools(source, train_tasks=5, val_tasks=4, use_validation=False)
    assert [r.split for r in pools.valset] == ["train"] * 4 and not pools.val_is_validation_split
    train_ids, val_ids = [r.task for r in pools.trainset], [r.task for r in pools.valset]
    assert len(set(train_ids + val_ids)) == 9  # disjoint
    assert not set(train_ids + val_ids) & set(source.heldout()[1])
    envs, ids, _ = pools.envs(pools.valset[::-1])  # fresh envs, in the order asked
    assert ids == val_ids[::-1] and len(envs) == 4


def test_endpoint_reflection_lm_against_a_local_fake_server(fake_chat, monkeypatch):
    from esopt.algos.gepa.lms import EndpointLM, ReflectionError

    monkeypatch.setenv("ESOPT_TEST_REFLECT_KEY", "k1")
    lm = EndpointLM(fake_chat.url, "judge-1", "ESOPT_TEST_REFLECT_KEY", max_tokens=32, temperature=0.5)
    fake_chat.replies = [(200, "a better prompt", "stop")]
    assert lm([{"role": "user", "content": "reflect"}]) == "a better prompt" and lm.last_tokens == 3
    req = fake_chat.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer k1"
    assert req["body"]["max_tokens"] == 32 and req["body"]["temperature"] == 0.5 and "seed" not in req["body"]
    fake_chat.replies = [(502, "", "stop")]
    with pytest.raises(ReflectionError, match="HTTP 502"):
        lm("again")
    monkeypatch.delenv("ESOPT_TEST_REFLECT_KEY")
    with pytest.raises(ReflectionError, match="ESOPT_TEST_REFLECT_KEY .* no longer set"):
        lm("a third time")
    assert len(fake_chat.requests) == 2  # nothing sent without the key


def test_gepa_is_a_plug_in_of_train_and_its_runs_are_not_resumed(esopt_cache, tmp_path, capsys):
    """`esopt train --algo gepa` goes through the same session as ES and GRPO (the plug-in's trainer,
    default options); the run says algo gepa, and a resume is refused in one line."""
    from conftest import TINY_OVERRIDES

    from esopt.cli import main

    args = ["train", "configs/demo.yaml", *TINY_OVERRIDES, "tasks.validation=2", f"run.out_dir={tmp_path}",
            "run.name=g", "--algo", "gepa"]
    assert main(args) == 0
    run = tmp_path / "g"
    assert yaml.safe_load((run / "config.yaml").read_text())["algo"] == "gepa"
    assert json.loads((run / "summary.json").read_text())["algo"] == "gepa"
    assert "RESULT heldout_reward_gepa=" in capsys.readouterr().out
    assert main(["train", "--resume", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "GEPA run, which cannot be resumed" in err[0]


def test_pass_at_k_of_both_contexts_with_eval_pass_at(tiny_cfg, tiny_model):
    """eval.pass_at: the baseline's held-out figures carry pass@k as an ES run's do (train/evaluate.py
    evaluate_attempts), with the attempts recorded beside the greedy episodes."""
    b = make(tiny_cfg, tiny_model, "passk", "eval.pass_at=[1,2]", budget=60)
    summary = b.train()
    G = summary["generations"]
    for when in ("base", "final"):
        assert {"pass_at_1", "pass_at_1_se", "pass_at_2", "pass_at_2_se"} <= set(summary[when])
        assert summary[when]["pass_at_n"] == 2 and summary[when]["reward"] is not None
    for gen in (0, G):
        attempts = (b.run.path / "trajectories" / f"attempts_gen{gen:04d}.jsonl").read_text().splitlines()
        assert len(attempts) == 2 * b.cfg.tasks.heldout * b.cfg.tasks.heldout_repeats
