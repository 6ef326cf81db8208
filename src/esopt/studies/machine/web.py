"""esopt bench web: what a browser episode costs, esopt's env vs BrowserGym's default.

Both play the same MiniWoB++ episodes (task, seed) with the same scripted solver
(it reads only the observation text, as a model does), alternating episode by
episode so both see the same machine:
- esopt: env.id=browsergym (esopt.envs.browser.env): one browser per process, a fresh
  context per episode, no chat window, no pre-observation delay, slow_mo 0;
- default: ``gym.make("browsergym/<task>")`` as BrowserGym ships it: a page
  browser and a chat browser launched at every reset, a 0.5 s pre-observation
  delay, the task's slow_mo; only the executable is set (the system chromium,
  for both of its browsers), since no other is installed here.

Reported per env: median seconds per reset and per step, episodes per second
(reset plus all steps, the env's own time; no model), success. RESULT lines:
web_reset_sequential_s and web_step_s (esopt's medians, one episode at a time),
web_default_reset_s, and web_pool_over_default_episodes_per_s.

Then episodes side by side, as a rollout plays them: ``parallel`` episodes at
once (all reset together, then every live episode stepped each turn, through
agent.rollout's ``call_envs``), in this process (workers 1) and in 2 and 4
worker processes (env.options.web.workers, envs/browser/workers.py); ``rounds`` rounds per
setting, settings alternating round by round, after one untimed warm-up round
that starts the workers and their browsers. Per setting: the amortised reset
(wall time of the reset phase / episodes; median over rounds) and episodes per
second. RESULT web_reset_s: the amortised reset of the fastest setting;
web_workers_over_inprocess_episodes_per_s: 2 workers vs in-process.

Section ``observation`` (studies/machine/web_obs.py): what the page text costs and
shows, esopt's observation style against BrowserGym's, over every task the
scripted solver (studies/machine/web_solver.py) knows. ``sections`` runs a part;
the other's figures are kept from an earlier OUT.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from statistics import median

from .web_solver import scripted_reply

TASKS = ("miniwob.click-button", "miniwob.enter-text", "miniwob.login-user")
class _DefaultEnv:
    """BrowserGym's env as shipped, behind the same reset/step text interface as esopt's."""

    def __init__(self, task: str, chromium: str, max_turns: int):
        import gymnasium as gym

        from ...envs.browser.tasks import load_namespace, namespace_of, task_settings
        from ...envs.browser.webshop.launch import use_chromium

        load_namespace(namespace_of(task))
        use_chromium(chromium)  # its chat browser launches with playwright's default executable otherwise
        kwargs, _ = task_settings(task)
        self.env = gym.make("browsergym/" + task, task_kwargs=kwargs)
        self.max_turns, self.turns = max_turns, 0

    def reset(self, seed: int):
        from ...envs.browser.obs import observation_text

        self.turns = 0
        obs, _ = self.env.reset(seed=seed)
        return observation_text(obs), {}

    def step(self, action: str):
        from ...envs.browser.obs import observation_text

        self.turns += 1
        obs, reward, terminated, truncated, _ = self.env.step(action)
        return observation_text(obs), float(reward), bool(terminated), truncated or self.turns >= self.max_turns, {}

    def close(self):
        self.env.close()


def task_from_goal(obs: str) -> str:
    """Which of TASKS an observation's goal (its first line) is from."""
    goal = obs.split("\n", 1)[0].lower()
    if "username" in goal:
        return "miniwob.login-user"
    return "miniwob.enter-text" if goal.startswith("goal: enter") else "miniwob.click-button"


def _side_by_side(workers: int, plan: list[tuple[str, int]], chromium: str, max_turns: int) -> dict:
    """Play ``plan``'s episodes at once with ``workers`` (1: in this process); wall times."""
    from ...agent.rollout import call_envs
    from ...envs import make
    from ...envs.browser.workers import RemoteEnv, worker_pool

    kwargs = [{"task": t, "seed": s, "max_turns": max_turns, "chromium": chromium} for t, s in plan]
    envs = [RemoteEnv(worker_pool(workers), **kw) if workers > 1 else make("browsergym", **kw) for kw in kwargs]
    idx = list(range(len(envs)))
    t0 = time.perf_counter()
    got = call_envs(envs, idx, "reset", [()] * len(envs))
    reset_wall = time.perf_counter() - t0
    obs = {i: r[0] for i, r in got.items() if isinstance(r, tuple)}
    failed = len(envs) - len(obs)
    rewards = {i: 0.0 for i in idx}
    while obs:
        live = sorted(obs)
        got = call_envs(envs, live, "step", [(scripted_reply(task_from_goal(obs[i]), obs[i]),) for i in live])
        for i in live:
            result = got[i]
            if not isinstance(result, tuple) or result[2] or result[3]:
                obs.pop(i)
                rewards[i] = result[1] if isinstance(result, tuple) else 0.0
            else:
                obs[i] = result[0]
    wall = time.perf_counter() - t0
    for env in envs:
        env.close()
    return {"workers": workers, "reset_amortised_s": reset_wall / len(envs), "episodes_per_s": len(envs) / wall,
            "success": sum(r > 0 for r in rewards.values()) / len(envs), "failed_resets": failed}


def parallel(chromium: str, max_turns: int, episodes: int = 12, rounds: int = 3, settings=(1, 2, 4)) -> dict:
    """Episodes side by side per setting of env.options.web.workers (see the module docstring)."""
    plan = [(TASKS[k % len(TASKS)], 2000 + k) for k in range(episodes)]
    for w in settings:  # warm-up: workers spawned, browsers launched
        _side_by_side(w, plan, chromium, max_turns)
    rows: dict[int, list[dict]] = {w: [] for w in settings}
    for r in range(rounds):
        for w in (settings if r % 2 == 0 else settings[::-1]):
            row = _side_by_side(w, [(t, s + 100 * (r + 1)) for t, s in plan], chromium, max_turns)
            rows[w].append(row)
            print(f"[bench] {episodes} episodes at once, workers {w}: reset {row['reset_amortised_s']:.3f}s "
                  f"amortised, {row['episodes_per_s']:.2f} episodes/s, success {row['success']:.2f}", flush=True)
    return {w: {"reset_amortised_s": median(x["reset_amortised_s"] for x in rs),
                "episodes_per_s": median(x["episodes_per_s"] for x in rs),
                "success": sum(x["success"] for x in rs) / len(rs), "rounds": rs} for w, rs in rows.items()}


def _episode(env, task: str, seed: int) -> dict:
    t0 = time.perf_counter()
    obs, _ = env.reset(seed=seed)
    reset_s = time.perf_counter() - t0
    steps, reward, done = [], 0.0, False
    while not done:
        t = time.perf_counter()
        obs, reward, terminated, truncated, _ = env.step(scripted_reply(task, obs))
        steps.append(time.perf_counter() - t)
        done = terminated or truncated
    return {"task": task, "seed": seed, "reset_s": reset_s, "step_s": steps, "episode_s": time.perf_counter() - t0,
            "reward": reward}


SECTIONS = ("episodes", "observation")


def main(out: str, episodes: int = 12, chromium: str | None = None, max_turns: int = 6,
         workers=(1, 2, 4), sections=None) -> dict:
    from ...envs.browser.browser import find_chromium
    from ..common import write_results

    sections = list(sections or SECTIONS)
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        raise ValueError(f"bench web: unknown section {', '.join(unknown)}; it has {', '.join(SECTIONS)}")
    exe = find_chromium(chromium)
    results, details = _earlier(out, [s for s in SECTIONS if s not in sections])
    if "episodes" in sections:
        got, more = _episodes(exe, episodes, max_turns, workers)
        results.update(got)
        details["episodes_section"] = more
    if "observation" in sections:
        from .web_obs import observation_cost

        got, more = observation_cost(exe)
        results.update(got)
        details["observation_section"] = more
    write_results(out, "web", results, details)
    return results


def _earlier(out: str, keep: list[str]) -> tuple[dict, dict]:
    """The figures and details of the sections in ``keep`` from an earlier OUT, if there is one."""
    if not keep:
        return {}, {}
    try:
        earlier = json.loads(Path(out).read_text())
    except (OSError, ValueError):
        return {}, {}
    prefix = {"episodes": lambda k: not k.startswith("web_obs_"), "observation": lambda k: k.startswith("web_obs_")}
    results = {k: v for k, v in earlier.get("results", {}).items() if any(prefix[s](k) for s in keep)}
    details = {f"{s}_section": earlier[f"{s}_section"] for s in keep if f"{s}_section" in earlier}
    if results:
        print(f"[bench] keeping {', '.join(keep)} from {out}", flush=True)
    return results, details


def _episodes(exe: str, episodes: int, max_turns: int, workers) -> tuple[dict, dict]:
    from ...envs import make
    from ...envs.browser.browser import close_shared_browsers
    from ...envs.browser.workers import close_worker_pools

    plan = [(TASKS[k % len(TASKS)], 1000 + k) for k in range(episodes)]
    envs = {"esopt": {t: make("browsergym", task=t, max_turns=max_turns, chromium=exe) for t in TASKS},
            "default": {t: _DefaultEnv(t, exe, max_turns) for t in TASKS}}
    rows: dict[str, list[dict]] = {"esopt": [], "default": []}
    try:
        for k, (task, seed) in enumerate(plan):
            order = ("esopt", "default") if k % 2 == 0 else ("default", "esopt")
            for name in order:
                rows[name].append(_episode(envs[name][task], task, seed))
                print(f"[bench] {name:7s} {task} seed {seed}: reset {rows[name][-1]['reset_s']:.2f}s, "
                      f"{len(rows[name][-1]['step_s'])} steps, reward {rows[name][-1]['reward']:.0f}", flush=True)
    finally:
        for group in envs.values():
            for env in group.values():
                env.close()
        close_shared_browsers()
    summary = {}
    for name, eps in rows.items():
        total = sum(e["episode_s"] for e in eps)
        summary[name] = {"reset_s_median": median(e["reset_s"] for e in eps),
                         "step_s_median": median(s for e in eps for s in e["step_s"]),
                         "episodes_per_s": len(eps) / total, "success": sum(e["reward"] > 0 for e in eps) / len(eps)}
        print(f"{name:7s}: reset {summary[name]['reset_s_median']:.3f}s, step {summary[name]['step_s_median']:.3f}s "
              f"(medians), {summary[name]['episodes_per_s']:.3f} episodes/s, success {summary[name]['success']:.2f}")
    try:
        side = parallel(exe, max_turns, episodes, settings=tuple(workers))
    finally:
        close_worker_pools()
        close_shared_browsers()
    for w, row in side.items():
        print(f"workers {w}: reset {row['reset_amortised_s']:.3f}s amortised, {row['episodes_per_s']:.3f} "
              f"episodes/s (medians), success {row['success']:.2f}")
    best = min(side.values(), key=lambda row: row["reset_amortised_s"])
    results = {"web_reset_s": best["reset_amortised_s"],
               "web_reset_sequential_s": summary["esopt"]["reset_s_median"],
               "web_step_s": summary["esopt"]["step_s_median"],
               "web_default_reset_s": summary["default"]["reset_s_median"],
               "web_pool_over_default_episodes_per_s": summary["esopt"]["episodes_per_s"]
               / summary["default"]["episodes_per_s"]}
    if 1 in side and 2 in side:
        results["web_workers_over_inprocess_episodes_per_s"] = side[2]["episodes_per_s"] / side[1]["episodes_per_s"]
    return results, {"tasks": list(TASKS), "episodes": episodes, "max_turns": max_turns, "chromium": exe,
                     "summary": summary, "episodes_detail": rows,
                     "side_by_side": {str(w): row for w, row in side.items()}}
