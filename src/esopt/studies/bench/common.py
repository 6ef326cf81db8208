"""Helpers shared by benchmarks."""
from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import torch


def machine() -> dict:
    import os

    return {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(),
            "torch": torch.__version__, "threads": torch.get_num_threads(), "date": time.strftime("%Y-%m-%d")}


def write_results(path: str | Path, name: str, results: dict, details: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"benchmark": name, "machine": machine(), "results": results, **details}, indent=1))
    for k, v in results.items():
        print(f"RESULT {k}={v:.4g}" if isinstance(v, float) else f"RESULT {k}={v}", flush=True)
