"""Training time as the axis (train/loop.py): eval.every_seconds evaluates as the training seconds
pass each multiple of it (a resumed run keeps counting), run.budget_seconds stops within half an
update of the budget whatever the update's size, and eval.heldout keeps held-out to the end (or
off) in runs with a validation split."""
import pytest

from esopt.train import loop


class FakeRun:
    def __init__(self, metrics=()):
        self._metrics = list(metrics)

    def metrics(self):
        return self._metrics


class FakeBar:
    def write(self, line):
        self.lines = getattr(self, "lines", []) + [line]

    def close(self):
        pass


class FakeTrainer:
    """Updates of fixed training seconds (their time_* figures); records which evaluations ran."""

    def __init__(self, seconds, every_seconds=None, budget=None, run=None, every=0):
        from esopt.config import load_config

        over = [f"eval.every={every}"]
        over += [f"eval.every_seconds={every_seconds}"] if every_seconds else []
        over += [f"run.budget_seconds={budget}"] if budget else []
        self.cfg = load_config(None, over)
        self.seconds, self.run, self.log = seconds, run or FakeRun(), print
        self.evals, self.updates = [], []

    def evaluate(self, generation, boundary=True):
        self.evals.append((generation, boundary))
        return {}

    def generation(self, t, bar=None):
        self.updates.append(t)
        s = self.seconds(t) if callable(self.seconds) else self.seconds
        return {"time_rollout": s * 0.75, "time_update": s * 0.25}

    def finish(self, evals):
        return sorted(evals)


def test_evaluations_at_each_multiple_of_every_seconds():
    tr = FakeTrainer(10.0, every_seconds=25)
    assert loop.train_loop(tr, 0, 10, FakeBar(), lambda *a: "") == [0, 3, 5, 8, 10]
    # 30 s, 50 s, 80 s: the first update at or past each of 25, 50, 75; the end is the final evaluation
    assert tr.evals == [(0, True), (3, False), (5, False), (8, False), (10, True)]


def test_a_resumed_run_keeps_the_marks_of_its_earlier_seconds():
    earlier = [{"kind": "train", "generation": g, "time_rollout": 10.0} for g in range(4)]  # 40 s done
    tr = FakeTrainer(10.0, every_seconds=25, run=FakeRun(earlier))
    loop.train_loop(tr, 4, 10, FakeBar(), lambda *a: "")
    assert tr.updates == [4, 5, 6, 7, 8, 9] and tr.evals == [(5, False), (8, False), (10, True)]


@pytest.mark.parametrize("seconds, updates", [(30.0, 3), (20.0, 5), (45.0, 2), (70.0, 1), (200.0, 1)])
def test_the_budget_ends_within_half_an_update_of_it(seconds, updates):
    """100 s: 3 x 30 (90 s; a 4th would end at 120), 5 x 20, 2 x 45 (90; 135), 1 x 70 (70; 140)."""
    tr = FakeTrainer(seconds, budget=100)
    bar = FakeBar()
    assert loop.train_loop(tr, 0, 50, bar, lambda *a: "")[-1] == updates
    assert abs(updates * seconds - 100) <= seconds / 2 or updates == 1
    assert any("run.budget_seconds=100 reached" in line for line in bar.lines)


def test_a_resumed_run_at_its_budget_makes_no_update():
    earlier = [{"kind": "train", "generation": g, "time_rollout": 30.0} for g in range(3)]
    tr = FakeTrainer(30.0, budget=100, run=FakeRun(earlier))
    assert loop.train_loop(tr, 3, 50, FakeBar(), lambda *a: "") == [3] and tr.updates == []
    assert loop.last_update_before(FakeRun(earlier), 3) == 30.0 and loop.seconds_by_update(earlier)[2] == 60.0


def test_eval_heldout_end_and_never():
    from esopt.config import ConfigError, load_config
    from esopt.train.summary import eval_splits

    cfg = lambda *o: load_config(None, ["tasks.validation=8", *o])  # noqa: E731
    assert eval_splits(cfg(), True, 0) == ["validation", "heldout"]
    assert eval_splits(cfg("eval.heldout=end"), True, 0) == ["validation"]
    assert eval_splits(cfg("eval.heldout=end"), True, 4) == ["validation", "heldout"]
    assert eval_splits(cfg("eval.heldout=end"), False, 2) == ["validation"]
    assert eval_splits(cfg("eval.heldout=never"), True, 4) == ["validation"]
    with pytest.raises(ConfigError, match="eval.heldout=never needs a validation split"):
        load_config(None, ["eval.heldout=never"])
    with pytest.raises(ConfigError, match="every_seconds"):
        load_config(None, ["eval.every_seconds=0"])


def test_a_run_records_its_curve_against_training_seconds(tiny_cfg, capsys):
    """A real tiny run: validation at time marks, held-out only at the end, the summary and the
    console line say what was played; the report draws the curve against seconds."""
    from esopt.algos.es.trainer import Trainer
    from esopt.cli import print_summary
    from esopt.report import load_run
    from esopt.report.plots import seconds_curve
    from esopt.train.rundir import RunDir

    cfg = tiny_cfg("tasks.validation=3", "eval.every_seconds=1e-6", "eval.heldout=end", "es.generations=3")
    tr = Trainer(cfg, RunDir.create(cfg), log=lambda *a: None)
    summary = tr.train()
    evals = [m for m in tr.run.metrics() if m["kind"] == "eval"]
    assert [m["generation"] for m in evals] == [0, 1, 2, 3]  # every update passes a mark this small
    assert ["heldout_reward" in m for m in evals] == [False, False, False, True]
    assert "final" in summary and "base" not in summary and "validation" in summary
    plot = seconds_curve(load_run(tr.run.path))
    assert plot.png is not None
    never = tiny_cfg("tasks.validation=3", "eval.heldout=never", "run.name=never")
    s2 = Trainer(never, RunDir.create(never), log=lambda *a: None).train()
    assert "final" not in s2 and not list((RunDir(never.run.out_dir).path / "never" / "trajectories").glob("eval_*"))
    print_summary(s2)
    out = capsys.readouterr().out
    assert "held-out not played (eval.heldout=never)" in out and "RESULT validation_reward_es=" in out
