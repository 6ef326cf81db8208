"""Sandbox overhead per evaluation (docs/sandbox.md): `python -m esopt.bench.sandbox [--repeats N] [--out PATH]`.

Times, alternating round by round so all see the same machine:
- bare: `python -I -S -B -c pass` (interpreter start and exit; the floor of any process-based sandbox);
- numpy: the same plus `import numpy` (what the child imports before locking down);
- sandbox: run_candidate() of a trivial heuristic on one tiny instance: start, imports, lockdown,
  namespaces, the run, result, reaping, session sweep and directory removal; wall time in the parent,
  and the child's CPU time (from wait4).
RESULT lines: sandbox_wall_s (median), sandbox_cpu_s (median), sandbox_over_numpy_s (median sandbox wall
minus median numpy wall: the cost of the lockdown and the parent's bookkeeping).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from statistics import median

from esopt.ahd.sandbox import Limits, protections, run_candidate
from esopt.ahd.toy import TOY

CODE = "def score_item(x):\n    return x + 1.0\n"


def _time_process(args: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(args, check=True, env={"PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    return time.perf_counter() - t


def main(out: str, repeats: int) -> dict:
    from esopt.ahd.sandbox import _import_roots

    prot = protections()
    if not prot.get("available"):
        raise SystemExit(f"esopt: error: {prot['refusal']}")
    roots = _import_roots()
    numpy_cmd = [sys.executable, "-I", "-S", "-B", "-c", f"import sys; sys.path[:0] = {list(roots)!r}; import numpy"]
    bare_cmd = [sys.executable, "-I", "-S", "-B", "-c", "pass"]
    limits = Limits()
    run_candidate(CODE, TOY.entry, TOY.driver, [{"items": [1.0]}], limits)  # warm the page cache
    bare, numpy_, wall, cpu = [], [], [], []
    for _ in range(repeats):
        bare.append(_time_process(bare_cmd))
        numpy_.append(_time_process(numpy_cmd))
        outcome = run_candidate(CODE, TOY.entry, TOY.driver, [{"items": [1.0]}], limits)
        if not outcome.ok:
            raise SystemExit(f"esopt: error: the trivial heuristic failed in the sandbox: {outcome.reason}")
        wall.append(outcome.wall_s)
        cpu.append(outcome.cpu_s)
    results = {"sandbox_wall_s": median(wall), "sandbox_cpu_s": median(cpu),
               "sandbox_over_numpy_s": median(wall) - median(numpy_),
               "bare_python_s": median(bare), "python_numpy_s": median(numpy_)}
    from esopt.bench.common import write_results

    write_results(out, "sandbox", results, {"repeats": repeats, "protections": prot,
                                            "samples": {"bare": bare, "numpy": numpy_, "wall": wall, "cpu": cpu}})
    return results


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--out", default="bench-results/sandbox.json")
    a = p.parse_args()
    main(a.out, max(a.repeats, 1))
