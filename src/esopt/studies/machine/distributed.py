"""esopt bench ray: one ES generation on Ray workers vs in one process, at equal total cores.

Three setups of the same config, one after another in this process, on a local Ray instance
with `cores` CPUs: local (the training process, `cores` threads), Ray with 1 worker x `cores`
threads, and Ray with `cores` workers x 1 thread. Each plays one warm-up generation (workers
start, kernels compile), then `repeats` timed generations; medians are compared.

ray_over_local_generation_time: Ray (cores x 1) / local (goal <= 1.10);
ray_member_overhead_s: (Ray 1 x cores - local) / population, the Ray path's cost per member;
worker_over_local_peak_rss: a worker's peak RSS / the local process's (goal: about 1).
"""
from __future__ import annotations

import tempfile
import time
from statistics import median

from ..common import write_results


def _timed(cfg, runner, repeats: int) -> dict:
    from ...train.rundir import RunDir
    from ...algos.es.trainer import Trainer

    tr = Trainer(cfg, RunDir.create(cfg), log=lambda *_: None, runner=runner)
    try:
        walls, stats = [], []
        for t in range(repeats + 1):
            t0 = time.time()
            stats.append(tr.generation(t))
            walls.append(time.time() - t0)
        out = {"warmup_s": walls[0], "generation_s": walls[1:], "median_s": median(walls[1:]),
               "stats": stats[1:], "weights_hash": tr.history.records[-1]["weights_hash"]}
        if runner is not None:
            out["workers"] = runner.worker_info()
        return out
    finally:
        (runner or tr.runner).close()
        tr.run.close()


def main(config: str, overrides: list[str], out: str, cores: int = 2, repeats: int = 2) -> dict:
    from ...config import ConfigError, load_config
    from ...train.ray.cluster import OBJECT_STORE_BYTES, import_ray, local_cores
    from ...train.ray.runner import RayRunner
    from ...utils.memory import peak_rss_mb

    if cores < 2:
        raise ConfigError("bench ray compares 1 worker x N threads with N workers x 1 thread: give --workers 2 or more")
    if cores > local_cores():
        raise ConfigError(f"bench ray with {cores} cores, but this process may run on {local_cores()}: "
                          f"give --workers {local_cores()} or fewer")
    ray = import_ray()
    work = tempfile.mkdtemp(prefix="esopt-bench-ray-")
    base = overrides + [f"run.out_dir={work}", f"es.generations={repeats + 1}", "eval.at_start=false",
                        "eval.every=0"]
    results, started = {}, False
    setups = [("local", cores, None), ("ray_1x", cores, 1), ("ray_nx1", 1, cores)]
    for name, threads, workers in setups:  # local first: this process's peak RSS is then the local run's
        cfg = load_config(config, base + [f"runtime.threads={threads}", f"run.name={name}"])
        if workers is not None and not ray.is_initialized():
            started = True
            ray.init(address="local", num_cpus=cores, include_dashboard=False, object_store_memory=OBJECT_STORE_BYTES,
                     logging_level="WARNING")
        runner = None if workers is None else RayRunner(workers=workers)
        results[name] = _timed(cfg, runner, repeats)
        if workers is None:
            results[name]["peak_rss_mb"] = peak_rss_mb()
        print(f"{name}: {workers or 'no'} worker(s) x {threads} thread(s): median generation "
              f"{results[name]['median_s']:.2f}s (warm-up {results[name]['warmup_s']:.1f}s)", flush=True)
    if started:
        ray.shutdown()
    local, one, many = results["local"], results["ray_1x"], results["ray_nx1"]
    if not (local["weights_hash"] == one["weights_hash"] == many["weights_hash"]):
        print("note: the setups' weights differ (threads change float sums, or low-rank units differ: set "
              "es.members_per_rollout); timings stand", flush=True)
    population = load_config(config, overrides).es.population
    worker_rss = max(w["peak_rss_mb"] for w in many["workers"])
    sent = median(s.get("ray_bytes_sent", 0) + s.get("ray_bytes_received", 0) for s in many["stats"])
    res = {
        "ray_over_local_generation_time": many["median_s"] / local["median_s"],
        "ray_member_overhead_s": (one["median_s"] - local["median_s"]) / population,
        "worker_over_local_peak_rss": worker_rss / local["peak_rss_mb"],
        "ray_payload_bytes_per_generation": int(sent),
    }
    write_results(out, "ray", res, {"config": config, "overrides": overrides, "cores": cores, "repeats": repeats,
                                    "worker_peak_rss_mb": worker_rss, "setups": results})
    return res
