"""A TRL environment class as TRL's docs write one (environment_factory=GuessEnv): no esopt import.
tests/envs/test_trl_env.py trains it with esopt unchanged."""


class GuessEnv:
    """Find the secret number; the tools answer each guess and give a hint."""

    def __init__(self):
        self.secret = None
        self.reward = 0.0
        self.guesses = 0

    def reset(self, **kwargs) -> str | None:
        self.secret = int(kwargs["answer"])
        self.reward, self.guesses = 0.0, 0
        return "Guess with the guess tool; hint tells you the parity."

    def guess(self, number: int) -> str:
        """Guess the secret number.

        Args:
            number: the number guessed
        """
        self.guesses += 1
        if number == self.secret:
            self.reward = 1.0
            return "correct"
        return "higher" if number < self.secret else "lower"

    def hint(self) -> str:
        """Say whether the secret number is even or odd."""
        return "even" if self.secret % 2 == 0 else "odd"


def reward(environments, **kwargs):
    return [env.reward for env in environments]


def guesses_penalty(completions, environments, answer, **kwargs):
    return [-0.1 * env.guesses for env in environments]


class ScoredEnv(GuessEnv):
    """Rewarded by get_reward alone."""

    def get_reward(self) -> float:
        return self.reward + 0.5


def raising(completions, **kwargs):
    if "boom" in completions[0][-1]["content"]:
        raise RuntimeError("cannot score this one")
    return [0.25]


class NoTools:
    def reset(self, **kwargs):
        return None


class Undocumented(GuessEnv):
    def peek(self, x: int) -> int:
        return self.secret
