"""env.id=sudoku for the harness: its options, its task source (puzzles per split) and its checks."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...utils.settings import Strict
from ...utils.seeding import derive_seed
from ..spec import EnvSpec
from .env import SudokuEnv
from .puzzles import SudokuTasks, check_blanks


class SudokuOptions(Strict):
    """env.options of env.id=sudoku."""

    size: Literal[4, 9] = 4
    blanks: int = Field(2, ge=1)  # empty cells per puzzle (the default turn limit is 3 x blanks)
    reward: Literal["binary", "partial"] = "partial"  # partial: the share of blanks filled correctly


class SudokuSource:
    """Ready-to-play Sudoku envs for training (fresh per generation), validation and held-out: the
    puzzle pool of the run seed keeps the three splits disjoint (held-out: its first tasks.heldout_skip +
    tasks.heldout puzzles, of which the last tasks.heldout are played)."""

    max_live = None  # every episode plays at once
    skips_heldout = True

    def __init__(self, env_cfg, tasks_cfg, run_seed: int):
        self.env_cfg, self.tasks_cfg = env_cfg, tasks_cfg
        o = env_cfg.options
        self.pool = SudokuTasks(o.size, o.blanks, seed=derive_seed("tasks", run_seed),
                                heldout_reserve=max(256, tasks_cfg.heldout_skip + tasks_cfg.heldout),
                                validation_reserve=max(256, tasks_cfg.validation) if tasks_cfg.validation else 0)

    def _envs(self, puzzles):
        o = self.env_cfg.options
        envs, obs, ids = [], [], []
        for p in puzzles:
            env = SudokuEnv(size=o.size, blanks=o.blanks, max_turns=self.env_cfg.max_turns, reward=o.reward, puzzle=p)
            first, _ = env.reset()
            envs.append(env)
            obs.append(first)
            ids.append("".join(str(v) for row in p.grid for v in row))
        return envs, ids, obs

    def train(self, n: int, generation: int, repeat: int = 1):
        """n puzzles; with repeat > 1, each puzzle `repeat` times in a row (a GRPO group)."""
        key = generation if self.tasks_cfg.fresh_each_generation else 0
        return self._envs([p for p in self.pool.train(n, key) for _ in range(repeat)])

    def heldout(self):
        return self._envs(self.pool.heldout(self.tasks_cfg.heldout, self.tasks_cfg.heldout_skip) * self.tasks_cfg.heldout_repeats)

    def validation(self):
        """The validation puzzles (tasks.validation of them; none without a validation split)."""
        return self._envs(self.pool.validation(self.tasks_cfg.validation) * self.tasks_cfg.heldout_repeats)


def preflight(env_cfg) -> None:
    o = env_cfg.options
    try:
        check_blanks(o.size, o.blanks)
    except ValueError as err:
        raise ValueError(f"env.options.blanks={o.blanks} is out of range for a {o.size}x{o.size} Sudoku ({err})") \
            from None


def _renderer():
    from .render import render_sudoku_episode

    return render_sudoku_episode


SPEC = EnvSpec(id="sudoku", factory=SudokuEnv, options=SudokuOptions, tasks=SudokuSource, preflight=preflight,
               renderer=_renderer(), default_max_turns=6, summary_keys=("size", "blanks", "reward"),
               description="fill the blanks of a 4x4 or 9x9 Sudoku, one cell per turn")
