"""Task sources: deterministic training batches, and fixed validation and held-out sets per env."""
from __future__ import annotations

from ..envs import make
from ..envs.sudoku import SudokuTasks
from ..utils.seeding import derive_seed

TASK_SOURCES = ("sudoku",)  # env.id values with train / validation / held-out task sets


class TaskSource:
    """Builds ready-to-play envs for training (fresh per generation) and held-out evaluation."""

    def __init__(self, env_cfg, tasks_cfg, run_seed: int):
        self.env_cfg = env_cfg
        self.tasks_cfg = tasks_cfg
        if env_cfg.id not in TASK_SOURCES:
            raise ValueError(f"env.id={env_cfg.id!r} has no task source yet; available: {', '.join(TASK_SOURCES)}")
        self.pool = SudokuTasks(env_cfg.size, env_cfg.blanks, seed=derive_seed("tasks", run_seed),
                                heldout_reserve=max(256, tasks_cfg.heldout),
                                validation_reserve=max(256, tasks_cfg.validation) if tasks_cfg.validation else 0)

    def _envs(self, puzzles):
        envs, obs, ids = [], [], []
        for p in puzzles:
            env = make(self.env_cfg.id, size=self.env_cfg.size, blanks=self.env_cfg.blanks,
                       max_turns=self.env_cfg.max_turns, reward=self.env_cfg.reward, puzzle=p)
            o, _ = env.reset()
            envs.append(env)
            obs.append(o)
            ids.append("".join(str(v) for row in p.grid for v in row))
        return envs, ids, obs

    def train(self, n: int, generation: int, repeat: int = 1):
        """n puzzles; with repeat > 1, each puzzle `repeat` times in a row (a GRPO group)."""
        key = generation if self.tasks_cfg.fresh_each_generation else 0
        return self._envs([p for p in self.pool.train(n, key) for _ in range(repeat)])

    def heldout(self):
        puzzles = self.pool.heldout(self.tasks_cfg.heldout) * self.tasks_cfg.heldout_repeats
        return self._envs(puzzles)

    def validation(self):
        """The validation puzzles (tasks.validation of them; none without a validation split)."""
        return self._envs(self.pool.validation(self.tasks_cfg.validation) * self.tasks_cfg.heldout_repeats)
