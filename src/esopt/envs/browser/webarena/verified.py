"""WebArena-Verified, graded by its own CLI in its own environment (out of process).

``webarena-verified`` (812 tasks; grades offline from the agent's final
response and the episode's network trace, no LLM judge) pins ``pydantic==2.12.0``,
which esopt's environment cannot hold next to its own pydantic. So it lives in
a virtual environment of its own, and esopt only runs its command line:

- ``$ESOPT_WEBARENA_VERIFIED``: that environment's ``webarena-verified``
  executable (e.g. ``~/wav/bin/webarena-verified``).
- The task list comes from ``webarena-verified agent-input-get`` (task id,
  intent, start URLs, sites; never the expected answers), or from
  ``$ESOPT_WEBARENA_VERIFIED_DATA``, a dataset file in Verified's format, which
  is then also the dataset the CLI grades against.
- Grading one episode (:func:`grade`): a folder ``<task_id>/`` holding
  ``agent_response.json`` (the agent's last message, as sent) and
  ``network.zip`` (the Playwright trace of the episode's browser context), a
  config naming the site URLs (``__SHOPPING__`` -> ``$WA_SHOPPING``, ...), then
  ``webarena-verified eval-tasks --task-ids <id> --output-dir <folder>
  --config <config>``; the reward is ``score`` of ``<task_id>/eval_result.json``.
  A failed command or a result with status ``error`` raises (the episode is
  recorded as failed, never scored 0 silently).

Nothing here runs at import.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import sites

CLI_ENV = "ESOPT_WEBARENA_VERIFIED"
DATA_ENV = "ESOPT_WEBARENA_VERIFIED_DATA"
TRACE_NAME = "network.zip"
RESPONSE_NAME = "agent_response.json"
RESULT_NAME = "eval_result.json"
TIMEOUT_S = 300


def cli() -> str:
    """The webarena-verified executable named by $ESOPT_WEBARENA_VERIFIED; ValueError when it is not usable."""
    value = os.environ.get(CLI_ENV, "").strip()
    if not value:
        raise ValueError(f"webarena-verified.* tasks are graded by WebArena-Verified's own CLI: install it in a "
                         f"virtual environment of its own and set {CLI_ENV} to its webarena-verified executable "
                         "(docs/web.md)")
    path = shutil.which(value)
    if path is None:
        raise ValueError(f"{CLI_ENV}={value!r} is not an executable")
    return path


def _run(args: list[str], what: str) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run([cli(), *args], capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"webarena-verified {what} took over {TIMEOUT_S} s") from None
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).split())[-300:]
        raise RuntimeError(f"webarena-verified {what} failed (exit {done.returncode}): {tail}")
    return done


@functools.lru_cache(maxsize=None)
def _dataset(data_file: str | None, executable: str) -> dict[int, dict]:
    if data_file:
        raw = json.loads(Path(data_file).read_text(encoding="utf-8"))
    else:
        with tempfile.TemporaryDirectory(prefix="esopt-wav-") as tmp:
            out = Path(tmp) / "tasks.json"
            _run(["agent-input-get", "--output", str(out)], "agent-input-get")
            raw = json.loads(out.read_text(encoding="utf-8"))
    if not isinstance(raw, list) or not all(isinstance(t, dict) and isinstance(t.get("task_id"), int) for t in raw):
        raise ValueError(f"the WebArena-Verified task list ({data_file or 'agent-input-get'}) is not a list of tasks "
                         "with integer task_id")
    return {t["task_id"]: t for t in raw}


def tasks() -> dict[int, dict]:
    """The Verified tasks by id (see the module docstring)."""
    data = os.environ.get(DATA_ENV, "").strip() or None
    if data and not Path(data).is_file():
        raise ValueError(f"{DATA_ENV}={data!r} is not a file")
    return _dataset(data, cli())


def problems(task: dict) -> list[str]:
    """What keeps esopt from running a Verified task (its agent-facing fields; empty when it can)."""
    out = []
    if not isinstance(task.get("intent"), str) or not task["intent"].strip():
        out.append("intent must be a non-empty string")
    starts = task.get("start_urls")
    if not isinstance(starts, list) or not starts or not all(isinstance(u, str) and u for u in starts):
        out.append("start_urls must be a non-empty list of URLs")
    return out


def site_names(task: dict) -> list[str]:
    """Placeholder names of the task's sites and start URLs (``SHOPPING``, ``SHOPPING_ADMIN``, ...)."""
    return sorted({str(s).upper() for s in task.get("sites", [])} | set(sites.placeholders(task.get("start_urls"))))


def check_task(task: dict) -> list[str]:
    """Hosts the task's sites are on; ValueError (one line) when the CLI, a site or the task is not usable."""
    found = problems(task)
    if found:
        raise ValueError("; ".join(found))
    cli()
    return sites.hosts(sites.site_urls(site_names(task)))


def grade(task_id: int, answer: str, trace: Path, site_urls: dict[str, str], keep: Path | None = None) -> dict:
    """Grade one episode with the CLI; returns Verified's result (``score``, ``status``, ...).

    ``trace`` is the episode's Playwright trace (zip), ``site_urls`` maps
    placeholder names (``SHOPPING``) to base URLs. The folder is removed
    afterwards unless ``keep`` names one to write it to.
    """
    folder = Path(tempfile.mkdtemp(prefix="esopt-wav-")) if keep is None else Path(keep)
    try:
        task_dir = folder / str(task_id)
        task_dir.mkdir(parents=True, exist_ok=True)
        (task_dir / RESPONSE_NAME).write_text(answer, encoding="utf-8")
        shutil.copyfile(trace, task_dir / TRACE_NAME)
        config = {"environments": {f"__{name}__": {"urls": [url]} for name, url in site_urls.items()},
                  "trace_file_name": TRACE_NAME, "agent_response_file_name": RESPONSE_NAME,
                  "eval_result_file_name": RESULT_NAME}
        data = os.environ.get(DATA_ENV, "").strip()
        if data:
            config["test_data_file"] = str(Path(data).resolve())
        (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        _run(["eval-tasks", "--task-ids", str(task_id), "--output-dir", str(folder),
              "--config", str(folder / "config.json")], f"eval-tasks for task {task_id}")
        result_file = task_dir / RESULT_NAME
        if not result_file.is_file():
            raise RuntimeError(f"webarena-verified eval-tasks wrote no {result_file}")
        result = json.loads(result_file.read_text(encoding="utf-8"))
        if str(result.get("status", "")).lower() == "error":
            raise RuntimeError(f"webarena-verified could not grade task {task_id}: {result.get('error_msg')}")
        return result
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)
