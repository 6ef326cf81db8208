"""Env specs: everything the harness needs to know about an ``env.id``, in one object.

An :class:`EnvSpec` holds an environment's factory, its options model (the typed
``env.options`` section), its task source (training, validation and held-out tasks), its
preflight check, its episode renderer and its capabilities. The trainer, GRPO, GEPA, Ray
replicas, preflight and run reports take all of that from the spec, so no code outside
``esopt.envs`` needs to know an environment by name.

``resolve(env_id)`` finds the spec of an id, in this order:

1. a spec registered in this process (``register_spec``; esopt's own envs are registered
   lazily, by the module path of their spec, so naming one imports nothing heavy);
2. an ``esopt.envs`` entry point of that name (a package's ``[project.entry-points."esopt.envs"]``
   table: ``guess = "mypkg.guess:GuessEnv"``);
3. ``package.module:attr``: imported where it is used (training, eval, Ray workers, worker
   processes).

The object found may be an EnvSpec, a TRL environment class (a class with ``reset`` and no ``step``,
written for TRL's ``environment_factory``: envs/trl/, over a dataset's rows), or a TextEnv class or factory
function, which gets the default spec: tasks are seeds of ``reset`` (:class:`SeedTasks`), ``env.options`` are
validated by the factory's ``Options`` attribute (a pydantic model) if it has one, else by its
signature. docs/envs.md shows an example.
"""
from __future__ import annotations

import importlib
import inspect
import random
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from .base import TextEnv

DEFAULT_MAX_TURNS = 10  # episode length limit of an env that names none (env.max_turns overrides it)


@dataclass(frozen=True)
class EnvSpec:
    """What esopt needs to train on, evaluate and report an environment.

    factory(**options[, max_turns=N]) builds one env (``max_turns`` is passed when the factory
    accepts it and env.max_turns is set). options: the pydantic model of ``env.options`` (None:
    the factory's keyword arguments, checked against its signature). tasks(env_cfg, tasks_cfg,
    run_seed): the task source (None: seeds of reset, :class:`SeedTasks`). preflight(env_cfg[, tasks_cfg]):
    raise ValueError with one line when the env cannot run here (before anything is written); a
    second parameter gets the tasks config (None when there is none to check, e.g. an env on its own).
    renderer(episode) -> HTML for run reports (None: a turn table). max_live(env_cfg): episodes
    under way at once (None: all; an env that holds a browser page or a process per episode
    bounds it). A task source may also play its episodes in worker processes: envs whose steps
    mostly wait (browsers) do, with ``esopt.envs.browser.workers.RemoteEnv(pool, env_id, **kwargs)``,
    which builds any env id (package.module:attr too) in a spawned process.
    """

    id: str
    factory: Callable[..., TextEnv]
    options: type | None = None
    tasks: Callable[..., Any] | None = None
    preflight: Callable[[Any], None] | None = None
    renderer: Callable[[dict], str] | None = None
    max_live: Callable[[Any], int | None] | None = None
    default_max_turns: int = DEFAULT_MAX_TURNS
    summary_keys: tuple[str, ...] = ()  # env.options keys a run report shows (empty: all of them)
    # whether a command's preflight builds, resets and steps one env of each split (train/envcheck.py); False
    # where that is costly (a browser) or impossible (a harness's own task)
    smoke: bool = True
    # env.options keys (dotted) that say how episodes are played, not which: they may change on resume and
    # are left out of the task set a run's record keeps (esopt.train.resume_check.task_set)
    run_options: tuple[str, ...] = ()
    # distinct_tasks(env_cfg): how many different tasks the env has under these options (None: unknown, or too
    # many to matter); the preflight warns when the splits asked for must share tasks (train/preflight.py)
    distinct_tasks: Callable[[Any], int | None] | None = None
    description: str = ""

    # -- used by the harness -------------------------------------------------------------------
    def validate_options(self, raw: dict) -> Any:
        """``env.options`` as this env's typed model (or a checked dict without one); raises
        OptionsError naming the key."""
        if self.options is not None:
            from pydantic import ValidationError

            try:
                return self.options.model_validate(raw or {})
            except ValidationError as err:
                raise OptionsError(_options_error(err, self.options)) from None
        unknown, accepted = _unknown_kwargs(self.factory, raw or {})
        if unknown:
            raise OptionsError(f"unknown config key 'env.options.{unknown[0]}' for env.id={self.id}; "
                               f"allowed here: {', '.join(accepted) or '(none)'}")
        return dict(raw or {})

    def unchecked_options(self, options: Any) -> list[str]:
        """env.options keys that a factory taking ``**kwargs`` (and no options model) does not name: nothing
        checks them (a typo reaches the env as an argument it may ignore)."""
        if self.options is not None or not isinstance(options, dict):
            return []
        try:
            params = inspect.signature(self.factory).parameters
        except (TypeError, ValueError):
            return []
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return []
        return sorted(set(options) - set(params))

    def make(self, options: Any, max_turns: int | None = None, **extra) -> TextEnv:
        """One env from validated options (and per-task arguments such as a puzzle)."""
        kwargs = options_dict(options) | extra
        if max_turns is not None and accepts(self.factory, "max_turns"):
            kwargs["max_turns"] = max_turns
        return self.factory(**kwargs)

    def task_source(self, env_cfg, tasks_cfg, run_seed: int):
        source = (self.tasks or SeedTasks)(env_cfg, tasks_cfg, run_seed)
        if getattr(tasks_cfg, "heldout_skip", 0) and not getattr(source, "skips_heldout", False):
            from ..utils.settings import ConfigError

            raise ConfigError(f"tasks.heldout_skip={tasks_cfg.heldout_skip}: the task source of env.id={env_cfg.id} "
                              f"does not offer it (a task source that does sets skips_heldout = True)")
        return source

    def check(self, env_cfg, tasks_cfg=None, splits=None) -> None:
        """Run the preflight (given the tasks config too when it takes two arguments, and the splits the
        command will play when it takes three: None means training's, train, validation if any, held-out)."""
        if self.preflight is None:
            return
        try:
            takes = len(inspect.signature(self.preflight).parameters)
        except (TypeError, ValueError):
            takes = 1
        if takes >= 3:
            self.preflight(env_cfg, tasks_cfg, splits)
        elif takes == 2:
            self.preflight(env_cfg, tasks_cfg)
        else:
            self.preflight(env_cfg)

    def live_limit(self, env_cfg) -> int | None:
        return self.max_live(env_cfg) if self.max_live else None

    def task_count(self, env_cfg) -> int | None:
        """The number of distinct tasks the env declares under env_cfg's options (None: not declared)."""
        n = self.distinct_tasks(env_cfg) if self.distinct_tasks else None
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


class OptionsError(ValueError):
    """env.options does not fit the env's options model (one line naming the key)."""


class UnknownEnv(ValueError):
    """No spec answers to an env.id."""


def options_dict(options: Any) -> dict:
    if options is None:
        return {}
    if hasattr(options, "model_dump"):
        return {k: getattr(options, k) for k in type(options).model_fields}
    return dict(options)


def _options_error(err, model) -> str:
    e = err.errors()[0]
    loc = ".".join(str(x) for x in e["loc"])
    if e["type"] == "extra_forbidden":
        return f"unknown config key 'env.options.{loc}'; allowed here: {', '.join(model.model_fields)}"
    if e["type"] == "missing":
        return f"env.options.{loc} is required ({model.__name__})"
    if not loc:
        return f"bad env.options: {e['msg'].removeprefix('Value error, ')}"
    return f"bad value for 'env.options.{loc}': {e.get('input')!r} ({e['msg']})"


def accepts(fn: Callable, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _unknown_kwargs(fn: Callable, kwargs: dict) -> tuple[list[str], list[str]]:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return [], []
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return [], []
    accepted = [p.name for p in params.values()
                if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
                and p.name != "max_turns"]
    return sorted(set(kwargs) - set(accepted)), accepted


# -- the default task source: a task is a seed of reset --------------------------------------

SEED_SPLITS = {"train": (0, 1 << 30), "validation": (1 << 30, 3 << 29), "heldout": (3 << 29, 1 << 31)}


class SeededEnv(TextEnv):
    """An env and the seed its episode starts from: the rollout resets it (``reset()``) when
    the episode starts, so an env that raises in reset fails its episode, not the run."""

    def __init__(self, env: TextEnv, seed: int):
        self.env, self.seed = env, seed

    @property
    def max_turns(self):  # the env's own limit, if it states one
        return getattr(self.env, "max_turns", None)

    def reset(self, seed: int | None = None):
        return self.env.reset(seed=self.seed if seed is None else seed)

    def step(self, action: str):
        return self.env.step(action)

    def render_text(self) -> str:
        return self.env.render_text()

    def tools(self) -> list:
        """The wrapped env's tools (agent/tools.py), if it declares any."""
        declare = getattr(self.env, "tools", None)
        return declare() if callable(declare) else []

    def close(self) -> None:
        self.env.close()


class SeedTasks:
    """Tasks of any TextEnv: a task is a seed of ``reset``. Splits are disjoint seed ranges
    (SEED_SPLITS): validation and held-out are the first N seeds of their range, the same for
    every run seed (runs stay comparable); training seeds are drawn from the training range by
    the run seed and generation (tasks.fresh_each_generation). An env is built per episode and
    reset when its episode starts. tasks.heldout_skip passes over the first seeds of the held-out range."""

    skips_heldout = True

    def __init__(self, env_cfg, tasks_cfg, run_seed: int):
        from ..utils.seeding import derive_seed

        self.env_cfg, self.tasks_cfg, self.run_seed = env_cfg, tasks_cfg, run_seed
        self.spec = resolve(env_cfg.id)
        self.max_live = self.spec.live_limit(env_cfg)
        self._derive = derive_seed

    def seeds(self, split: str, n: int, key=0) -> list[int]:
        lo, hi = SEED_SPLITS[split]
        if split != "train":
            skip = self.tasks_cfg.heldout_skip if split == "heldout" else 0
            return list(range(lo + skip, lo + skip + n))
        rng = random.Random(self._derive("seed-tasks", self.run_seed, key))
        return rng.sample(range(lo, hi), n)

    def _envs(self, seeds: list[int]):
        envs = [SeededEnv(self.spec.make(self.env_cfg.options, self.env_cfg.max_turns), s) for s in seeds]
        return envs, [str(s) for s in seeds], [None] * len(envs)

    def train(self, n: int, generation: int, repeat: int = 1):
        key = generation if self.tasks_cfg.fresh_each_generation else 0
        return self._envs([s for s in self.seeds("train", n, key) for _ in range(repeat)])

    def validation(self):
        return self._envs(self.seeds("validation", self.tasks_cfg.validation) * self.tasks_cfg.heldout_repeats)

    def heldout(self):
        return self._envs(self.seeds("heldout", self.tasks_cfg.heldout) * self.tasks_cfg.heldout_repeats)


# -- the registry ----------------------------------------------------------------------------

_SPECS: dict[str, EnvSpec | str] = {}  # id -> spec, or "module:attr" of one (imported on first use)
_IN_PROCESS: dict[str, Any] = {}  # ids registered with an object, not a path: this process's own
_EXTRA_PATHS_VAR = "ESOPT_ENV_PATH"  # os.pathsep-separated folders to import user envs from (Ray workers)


def register_spec(spec: EnvSpec | str, env_id: str | None = None, *, overwrite: bool = False,
                  given: Any = None) -> None:
    """Register a spec (or the ``module:attr`` path of one, imported when first resolved). ``given``:
    the object the user registered, when the spec was made from it (a factory; esopt.envs.register)."""
    name = env_id or getattr(spec, "id", None)
    if not isinstance(name, str) or not name:
        raise ValueError("environment name must be a non-empty string")
    if ":" in name:
        raise ValueError(f"environment name {name!r} must not contain ':' (that form names a module:attr)")
    old = _SPECS.get(name)
    if old is not None and old != spec and not overwrite:
        raise ValueError(f"environment {name!r} is already registered; pass overwrite=True to replace it")
    _SPECS[name] = spec
    if isinstance(spec, str):
        _IN_PROCESS.pop(name, None)
    else:
        _IN_PROCESS[name] = spec if given is None else given


def in_process(env_id: str) -> Any:
    """The object ``env_id`` was registered with in this process (a spec or a factory, by
    register_spec or esopt.envs.register), None for ids a path, a built-in or an entry point names."""
    return _IN_PROCESS.get(env_id)


def known(env_id: str) -> bool:
    """Whether this process resolves ``env_id`` without importing anything new (registered or an entry point)."""
    _load_builtins()
    return env_id in _SPECS or ":" in env_id or _entry_point(env_id) is not None


def registered_ids() -> list[str]:
    return sorted(_SPECS)


def spec_of(obj: Any, env_id: str) -> EnvSpec:
    """An EnvSpec for what an id names: a spec as is, a factory with the default spec."""
    if isinstance(obj, EnvSpec):
        return obj if obj.id == env_id else replace(obj, id=env_id)
    if not callable(obj):
        raise UnknownEnv(f"env.id={env_id}: {type(obj).__name__} is neither an EnvSpec nor a TextEnv factory")
    if trl_shaped(obj):  # a class written for TRL's environment_factory (envs/trl/, imported by its path)
        return import_target(TRL_SPEC)(obj, env_id)
    opts = getattr(obj, "Options", None)  # a pydantic model of env.options
    render = getattr(obj, "render_episode", None)  # a function (a staticmethod on a class) episode -> HTML
    turns = getattr(obj, "max_turns", None)  # a class attribute: the env's default turn limit
    distinct = getattr(obj, "distinct_tasks", None)  # how many different tasks reset draws: an int, or options -> int
    return EnvSpec(id=env_id, factory=obj, options=opts if isinstance(opts, type) else None,
                   renderer=render if callable(render) else None,
                   distinct_tasks=_declared_count(distinct),
                   default_max_turns=turns if isinstance(turns, int) and not isinstance(turns, bool) and turns > 0
                   else DEFAULT_MAX_TURNS,
                   description=(inspect.getdoc(obj) or "").split("\n")[0])


TRL_SPEC = "esopt.envs.trl.spec:trl_spec"  # (class, env_id) -> the EnvSpec of a TRL environment class


def trl_shaped(obj: Any) -> bool:
    """Whether obj is shaped like a TRL environment class: a class with ``reset`` and no ``step`` (a class with
    ``step`` is a TextEnv)."""
    return inspect.isclass(obj) and callable(getattr(obj, "reset", None)) and not hasattr(obj, "step")


def _declared_count(distinct: Any) -> Callable[[Any], int | None] | None:
    """A factory's ``distinct_tasks`` (an int, or a function of its options) as a spec's distinct_tasks."""
    if isinstance(distinct, int) and not isinstance(distinct, bool):
        return lambda _env: distinct
    if callable(distinct):
        return lambda env_cfg: distinct(**options_dict(env_cfg.options))
    return None


def import_target(path: str) -> Any:
    """``package.module:attr`` (attr may be dotted) -> the object; UnknownEnv with one line."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise UnknownEnv(f"env.id={path!r}: write package.module:attr")
    _extend_path()
    try:
        obj = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        obj = _from_cwd(module_name, err, path)
    except (Exception, SystemExit) as err:  # noqa: BLE001 (the user's module: whatever its import raised)
        raise _import_failure(err, module_name, path) from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UnknownEnv(f"env.id={path}: module {module_name} has no {attr}") from None
    return obj


def _from_cwd(module_name: str, err: ModuleNotFoundError, path: str):
    """Like ``python -m``, a module in the current folder is found (the console script's path lacks it)."""
    cwd = str(Path.cwd())
    if err.name != module_name.split(".")[0] or cwd in sys.path:
        raise UnknownEnv(f"env.id={path}: cannot import {module_name} ({err}); install it, or put its folder on "
                         f"PYTHONPATH") from None
    sys.path.append(cwd)
    try:
        return importlib.import_module(module_name)
    except (Exception, SystemExit) as again:  # noqa: BLE001
        if isinstance(again, ImportError):
            sys.path.remove(cwd)
        raise _import_failure(again, module_name, path) from None


def _import_failure(err: BaseException, module_name: str, path: str) -> UnknownEnv:
    """One line for a module that did not import: not found, a syntax error (where), or what its code raised."""
    if isinstance(err, ImportError):
        return UnknownEnv(f"env.id={path}: cannot import {module_name} ({err}); install it, or put its folder on "
                          f"PYTHONPATH")
    if isinstance(err, SyntaxError):
        return UnknownEnv(f"env.id={path}: {module_name} has a syntax error: {err.msg} ({err.filename}, line "
                          f"{err.lineno})")
    return UnknownEnv(f"env.id={path}: importing {module_name} raised {type(err).__name__}: {err}")


def _extend_path() -> None:
    import os

    for folder in filter(None, os.environ.get(_EXTRA_PATHS_VAR, "").split(os.pathsep)):
        if folder not in sys.path:
            sys.path.append(folder)


def _entry_point(env_id: str):
    from importlib.metadata import entry_points

    for ep in entry_points(group="esopt.envs"):
        if ep.name == env_id:
            return ep
    return None


def resolve(env_id: str) -> EnvSpec:
    """The spec of ``env_id`` (registered, an entry point, or package.module:attr)."""
    _load_builtins()
    if not isinstance(env_id, str) or not env_id.strip():
        raise UnknownEnv("env.id is empty: name a registered env, an esopt.envs entry point or package.module:attr")
    found = _SPECS.get(env_id)
    if isinstance(found, EnvSpec):
        return found
    if isinstance(found, str):
        spec = spec_of(import_target(found), env_id)
        _SPECS[env_id] = spec
        return spec
    if found is not None:  # a factory registered by name
        spec = spec_of(found, env_id)
        _SPECS[env_id] = spec
        return spec
    if ":" in env_id:
        spec = spec_of(import_target(env_id), env_id)
        _SPECS[env_id] = spec
        return spec
    ep = _entry_point(env_id)
    if ep is not None:
        try:
            spec = spec_of(ep.load(), env_id)
        except Exception as err:  # a broken plug-in: one line naming it
            raise UnknownEnv(f"env.id={env_id}: its entry point {ep.value} failed to load "
                             f"({type(err).__name__}: {err})") from None
        _SPECS[env_id] = spec
        return spec
    raise UnknownEnv(f"unknown env.id {env_id!r}; available: {', '.join(available())} "
                     f"(or an esopt.envs entry point, or package.module:attr)")


def available() -> list[str]:
    """Registered ids and installed entry points."""
    from importlib.metadata import entry_points

    _load_builtins()
    return sorted(set(_SPECS) | {ep.name for ep in entry_points(group="esopt.envs")})


def module_root(env_id: str) -> str | None:
    """For a package.module:attr id, the sys.path folder its module was imported from (what a Ray
    worker needs on its path to import it too); None for other ids."""
    if ":" not in env_id:
        return None
    module = sys.modules.get(env_id.partition(":")[0])
    file = getattr(module, "__file__", None)
    if not file:
        return None
    depth = env_id.partition(":")[0].count(".") + 1
    root = Path(file).resolve().parents[depth - 1] if Path(file).name != "__init__.py" else \
        Path(file).resolve().parents[depth]
    return str(root)


def env_import_path(env_id: str) -> dict[str, str]:
    """The environment variable a process elsewhere (a Ray worker) needs to import ``env_id``'s module
    as this process did: {ESOPT_ENV_PATH: folders}, or {} when nothing is needed."""
    import os

    folders = [f for f in os.environ.get(_EXTRA_PATHS_VAR, "").split(os.pathsep) if f]
    root = module_root(env_id)
    if root and root not in folders:
        folders.append(root)
    return {_EXTRA_PATHS_VAR: os.pathsep.join(folders)} if folders else {}


_BUILTINS_LOADED = False


def _load_builtins() -> None:
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        importlib.import_module("esopt.envs")  # registers esopt's own specs (lazily)
