"""esopt bench perturb: cost of perturb + restore of every parameter, against
two in-place axpy passes over the same tensors (the memory-bound floor), for
each noise source with the fused kernels and with eager torch ops, measured
side by side in one process; medians of repeats."""
from __future__ import annotations

import time
from statistics import median

import torch


def _axpy_twice(params, xs: list[torch.Tensor]) -> None:
    """The floor: w += a*x over every tensor, then w -= a*x over every tensor, each
    tensor with its own slice of x. Like perturb-all-then-restore-all, nothing is
    still in cache when the second pass comes, and x is read from memory as noise is."""
    for (_, p), v in zip(params, xs):
        p.data.add_(v, alpha=1e-3)
    for (_, p), v in zip(params, xs):
        p.data.sub_(v, alpha=1e-3)


def _axpy_twice_hot(params, x: torch.Tensor) -> None:
    """The earlier floor, kept for comparison: one shared x prefix and add/sub back to
    back per tensor, so small tensors stay in cache (a lower bound no noise reaches)."""
    for _, p in params:
        v = x[: p.numel()].view_as(p)
        p.data.add_(v, alpha=1e-3)
        p.data.sub_(v, alpha=1e-3)


def main(model_name: str, out: str, repeats: int = 5, sigma: float = 2e-3, table_size: int = 1 << 25,
         threads: int | None = None) -> dict:
    from ...es.noise import make_noise
    from ...es.perturb import Perturber
    from ...models import load_model
    from ...utils.memory import peak_rss_mb
    from ..common import rounds, write_results

    if threads:
        torch.set_num_threads(threads)
    model, _ = load_model(model_name)
    sources = {"gaussian": make_noise("gaussian"), "table": make_noise("table", table_size)}
    # each noise source with the one-pass kernels (the default) and with eager torch ops
    perturbers = {f"{k}{suffix}": Perturber(model, "full", src, fused=fused)
                  for k, src in sources.items() for suffix, fused in (("", True), ("_torch", False))}
    params = perturbers["gaussian"].params
    flat = torch.randn(sum(p.numel() for _, p in params))
    xs = [v.view_as(p) for (_, p), v in zip(params, flat.split([p.numel() for _, p in params]))]
    times: dict[str, list[float]] = {"axpy2": [], "axpy2_hot": [], **{k: [] for k in perturbers}}
    corr_mb: dict[str, float] = {}
    for r in rounds("bench perturb", repeats + 1):  # the first round warms up (page faults, buffers) and is dropped
        t0 = time.perf_counter()
        _axpy_twice(params, xs)
        t_axpy = time.perf_counter() - t0
        t0 = time.perf_counter()
        _axpy_twice_hot(params, flat)
        if r:
            times["axpy2_hot"].append(time.perf_counter() - t0)
        for k, pert in perturbers.items():
            t0 = time.perf_counter()
            corr = pert.perturb(seed=r, scale=sigma)
            pert.restore(seed=r, scale=sigma, corrections=corr)
            if r:
                times[k].append(time.perf_counter() - t0)
            corr_mb[k] = pert.last_correction_bytes / 2**20
        if r:
            times["axpy2"].append(t_axpy)
    med = {k: median(v) for k, v in times.items()}
    numel = sum(p.numel() for _, p in params)
    for k in perturbers:
        print(f"{k:14s}: perturb+restore {med[k]:.3f}s median ({numel / med[k] / 1e6:.0f} M params/s); "
              f"corrections {corr_mb[k]:.1f} MiB")
    print(f"axpy x2       : {med['axpy2']:.3f}s median over {numel / 1e6:.1f}M params (cache-hot variant "
          f"{med['axpy2_hot']:.3f}s); peak RSS {peak_rss_mb():.0f} MB (noise table {sources['table'].describe()['table_mib']:.0f} MiB)")
    results = {f"perturb_restore_over_axpy_{k}": med[k] / med["axpy2"] for k in perturbers if k != "table"}
    results["perturb_restore_over_axpy_hot"] = med["table"] / med["axpy2_hot"]
    results["perturb_restore_over_axpy"] = med["table"] / med["axpy2"]  # the goal: noise table, fused kernels
    write_results(out, "perturb", results, {"model": model_name, "params": numel, "sigma": sigma, "repeats": repeats,
                                            "median_seconds": med, "seconds": times, "correction_mib": corr_mb,
                                            "noise": {k: s.describe() for k, s in sources.items()}})
    return results
