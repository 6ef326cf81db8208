"""What esopt serve publishes for a client to play: a generation (its members and the episodes each must
play) or an evaluation (the split's episodes, played with the center), the rewards posted for them, and
the file those rewards are kept in (RUN/serve/<name>.jsonl), so a server killed mid-generation and
resumed keeps them."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..train.evaluate import summarize
from ..utils.jsonl import strict_dumps
from .protocol import CENTER


@dataclass
class Generation:
    """One generation as served: its members, the episodes each plays, and the rewards posted so far."""

    t: int
    sigma: float
    members: list
    episodes_per_member: int
    tasks: list[dict]  # per episode index j: {"index", "seed", "task" (esopt's task id, where it has one)}
    rewards: dict = field(default_factory=dict)  # episode id -> reward
    metadata: dict = field(default_factory=dict)  # episode id -> the client's metadata

    kind = "generation"

    @property
    def file(self) -> str:  # RUN/serve/<file>.jsonl: the rewards posted, kept across a kill
        return f"gen{self.t:04d}"

    def episode_id(self, k: int, j: int) -> str:
        return f"g{self.t}-m{k}-e{j}"

    def player(self, episode: str) -> str:
        """The model an assigned episode is played with."""
        return f"member-{self.owner(episode)[0]}"

    def owner(self, episode: str) -> tuple[int, int] | None:
        """(member, episode index) of an episode id of this generation, else None."""
        try:
            g, m, e = episode.split("-")
            t, k, j = int(g[1:]), int(m[1:]), int(e[1:])
        except ValueError:
            return None
        if (g[0], m[0], e[0]) != ("g", "m", "e") or t != self.t or not (0 <= k < len(self.members)) \
                or not (0 <= j < self.episodes_per_member) or episode != self.episode_id(k, j):
            return None
        return k, j

    def all_ids(self) -> list[str]:
        return [self.episode_id(k, j) for k in range(len(self.members)) for j in range(self.episodes_per_member)]

    def missing(self) -> list[str]:
        return [e for e in self.all_ids() if e not in self.rewards]

    def assignment(self) -> dict:
        return {"generation": self.t, "sigma": self.sigma, "episodes_per_member": self.episodes_per_member,
                "members": [f"member-{k}" for k in range(len(self.members))],
                "episodes": [{"id": self.episode_id(k, j), "member": f"member-{k}", **self.tasks[j]}
                             for k in range(len(self.members)) for j in range(self.episodes_per_member)],
                "rewarded": sorted(self.rewards), "missing": len(self.missing())}


@dataclass
class Evaluation(Generation):
    """An evaluation played by the harness (serve.evaluations=harness): the split's episodes, each played with
    ``center`` (the unperturbed weights after ``t`` updates); the same seeds at every evaluation."""

    split: str = "heldout"
    since: float = field(default_factory=time.monotonic)
    kind = "evaluation"

    @property
    def file(self) -> str:
        return f"{self.split}-gen{self.t:04d}"

    def episode_id(self, k: int, j: int) -> str:
        return f"{self.split}-g{self.t}-e{j}"

    def owner(self, episode: str) -> tuple[int, int] | None:
        head, sep, index = episode.rpartition("-e")
        if not sep or head != f"{self.split}-g{self.t}" or not index.isdigit():
            return None
        j = int(index)
        return (0, j) if 0 <= j < self.episodes_per_member and episode == self.episode_id(0, j) else None

    def player(self, episode: str) -> str:
        return CENTER

    def all_ids(self) -> list[str]:
        return [self.episode_id(0, j) for j in range(self.episodes_per_member)]

    def assignment(self) -> dict:
        return {"kind": "evaluation", "split": self.split, "generation": self.t, "members": [],
                "episodes": [{"id": self.episode_id(0, j), "member": CENTER, **self.tasks[j]}
                             for j in range(self.episodes_per_member)],
                "rewarded": sorted(self.rewards), "missing": len(self.missing())}

    def result(self, missing: list[str], seconds: float) -> tuple[dict, list[dict]]:
        """(figures, episode records) as esopt's own evaluation gives them (train/evaluate.py)."""
        episodes = []
        for j, e in enumerate(self.all_ids()):
            meta = self.metadata.get(e) or {}
            episodes.append({"task": self.tasks[j].get("task", f"{self.split}-{j}"), "episode": e, "player": "harness",
                             "observation0": "", "turns": [], "reward": self.rewards[e], "done": True,
                             "solved": bool(meta.get("solved", False)), "truncated": False, "metadata": meta,
                             "error": "no reward posted" if e in missing else None})
        stats = summarize(episodes)
        stats["seconds"] = seconds
        return stats, episodes


def append_reward(run_path: Path, name: str, line: dict) -> None:
    """A posted reward appended to RUN/serve/<name>.jsonl (one JSON line)."""
    folder = Path(run_path) / "serve"
    folder.mkdir(exist_ok=True)
    with open(folder / f"{name}.jsonl", "a", encoding="utf-8") as f:
        f.write(strict_dumps(line) + "\n")


def posted_rewards(run_path: Path, name: str) -> list[dict]:
    """The rewards RUN/serve/<name>.jsonl holds (none if it does not exist)."""
    path = Path(run_path) / "serve" / f"{name}.jsonl"
    if not path.exists():
        return []
    lines = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        try:
            lines.append(json.loads(raw))
        except ValueError:  # a line torn by a kill: that reward was never acknowledged
            continue
    return lines


def with_task_ids(rows: list[dict], split) -> list[dict]:
    """rows with esopt's task id of each episode, from split() -> (envs, ids, observations), where the config's
    env has a task source here; as they are where it has none (the harness has its own tasks)."""
    try:
        _, ids, _ = split()
    except Exception:  # an env esopt cannot build here
        return rows
    for row, task in zip(rows, ids):
        row["task"] = task
    return rows
