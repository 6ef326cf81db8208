"""The evaluation bar counts turns played (a turn's cost is its rows), so its rate and ETA hold
across turns; its total, the turns still possible, shrinks as episodes end."""
from __future__ import annotations

from esopt.config import load_config
from esopt.envs.spec import resolve
from esopt.train import evaluate as ev


class Recorder:
    seen: list[tuple[int, int, str]] = []

    def __init__(self, total, **kw):
        self.n, self.total, self.postfix = 0, total, ""

    def set_postfix_str(self, text, refresh=True):
        self.postfix = text

    def update(self, k):
        self.n += k
        Recorder.seen.append((self.n, self.total, self.postfix))

    def close(self):
        pass


class Nonsense:
    def generate(self, conversations, options, **kw):
        return ["nonsense"] * len(conversations)


def play(monkeypatch, overrides):
    monkeypatch.setattr(ev, "tqdm", Recorder)
    Recorder.seen = []
    cfg = load_config(None, overrides)
    tasks = resolve(cfg.env.id).task_source(cfg.env, cfg.tasks, cfg.run.seed)
    stats, _ = ev.evaluate(Nonsense(), tasks, cfg)
    assert stats["n"] == 5
    return Recorder.seen


def test_the_evaluation_bar_counts_turns_and_ends_full(monkeypatch):
    seen = play(monkeypatch, ["env.max_turns=3", "tasks.heldout=5", "agent.examples=[]"])  # no move is valid
    assert [(n, total) for n, total, _ in seen] == [(5, 15), (10, 15), (15, 15)]
    assert seen[-1][2] == "turn 3, episodes 5/5"


def test_the_total_shrinks_when_episodes_end_early(monkeypatch):
    seen = play(monkeypatch, ["env.id=vowels", "env.max_turns=3", "tasks.heldout=5"])  # one turn each
    assert [(n, total) for n, total, _ in seen] == [(5, 5)]
