import pytest

from esopt.algos.es.diagnostics import (antithetic_pairs, describe, distinct_replies, identical_pairs,
                                        reward_spread, signal_diagnostics, tied_tasks)
from esopt.es.strategy import Member, Strategy


def ep(member, task, reward, *replies):
    return {"generation": 0, "member": member, "task": task, "reward": reward,
            "turns": [{"response": r, "action": None, "feedback": "", "reward": 0.0} for r in replies]}


ANTI = [Member(0, 11, +1), Member(1, 11, -1), Member(2, 22, +1), Member(3, 22, -1)]
PLAIN = [Member(0, 11, +1), Member(1, 22, +1), Member(2, 33, +1), Member(3, 44, +1)]


def test_all_tie_generation():
    traj = [ep(m, t, 0.0, "xx", "yy") for m in range(4) for t in ("a", "b", "c")]
    d = signal_diagnostics(traj, ANTI)
    assert d["diag_tasks"] == d["diag_tied_tasks"] == 3 and d["diag_tied_task_share"] == 1.0
    assert d["diag_pairs"] == d["diag_identical_pairs"] == 2 and d["diag_identical_pair_share"] == 1.0
    assert d["diag_distinct_replies"] == 1.0 and d["diag_reward_spread"] == 0.0
    assert describe(d) == " | ties 3/3 tasks, 2/2 pairs replied alike"


def test_ties_use_each_members_mean_on_a_task():
    # task a: member 0 plays it twice (0 and 1 -> mean 0.5), member 1 once with 0.5: a tie
    # task b: 1.0 vs 0.0: not a tie
    traj = [ep(0, "a", 0.0, "p"), ep(0, "a", 1.0, "q"), ep(1, "a", 0.5, "p"), ep(0, "b", 1.0, "p"), ep(1, "b", 0.0, "r")]
    assert tied_tasks(traj) == (1, 2)
    assert reward_spread(traj) == pytest.approx((0.0 + 0.5) / 2)  # std of [0.5, 0.5] and of [1, 0]
    # a task one member played alone compares nothing; a failed episode (reward None) is left out of the rewards
    traj += [ep(2, "c", 1.0, "z"), ep(1, "b", None, "r")]
    assert tied_tasks(traj) == (1, 2)


def test_distinct_first_turn_replies_per_task():
    traj = [ep(0, "a", 0, "x", "1"), ep(1, "a", 0, "x", "2"), ep(2, "a", 0, "y", "3"),  # a: x, y
            ep(0, "b", 0, "z"), ep(1, "b", 0, "z"), ep(2, "b", 0, "z")]  # b: z
    assert distinct_replies(traj) == pytest.approx(1.5)
    assert distinct_replies([]) is None


def test_antithetic_pairs_from_members():
    assert antithetic_pairs(ANTI) == [(0, 1), (2, 3)]
    assert antithetic_pairs([Member(1, 5, -1), Member(0, 5, +1)]) == [(0, 1)]  # the + member first
    assert antithetic_pairs(PLAIN) == []
    assert antithetic_pairs([Member(k, 0, +1) for k in range(4)]) == []  # a context-only search: no noise
    assert antithetic_pairs(Strategy(4, 7, antithetic=True).ask(0)) == [(0, 1), (2, 3)]
    assert antithetic_pairs(Strategy(4, 7, antithetic=False).ask(0)) == []


def test_identical_pairs_compare_every_turn_of_every_common_task():
    traj = [ep(0, "a", 0, "x", "y"), ep(1, "a", 0, "x", "y"),  # pair (0, 1): alike on a ...
            ep(0, "b", 0, "x", "y"), ep(1, "b", 0, "x", "DIFF"),  # ... but not on b's second turn
            ep(2, "a", 0, "q"), ep(3, "a", 0, "q")]  # pair (2, 3): alike on the one task both played
    assert identical_pairs(traj, ANTI) == (1, 2)
    d = signal_diagnostics(traj, ANTI)
    assert d["diag_identical_pair_share"] == 0.5


def test_without_antithetic_sampling_pair_figures_are_absent():
    traj = [ep(m, "a", float(m), "r") for m in range(4)]
    d = signal_diagnostics(traj, PLAIN)
    assert not any(k.startswith(("diag_pairs", "diag_identical")) for k in d)
    assert d["diag_tied_task_share"] == 0.0 and d["diag_tied_tasks"] == 0
    assert describe(d) == ""  # nothing weak to say


def test_empty_generation():
    assert signal_diagnostics([], ANTI) == {"diag_tasks": 0, "diag_tied_tasks": 0}


def test_trainer_logs_the_diagnostics_and_the_update_check(tiny_cfg):
    """A real generation of the tiny model (its members' play scripted: rewards that differ, replies that tie
    on one pair), es.diagnostics=full: the metrics line has every diag_* figure; the weights are those of a
    run without the check."""
    from esopt.algos.es.trainer import Trainer
    from esopt.es.perturb import weights_hash
    from esopt.train.rundir import RunDir
    from esopt.train.runner import Played

    def scripted(self, members, sigma, t, times, bar=None, contexts=None):
        rewards = [1.0, 0.0, 0.5, 0.5]
        traj = [ep(m.index, task, rewards[m.index], "same" if m.index >= 2 else f"r{m.index}")
                for m in members for task in ("a", "b")]
        return Played(rewards, traj, {}, 0)

    hashes = {}
    for level in ("basic", "full"):
        cfg = tiny_cfg(f"es.diagnostics={level}", f"run.name={level}", "es.generations=1")
        tr = Trainer(cfg, RunDir.create(cfg), log=lambda *a: None)
        tr.runner.play = scripted.__get__(tr.runner)
        stats = tr.generation(0)
        hashes[level] = weights_hash(tr.model)
        assert stats["diag_tied_tasks"] == 0 and stats["diag_identical_pairs"] == 1 and stats["diag_pairs"] == 2
        assert stats["diag_distinct_replies"] == 3.0 and stats["diag_reward_spread"] > 0
        update = {k for k in stats if k.startswith("diag_update_")}
        if level == "full":
            assert update == {"diag_update_moved_share", "diag_update_cosine", "diag_update_norm_ratio"}
            assert stats["diag_update_moved_share"] > 0.9 and stats["diag_update_cosine"] > 0.999  # float32
        else:
            assert not update
        assert not tr.perturber.check_update  # on only while the generation's update is made
    assert hashes["basic"] == hashes["full"]
