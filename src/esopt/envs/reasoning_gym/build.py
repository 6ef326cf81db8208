"""reasoning-gym's side of env.id=reasoning-gym: a dataset's config from env.options (its own config
keys, a curriculum level), cached dataset instances, and items drawn from them.

reasoning-gym is imported here, inside the functions, never when the module loads. Every error a
user can cause (an unknown dataset, a config key or value, a level) is a ValueError with one line.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
from collections import OrderedDict
from typing import Any

INSTALL_HINT = "pip install 'esopt[reasoning-gym]' (make install does)"
# datasets whose questions depend on Python's string hashing (set order), measured on reasoning-gym
# 0.1.23: another process (eval --run, a resumed run, a Ray worker) draws other questions for the
# same task ids unless PYTHONHASHSEED is fixed
HASH_DEPENDENT = frozenset({"isomorphic_strings", "knight_swap", "polynomial_multiplication", "ransom_note",
                            "word_ladder"})


def registry() -> dict:
    """reasoning-gym's datasets: name -> (dataset class, config class)."""
    try:
        from reasoning_gym.factory import DATASETS
    except ImportError as err:
        raise ValueError(f"env.id=reasoning-gym needs reasoning-gym ({err}); {INSTALL_HINT}") from None
    return DATASETS


def check_name(name: str) -> None:
    """An unknown dataset: one line with the closest names."""
    names = sorted(registry())
    if name in names:
        return
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
    hint = f"close names: {', '.join(close)}" if close else f"e.g. {', '.join(names[:8])}, ... ({len(names)} in all)"
    raise ValueError(f"unknown reasoning-gym dataset env.options.dataset={name!r}; {hint}")


def check_hashing(name: str, environ=None) -> None:
    """A dataset whose questions depend on string hashing needs a fixed PYTHONHASHSEED."""
    import os

    value = (os.environ if environ is None else environ).get("PYTHONHASHSEED", "random")
    if name in HASH_DEPENDENT and not value.isdigit():
        raise ValueError(f"reasoning-gym dataset {name} draws its questions in an order set by Python's string "
                         f"hashing: run with PYTHONHASHSEED=0 (exported, so eval --run, resumed runs and Ray "
                         f"workers draw the same questions)")


def max_level(name: str) -> int | None:
    """The highest global level of the dataset's curriculum (None: it has no curriculum)."""
    from reasoning_gym.factory import CURRICULA

    if name not in CURRICULA:
        return None
    return max((len(a.levels) for a in CURRICULA[name]().attributes.values()), default=1) - 1


def config_kwargs(name: str, config: dict, level: int | None) -> dict:
    """The keyword arguments of the dataset's config class (without seed and size): the curriculum's
    values at `level` (if set), then env.options.config over them. Raises ValueError (one line)."""
    check_name(name)
    _, config_cls = registry()[name]
    fields = [f.name for f in dataclasses.fields(config_cls) if f.name not in ("seed", "size")]
    unknown = [k for k in config if k not in fields]
    if unknown:
        raise ValueError(f"unknown config key 'env.options.config.{unknown[0]}' for reasoning-gym dataset {name}; "
                         f"allowed here: {', '.join(fields)}")
    base: dict[str, Any] = {}
    if level is not None:
        top = max_level(name)
        if top is None:
            raise ValueError(f"env.options.level={level}: reasoning-gym dataset {name} has no curriculum; "
                             f"remove level and set env.options.config instead")
        if level > top:
            raise ValueError(f"env.options.level={level} is out of range: {name}'s curriculum has levels 0..{top}")
        from reasoning_gym.factory import create_curriculum

        curriculum = create_curriculum(name)
        curriculum.set_global_level(level)
        made = curriculum.generate_configuration({})
        base = {f: getattr(made, f) for f in fields if hasattr(made, f)}
    kwargs = base | dict(config)
    _checked_config(name, config_cls, kwargs, level)
    return kwargs


def _checked_config(name: str, config_cls, kwargs: dict, level: int | None):
    try:
        cfg = config_cls(**kwargs, seed=0, size=1)
        if callable(getattr(cfg, "validate", None)):
            cfg.validate()
    except Exception as err:  # the config class refusing the values (asserts, TypeErrors, ...)
        at = f" at level {level}" if level is not None else ""
        why = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"bad env.options.config for reasoning-gym dataset {name}{at}: {why}") from None
    return cfg


_DATASETS: OrderedDict = OrderedDict()  # (name, config, seed, size) -> dataset instance, the newest last
_KEEP = 16


def dataset(name: str, kwargs: dict, seed: int, size: int):
    """A dataset instance, cached per process (some datasets load word lists or task files when built)."""
    key = (name, json.dumps(kwargs, sort_keys=True, default=repr), seed, size)
    if key in _DATASETS:
        _DATASETS.move_to_end(key)
        return _DATASETS[key]
    dataset_cls, config_cls = registry()[name]
    made = _DATASETS[key] = dataset_cls(config=config_cls(**kwargs, seed=seed, size=size))
    while len(_DATASETS) > _KEEP:
        _DATASETS.popitem(last=False)
    return made


@dataclasses.dataclass(frozen=True)
class Item:
    """One question: its dataset entry, the dataset that scores it, and its task id."""

    entry: dict
    scorer: Any  # the dataset instance (its score_answer(answer, entry))
    task_id: str


def draw(name: str, kwargs: dict, seeds: list[int], n: int, exclude: frozenset = frozenset()) -> list[Item]:
    """n items whose questions are not in `exclude`: items 0, 1, ... of dataset(seed, size) for each
    seed of `seeds` in turn (size: n plus room for skipped ones). A task id is "<seed>+<index>".
    Raises ValueError when the seeds run out (a dataset with too few distinct questions)."""
    items: list[Item] = []
    size = n + max(8, n // 2) if exclude else n
    for seed in seeds:
        ds = dataset(name, kwargs, seed, size)
        for i in range(size):
            entry = ds[i]
            if entry["question"] not in exclude:
                items.append(Item(entry, ds, f"{seed}+{i}"))
                if len(items) == n:
                    return items
    raise ValueError(f"reasoning-gym dataset {name} repeats its questions: {len(items)} of {n} questions could be "
                     f"drawn outside the held-out and validation ones; raise env.options.level (or widen "
                     f"env.options.config), or lower tasks.heldout / tasks.validation")
