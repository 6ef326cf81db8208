"""A toy two-turn environment GRPO can learn in seconds: reward 0.5 per turn whose
reply starts with a capital letter (the tiny random test model does so ~15% of the time)."""
from esopt.envs import make, register
from esopt.envs.base import TextEnv


class CapitalEnv(TextEnv):
    max_turns = 2

    def __init__(self, task: int = 0):
        self.task = task

    def reset(self, seed=None):
        self.turn = 0
        self._obs = f"Task {self.task}: say a word."
        return self._obs, {}

    def step(self, action: str):
        self.turn += 1
        reward = 0.5 if action[:1].isupper() else 0.0
        done = self.turn >= self.max_turns
        self._obs = f"Task {self.task}, turn {self.turn + 1}: say a word."
        return self._obs, reward, done, False, {"action": action[:1], "feedback": str(reward), "solved": done and reward > 0}

    def render_text(self) -> str:
        return self._obs


register("toy-capital", CapitalEnv)


class CapitalTasks:
    """Task-source stand-in with TaskSource's interface (train, heldout)."""

    def _envs(self, tasks):
        envs = [make("toy-capital", task=t) for t in tasks]
        obs = [e.reset()[0] for e in envs]
        return envs, [str(t) for t in tasks], obs

    def train(self, n: int, generation: int, repeat: int = 1):
        return self._envs([100 * generation + i for i in range(n) for _ in range(repeat)])

    def heldout(self):
        return self._envs([10_000 + i for i in range(8)])
