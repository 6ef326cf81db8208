"""es.drop_tied_rounds (algos/es/droptied.py): tied tasks dropped, fresh ones played, deterministically."""
from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from conftest import TINY_OVERRIDES

from esopt.algos.es.droptied import kept_rewards, replacement_draw, tied_task_ids
from esopt.cli import main
from esopt.envs import TextEnv
from esopt.es.strategy import Member
from esopt.utils.seeding import derive_seed

HERE = Path(__file__).parent


def ep(member, task, reward, **kw):
    return {"generation": 0, "member": member, "task": task, "reward": reward, "turns": [], **kw}


class HalfTied(TextEnv):
    """Even task seeds pay 0 whatever the reply (every member ties); odd ones pay the share of the reply's
    characters in the task's target set (members replying differently score differently)."""

    max_turns = 1

    def reset(self, seed=None):
        self.seed = int(seed)
        self.target = "".join(random.Random(seed).sample("abcdefghijklmnopqrstuvwxyz0123456789", 12))
        return f"Say letters from {self.target}.", {}

    def step(self, action):
        chars = set(action)
        reward = 0.0 if self.seed % 2 == 0 else len(chars & set(self.target)) / (len(chars) or 1)
        return "done", reward, True, False, {}

    def render_text(self):
        return ""


class Stream:
    """A task source like the env specs': n task ids deterministic in (run seed, generation)."""

    def __init__(self, seed, pool=10**6):
        self.seed, self.pool, self.calls = seed, pool, []

    def train(self, n, generation, repeat=1):
        self.calls.append((n, generation))
        rng = random.Random(derive_seed("stream", self.seed, generation))
        ids = [str(i) for i in rng.sample(range(self.pool), min(n, self.pool))]
        return [object() for _ in ids], ids, [None] * len(ids)


# -------------------------------------------------------------------------------- selection
def test_tied_tasks_are_those_every_member_scored_alike():
    traj = [ep(m, "a", 1.0) for m in range(3)]  # a: tied at 1
    traj += [ep(0, "b", 1.0), ep(1, "b", 0.0), ep(2, "b", 1.0)]  # b: signal
    traj += [ep(0, "c", 0.0), ep(0, "c", 1.0), ep(1, "c", 0.5), ep(2, "c", 0.5)]  # c: means alike (0.5): tied
    traj += [ep(0, "d", 0.0), ep(1, "d", float("nan")), ep(2, "d", 0.0)]  # d: a non-finite reward: kept
    traj += [ep(0, "e", 0.0)]  # e: one member compares nothing: kept
    assert tied_task_ids(traj) == ["a", "c"]


def test_replacements_are_fresh_and_deterministic_by_seed_and_generation():
    played = set(Stream(1).train(4, 7)[1])
    n, pos, ids = replacement_draw(Stream(1), 7, played, 3)
    assert len(ids) == len(set(ids)) == 3 and not set(ids) & played
    assert [Stream(1).train(n, 7)[1][p] for p in pos] == ids  # what the members are handed is what was drawn
    assert replacement_draw(Stream(1), 7, played, 3) == (n, pos, ids)  # same seed and generation: same tasks
    assert replacement_draw(Stream(2), 7, played, 3)[2] != ids  # another run seed
    assert replacement_draw(Stream(1), 8, played, 3)[2] != ids  # another generation
    # a stream with no more distinct tasks gives what it has
    small = Stream(1, pool=5)
    assert len(replacement_draw(small, 0, set(small.train(4, 0)[1]), 3)[2]) == 1


def test_rewards_use_the_kept_tasks_only():
    members = [Member(0, 11, 1), Member(1, 11, -1), Member(2, 22, 1)]
    traj = [ep(0, "a", 1.0), ep(1, "a", 1.0), ep(2, "a", 1.0),
            ep(0, "b", 1.0), ep(1, "b", 0.0), ep(2, "b", 0.5)]
    assert kept_rewards(members, traj, {}, {"a"}) == [1.0, 0.0, 0.5]
    assert kept_rewards(members, traj, {}, set()) == [1.0, 0.5, 0.75]
    assert kept_rewards(members, traj, {}, {"a", "b"}) == [1.0, 0.5, 0.75]  # every task tied: all of them
    got = kept_rewards(members, traj, {"1": "Traceback"}, {"a"})  # a member whose rollout failed: the worst
    assert got[0] == 1.0 and math.isnan(got[1])


# -------------------------------------------------------------------------------- a run
COMMON = [*TINY_OVERRIDES, "env.id=test_droptied:HalfTied", "es.episodes_per_member=4", "agent.max_new_tokens=3",
          "es.sigma.start=0.05", "es.sigma.end=0.05", "es.alpha.start=0.01", "es.alpha.end=0.01",
          "tasks.heldout=2", "eval.at_start=false", "agent.system_prompt=Reply with letters."]


@pytest.fixture
def env_path(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))


def run(tmp_path, name, *extra, resume=False):
    args = ["train", "--resume", str(tmp_path / name), *extra] if resume else \
        ["train", "configs/demo.yaml", *COMMON, f"run.out_dir={tmp_path}", f"run.name={name}", *extra]
    assert main(args) == 0
    path = tmp_path / name
    metrics = [json.loads(x) for x in (path / "metrics.jsonl").read_text().splitlines()]
    traj = {p.name: [json.loads(x) for x in p.read_text().splitlines()] for p in sorted(path.glob("trajectories/*"))}
    return {"history": json.loads((path / "history.json").read_text())["generations"],
            "train": [m for m in metrics if m.get("kind") == "train"], "traj": traj,
            "hash": json.loads((path / "summary.json").read_text())["weights_hash"]}


def untimed(record: dict) -> dict:
    return {k: v for k, v in record.items() if not (k.startswith("time") or k.endswith("seconds") or k == "wall")}


def test_a_run_drops_tied_tasks_and_plays_fresh_ones(esopt_cache, tmp_path, env_path):
    off = run(tmp_path, "plain", "es.generations=2")
    on = run(tmp_path, "dropping", "es.generations=2", "es.drop_tied_rounds=2")
    pop, per = 4, 4
    for t, (stats, record) in enumerate(zip(on["train"], on["history"])):
        episodes = on["traj"][f"gen{t:04d}.jsonl"]
        first = [e for e in episodes if e["round"] == 0]
        # the generation's own tasks are what the option-off run played: later generations are not shifted
        assert [e["task"] for e in first] == [e["task"] for e in off["traj"][f"gen{t:04d}.jsonl"]]
        tied0 = {e["task"] for e in first if int(e["task"]) % 2 == 0}
        assert tied0  # the env ties on even seeds
        assert {e["task"] for e in episodes if e.get("dropped")} >= tied0
        assert stats["episodes"] == len(episodes) > pop * per  # every episode played is counted
        assert stats["tasks_played"] == len({e["task"] for e in episodes})
        kept = stats["tasks_played"] - stats["tasks_dropped"]
        assert stats["diag_kept_task_share"] == pytest.approx(kept / stats["tasks_played"])
        assert 1 <= stats["drop_tied_rounds_played"] <= 2
        drawn = [task for ids in record["drop_tied"]["drawn"] for task in ids]
        assert drawn == list(dict.fromkeys(e["task"] for e in episodes if e["round"] > 0))
        assert not set(drawn) & {e["task"] for e in first}
        assert sorted(record["drop_tied"]["dropped"]) == sorted({e["task"] for e in episodes if e.get("dropped")})
        # each member's reward is its mean over the kept tasks' episodes (all members play the same tasks)
        for m in range(pop):
            mine = [e for e in episodes if e["member"] == m]
            assert len(mine) == len(episodes) // pop
            assert record["rewards"][m] == pytest.approx(sum(e["reward"] for e in mine if not e.get("dropped")) /
                                                         sum(1 for e in mine if not e.get("dropped")))
    assert on["hash"] != off["hash"]


def test_resume_with_dropping_is_bit_exact(esopt_cache, tmp_path, env_path):
    opts = ["es.drop_tied_rounds=1", "es.schedule_generations=2"]
    whole = run(tmp_path, "whole", "es.generations=2", *opts)
    run(tmp_path, "parted", "es.generations=1", *opts)
    parted = run(tmp_path, "parted", "es.generations=2", resume=True)
    assert parted["hash"] == whole["hash"]
    assert [untimed(r) for r in parted["history"]] == [untimed(r) for r in whole["history"]]
    gens = {k: v for k, v in whole["traj"].items() if k.startswith("gen")}  # (the parted run also evaluated at 1)
    assert {k: v for k, v in parted["traj"].items() if k.startswith("gen")} == gens and len(gens) == 2


def test_ray_and_served_runs_refuse_it():
    from esopt.algos.es.plugin import ES
    from esopt.config import load_config
    from esopt.train.preflight import check_run_config
    from esopt.utils.settings import ConfigError

    cfg = load_config("configs/demo.yaml", [*TINY_OVERRIDES, "es.drop_tied_rounds=1"])
    with pytest.raises(ConfigError, match="es.drop_tied_rounds=1 .*--workers"):
        ES().check(cfg, on_ray=True)
    ES().check(cfg)  # locally: fine
    with pytest.raises(ConfigError, match="esopt serve"):
        check_run_config(cfg, device=False, served=True)


def test_the_console_line_says_the_share_kept():
    from esopt.algos.es.diagnostics import describe

    stats = {"diag_tasks": 5, "diag_tied_tasks": 1, "tasks_played": 5, "tasks_dropped": 1, "diag_kept_task_share": 0.8}
    assert describe(stats) == " | ties 1/5 tasks, kept 4/5 tasks (80%)"
    assert "kept" not in describe({"diag_tasks": 5, "diag_tied_tasks": 1})  # the option off: as before
