"""Connecting to Ray, and sizing the workers to the cores and GPUs there are.

Two processes of 2 torch threads each on 2 cores made perturbation 19-50x slower (OpenMP
threads spinning on each other's cores), so a plan never gives the workers more threads than
Ray has cores: runtime.threads is lowered (with a log line) to each worker's share, and more
workers than cores is refused. Ray places each worker where its threads (num_cpus) and GPU
are free, so workers sharing a node never share a core.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from ...config import ConfigError

OBJECT_STORE_BYTES = 256 << 20  # a local instance's object store: a generation moves kilobytes to megabytes


def import_ray():
    try:
        import ray
    except ImportError:
        raise ConfigError("--workers / --ray-address run members on Ray, which is not installed here: "
                          "pip install 'esopt[ray]' (make install does)") from None
    return ray


def local_cores() -> int:
    """Cores this process may run on (its CPU affinity, which containers and taskset narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def connect(address: str | None, cores: int, log=print) -> bool:
    """Connect this process to Ray: a new local instance with `cores` CPUs (address None), or the
    cluster at `address` ("auto": the one `ray start` made on this machine). An instance this
    process already has is used as it is. Returns whether this call started Ray (and so must
    shut it down)."""
    ray = import_ray()
    if ray.is_initialized():
        log("[esopt] Ray: using the Ray instance this process already has")
        return False
    if address is None:
        ray.init(address="local", num_cpus=cores, include_dashboard=False, logging_level=logging.WARNING,
                 object_store_memory=OBJECT_STORE_BYTES)
        log(f"[esopt] Ray: started a local instance with {cores} CPU cores")
        return True
    try:
        ray.init(address=address, logging_level=logging.WARNING)
    except (ConnectionError, ValueError, RuntimeError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ConfigError(f"--ray-address {address}: no Ray cluster there ({first}); start one with "
                          "`ray start --head` (docs/ray.md), or use --workers N for a local instance") from None
    log(f"[esopt] Ray: connected to the cluster at {address}")
    return True


@dataclass(frozen=True)
class Plan:
    workers: int
    threads: int  # torch (and numba) threads per worker, also its Ray num_cpus
    gpus: int  # GPUs per worker: 1 with runtime.device=cuda, else 0


def plan_workers(workers: int | None, threads: int | None, cpus: float, gpus: float, use_gpu: bool,
                 log=print) -> Plan:
    """How many workers, with how many threads each, on a cluster of `cpus` cores and `gpus` GPUs.

    workers None: one per GPU (use_gpu), else as many as fit with `threads` (default 1) each.
    threads None: each worker's share of the cores. workers x threads above the cores: threads
    lowered to the share, with a log line. More workers than cores (or GPUs): refused.
    """
    cpus, gpus = int(cpus), int(gpus)
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}")
    if cpus < 1:
        raise ConfigError("the Ray cluster has no CPU cores to run workers on")
    if use_gpu:
        if gpus < 1:
            raise ConfigError("runtime.device=cuda, but the Ray cluster has no GPU: use runtime.device=cpu, "
                              "or start Ray on machines with GPUs")
        workers = workers or gpus
        if workers > gpus:
            raise ConfigError(f"--workers {workers} with runtime.device=cuda needs one GPU per worker; the Ray "
                              f"cluster has {gpus}: give --workers {gpus} or fewer")
    elif workers is None:
        workers = max(1, cpus // (threads or 1))
    if workers > cpus:
        raise ConfigError(f"--workers {workers} is more than the {cpus} CPU cores Ray has; each worker needs a "
                          f"core of its own: give --workers {cpus} or fewer")
    share = max(1, cpus // workers)
    if threads is None:
        threads = share
    elif workers * threads > cpus:
        log(f"[esopt] runtime.threads={threads} x {workers} workers is more than the {cpus} CPU cores Ray has: "
            f"each worker runs {share} thread(s) (more threads than cores slow perturbation many-fold)")
        threads = share
    return Plan(workers, threads, 1 if use_gpu else 0)
