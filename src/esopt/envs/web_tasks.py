"""BrowserGym task ids -> task classes, their settings here, and train / validation / held-out task sets.

A task id is BrowserGym's without the ``browsergym/`` prefix: ``miniwob.click-button``,
``esopt-webshop.12`` (the local shop, esopt.envs.webshop), ``webarenalite.3`` (needs the
WebArena sites, docs/web.md). Importing a namespace's package registers its tasks with
gymnasium; nothing here touches the network.

An episode is a (task id, seed) pair. Seeds are split by their residue mod 4: held-out
seeds are 0 mod 4, validation seeds 1 mod 4, training seeds 2 or 3 mod 4, so the three
sets never share an episode. A namespace whose tasks carry a split of their own (the
local shop) also keeps each task in its own split.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from ..utils.seeding import derive_seed

SPLITS = ("train", "validation", "heldout")
_RESIDUES = {"heldout": (0,), "validation": (1,), "train": (2, 3)}
_SEED_RANGE = 1 << 20


@dataclass(frozen=True)
class Namespace:
    """What esopt needs to know about one family of BrowserGym tasks."""

    module: str  # importing it registers the tasks
    install: str  # what to install when it is missing
    files: tuple[str, ...] = ()  # directories whose file: URLs the browser may load


def _miniwob_dir() -> str:
    import miniwob

    return str(Path(miniwob.__file__).parent / "html" / "miniwob")


NAMESPACES = {
    "miniwob": Namespace("browsergym.miniwob", "pip install browsergym-miniwob miniwob (or make install)"),
    "esopt-webshop": Namespace("esopt.envs.webshop", "it ships with esopt"),
    "webarenalite": Namespace("browsergym.webarenalite", "pip install 'esopt[webarena]' and host the sites "
                              "(docs/web.md)"),
    "webarena": Namespace("browsergym.webarena", "pip install 'esopt[webarena]' and host the sites (docs/web.md)"),
}


def namespace_of(task_id: str) -> str:
    ns = task_id.split(".", 1)[0]
    if ns not in NAMESPACES or "." not in task_id:
        raise ValueError(f"unknown BrowserGym task {task_id!r}: use <namespace>.<task> with a namespace of "
                         f"{', '.join(NAMESPACES)} (e.g. miniwob.click-button)")
    return ns


def load_namespace(ns: str):
    """Import the namespace's package (registering its tasks); a clear error when it is not installed."""
    spec = NAMESPACES[ns]
    try:
        module = importlib.import_module(spec.module)
    except ImportError as err:
        raise ValueError(f"BrowserGym tasks {ns}.* need {spec.module}, which is not importable ({err}); "
                         f"{spec.install}") from None
    register = getattr(module, "register_webshop_tasks", None)
    if register is not None:
        register()
    return module


def task_entrypoint(task_id: str):
    """The callable BrowserGym builds task ``task_id``'s task object with (seed=..., **task_kwargs)."""
    import gymnasium as gym

    load_namespace(namespace_of(task_id))
    try:
        env = gym.make("browsergym/" + task_id, disable_env_checker=True)
    except gym.error.Error as err:
        raise ValueError(f"unknown BrowserGym task {task_id!r} ({err})") from None
    return env.unwrapped.task_entrypoint


def task_settings(task_id: str) -> tuple[dict, tuple[str, ...]]:
    """(task kwargs, directories the browser may load file: URLs from) for ``task_id`` here."""
    ns = namespace_of(task_id)
    if ns == "miniwob":
        pages = _miniwob_dir()  # its pages load ../core, ../common: the whole html folder is allowed
        return {"base_url": Path(pages).as_uri() + "/"}, (str(Path(pages).parent),)
    return {}, NAMESPACES[ns].files


def task_split(task_id: str) -> str | None:
    """The split a task belongs to, for namespaces whose tasks carry one (else None: every split)."""
    module = load_namespace(namespace_of(task_id))
    split_of = getattr(module, "task_split", None)
    return split_of(task_id) if split_of else None


def expand(patterns: list[str]) -> list[str]:
    """Task ids from ``patterns``: ids as given; ``<namespace>.*`` for all of a namespace's registered tasks."""
    import gymnasium as gym

    out: list[str] = []
    for pattern in patterns:
        if pattern.endswith(".*"):
            ns = pattern[:-2]
            if ns not in NAMESPACES:
                raise ValueError(f"unknown BrowserGym namespace in {pattern!r}; available: {', '.join(NAMESPACES)}")
            load_namespace(ns)
            found = sorted(k[len("browsergym/"):] for k in gym.registry if k.startswith(f"browsergym/{ns}."))
            if not found:
                raise ValueError(f"{pattern!r} matches no registered task")
            out += found
        else:
            namespace_of(pattern)
            out.append(pattern)
    return list(dict.fromkeys(out))


class WebTaskSet:
    """Deterministic (task id, seed) episodes per split for a list of BrowserGym tasks."""

    def __init__(self, task_ids: list[str], run_seed: int):
        if not task_ids:
            raise ValueError("env.task lists no BrowserGym task (e.g. env.task=miniwob.click-button)")
        self.run_seed = run_seed
        self.by_split = {}
        for split in SPLITS:
            self.by_split[split] = [t for t in task_ids if task_split(t) in (None, split)]
            if not self.by_split[split]:
                raise ValueError(f"env.task has no task in the {split} split ({', '.join(task_ids)})")

    def _episodes(self, split: str, n: int, key: object) -> list[tuple[str, int]]:
        tasks = self.by_split[split]
        residues = _RESIDUES[split]
        base = derive_seed("web", split, self.run_seed, key) % _SEED_RANGE
        out = []
        for k in range(n):
            m = base + k // len(residues)
            out.append((tasks[k % len(tasks)], 4 * m + residues[k % len(residues)]))
        return out

    def train(self, n: int, key: object) -> list[tuple[str, int]]:
        return self._episodes("train", n, key)

    def validation(self, n: int) -> list[tuple[str, int]]:
        return self._episodes("validation", n, 0)

    def heldout(self, n: int) -> list[tuple[str, int]]:
        return self._episodes("heldout", n, 0)
