"""Sandbox overhead per evaluation (docs/sandbox.md): `python -m esopt.studies.machine.sandbox [--repeats N] [--out PATH]`.

Times, alternating round by round so all see the same machine:
- bare: `python -I -S -B -c pass` (interpreter start and exit; the floor of any process-based sandbox);
- numpy: the same plus `import numpy` (what the child imports before locking down);
- sandbox: run_candidate() of a trivial heuristic on one tiny instance: start, imports, lockdown,
  namespaces, the run, result, reaping, session sweep and directory removal; wall time in the parent,
  and the child's CPU time (from wait4).
RESULT lines (medians): sandbox_wall_s, sandbox_cpu_s (the child), sandbox_over_numpy_s and
sandbox_cpu_over_numpy_s (sandbox minus python+numpy: what the lockdown and the parent's bookkeeping
add), bare_python_s, python_numpy_s, python_numpy_cpu_s. The JSON also holds the load average before
and after (timings on a shared machine are only as quiet as it was).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from statistics import median

from esopt.sandbox.parent import Limits, protections, run_candidate
from esopt.ahd.toy import TOY

CODE = "def score_item(x):\n    return x + 1.0\n"


def _time_process(args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process from wait4)."""
    t = time.perf_counter()
    proc = subprocess.Popen(args, env={"PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"esopt: error: {args[-1]!r} failed")
    return time.perf_counter() - t, usage.ru_utime + usage.ru_stime


def main(out: str, repeats: int) -> dict:
    from esopt.sandbox.parent import _import_roots
    from esopt.studies.common import rounds, write_results

    prot = protections()
    if not prot.get("available"):
        raise SystemExit(f"esopt: error: {prot['refusal']}")
    roots = _import_roots()
    numpy_cmd = [sys.executable, "-I", "-S", "-B", "-c", f"import sys; sys.path[:0] = {list(roots)!r}; import numpy"]
    bare_cmd = [sys.executable, "-I", "-S", "-B", "-c", "pass"]
    limits = Limits()
    load_before = os.getloadavg()
    run_candidate(CODE, TOY.entry, TOY.driver, [{"items": [1.0]}], limits)  # warm the page cache
    bare, numpy_, numpy_cpu, wall, cpu = [], [], [], [], []
    for _ in rounds("bench sandbox", repeats):
        bare.append(_time_process(bare_cmd)[0])
        w, c = _time_process(numpy_cmd)
        numpy_.append(w)
        numpy_cpu.append(c)
        outcome = run_candidate(CODE, TOY.entry, TOY.driver, [{"items": [1.0]}], limits)
        if not outcome.ok:
            raise SystemExit(f"esopt: error: the trivial heuristic failed in the sandbox: {outcome.reason}")
        wall.append(outcome.wall_s)
        cpu.append(outcome.cpu_s)
    results = {"sandbox_wall_s": median(wall), "sandbox_cpu_s": median(cpu),
               "sandbox_over_numpy_s": median(wall) - median(numpy_),
               "bare_python_s": median(bare), "python_numpy_s": median(numpy_),
               "python_numpy_cpu_s": median(numpy_cpu), "sandbox_cpu_over_numpy_s": median(cpu) - median(numpy_cpu)}

    write_results(out, "sandbox", results, {"repeats": repeats, "protections": prot, "loadavg_before": load_before,
                                            "loadavg_after": os.getloadavg(),
                                            "samples": {"bare": bare, "numpy": numpy_, "numpy_cpu": numpy_cpu, "wall": wall, "cpu": cpu}})
    return results


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--out", default="bench-results/sandbox.json")
    a = p.parse_args()
    main(a.out, max(a.repeats, 1))
