"""Training runs driven by benchmarks: each in its own process (esopt.train.session.train), so
memory and wall time are its own, then read back from its run folder.

Beside each run folder NAME, `NAME.bench.json` records what only the parent sees:
the child's peak RSS (its own getrusage maximum, exact, read as it exits), its peak
CUDA memory where it used a GPU (torch.cuda.max_memory_allocated), and its wall
time including evaluations. A run read back later keeps these figures.

With a records folder (train_run's `records`), a finished run also leaves RECORDS/NAME.json:
what read_run returns plus the run's resolved config, a few KB. A study whose records folder
is committed can then be continued on another machine or in a later session, where the run
folders are gone: a run with a record is read back from it (the settings checked as for a
folder), not trained again.

A file named PAUSE in the runs folder holds the study at the next run boundary: runs under way
finish, no run starts while it exists (`touch RUNS/PAUSE` before running tests beside a study or
before a session ends; `rm RUNS/PAUSE` to go on). Waiting counts towards no run's budget.

Under stop_children_on_signals (every `esopt bench`), the first Ctrl-C or SIGTERM is passed on to the
training runs under way as SIGTERM: each stops at its safe point, its folder resumable, and no run starts
after it; the bench then ends with one line (exit 130). A second Ctrl-C is passed on as Ctrl-C (they stop at
once). With no run under way, the bench is interrupted at once.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from ..train.loop import seconds_by_update
from ..train.rundir import RunDir, holds_run
from ..train.stop import Interrupted, interrupt_on_signals, on_stop_signals, signal_name

# the child: `esopt train ...` in a process that writes its own peaks to a JSON file as it exits
_LAUNCHER = "import sys; from esopt.studies.runs import child_main; sys.exit(child_main())"  # 130: ends at once
_IGNORED_KEYS = {("run", "out_dir"), ("runtime", "threads")}  # settings that may differ on a read-back
PAUSE = "PAUSE"  # a file of this name in a bench's runs folder: no run starts while it exists
_children: set[subprocess.Popen] = set()  # training processes under way
_stopping: list[str] = []  # the signals received under stop_children_on_signals, first first
_lock = threading.Lock()


def child_main(argv: list[str] | None = None) -> int:
    """`python -c _LAUNCHER PEAKS.json (--resume RUN | CONFIG override...)`: train (a user error:
    one line, exit 2), then write {peak_rss_mb, peak_cuda_mb} of this process to PEAKS.json,
    whatever the exit."""
    argv = sys.argv[1:] if argv is None else argv
    peaks_path, args = argv[0], argv[1:]
    from ..errors import one_line
    from ..train.session import train
    from ..utils.memory import peak_rss_mb

    code = 1
    try:
        with interrupt_on_signals():  # a signal before training begins (the pre-run check): one line, exit 130
            if args[0] == "--resume":
                code = one_line(train, resume_dir=args[1])
            else:
                code = one_line(train, args[0], args[1:])
    finally:
        peaks = {"peak_rss_mb": peak_rss_mb(), "peak_cuda_mb": None}
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            peaks["peak_cuda_mb"] = torch.cuda.max_memory_allocated() / 2**20
        Path(peaks_path).write_text(json.dumps(peaks))
    if code == 130:  # stopped on request: all it keeps is written; no seconds of interpreter teardown (cli.entry)
        from ..errors import end_now

        end_now(code)
    import gc

    gc.freeze()  # as cli.entry: the exit's last collection would walk every object torch made (seconds)
    return code


def bench_meta_path(path: Path) -> Path:
    path = Path(path)
    return path.parent / f"{path.name}.bench.json"


_MISSING = object()


def _differences(a: dict, b: dict, prefix: tuple = (), defaults: dict | None = None) -> list[str]:
    """Settings of `a` (wanted now) that `b` (a run folder's or record's) does not share. A key `b`
    lacks (a setting added to esopt after that run) counts as its default there."""
    out = []
    for k in sorted(set(a) | set(b)):
        key = prefix + (k,)
        if key in _IGNORED_KEYS:
            continue
        default = defaults.get(k, _MISSING) if isinstance(defaults, dict) else _MISSING
        va, vb = a.get(k), b.get(k, default)
        if vb is _MISSING:
            vb = None
        if isinstance(va, dict) and isinstance(vb, dict):
            out += _differences(va, vb, key, default if isinstance(default, dict) else None)
        elif va != vb:
            out.append(f"{'.'.join(key)}: {vb!r} there, {va!r} now")
    return out


def _check_same_settings(config: str, overrides: list[str], path: Path, have: dict | None = None) -> None:
    """A run folder (or record: `have`, its config) reused by name must hold a run of the same
    settings (a sweep split over several invocations with another budget would otherwise mix runs
    silently)."""
    from ..config import ConfigError, load_config

    want = load_config(config, overrides).model_dump(mode="json")
    have = have if have is not None else RunDir(path).load_config().model_dump(mode="json")
    from ..config import Config

    diff = _differences(want, have, defaults=Config().model_dump(mode="json"))
    if diff:
        raise ConfigError(f"{path} holds a run with other settings ({'; '.join(diff[:4])}"
                          f"{'; ...' if len(diff) > 4 else ''}): use another --out, or move that folder away")


def record_path(records: str | Path, name: str) -> Path:
    return Path(records) / f"{name}.json"


def write_record(records: str | Path, name: str, run: dict) -> None:
    """RECORDS/NAME.json: read_run's figures of a finished run and its resolved config."""
    from ..es.history import atomic_write_bytes

    cfg = RunDir(run["run_dir"]).load_config().model_dump(mode="json")
    path = record_path(records, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, json.dumps({**run, "config": cfg}, indent=1).encode())


def read_record(records: str | Path, name: str) -> dict | None:
    """A run's record ({**read_run, "config"}), or None where there is none."""
    path = record_path(records, name)
    return json.loads(path.read_text()) if path.exists() else None


def train_run(config: str, overrides: list[str], out_dir: str, name: str, log=print,
              records: str | None = None) -> dict:
    """Run `esopt train CONFIG overrides` into out_dir/name and return its curve (read_run).

    A finished run of that name (summary.json) is read back instead of trained again; an
    interrupted one is resumed where it can be (ES history, GRPO checkpoint), else moved
    aside to NAME.incomplete-<time> and trained afresh. Either way the folder's settings
    must match these (a ConfigError names the differences). With `records`, a run found
    there is read from its record (settings checked alike) and a finished one is recorded.
    """
    path = Path(out_dir) / name
    full = list(overrides) + [f"run.out_dir={out_dir}", f"run.name={name}"]
    rec = read_record(records, name) if records else None
    if rec is not None and not (path / "summary.json").exists():
        _check_same_settings(config, full, record_path(records, name), rec.pop("config"))
        return rec
    resumable = holds_run(path)
    if (path / "summary.json").exists() or resumable:
        _check_same_settings(config, full, path)
    if not (path / "summary.json").exists():
        if resumable:
            args = ["--resume", str(path)]
            log(f"[bench] {name}: resuming an interrupted run")
        else:
            if path.exists():
                aside = path.with_name(f"{name}.incomplete-{time.strftime('%Y%m%d-%H%M%S')}")
                path.rename(aside)
                log(f"[bench] {name}: moved an unfinished, unresumable folder to {aside}")
            args = [config, *full]
        wait_while_paused(Path(out_dir) / PAUSE, name, log)
        fd, peaks_file = tempfile.mkstemp(prefix="esopt-peaks-", suffix=".json")
        os.close(fd)
        t0 = time.time()
        try:
            proc = _child([sys.executable, "-c", _LAUNCHER, peaks_file, *args])
            wall = time.time() - t0
            peaks = json.loads(Path(peaks_file).read_text() or "{}")
        finally:
            Path(peaks_file).unlink(missing_ok=True)
        if _stopping and proc.returncode != 0:  # stopped on request (one that finished first is kept below)
            err = Interrupted(_stopping[0])
            err.phase, err.kept = f"training run {name}", (
                f"the runs finished before it stay in {out_dir}, with {name} " +
                ("stopped (at its safe point, or at once on a second Ctrl-C): it resumes" if proc.returncode == 130 else
                 f"ended (exit {proc.returncode}): it starts again") + " when the same command runs again")
            raise err
        if proc.returncode != 0:
            raise RuntimeError(f"training run {name} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        _record_meta(path, peaks, wall)
        log(f"[bench] {name}: trained in {wall:.0f}s, peak RSS {peaks.get('peak_rss_mb') or 0:.0f} MB")
    run = read_run(path)
    if records:
        write_record(records, name, run)
    return run


def _child(argv: list[str]) -> subprocess.CompletedProcess:
    """argv run to its end, its output captured, as one of the training processes a stop is passed on to."""
    with _lock:
        if _stopping:  # no run starts after a stop
            raise Interrupted(_stopping[0])
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _children.add(proc)
    try:
        out, err = proc.communicate()
    finally:
        with _lock:
            _children.discard(proc)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


@contextmanager
def stop_children_on_signals(log=print):
    """Within the block (a bench), Ctrl-C and SIGTERM are passed on to the training runs under way (the
    module's docstring); with none under way they interrupt at once (train/stop.py's Interrupted)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum, frame):
        name = signal_name(signum)
        with _lock:
            live = [p for p in _children if p.poll() is None]
            first = not _stopping
            _stopping.append(name)
        if not live:
            raise Interrupted(name)
        passed = signal.SIGTERM if first else signal.SIGINT
        for proc in live:
            proc.send_signal(passed)
        log(f"[bench] {name}: {len(live)} training run(s) under way stop " +
            ("at their safe points (Ctrl-C again: at once)" if first else "at once"), flush=True)

    try:
        with on_stop_signals(handle):
            yield
    finally:
        with _lock:
            _stopping.clear()


def wait_while_paused(flag: Path, name: str, log=print, poll: float = 5.0) -> None:
    """Before a run starts: wait (one line said) while `flag` exists; a stop asked for meanwhile (Ctrl-C, SIGTERM)
    ends the wait with Interrupted, also in a worker thread of run_all, which the signal itself cannot reach."""
    if not flag.exists():
        return
    log(f"[bench] {name}: waiting to start while {flag} exists (remove it to go on)")
    t0 = time.time()
    while flag.exists():
        if _stopping:
            raise Interrupted(_stopping[0])
        time.sleep(poll)
    log(f"[bench] {name}: starting after {time.time() - t0:.0f}s paused")


def run_all(calls: list[Callable[[], dict]], jobs: int = 1) -> list[dict]:
    """Results of `calls` (each one train_run), in order, with up to `jobs` training processes
    side by side (threads that wait on their child process). Side-by-side runs share the
    machine: their wall and training seconds are not a quiet machine's (give each run its
    share of the cores with runtime.threads)."""
    if jobs <= 1 or len(calls) <= 1:
        return [c() for c in calls]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda c: c(), calls))


def _record_meta(path: Path, peaks: dict, wall: float) -> None:
    """Merge one training process's figures into NAME.bench.json (a resumed run: the max of
    the peaks, the sum of the wall times)."""
    meta_path = bench_meta_path(path)
    old = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    meta = {"processes": old.get("processes", 0) + 1, "wall_seconds": old.get("wall_seconds", 0.0) + wall}
    for k in ("peak_rss_mb", "peak_cuda_mb"):
        vals = [v for v in (old.get(k), peaks.get(k)) if v is not None]
        meta[k] = max(vals) if vals else None
    meta_path.write_text(json.dumps(meta, indent=1))


def read_run(path: Path) -> dict:
    """A finished run: run_dir, summary, curve (one point per evaluation), and from
    NAME.bench.json (None where the run was not trained by train_run) peak_rss_mb,
    peak_cuda_mb and wall_seconds."""
    path = Path(path)
    summary = json.loads((path / "summary.json").read_text())
    metrics = RunDir(path).metrics()
    per_gen = summary.get("episodes_per_generation")
    train_seconds = seconds_by_update(metrics)
    episodes: dict[int, int] = {}
    played = 0
    for m in metrics:
        if m.get("kind") == "train":
            played += int(m.get("episodes") or per_gen or 0)
            episodes[m["generation"] + 1] = played
    # reward/se: held-out (None at evaluations that played only the validation split);
    # validation/validation_se: the validation split's figures where the run has one
    curve = [{"generation": m["generation"], "episodes": episodes.get(m["generation"], 0),
              "train_seconds": train_seconds.get(m["generation"], 0.0),
              "reward": m.get("heldout_reward"), "se": m.get("heldout_reward_se"),
              "validation": m.get("validation_reward"), "validation_se": m.get("validation_reward_se")}
             for m in metrics if m.get("kind") == "eval"]
    meta_path = bench_meta_path(path)
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    # updates in which every member scored the same: an ES generation whose update is zero
    flat = sum(1 for m in metrics if m.get("kind") == "train" and "reward_std" in m and m["reward_std"] == 0)
    return {"run_dir": str(path), "summary": summary, "curve": curve, "flat_updates": flat,
            "heldout_by_task": {"base": _by_task(path, 0), "final": _by_task(path, summary.get("generations"))},
            **{k: meta.get(k) for k in ("peak_rss_mb", "peak_cuda_mb", "wall_seconds")}}


def _by_task(path: Path, generation) -> dict[str, float] | None:
    """{task id: mean reward} of the held-out evaluation after `generation` updates (None: not played),
    so two methods' runs on the same held-out tasks can be paired task by task."""
    from ..train.summary import TRAJECTORY_PREFIX

    if generation is None:
        return None
    episodes = RunDir(path).read_trajectories(f"{TRAJECTORY_PREFIX['heldout']}_gen{int(generation):04d}")
    if not episodes:
        return None
    by: dict[str, list[float]] = {}
    for k, ep in enumerate(episodes):
        by.setdefault(str(ep.get("task", k)), []).append(ep["reward"])
    return {task: sum(v) / len(v) for task, v in by.items()}
