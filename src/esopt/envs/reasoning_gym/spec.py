"""env.id=reasoning-gym for the harness: its options, task source and checks.

Nothing here imports reasoning_gym: a config naming env.id=reasoning-gym validates without it (the
dataset name, its config keys and the level are checked by the preflight, and again where the
tasks are built)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from ...utils.settings import Strict
from ..spec import EnvSpec
from .env import ReasoningGymEnv


class ReasoningGymOptions(Strict):
    """env.options of env.id=reasoning-gym."""

    dataset: str  # a reasoning-gym dataset name, e.g. leg_counting
    config: dict[str, Any] = {}  # the dataset's own config keys (over the level's values), e.g. {max_animals: 3}
    level: int | None = Field(None, ge=0)  # the dataset's curriculum level (none: its config's defaults)
    attempts: int = Field(1, ge=1)  # answers per question; after a wrong one the agent gets its score and retries
    answer_format: Literal["tag", "line"] = "tag"  # the instruction: <answer>...</answer>, or the answer alone

    @field_validator("dataset")
    @classmethod
    def _named(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("name a reasoning-gym dataset, e.g. leg_counting")
        return v.strip()

    @field_validator("config")
    @classmethod
    def _no_seed(cls, v: dict) -> dict:
        for key in ("seed", "size"):
            if key in v:
                raise ValueError(f"env.options.config.{key} is set by esopt's task splits; remove it")
        return v


def preflight(env_cfg, tasks_cfg=None) -> None:
    """reasoning-gym installed, the dataset known (else the closest names), its config and level
    valid, PYTHONHASHSEED fixed for the few datasets that need it (build.HASH_DEPENDENT), a question
    generated; with the tasks config, the held-out and validation splits and a training batch drawn
    (a dataset with too few distinct questions is refused): one line if not."""
    from .build import check_hashing, config_kwargs, draw

    o = env_cfg.options
    try:
        kwargs = config_kwargs(o.dataset, o.config, o.level)
        check_hashing(o.dataset)
        draw(o.dataset, kwargs, [0], 1)
        if tasks_cfg is not None:
            from .tasks import ReasoningGymTasks

            source = ReasoningGymTasks(env_cfg, tasks_cfg, 0)
            source.heldout()
            source.validation()
            source.train(16, 0)
    except ValueError:
        raise
    except Exception as err:  # the dataset's own code failing: one line naming it
        why = (str(err).strip().splitlines() or [""])[0]
        raise ValueError(f"reasoning-gym dataset {o.dataset} failed to generate questions "
                         f"({type(err).__name__}: {why})") from None


def _tasks(env_cfg, tasks_cfg, run_seed: int):
    from .tasks import ReasoningGymTasks

    return ReasoningGymTasks(env_cfg, tasks_cfg, run_seed)


SPEC = EnvSpec(id="reasoning-gym", factory=ReasoningGymEnv, options=ReasoningGymOptions, tasks=_tasks,
               preflight=preflight, default_max_turns=1, summary_keys=("dataset", "level"),
               description="reasoning-gym's procedural questions (arithmetic, words, logic, puzzles), "
                           "scored by each dataset's score_answer; optional retries with feedback")
