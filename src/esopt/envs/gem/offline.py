"""Importing GEM, checking a GEM id before a run starts, and keeping GEM off the network.

What GEM 0.1 fetches (read from its registration, gem/envs/__init__.py, and its env modules):

* ``import gem`` fetches nothing (it imports reasoning_gym, about 1.5 s), but it calls
  ``logging.basicConfig(level=INFO)``; :func:`import_gem` undoes that.
* Hangman and Wordle call ``nltk.download("words")`` whenever one is built (a network call even
  when the corpus is there); WordSearch reads the same corpus. :func:`no_downloads` makes that call
  look on this machine only.
* every id whose registration names a ``dataset_name`` (math:*, code:*, qa:*, logic:*, eval:*)
  calls ``datasets.load_dataset`` on it: the Hugging Face Hub unless it is in the local cache.
* the other games and the rg:* (reasoning_gym) ids generate their tasks locally.
"""
from __future__ import annotations

import difflib
import importlib
import inspect
import logging
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path

# GEM env modules that read an NLTK corpus (GEM downloads it when one of them is built)
NLTK_CORPORA = {
    "gem.envs.game_env.hangman": "words",
    "gem.envs.game_env.wordle": "words",
    "gem.envs.game_env.word_search": "words",
}
EXAMPLES = ("game:GuessTheNumber-v0-easy", "game:Mastermind-v0-easy", "game:Sudoku-v0-easy",
            "game:TowerofHanoi-v0-easy", "game:Minesweeper-v0-easy", "rg:basic_arithmetic")


def import_gem():
    """The gem module (its registry filled), leaving the root logger as it was; ValueError with one
    line when GEM is not installed."""
    if "gem" in sys.modules:
        return sys.modules["gem"]
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import gem
    except ImportError as err:
        raise ValueError(f"env.id=gem needs GEM (the gem-llm package): pip install 'esopt[gem]' ({err})") from None
    finally:
        root.handlers[:] = handlers  # gem/__init__.py calls logging.basicConfig(level=INFO)
        root.setLevel(level)
    return gem


def registration(task: str):
    """GEM's registration of ``task`` (entry_point, kwargs); ValueError naming a few valid ids."""
    import_gem()
    from gem.envs.registration import ENV_REGISTRY

    entry = ENV_REGISTRY.get(task)
    if entry is None:
        close = difflib.get_close_matches(task, list(ENV_REGISTRY), n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise ValueError(f"env.options.task={task!r} is not a GEM env id; {hint}valid ids include "
                         f"{', '.join(EXAMPLES)} ({len(ENV_REGISTRY)} in all; list them with "
                         f"python -c 'import gem; gem.print_envs()')")
    return entry


def env_class(task: str):
    entry = registration(task)
    if not isinstance(entry.entry_point, str):
        return entry.entry_point
    module, _, name = entry.entry_point.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as err:  # e.g. GEM's math envs import pylatexenc, which gem-llm does not require
        missing = f": pip install {err.name}" if getattr(err, "name", None) else ""
        raise ValueError(f"env.options.task={task}: GEM's {module} does not import here ({err}){missing}") from None


def check_make_kwargs(task: str, make_kwargs: dict) -> None:
    """GEM's envs swallow unknown keyword arguments (``**_``): name one that its class does not take."""
    cls = env_class(task)
    params = inspect.signature(cls.__init__).parameters
    named = [p for p, v in params.items() if p != "self" and v.kind in (v.POSITIONAL_OR_KEYWORD, v.KEYWORD_ONLY)]
    for key in make_kwargs:
        if key not in named:
            raise ValueError(f"env.options.make_kwargs.{key} is not a setting of {task} ({cls.__name__} takes "
                             f"{', '.join(k for k in named if k != 'max_turns') or 'none'})")


def missing_data(task: str, make_kwargs: dict) -> str | None:
    """One line saying what ``task`` would download, and how to provide it, or None when it needs
    nothing from the network (or what it needs is already here). Makes no network call."""
    entry = registration(task)
    module = entry.entry_point.partition(":")[0] if isinstance(entry.entry_point, str) else ""
    corpus = NLTK_CORPORA.get(module)
    if corpus is not None and not nltk_has(corpus):
        return (f"env.options.task={task} reads NLTK's {corpus!r} corpus, which is not on this machine, and GEM "
                f"would download it: run python -c \"import nltk; nltk.download('{corpus}')\" where there is "
                f"internet (or copy nltk_data/corpora/{corpus} into a folder on NLTK_DATA here)")
    kwargs = {**entry.kwargs, **make_kwargs}
    name = kwargs.get("dataset_name")
    if name and kwargs.get("dataset") is None and not hf_dataset_here(str(name)):
        return (f"env.options.task={task} loads the Hugging Face dataset {name}, which is not in the local cache, "
                f"and GEM would download it: run python -c \"import datasets; datasets.load_dataset('{name}')\" "
                f"where there is internet (same HF_HOME), then set HF_HUB_OFFLINE=1 on a machine without it")
    return None


def nltk_has(corpus: str) -> bool:
    try:
        import nltk
    except ImportError:
        return False
    try:
        nltk.data.find(f"corpora/{corpus}")
        return True
    except LookupError:
        return False


def hf_dataset_here(name: str) -> bool:
    """A local folder, or a Hub dataset in the hub cache or the datasets cache (no network)."""
    if Path(name).expanduser().exists():
        return True
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    hub = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    if Path(hub, "datasets--" + name.replace("/", "--"), "snapshots").expanduser().is_dir():
        return True
    cache = Path(os.environ.get("HF_DATASETS_CACHE") or os.path.join(home, "datasets")).expanduser()
    want = _squash(name.replace("/", "___"))
    return cache.is_dir() and any(_squash(p.name) == want for p in cache.iterdir() if p.is_dir())


def _squash(name: str) -> str:  # the datasets cache snake-cases names (MATH-12k -> math-12k)
    return re.sub(r"[^a-z0-9]", "", name.lower())


@contextmanager
def no_downloads():
    """While GEM builds an env: ``nltk.download(x)`` succeeds if x is here, else raises ValueError
    (GEM's Hangman and Wordle call it on every build; it would go to the network)."""
    nltk = sys.modules.get("nltk")
    if nltk is None:
        yield
        return
    real = nltk.download

    def local_only(info_or_id=None, *args, **kwargs):
        if isinstance(info_or_id, str) and nltk_has(info_or_id):
            return True
        raise ValueError(f"GEM asked NLTK to download {info_or_id!r}, which is not on this machine: run "
                         f"python -c \"import nltk; nltk.download('{info_or_id}')\" where there is internet")

    nltk.download = local_only
    try:
        yield
    finally:
        nltk.download = real
