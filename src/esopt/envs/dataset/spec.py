"""env.id=dataset for the harness: prompts from a file (or a ``datasets`` dataset) and a reward
function, the way TRL takes them (docs/datasets.md). Imports nothing heavy: the rows are read when
the preflight or the task source first needs them."""
from __future__ import annotations

from typing import Union

from pydantic import Field, field_validator, model_validator

from ...utils.settings import Strict
from ..spec import EnvSpec


class SplitValues(Strict):
    """The values of env.options.split_column (or a DatasetDict's split names) that name each split."""

    train: str = "train"
    validation: str = "validation"
    heldout: str = "test"


class RowOptions(Strict):
    """The env.options that say which rows are tasks and how they are split (env.id=dataset's, and those of
    a TRL environment class, envs/trl/)."""

    # a .jsonl / .json (a list of objects) / .csv / .parquet file (relative to the working directory),
    # or hf:<save_to_disk folder, data folder or cached Hub dataset name>
    source: str
    subset: str | None = None  # hf: a Hub dataset's configuration (e.g. main for openai/gsm8k)
    prompt: str = "prompt"  # the column holding each row's prompt (a string, or a chat of one user message)
    template: str | None = None  # instead of prompt: a text with {column} placeholders ({{ }}: literal braces)
    id_column: str | None = None  # task ids (none: a column named id if there is one, else the row index)
    split_column: str | None = None  # a column naming each row's split (its values: split_values)
    split_values: SplitValues = SplitValues()
    # without split_column: rows carved from the END of the source, a count (int) or a share of
    # the rows (a float below 1): held-out last, validation just before it, training the rest
    heldout_rows: Union[int, float] = 0.1
    validation_rows: Union[int, float] = 0

    @field_validator("heldout_rows", "validation_rows")
    @classmethod
    def _count_or_share(cls, v):
        if isinstance(v, bool) or v < 0 or (isinstance(v, float) and v >= 1):
            raise ValueError("a row count (an int >= 0) or a share of the rows (a float in [0, 1))")
        return v

    @field_validator("template")
    @classmethod
    def _template_parses(cls, v):
        if v is not None:
            from .tasks import template_fields

            try:
                fields = template_fields(v)
            except ValueError as err:
                raise ValueError(f"not a valid template ({err}); write {{column}}, and {{{{ }}}} for braces") from None
            if not fields or any(not f or f.isdigit() for f in fields):
                raise ValueError("a template names columns in braces, e.g. '{question}'")
        return v

    @model_validator(mode="after")
    def _one_way_to_split(self):
        carved = [k for k in ("heldout_rows", "validation_rows")  # a saved config holds the defaults too
                  if getattr(self, k) != type(self).model_fields[k].default]
        if self.split_column and carved:
            raise ValueError(f"{carved[0]} carves splits from the end of the source; with "
                             f"split_column={self.split_column} the column names them: set one")
        return self


class DatasetOptions(RowOptions):
    """env.options of env.id=dataset."""

    # package.module:function or path/to/file.py:function, called fn(completion, **columns)
    reward: str
    turns: int = Field(1, ge=1)  # attempts per row: a reply whose reward function gives feedback may try again


def preflight(env_cfg, tasks_cfg=None) -> None:
    """The source reads, the prompt column (or template) fits every row, the splits have rows (as many
    as tasks.heldout / tasks.validation ask) and the reward function imports and takes
    (completion, **columns): one line naming the key if not."""
    from .tasks import DatasetTasks, prepare

    prepare(env_cfg.options)
    if tasks_cfg is not None:
        DatasetTasks(env_cfg, tasks_cfg, 0)


def dataset_env(row: int | str = 0, max_turns: int | None = None, **options):
    """One row's env (``esopt.envs.make("dataset", source=..., reward=..., row=3)``): row is a task id,
    else a row index."""
    from .env import DatasetEnv
    from .tasks import prepare, prompt_of

    o = DatasetOptions.model_validate(options)
    data = prepare(o)
    i = data.ids.index(str(row)) if str(row) in data.ids else row
    if not isinstance(i, int) or not 0 <= i < len(data.table.rows):
        raise ValueError(f"row {row!r} is neither a task id nor a row index of {o.source}")
    prompt = data.prompts[i] if data.prompts[i] is not None else prompt_of(data.table.rows[i], o, i)
    return DatasetEnv(prompt, data.table.rows[i], data.reward, o.reward, min(o.turns, max_turns or o.turns),
                      data.ids[i])


def _tasks(env_cfg, tasks_cfg, run_seed: int):
    from .tasks import DatasetTasks

    return DatasetTasks(env_cfg, tasks_cfg, run_seed)


SPEC = EnvSpec(id="dataset", factory=dataset_env, options=DatasetOptions, tasks=_tasks, preflight=preflight,
               default_max_turns=1, summary_keys=("source", "reward"),
               description="prompts from a file or a datasets dataset, scored by a reward function (TRL-style)")
