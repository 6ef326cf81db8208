"""Tasks of env.id=dataset: a task is a row. ``prepare`` reads and checks everything (the preflight
runs it); ``DatasetTasks`` is the task source (training rows drawn per generation, the first rows of
the validation and held-out splits)."""
from __future__ import annotations

import random
import string
from dataclasses import dataclass
from typing import Callable

from .env import DatasetEnv
from .reward import check_call, import_reward
from .rows import Table, load_table

SPLITS = ("train", "validation", "heldout")


@dataclass(frozen=True)
class Prepared:
    table: Table
    ids: list[str]  # each row's task id
    prompts: list[str | None]  # each row's first observation (None: a row of no split, not used)
    splits: dict[str, list[int]]  # split -> row indices, in file order
    reward: Callable


def prepare(options) -> Prepared:
    """Load the source and check it against the options; ValueError with one line naming the key."""
    o = options
    table = load_table(o.source, o.subset)
    columns = table.columns
    splits = split_rows(table, o)
    used = sorted(i for rows in splits.values() for i in rows)
    prompts: list[str | None] = [None] * len(table.rows)
    for i in used:
        prompts[i] = prompt_of(table.rows[i], o, i)
    reward = import_reward(o.reward)
    check_call(reward, o.reward, table.rows[used[0]] if used else {c: None for c in columns})
    return Prepared(table, task_ids(table, o.id_column), prompts, splits, reward)


def split_rows(table: Table, o) -> dict[str, list[int]]:
    """Row indices of each split: by a split column (or a DatasetDict's splits), else carved from the end
    of the source (held-out last, validation before it, training the rest)."""
    n = len(table.rows)
    if table.split_of is not None or o.split_column:
        if table.split_of is not None and o.split_column:
            raise ValueError(f"env.options.split_column={o.split_column}: {o.source} is a DatasetDict, whose own "
                             f"splits ({', '.join(dict.fromkeys(table.split_of))}) name each row's split; drop it")
        if table.split_of is None and o.split_column not in table.columns:
            raise ValueError(f"env.options.split_column={o.split_column} is not a column of {o.source} "
                             f"(columns: {', '.join(table.columns)})")
        values = table.split_of or [row.get(o.split_column) for row in table.rows]
        names = {str(getattr(o.split_values, s)): s for s in SPLITS}
        out: dict[str, list[int]] = {s: [] for s in SPLITS}
        for i, v in enumerate(values):
            if str(v) in names:
                out[names[str(v)]].append(i)
        for s in ("train", "heldout"):
            if not out[s]:
                want = getattr(o.split_values, s)
                if o.split_column:
                    raise ValueError(f"env.options.split_column={o.split_column}: no row of {o.source} has the value "
                                     f"{want!r} (env.options.split_values.{s}); values found: "
                                     f"{', '.join(sorted({str(v) for v in values})[:8])}")
                raise ValueError(f"env.options.source={o.source}: no split is named {want!r} (env.options.split_values."
                                 f"{s}); its splits: {', '.join(dict.fromkeys(values))}")
        return out
    held, val = _count(o.heldout_rows, n), _count(o.validation_rows, n)
    if held < 1 or held + val >= n:
        raise ValueError(f"env.options.heldout_rows={o.heldout_rows} and validation_rows={o.validation_rows} leave "
                         f"{n - held - val} training row(s) and {held} held-out of the {n} in {o.source}; "
                         f"each needs at least one")
    return {"train": list(range(n - held - val)), "validation": list(range(n - held - val, n - held)),
            "heldout": list(range(n - held, n))}


def _count(value, n: int) -> int:
    if isinstance(value, float):
        return max(1, round(value * n)) if value > 0 else 0
    return int(value)


def task_ids(table: Table, id_column: str | None) -> list[str]:
    """A stable key per row: the id column's value (id_column, else a column named id), else the row's
    index (a DatasetDict: split/index)."""
    col = id_column or ("id" if "id" in table.columns else None)
    if col is None:
        if table.split_of is None:
            return [str(i) for i in range(len(table.rows))]
        counts: dict[str, int] = {}
        ids = []
        for s in table.split_of:
            ids.append(f"{s}/{counts.get(s, 0)}")
            counts[s] = counts.get(s, 0) + 1
        return ids
    where = f"env.options.id_column={col}" if id_column else "the id column"
    seen: dict[str, int] = {}
    for i, row in enumerate(table.rows):
        if row.get(col) is None:
            raise ValueError(f"{where}: row {i} has no {col}")
        key = str(row[col])
        if key in seen:
            raise ValueError(f"{where}: id {key!r} appears twice (rows {seen[key]} and {i}); task ids must be unique")
        seen[key] = i
    return list(seen)


def template_fields(template: str) -> list[str]:
    """The columns a template names ({column}; {{ and }} are literal braces)."""
    return [f.split(".")[0].split("[")[0] for _, f, _, _ in string.Formatter().parse(template) if f is not None]


def prompt_of(row: dict, o, index: int) -> str:
    """A row's first observation: the template filled with its columns, else its prompt column (a
    string, or a chat of one user message)."""
    if o.template is not None:
        missing = [f for f in template_fields(o.template) if f not in row]
        if missing:
            raise ValueError(f"env.options.template names {{{missing[0]}}}, which row {index} of {o.source} lacks "
                             f"(columns: {', '.join(row)})")
        try:
            return o.template.format_map(row)
        except (KeyError, IndexError, AttributeError, TypeError, ValueError) as err:
            raise ValueError(f"env.options.template does not fit row {index} of {o.source} "
                             f"({type(err).__name__}: {err})") from None
    if o.prompt not in row:
        raise ValueError(f"env.options.prompt={o.prompt}: row {index} of {o.source} has no such column "
                         f"(columns: {', '.join(row)}); or write env.options.template")
    value = row[o.prompt]
    if isinstance(value, list):
        users = [m for m in value if isinstance(m, dict) and m.get("role") == "user"]
        if len(value) == 1 and len(users) == 1 and isinstance(users[0].get("content"), str):
            return users[0]["content"]
        raise ValueError(f"env.options.prompt={o.prompt}: row {index} holds a chat of {len(value)} message(s); "
                         f"esopt takes one user message (the context goes in agent.system_prompt and agent.examples)")
    if not isinstance(value, str) or not value:
        raise ValueError(f"env.options.prompt={o.prompt}: row {index} holds {type(value).__name__} "
                         f"{repr(value)[:40]}, not a text; or write env.options.template")
    return value


class DatasetTasks:
    """The task source of env.id=dataset. Training: tasks drawn from the training rows by (run seed,
    generation), without repeats until every row has been drawn (tasks.fresh_each_generation=false: the
    same ones every generation). Validation and held-out: the first tasks.validation / tasks.heldout
    rows of their split, the same for every run seed."""

    max_live = None  # every episode plays at once
    skips_heldout = True  # tasks.heldout_skip: the held-out split's rows after the first skip

    def __init__(self, env_cfg, tasks_cfg, run_seed: int):
        from ...utils.settings import ConfigError
        from ...utils.seeding import derive_seed

        self.env_cfg, self.tasks_cfg, self.run_seed, self._derive = env_cfg, tasks_cfg, run_seed, derive_seed
        try:
            self.data = self.prepare(env_cfg.options)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        for split, asked, key in (("heldout", tasks_cfg.heldout_skip + tasks_cfg.heldout,
                                   "tasks.heldout_skip + tasks.heldout" if tasks_cfg.heldout_skip else "tasks.heldout"),
                                  ("validation", tasks_cfg.validation, "tasks.validation")):
            have = len(self.data.splits[split])
            if asked > have:
                raise ConfigError(f"{key}={asked} but the {split} split of env.options.source={env_cfg.options.source} "
                                  f"has {have} row(s); lower {key} or give that split more rows")

    def prepare(self, options):
        """The rows, splits, ids and prompts of these options (a task source of another env's rows overrides it)."""
        return prepare(options)

    def _envs(self, rows: list[int]):
        d, o = self.data, self.env_cfg.options
        envs = [DatasetEnv(d.prompts[i], d.table.rows[i], d.reward, o.reward, o.turns, d.ids[i]) for i in rows]
        return envs, [d.ids[i] for i in rows], [d.prompts[i] for i in rows]

    def draw(self, n: int, key) -> list[int]:
        pool = self.data.splits["train"]
        rng = random.Random(self._derive("dataset-tasks", self.run_seed, key))
        out: list[int] = []
        while len(out) < n:
            out += rng.sample(pool, min(len(pool), n - len(out)))
        return out

    def train(self, n: int, generation, repeat: int = 1):
        """n training tasks; with repeat > 1, each `repeat` times in a row (a GRPO group)."""
        key = generation if self.tasks_cfg.fresh_each_generation else 0
        return self._envs([i for i in self.draw(n, key) for _ in range(repeat)])

    def validation(self):
        rows = self.data.splits["validation"][: self.tasks_cfg.validation]
        return self._envs(rows * self.tasks_cfg.heldout_repeats)

    def heldout(self):
        skip = self.tasks_cfg.heldout_skip
        return self._envs(self.data.splits["heldout"][skip: skip + self.tasks_cfg.heldout] * self.tasks_cfg.heldout_repeats)
