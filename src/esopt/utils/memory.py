"""Process memory readings."""
from __future__ import annotations

import resource


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB


def rss_mb(pid: int | str = "self") -> float:
    """A process's resident memory now (VmRSS, Linux), in MB: this one's by default."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
