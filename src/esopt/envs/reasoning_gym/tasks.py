"""The task source of env.id=reasoning-gym: questions per split, disjoint and deterministic.

A batch of n questions is items 0..n-1 of ONE dataset instance built with a seed of the split's
range (esopt.envs.spec.SEED_SPLITS), so a batch costs one dataset build (some datasets load word
lists or task files when built; items then take microseconds to milliseconds each) instead of one
per episode. Held-out and validation seeds are fixed (the same questions for every run seed);
training seeds come from the run seed and the generation. Splits are disjoint by seed range and by
content: validation skips questions that are held-out ones, training skips both (datasets with few
distinct questions repeat them across seeds); a skipped item is replaced by the next one.
"""
from __future__ import annotations

import json
from collections import OrderedDict

from ...utils.seeding import derive_seed
from ..spec import SEED_SPLITS
from .build import config_kwargs, draw
from .env import ReasoningGymEnv

STRIDE = 1 << 24  # a fixed split's next seed, when skipped questions used up a dataset instance
ROUNDS = 8  # dataset instances tried per batch before giving up (too few distinct questions)
_EVAL: OrderedDict = OrderedDict()  # held-out / validation items, shared by task sources of a process


class ReasoningGymTasks:
    """Ready-to-play envs per split: train(n, generation, repeat), validation(), heldout()."""

    max_live = None  # every episode plays at once
    skips_heldout = True  # tasks.heldout_skip: held-out is the last tasks.heldout of skip + heldout questions

    def __init__(self, env_cfg, tasks_cfg, run_seed: int):
        self.env_cfg, self.tasks_cfg, self.run_seed = env_cfg, tasks_cfg, run_seed
        o = env_cfg.options
        self.kwargs = config_kwargs(o.dataset, o.config, o.level)
        self._train: OrderedDict = OrderedDict()  # (n, key) -> items (every ES member asks for the same batch)

    # -- splits ---------------------------------------------------------------------------------
    def train(self, n: int, generation, repeat: int = 1):
        """n questions (fresh per generation with tasks.fresh_each_generation); each `repeat` times in
        a row with repeat > 1 (a GRPO group)."""
        key = generation if self.tasks_cfg.fresh_each_generation else 0
        if (n, key) not in self._train:
            lo, hi = SEED_SPLITS["train"]
            seeds = [lo + derive_seed("reasoning-gym", self.run_seed, key, r) % (hi - lo - STRIDE)
                     for r in range(ROUNDS)]
            self._train[(n, key)] = draw(self.env_cfg.options.dataset, self.kwargs, seeds, n,
                                         self._questions("heldout") | self._questions("validation"))
            while len(self._train) > 4:
                self._train.popitem(last=False)
        return self._envs([it for it in self._train[(n, key)] for _ in range(repeat)])

    def validation(self):
        """tasks.validation questions (none without a validation split)."""
        return self._envs(self._fixed("validation") * self.tasks_cfg.heldout_repeats)

    def heldout(self):
        return self._envs(self._fixed("heldout")[self.tasks_cfg.heldout_skip:] * self.tasks_cfg.heldout_repeats)

    # -- helpers --------------------------------------------------------------------------------
    def _fixed(self, split: str) -> list:
        # held-out: the skipped questions too, so validation and training stay clear of them
        every_heldout = self.tasks_cfg.heldout_skip + self.tasks_cfg.heldout
        n = every_heldout if split == "heldout" else self.tasks_cfg.validation
        if not n:
            return []
        name = self.env_cfg.options.dataset
        key = (name, json.dumps(self.kwargs, sort_keys=True, default=repr), split, n,
               every_heldout if split == "validation" else None)
        if key not in _EVAL:
            lo = SEED_SPLITS[split][0]
            exclude = self._questions("heldout") if split == "validation" else frozenset()
            _EVAL[key] = draw(name, self.kwargs, [lo + r * STRIDE for r in range(ROUNDS)], n, exclude)
            while len(_EVAL) > 8:
                _EVAL.popitem(last=False)
        return _EVAL[key]

    def _questions(self, split: str) -> frozenset:
        return frozenset(it.entry["question"] for it in self._fixed(split))

    def _envs(self, items):
        o, max_turns = self.env_cfg.options, self.env_cfg.max_turns
        envs = [ReasoningGymEnv(o.dataset, o.config, o.level, o.attempts, o.answer_format, max_turns, item=it)
                for it in items]
        obs = [env.reset()[0] for env in envs]
        return envs, [it.task_id for it in items], obs
