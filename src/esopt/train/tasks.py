"""Task sources: deterministic training batches, and fixed validation and held-out sets per env."""
from __future__ import annotations

from ..envs import make
from ..envs.sudoku import SudokuTasks
from ..utils.seeding import derive_seed

TASK_SOURCES = ("sudoku", "browsergym")  # env.id values with train / validation / held-out task sets


def TaskSource(env_cfg, tasks_cfg, run_seed: int):
    """The task source of ``env_cfg.id``: ``train(n, generation, repeat)``, ``validation()``, ``heldout()``,
    each returning (envs, task ids, first observations); an observation of None means the env is reset
    when its episode starts (rollout's ``max_live``)."""
    if env_cfg.id == "sudoku":
        return SudokuSource(env_cfg, tasks_cfg, run_seed)
    if env_cfg.id == "browsergym":
        return WebSource(env_cfg, tasks_cfg, run_seed)
    raise ValueError(f"env.id={env_cfg.id!r} has no task source yet; available: {', '.join(TASK_SOURCES)}")


class SudokuSource:
    """Builds ready-to-play Sudoku envs for training (fresh per generation), validation and held-out."""

    max_live = None  # every episode plays at once

    def __init__(self, env_cfg, tasks_cfg, run_seed: int):
        self.env_cfg = env_cfg
        self.tasks_cfg = tasks_cfg
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


class WebSource:
    """BrowserGym episodes (task id, seed) per split; envs are reset only when their episode starts,
    at most env.web.max_live at a time, so a split of hundreds does not open hundreds of pages."""

    def __init__(self, env_cfg, tasks_cfg, run_seed: int):
        from ..envs.web_tasks import WebTaskSet, expand

        self.env_cfg = env_cfg
        self.tasks_cfg = tasks_cfg
        self.max_live = env_cfg.web.max_live
        self.set = WebTaskSet(expand(env_cfg.task), run_seed)

    def _envs(self, episodes):
        w = self.env_cfg.web
        if w.workers > 1:  # each episode's browser in one of the worker processes
            from ..envs.web_workers import RemoteEnv, worker_pool

            pool = worker_pool(w.workers)
            build = lambda **kw: RemoteEnv(pool, **kw)  # noqa: E731
        else:
            build = lambda **kw: make("browsergym", **kw)  # noqa: E731
        envs = [build(task=task, seed=seed, max_turns=self.env_cfg.max_turns, obs_max_chars=w.obs_max_chars,
                      allowed_hosts=w.allowed_hosts, timeout_ms=w.timeout_ms, chromium=w.chromium,
                      headless=w.headless, judge=w.judge.model_dump() if w.judge else None)
                for task, seed in episodes]
        return envs, [f"{task}#{seed}" for task, seed in episodes], [None] * len(envs)

    def train(self, n: int, generation: int, repeat: int = 1):
        key = generation if self.tasks_cfg.fresh_each_generation else 0
        return self._envs([e for e in self.set.train(n, key) for _ in range(repeat)])

    def heldout(self):
        return self._envs(self.set.heldout(self.tasks_cfg.heldout) * self.tasks_cfg.heldout_repeats)

    def validation(self):
        return self._envs(self.set.validation(self.tasks_cfg.validation) * self.tasks_cfg.heldout_repeats)
