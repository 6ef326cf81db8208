"""env.id=package.module:Class naming a TRL environment class: its options (a dataset, as env.id=dataset takes
one, and TRL-style reward functions), its task source (a task is a row) and its preflight. Imports nothing
heavy: the rows are read, and the class checked, when the preflight or the task source first needs them."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Union

from pydantic import model_validator

from ..dataset.rows import Table
from ..dataset.spec import RowOptions
from ..dataset.tasks import DatasetTasks
from ..spec import EnvSpec

DEFAULT_TURNS = 6  # replies per episode: tool turns, then the final answer (env.max_turns overrides it)


class TrlOptions(RowOptions):
    """env.options of a TRL environment class: the rows (RowOptions) and the reward functions."""

    # TRL-style reward functions, package.module:function or path/to/file.py:function (one, or a list: summed)
    reward: Union[str, list[str], None] = None
    reward_weights: list[float] | None = None  # one per reward function (none: 1 each)

    @model_validator(mode="after")
    def _one_weight_each(self):
        if self.reward_weights is not None and len(self.reward_weights) != len(self.reward_paths()):
            raise ValueError(f"reward_weights has {len(self.reward_weights)} weight(s) for "
                             f"{len(self.reward_paths())} reward function(s); give one per function")
        return self

    def reward_paths(self) -> list[str]:
        return [] if self.reward is None else [self.reward] if isinstance(self.reward, str) else list(self.reward)


@dataclass(frozen=True)
class Prepared:
    table: Table
    ids: list[str]
    prompts: list[str | None]  # the row's prompt (None: the row has none; reset's answer is the prompt)
    splits: dict[str, list[int]]
    rewards: list


def prepare(options) -> Prepared:
    """Read the source and import the reward functions; ValueError with one line naming the key."""
    from ..dataset.rows import load_table
    from ..dataset.tasks import prompt_of, split_rows, task_ids
    from .rewards import check_call, import_rewards

    o = options
    table = load_table(o.source, o.subset)
    splits = split_rows(table, o)
    used = sorted(i for rows in splits.values() for i in rows)
    prompts: list[str | None] = [None] * len(table.rows)
    for i in used:
        if o.template is not None or o.prompt in table.rows[i]:
            prompts[i] = prompt_of(table.rows[i], o, i)
    rewards = import_rewards(o.reward_paths(), o.reward_weights)
    for r in rewards:
        check_call(r, table.rows[used[0]] if used else {c: None for c in table.columns})
    return Prepared(table, task_ids(table, o.id_column), prompts, splits, rewards)


class TrlTasks(DatasetTasks):
    """env.id=dataset's task source (splits, draws, task ids), each row played by the class."""

    def __init__(self, cls: type, env_cfg, tasks_cfg, run_seed: int):
        self.cls = cls
        super().__init__(env_cfg, tasks_cfg, run_seed)

    def prepare(self, options):
        return prepare(options)

    def _envs(self, rows: list[int]):
        from .env import TrlEnv

        d = self.data
        envs = [TrlEnv(self.cls, d.table.rows[i], d.prompts[i], d.rewards, d.ids[i]) for i in rows]
        return envs, [d.ids[i] for i in rows], [None] * len(rows)  # reset when its episode starts


def preflight(cls: type, env_id: str, env_cfg, tasks_cfg=None) -> None:
    """The class has tools that can be declared and is built with no arguments, something rewards it, the source
    reads and the reward functions take TRL's arguments: one line naming what is wrong if not."""
    from .methods import check_class

    check_class(cls, f"env.id={env_id}", bool(env_cfg.options.reward_paths()))
    prepare(env_cfg.options)
    if tasks_cfg is not None:
        TrlTasks(cls, env_cfg, tasks_cfg, 0)


def trl_env(cls: type, row: int | str = 0, max_turns: int | None = None, **options):
    """One row's env (``esopt.envs.make("pkg.module:Class", source=..., row=3)``): row is a task id, else an index."""
    from .env import TrlEnv

    o = TrlOptions.model_validate(options)
    data = prepare(o)
    i = data.ids.index(str(row)) if str(row) in data.ids else row
    if not isinstance(i, int) or not 0 <= i < len(data.table.rows):
        raise ValueError(f"row {row!r} is neither a task id nor a row index of {o.source}")
    return TrlEnv(cls, data.table.rows[i], data.prompts[i], data.rewards, data.ids[i])


def trl_spec(cls: type, env_id: str) -> EnvSpec:
    """The spec of a TRL environment class named by env_id (package.module:Class)."""
    import inspect

    return EnvSpec(id=env_id, factory=partial(trl_env, cls), options=TrlOptions, tasks=partial(TrlTasks, cls),
                   preflight=partial(preflight, cls, env_id), default_max_turns=DEFAULT_TURNS,
                   summary_keys=("source", "reward"),
                   description=(inspect.getdoc(cls) or f"TRL environment class {cls.__name__}").split("\n")[0])
