"""WebArena task configs: where they come from, what esopt can grade, which split each is in.

Sources (each a JSON list of WebArena configs):

- ``webarenalite``: the 165 WebArena-Lite configs in the ``browsergym-webarenalite``
  package (its data file ``browsergym/webarenalite/test_webarena_lite.raw.json``,
  found through the package's installed-files record, so none of its modules is
  imported: its ``__init__`` downloads NLTK data). Ids are BrowserGym's, the
  configs' ``old_task_id`` (``webarenalite.4``).
- ``webarena``: WebArena's 812 configs in ``libwebarena`` (``webarena/test.raw.json``,
  a dependency of the former); ids are ``task_id``.
- a file of your own: ``webarena-file:<path>``; ids are ``task_id``.

A config may carry ``split`` (train / validation / heldout). Otherwise its
split follows from a hash of its ``intent_template_id``, so the tasks of one
template (near copies of each other) never straddle two splits: residue 0 of 4
is held-out, 1 validation, 2 and 3 training.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ....utils.seeding import derive_seed
from .scoring import URL_RULES

SPLITS = ("train", "validation", "heldout")
EVAL_TYPES = ("string_match", "url_match", "program_html")
REFERENCE_KEYS = ("exact_match", "must_include", "fuzzy_match")
SUPPORTED_URL_FUNCS = ("reddit_get_post_url",)  # func: URLs esopt computes itself (grade.py)
INSTALL = "pip install --no-deps browsergym-webarenalite==0.14.3 libwebarena==0.0.4 (make install-webarena)"


@dataclass(frozen=True)
class PackagedSource:
    dist: str  # the PyPI distribution that ships the file
    path: str  # the file, relative to the distribution's install root
    id_key: str  # the config field that gives the task id


PACKAGED = {
    "webarenalite": PackagedSource("browsergym-webarenalite", "browsergym/webarenalite/test_webarena_lite.raw.json",
                                   "old_task_id"),
    "webarena": PackagedSource("libwebarena", "webarena/test.raw.json", "task_id"),
}


def _index(configs, id_key: str, where: str) -> dict[int, dict]:
    if not isinstance(configs, list) or not all(isinstance(c, dict) for c in configs):
        raise ValueError(f"{where} must hold a JSON list of WebArena task configs (objects)")
    out: dict[int, dict] = {}
    for k, config in enumerate(configs):
        task_id = config.get(id_key)
        if not isinstance(task_id, int) or isinstance(task_id, bool):
            raise ValueError(f"{where}: config #{k} has no integer {id_key}")
        if task_id in out:
            raise ValueError(f"{where}: {id_key} {task_id} occurs twice")
        out[task_id] = config
    return out


@functools.lru_cache(maxsize=None)
def packaged(ns: str) -> dict[int, dict]:
    """The configs a package ships for namespace ``ns``, by id (read from its file, nothing imported)."""
    source = PACKAGED[ns]
    try:
        dist = metadata.distribution(source.dist)
    except metadata.PackageNotFoundError:
        raise ValueError(f"{ns}.* task configs come from the {source.dist} package, which is not installed; "
                         f"{INSTALL} (docs/web.md)") from None
    path = Path(str(dist.locate_file(source.path)))
    if not path.is_file():
        raise ValueError(f"{source.dist} {dist.version} has no {source.path} (looked at {path}); "
                         f"reinstall it: {INSTALL}")
    return _index(json.loads(path.read_text(encoding="utf-8")), source.id_key, str(path))


@functools.lru_cache(maxsize=None)
def from_file(path: str) -> dict[int, dict]:
    """The configs in a WebArena-format JSON file of yours, by ``task_id``."""
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"webarena-file:{path}: no such file")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"webarena-file:{path} is not JSON ({err})") from None
    return _index(data if isinstance(data, list) else [data], "task_id", f"webarena-file:{path}")


def problems(config: dict) -> list[str]:
    """What keeps esopt from running and grading ``config`` (empty when it can)."""
    out = []
    if not isinstance(config.get("intent"), str) or not config["intent"].strip():
        out.append("intent must be a non-empty string")
    if not isinstance(config.get("start_url"), str) or not config["start_url"].strip():
        out.append("start_url must be a URL (or URLs joined by ' |AND| ')")
    spec = config.get("eval")
    types = spec.get("eval_types") if isinstance(spec, dict) else None
    if not isinstance(types, list) or not types or set(types) - set(EVAL_TYPES):
        return out + [f"eval.eval_types must be a non-empty list from {', '.join(EVAL_TYPES)}, got {types!r}"]
    if "string_match" in types:
        out += _reference_problems(spec.get("reference_answers"), "eval.reference_answers")
    if "url_match" in types:
        if not isinstance(spec.get("reference_url"), str) or not spec["reference_url"].strip():
            out.append("url_match needs eval.reference_url")
        if spec.get("url_note") not in (None, *URL_RULES):
            out.append(f"eval.url_note {spec['url_note']!r} is not one of {', '.join(URL_RULES)}")
    if "program_html" in types:
        items = spec.get("program_html")
        if not isinstance(items, list) or not items:
            out.append("program_html needs a list of {url, locator, required_contents}")
        for k, item in enumerate(items if isinstance(items, list) else []):
            out += [f"program_html[{k}]: {p}" for p in _program_problems(item)]
    return out


def _reference_problems(ref, where: str) -> list[str]:
    if not isinstance(ref, dict) or not ref or set(ref) - set(REFERENCE_KEYS):
        return [f"{where} must hold {', '.join(REFERENCE_KEYS)} (one or more), got {ref!r}"]
    out = []
    if "exact_match" in ref and not isinstance(ref["exact_match"], str):
        out.append(f"{where}.exact_match must be a string")
    if "must_include" in ref and not isinstance(ref["must_include"], (list, str)):
        out.append(f"{where}.must_include must be a list (or one string)")
    if "fuzzy_match" in ref and not (isinstance(ref["fuzzy_match"], list) or ref["fuzzy_match"] == "N/A"):
        out.append(f"{where}.fuzzy_match must be a list or 'N/A'")
    return out


def _program_problems(item) -> list[str]:
    if not isinstance(item, dict) or not {"url", "locator", "required_contents"} <= set(item):
        return ["needs url, locator and required_contents"]
    out = []
    url, locator = str(item["url"]), str(item["locator"])
    if url.startswith("func:") and not any(url.startswith(f"func:{f}(") for f in SUPPORTED_URL_FUNCS):
        out.append(f"url {url!r} calls a WebArena helper esopt does not run (it runs {', '.join(SUPPORTED_URL_FUNCS)})")
    if locator.strip() and not locator.startswith(("document.", "[...document.")):
        out.append(f"locator {locator[:60]!r} is not a document.* expression or empty (esopt runs no helpers)")
    if item.get("prep_actions"):
        out.append("prep_actions are not supported")
    return out + _reference_problems(item["required_contents"], "required_contents")


def needs_judge(config: dict) -> bool:
    """Whether grading ``config`` asks the LLM judge (``fuzzy_match`` anywhere in its eval)."""
    spec = config.get("eval") or {}
    refs = [spec.get("reference_answers") or {}] + [i.get("required_contents") or {} for i in spec.get("program_html")
                                                     or [] if isinstance(i, dict)]
    types = spec.get("eval_types") or []
    return ("string_match" in types and "fuzzy_match" in refs[0]) or (
        "program_html" in types and any("fuzzy_match" in r for r in refs[1:]))


def split_of(config: dict, task_id: int) -> str:
    """The config's own ``split``, else the one its template hashes to (see the module docstring)."""
    split = config.get("split")
    if split is not None:
        if split not in SPLITS:
            raise ValueError(f"task {task_id}: split {split!r} is not one of {', '.join(SPLITS)}")
        return split
    template = config.get("intent_template_id", f"task-{task_id}")
    residue = derive_seed("webarena-split", template) % 4
    return "heldout" if residue == 0 else "validation" if residue == 1 else "train"
