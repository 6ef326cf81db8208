"""What `esopt train --resume RUN key=value ...` may change, checked before anything is written.

The history (ES) or checkpoint (GRPO) was made under the run's config: settings that change
what it means, or how it replays, cannot change on resume. Settings of the generations still
to come (more generations, sigma/alpha schedules, evaluation, batch sizes) can.
"""
from __future__ import annotations

from ..es.history import History, RunFolderError

# keys whose change would make the replayed weights, or the generations still to come, something
# other than a continuation of this run
FROZEN = {
    "es": ("model", "algo", "runtime.dtype", "run.seed", "env.id", "es.scope", "es.noise", "es.rank", "es.table_size",
           "es.lowrank_others", "es.update_rounding", "es.population", "es.antithetic", "es.shaping",
           # the context search (the library's content is checked by its hash on resume, so its file may move)
           "coevo.mode", "coevo.lr", "coevo.init_prob", "coevo.init_logits", "coevo.logit_clip"),
    "grpo": ("model", "algo", "runtime.dtype", "run.seed", "env.id"),
}


def _get(cfg, dotted: str):
    node = cfg
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def done_so_far(run, cfg) -> int:
    """Generations (ES, from history.json) or steps (GRPO, from the last complete checkpoint) done
    in `run`, whose own config is `cfg`."""
    if cfg.algo == "grpo":
        from ..rl import checkpoint

        state = checkpoint.read_state(run.path)
        return int(state["step"]) if state else 0
    path = run.path / "history.json"
    if path.exists():
        return len(History.load(path))
    trained = [m for m in run.metrics() if m.get("kind") == "train"]
    if trained:
        raise RunFolderError(f"{run.path} has metrics of {len(trained)} trained generation(s) but no history.json, the "
                             "record resume replays: restore history.json, or start a new run (resuming would "
                             "start over and overwrite these metrics)")
    return 0


def check_resume(run, new) -> None:
    """Refuse (one line) overrides that change the meaning of the run's history, and budgets
    below what is already done."""
    old = run.load_config()
    for key in FROZEN[old.algo]:
        if _get(old, key) != _get(new, key):
            raise RunFolderError(f"{key} cannot change on resume ({_get(old, key)!r} in {run.path}, {_get(new, key)!r} "
                                 f"given): the {'checkpoint' if old.algo == 'grpo' else 'history'} was made with it; "
                                 "start a new run for other settings")
    done = done_so_far(run, old)
    budget_key = "grpo.steps" if old.algo == "grpo" else "es.generations"
    if _get(new, budget_key) < done:
        raise RunFolderError(f"{budget_key}={_get(new, budget_key)} is fewer than the {done} already done in "
                             f"{run.path}; to evaluate earlier weights use `esopt eval --run` on a copy, or keep "
                             f"{budget_key} >= {done}")
