"""Task sources: deterministic training batches, and fixed validation and held-out sets, from the env's spec."""
from __future__ import annotations

from ..envs.spec import resolve


def TaskSource(env_cfg, tasks_cfg, run_seed: int):
    """The task source of ``env_cfg.id`` (its spec's, esopt.envs.spec): ``train(n, generation, repeat)``,
    ``validation()``, ``heldout()``, each returning (envs, task ids, first observations); an observation
    of None means the env is reset when its episode starts (rollout's ``max_live``)."""
    return resolve(env_cfg.id).task_source(env_cfg, tasks_cfg, run_seed)
