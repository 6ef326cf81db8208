"""The evaluation bar counts episodes done of the split's total; its postfix gives the turn and an ETA
from the turns played (a turn's cost is its rows), there from the end of the first turn whether the
first episodes end then or only in the last turn."""
from __future__ import annotations

import types

from esopt.config import load_config
from esopt.envs.spec import resolve
from esopt.train import evaluate as ev


class Recorder:
    seen: list[tuple[int, int, str]] = []

    def __init__(self, total, postfix="", **kw):
        self.n, self.total, self.postfix = 0, total, postfix
        self.refresh()

    def set_postfix_str(self, text, refresh=True):
        self.postfix = text
        if refresh:
            self.refresh()

    def refresh(self):  # what the terminal shows, each change once
        if not Recorder.seen or Recorder.seen[-1] != (self.n, self.total, self.postfix):
            Recorder.seen.append((self.n, self.total, self.postfix))

    def update(self, k):  # as tqdm with mininterval=0: every update is drawn
        self.n += k
        self.refresh()

    def close(self):
        pass


class Clock:
    """time.monotonic / time.time that move only when a turn is played (10 s each)."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now

    time = monotonic


class Nonsense:
    def __init__(self, clock):
        self.clock = clock

    def generate(self, conversations, options, **kw):
        self.clock.now += 10.0
        return ["nonsense"] * len(conversations)


class Countdown:
    """An env whose episode ends by itself after `turns` turns."""

    def __init__(self, turns):
        self.left = turns

    def step(self, reply):
        self.left -= 1
        return "go on", 1.0, self.left == 0, False, {}

    def close(self):
        pass


class Tasks:
    """A task source whose held-out split is five Countdown episodes of 1, 1, 2, 3 and 3 turns."""

    def heldout(self):
        envs = [Countdown(n) for n in (1, 1, 2, 3, 3)]
        return envs, [f"t{k}" for k in range(len(envs))], ["start"] * len(envs)


def play(monkeypatch, overrides, tasks=None):
    monkeypatch.setattr(ev, "tqdm", Recorder)
    clock = Clock()
    monkeypatch.setattr(ev, "time", types.SimpleNamespace(monotonic=clock.monotonic, time=clock.time))
    Recorder.seen = []
    cfg = load_config(None, overrides)
    tasks = tasks or resolve(cfg.env.id).task_source(cfg.env, cfg.tasks, cfg.run.seed)
    stats, _ = ev.evaluate(Nonsense(clock), tasks, cfg)
    assert stats["n"] == 5
    return Recorder.seen


def test_episodes_that_end_late_get_an_eta_from_the_turns_played(monkeypatch):
    seen = play(monkeypatch, ["env.max_turns=3", "tasks.heldout=5", "agent.examples=[]"])  # no move is valid
    # before the first turn ends nothing says how long a turn takes; after it (10 s for 5 of at most 15
    # turns) the 10 turns still possible take 20 s, though no episode has ended yet
    assert seen == [(0, 5, "turn 1/3 under way, ETA after it"), (0, 5, "turn 1/3, ETA 00:20"),
                    (0, 5, "turn 2/3, ETA 00:10"), (5, 5, "turn 3/3, ETA 00:00")]


def test_episodes_that_end_early_shorten_the_eta(monkeypatch):
    # turn 1: 5 rows in 10 s, 2 episodes end: 3 x 2 turns possible -> 12 s; turn 2: 8 rows in 20 s,
    # 1 more ends: 2 x 1 -> 5 s
    seen = play(monkeypatch, ["env.max_turns=3", "tasks.heldout=5"], Tasks())
    assert seen == [(0, 5, "turn 1/3 under way, ETA after it"), (2, 5, "turn 1/3, ETA 00:12"),
                    (3, 5, "turn 2/3, ETA 00:05"), (5, 5, "turn 3/3, ETA 00:00")]


def test_one_turn_episodes_end_the_bar_full(monkeypatch):
    seen = play(monkeypatch, ["env.id=vowels", "env.max_turns=3", "tasks.heldout=5"])  # one turn each
    assert seen[-1] == (5, 5, "turn 1/3, ETA 00:00")


def test_the_real_bar_shows_episodes_and_the_eta():
    """tqdm draws EVAL_BAR: episodes done / total, and the postfix with the ETA (not tqdm's own '?')."""
    import io

    from tqdm import tqdm

    out = io.StringIO()
    bar = tqdm(total=5, desc="held-out evaluation", file=out, ncols=100, bar_format=ev.EVAL_BAR, mininterval=60)
    ev.eval_progress(bar, 5, 3)(1, 2, 5)
    bar.close()
    last = out.getvalue().split("\r")[-2 if out.getvalue().endswith("\n") else -1]
    assert "held-out evaluation: 2/5 episodes" in last and "turn 1/3, ETA " in last and "?" not in last
