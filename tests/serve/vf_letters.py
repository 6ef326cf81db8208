"""A verifiers taskset for tests/serve/test_verifiers.py: each task names 12 characters; the reward is
the share of the reply's distinct characters among them (tests/golden/golden_env.py's Letters), so the
replies of tiny random members score differently and ES moves. Loaded by verifiers by its module id."""
import random

import verifiers.v1 as vf

__all__ = ["Letters"]


class Target(vf.TaskData):
    answer: str


class LettersTask(vf.Task[Target]):
    @vf.reward
    async def letters(self, task: Target, trace: vf.Trace) -> float:
        chars = set(trace.last_reply)
        return len(chars & set(task.answer)) / (len(chars) or 1)


class Letters(vf.Taskset[LettersTask]):
    def load(self):
        rng = random.Random(0)
        for _ in range(16):
            target = "".join(rng.sample("abcdefghijklmnopqrstuvwxyz0123456789", 12))
            yield LettersTask(Target(prompt=f"Say letters from {target}.", answer=target), self.config.task)
