"""Summary statistics the evaluations, the benches and env record readers share."""
from __future__ import annotations

import math


def mean_se(values: list[float]) -> tuple[float, float]:
    """The mean and its standard error (sample standard deviation / sqrt(n); 0 for one value)."""
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / max(n - 1, 1)
    return mean, math.sqrt(var / n)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from n attempts of which c succeeded (Chen et al. 2021):
    1 - C(n-c, k) / C(n, k), the chance that k attempts drawn without replacement from the n
    include a success. Exact (integer binomials); k must be in 1..n and c in 0..n."""
    if not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n attempts, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n successes, got c={c} of n={n}")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_at_ks(figures: dict, prefix: str = "") -> list[int]:
    """The ks whose pass@k figures (<prefix>pass_at_<k>, e.g. heldout_pass_at_4) `figures` holds, in order."""
    head = f"{prefix}pass_at_"
    return sorted(int(key[len(head):]) for key in figures if key.startswith(head) and key[len(head):].isdigit())
