"""BrowserGym task ids -> task classes, their settings here, and train / validation / held-out task sets.

A task id is BrowserGym's without the ``browsergym/`` prefix: ``miniwob.click-button``,
``esopt-webshop.12`` (the local shop, esopt.envs.browser.webshop), ``webarenalite.4``, ``webarena.27``,
``webarena-verified.27`` (on sites you host, docs/web.md); a WebArena-format file of your own is
``webarena-file:<path>#<task_id>``. Importing a namespace's package registers its tasks with
gymnasium, except for namespaces that build their tasks themselves (the WebArena ones,
esopt.envs.browser.webarena.namespaces); nothing here touches the network.

An episode is a (task id, seed) pair. Seeds are split by their residue mod 4: held-out
seeds are 0 mod 4, validation seeds 1 mod 4, training seeds 2 or 3 mod 4, so the three
sets never share an episode. A namespace whose tasks carry a split of their own (the
local shop) also keeps each task in its own split.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from ...utils.seeding import derive_seed

SPLITS = ("train", "validation", "heldout")
_RESIDUES = {"heldout": (0,), "validation": (1,), "train": (2, 3)}
_SEED_RANGE = 1 << 20


@dataclass(frozen=True)
class Namespace:
    """What esopt needs to know about one family of BrowserGym tasks."""

    module: str  # importing it registers the tasks
    install: str  # what to install when it is missing
    files: tuple[str, ...] = ()  # directories whose file: URLs the browser may load
    sep: str = "."  # between the namespace and the task: <namespace><sep><task>
    # the module lists, checks and builds its tasks itself, not through gymnasium's registry:
    # task_ids(pattern), entrypoint(id), task_kwargs(id, judge), task_split(id), check_task(id, judge) -> hosts
    builds_tasks: bool = False
    # episodes may reuse a context and page an earlier episode left (wiped, then navigated by the task's
    # setup as a new page would be): only for static pages that hold no state outside the page
    reuse_pages: bool = False


def _miniwob_dir() -> str:
    import miniwob

    return str(Path(miniwob.__file__).parent / "html" / "miniwob")


_WEBARENA = "esopt.envs.browser.webarena.namespaces"
_WEBARENA_INSTALL = "make install-webarena (the task configs) and host the sites (docs/web.md)"
NAMESPACES = {
    "miniwob": Namespace("browsergym.miniwob", "pip install browsergym-miniwob miniwob (or make install)",
                         reuse_pages=True),
    "esopt-webshop": Namespace("esopt.envs.browser.webshop", "it ships with esopt"),
    "webarenalite": Namespace(_WEBARENA, _WEBARENA_INSTALL, builds_tasks=True),
    "webarena": Namespace(_WEBARENA, _WEBARENA_INSTALL, builds_tasks=True),
    "webarena-verified": Namespace(_WEBARENA, "install webarena-verified in a virtual environment of its own and "
                                   "set ESOPT_WEBARENA_VERIFIED to its CLI (docs/web.md)", builds_tasks=True),
    "webarena-file": Namespace(_WEBARENA, "it ships with esopt", sep=":", builds_tasks=True),
}


def namespace_of(task_id: str) -> str:
    for ns, spec in NAMESPACES.items():
        if task_id.startswith(ns + spec.sep) and len(task_id) > len(ns) + len(spec.sep):
            return ns
    raise ValueError(f"unknown BrowserGym task {task_id!r}: use <namespace>.<task> with a namespace of "
                     f"{', '.join(n for n, s in NAMESPACES.items() if s.sep == '.')} (e.g. miniwob.click-button), "
                     "or webarena-file:<path>[#<task_id>]")


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
    ns = namespace_of(task_id)
    module = load_namespace(ns)
    if NAMESPACES[ns].builds_tasks:
        return module.entrypoint(task_id)
    import gymnasium as gym

    try:
        env = gym.make("browsergym/" + task_id, disable_env_checker=True)
    except gym.error.Error as err:
        raise ValueError(f"unknown BrowserGym task {task_id!r} ({err})") from None
    return env.unwrapped.task_entrypoint


def task_settings(task_id: str, judge=None) -> tuple[dict, tuple[str, ...]]:
    """(task kwargs, directories the browser may load file: URLs from) for ``task_id`` here.

    ``judge`` (env.options.web.judge) goes to tasks that grade with an LLM judge.
    """
    ns = namespace_of(task_id)
    if NAMESPACES[ns].builds_tasks:
        return load_namespace(ns).task_kwargs(task_id, judge), NAMESPACES[ns].files
    if ns == "miniwob":
        pages = _miniwob_dir()  # its pages load ../core, ../common: the whole html folder is allowed
        return {"base_url": Path(pages).as_uri() + "/"}, (str(Path(pages).parent),)
    return {}, NAMESPACES[ns].files


def reuses_pages(task_id: str) -> bool:
    return NAMESPACES[namespace_of(task_id)].reuse_pages


def task_split(task_id: str) -> str | None:
    """The split a task belongs to, for namespaces whose tasks carry one (else None: every split)."""
    module = load_namespace(namespace_of(task_id))
    split_of = getattr(module, "task_split", None)
    return split_of(task_id) if split_of else None


def task_hosts(task_id: str, judge=None) -> tuple[str, ...]:
    """Hosts the task's own sites are on (env.options.web.allowed_hosts must hold them); ValueError when the
    task cannot run here (a site variable, the judge or a login missing). Empty for local tasks."""
    ns = namespace_of(task_id)
    check = getattr(load_namespace(ns), "check_task", None)
    return tuple(check(task_id, judge)) if check else ()


def expand(patterns: list[str]) -> list[str]:
    """Task ids from ``patterns``: ids as given; ``<namespace>.*`` for all of a namespace's registered tasks;
    ``webarena-file:<path>`` for all tasks of a file."""
    out: list[str] = []
    for pattern in patterns:
        wildcard = pattern.endswith(".*") and ":" not in pattern
        if wildcard and pattern[:-2] not in NAMESPACES:
            raise ValueError(f"unknown BrowserGym namespace in {pattern!r}; available: {', '.join(NAMESPACES)}")
        ns = pattern[:-2] if wildcard else namespace_of(pattern)
        if NAMESPACES[ns].builds_tasks:
            out += load_namespace(ns).task_ids(pattern)
        elif wildcard:
            import gymnasium as gym

            load_namespace(ns)
            found = sorted(k[len("browsergym/"):] for k in gym.registry if k.startswith(f"browsergym/{ns}."))
            if not found:
                raise ValueError(f"{pattern!r} matches no registered task")
            out += found
        else:
            out.append(pattern)
    return list(dict.fromkeys(out))


class WebTaskSet:
    """Deterministic (task id, seed) episodes per split for a list of BrowserGym tasks."""

    def __init__(self, task_ids: list[str], run_seed: int):
        if not task_ids:
            raise ValueError("env.options.task lists no BrowserGym task (e.g. env.options.task=miniwob.click-button)")
        self.run_seed, self.task_ids = run_seed, task_ids
        self.by_split = {split: [t for t in task_ids if task_split(t) in (None, split)] for split in SPLITS}

    def check(self, splits) -> None:
        """A ValueError naming the first of `splits` that holds no task, and how to fill it or not play it."""
        for split in splits:
            if not self.by_split[split]:
                hint = {"train": "esopt eval plays no train tasks",
                        "validation": "or set tasks.validation=0 to play none",
                        "heldout": "every run and evaluation plays held-out tasks"}[split]
                shown = ", ".join(self.task_ids[:5]) + (", ..." if len(self.task_ids) > 5 else "")
                raise ValueError(f"env.options.task has no task in the {split} split ({shown}): mark some tasks "
                                 f"`split: {split}` in the task file, or leave tasks without a split (they serve "
                                 f"every split); {hint}")

    def _episodes(self, split: str, n: int, key: object) -> list[tuple[str, int]]:
        if n:
            self.check((split,))
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
