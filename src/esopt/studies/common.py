"""Helpers shared by the benchmarks of studies/machine and studies/method: where a bench writes its
JSON, the machine it ran on, progress lines, RESULT lines, parts kept from an earlier run."""
from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path


def out_path(a, name: str) -> str:
    """`esopt bench NAME`'s JSON: --out, else bench-results/NAME.json."""
    return a.out or f"bench-results/{name}.json"


def machine() -> dict:
    import os

    import torch  # here, not at the top: the bench tables import this module when the command line is built

    return {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(),
            "torch": torch.__version__, "threads": torch.get_num_threads(), "date": time.strftime("%Y-%m-%d")}


def rounds(label: str, n: int, start: int = 0):
    """range(start, n), with a line per round on stderr (its number, time so far, time left): a
    bench's repeats show progress (the RESULT lines on stdout stay clean)."""
    total, t0 = n - start, time.perf_counter()
    for k, r in enumerate(range(start, n)):
        spent = time.perf_counter() - t0
        left = f", about {spent / k * (total - k):.0f}s left" if k else ""
        print(f"[{label}] round {k + 1}/{total} ({spent:.0f}s so far{left})", file=sys.stderr, flush=True)
        yield r
    print(f"[{label}] {total} rounds in {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)


def write_results(path: str | Path, name: str, results: dict, details: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"benchmark": name, "machine": machine(), "results": results, **details}, indent=1))
    for k, v in results.items():
        print(f"RESULT {k}={v:.4g}" if isinstance(v, float) else f"RESULT {k}={v}", flush=True)


def kept_from_earlier(out: str, settings: dict, key: str, known, measured: list[str], label: str) -> dict:
    """The entries under `key` of an earlier OUT written with the same settings whose names are
    `known` and not `measured` now (so a long bench can be run a part at a time into one file)."""
    try:
        earlier = json.loads(Path(out).read_text())
    except (OSError, ValueError):
        return {}
    if any(earlier.get(k) != v for k, v in settings.items()):
        return {}
    kept = {name: v for name, v in earlier.get(key, {}).items() if name in known and name not in measured}
    if kept:
        print(f"[{label}] keeping {', '.join(kept)} from {out} (same settings)", flush=True)
    return kept
