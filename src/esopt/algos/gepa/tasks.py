"""GEPA's trainset and valset: references into esopt's task source (never its held-out split).

The trainset is the first N training tasks of the config's task source (train(N, 0): the
tasks of the first ES generation and beyond, disjoint from validation and held-out). The valset
is the validation split (tasks.validation) when the config has one, else N' further training
tasks. Every evaluation builds fresh envs from the source and plays the ones it names, so a
reference always means the same task.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...config import ConfigError


@dataclass(frozen=True)
class TaskRef:
    split: str  # "train" or "validation": the task source's split
    index: int  # position in that split's episode list
    task: str  # the task id (pairs episodes across candidates)


def valset_size(validation_episodes: int, val_tasks: int | None, name: str = "--val-tasks") -> int:
    """GEPA's valset size: of a validation split of `validation_episodes` (tasks.validation x
    tasks.heldout_repeats), all or the first val_tasks; without one (0), val_tasks (default 32)
    further training tasks. name: how the caller spells val_tasks in an error."""
    if validation_episodes:
        n = validation_episodes if val_tasks is None else val_tasks
        if not 1 <= n <= validation_episodes:
            raise ConfigError(f"{name} {n}: the validation split has {validation_episodes} episodes "
                              f"(tasks.validation x tasks.heldout_repeats); give 1..{validation_episodes}")
        return n
    n = 32 if val_tasks is None else val_tasks
    if n < 1:
        raise ConfigError(f"{name} must be at least 1, got {n}")
    return n


class TaskPools:
    """trainset and valset (lists of TaskRef) and fresh envs for any of them."""

    def __init__(self, source, train_tasks: int, val_tasks: int | None, use_validation: bool):
        if train_tasks < 1:
            raise ConfigError(f"--train-tasks must be at least 1, got {train_tasks}")
        self.source = source
        if use_validation:
            _, ids, _ = source.validation()
            n = valset_size(len(ids), val_tasks)
            self.valset = [TaskRef("validation", i, ids[i]) for i in range(n)]
            self.train_total = train_tasks
        else:
            n = valset_size(0, val_tasks)
            self.train_total = train_tasks + n
        _, ids, _ = source.train(self.train_total, 0)
        self.trainset = [TaskRef("train", i, ids[i]) for i in range(train_tasks)]
        if not use_validation:  # carved from the training split, after GEPA's trainset
            self.valset = [TaskRef("train", i, ids[i]) for i in range(train_tasks, self.train_total)]
        self.val_is_validation_split = use_validation

    def envs(self, refs: list[TaskRef]):
        """(envs, task ids, first observations) of `refs`, in their order, freshly built."""
        built = {}
        for split in {r.split for r in refs}:
            if split == "train":
                built[split] = self.source.train(self.train_total, 0)
            elif split == "validation":
                built[split] = self.source.validation()
            else:
                raise ValueError(f"GEPA plays training and validation tasks only, not {split!r}")
        envs, ids, obs = [], [], []
        for r in refs:
            e, i, o = built[r.split]
            if i[r.index] != r.task:
                raise RuntimeError(f"task source changed: {r.split}[{r.index}] is {i[r.index]!r}, expected {r.task!r}")
            envs.append(e[r.index])
            ids.append(i[r.index])
            obs.append(o[r.index])
        return envs, ids, obs


class ObservedEnv:
    """An env, passed through, that keeps the observations its steps return (the rollout's turn
    records hold replies and feedback, not what the agent saw after the first turn)."""

    def __init__(self, env):
        self.env = env
        self.seen: list[str] = []

    def reset(self, *args, **kwargs):
        return self.env.reset(*args, **kwargs)

    def step(self, action):
        out = self.env.step(action)
        self.seen.append(out[0])
        return out

    def __getattr__(self, name):  # start_/finish_ calls of envs in worker processes, max_turns, ...
        attr = getattr(self.env, name)
        if name != "finish_step":
            return attr

        def finish_step():
            out = attr()
            self.seen.append(out[0])
            return out

        return finish_step

    def observations(self, observation0: str, turns: int) -> list[str]:
        """What the agent saw at each of its turns."""
        return ([observation0] + self.seen)[:turns]
