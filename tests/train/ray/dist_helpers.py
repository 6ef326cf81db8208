"""Rollouts for the scheduling tests: real episodes whose rewards also depend on each member's
weights (so every generation makes a real update), plus versions that fail, kill their process
or corrupt the replica's weights at a given call, counted across processes in a file."""
import os
import signal
from contextlib import nullcontext

import torch

from esopt.train.evaluate import run_episodes

PROBE = torch.arange(3, 13).view(1, -1)


def probe_rollout(policy, envs, ids, obs, cfg, seed, on_turn=None, rows=None):
    """The real rollout (tasks, decoding, envs); each episode's reward plus a forward pass of a fixed
    prompt under its row's weights (its member's side terms with low-rank noise)."""
    episodes = run_episodes(policy, envs, ids, obs, cfg, seed, on_turn=on_turn, rows=rows)
    for i, ep in enumerate(episodes):
        with torch.no_grad(), (rows.context([i]) if rows else nullcontext()):
            ep.reward += float(policy.model(PROBE).logits[0, -1, :16].sum())
    return episodes


def count_call(counter) -> int:
    """This call's number (1, 2, ...) among all calls, in every process, that counted in `counter`."""
    fd = os.open(counter, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"x")
        return os.lseek(fd, 0, os.SEEK_CUR)  # the end of this write: unique per call
    finally:
        os.close(fd)


def calls(counter) -> int:
    return os.path.getsize(counter) if os.path.exists(counter) else 0


def dying_rollout(*args, counter, die_at, **kw):
    """probe_rollout; the process making call number `die_at` is killed (SIGKILL) instead."""
    if count_call(counter) == die_at:
        os.kill(os.getpid(), signal.SIGKILL)
    return probe_rollout(*args, **kw)


def failing_rollout(policy, envs, ids, obs, cfg, seed, *, counter, fail_seeds, **kw):
    """probe_rollout, raising for the rollout seeds in `fail_seeds` (a member failing in its episodes)."""
    count_call(counter)
    if seed in fail_seeds:
        raise RuntimeError(f"episode exploded (rollout seed {seed})")
    return probe_rollout(policy, envs, ids, obs, cfg, seed, **kw)


def corrupting_rollout(policy, *args, counter, at, **kw):
    """probe_rollout; call number `at` also changes a weight in place (a replica gone wrong)."""
    if count_call(counter) == at:
        with torch.no_grad():
            next(policy.model.parameters()).view(-1)[0] += 1.0
    return probe_rollout(policy, *args, **kw)
