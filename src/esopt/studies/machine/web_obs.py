"""esopt bench web, section ``observation``: what the page text costs, esopt's style vs BrowserGym's.

Every MiniWoB++ task the scripted solver knows (studies/machine/web_solver.py), a
few seeds each, played twice, once per observation style (envs/browser/obs.py
STYLES; the two alternate episode by episode). Per style: success of the solver
reading that style's text, and the page text's length. At every observation of
the esopt episodes, on the same page, three costs are timed:
- reading the accessibility tree (BrowserGym's element marking and tree
  extraction, what every step pays);
- turning it into text, each style (the esopt style adds a pass over the tree);
- a DOM snapshot with element properties, BrowserGym's own way to show
  clickable elements (``with_clickable``), which esopt's observation leaves out.
RESULT lines: web_obs_solved_esopt / web_obs_solved_browsergym (fraction of
episodes), web_obs_chars_esopt_over_browsergym (median ratio on the same pages),
web_obs_axtree_ms, web_obs_text_ms_esopt, web_obs_text_ms_browsergym and
web_obs_dom_snapshot_ms (medians).
"""
from __future__ import annotations

import time
from statistics import median


def _timed(fn, *args, **kwargs):
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, (time.perf_counter() - t) * 1000


def _costs(env, obs: dict) -> dict:
    """The three costs of one observation on the page ``env`` shows now (see the module docstring)."""
    from browsergym.core.observation import (_post_extract, _pre_extract, extract_dom_extra_properties,
                                             extract_dom_snapshot, extract_merged_axtree)

    from ...envs.browser.obs import observation_text

    page = env.page
    t = time.perf_counter()
    _pre_extract(page, tags_to_mark=env.tags_to_mark)
    extract_merged_axtree(page)
    axtree_ms = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    extract_dom_extra_properties(extract_dom_snapshot(page), 1.0)
    dom_ms = (time.perf_counter() - t) * 1000
    _post_extract(page)
    esopt, esopt_ms = _timed(observation_text, obs, 100_000, style="esopt")
    plain, plain_ms = _timed(observation_text, obs, 100_000, style="browsergym")
    return {"axtree_ms": axtree_ms, "dom_snapshot_ms": dom_ms, "text_ms_esopt": esopt_ms,
            "text_ms_browsergym": plain_ms, "chars_esopt": len(esopt), "chars_browsergym": len(plain)}


def _episode(envs: dict, task: str, seed: int, style: str, max_turns: int, measure: bool) -> dict:
    """One episode of ``task`` played by the solver reading ``style``'s text; costs timed if ``measure``."""
    from ...envs.browser.obs import observation_text
    from .web_solver import Unsolvable, scripted_reply

    env = envs[task]
    raw, _ = env.reset(seed=seed)
    done, reward, costs, unsolvable = [], 0.0, [], None
    for _ in range(max_turns):
        if measure:
            costs.append(_costs(env, raw))
        try:
            action = scripted_reply(task, observation_text(raw, 100_000, style=style), done)
        except Unsolvable as err:
            unsolvable = str(err)
            break
        done.append(action)
        raw, reward, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    env.end_episode()
    return {"task": task, "seed": seed, "style": style, "reward": float(reward), "actions": done,
            "unsolvable": unsolvable, "costs": costs}


def observation_cost(chromium: str, seeds=(3000, 3001), max_turns: int = 10) -> tuple[dict, dict]:
    """RESULT figures and details (see the module docstring)."""
    from ...envs.browser.browser import ReusableBrowserEnv, close_shared_browsers
    from ...envs.browser.tasks import reuses_pages, task_entrypoint, task_settings
    from .web_solver import SOLVERS

    tasks = sorted(SOLVERS)
    envs = {}
    for task in tasks:
        kwargs, files = task_settings(task)
        envs[task] = ReusableBrowserEnv(task_entrypoint(task), kwargs, executable=chromium, timeout_ms=5000,
                                        allowed_files=files, reuse_pages=reuses_pages(task))
    rows = []
    try:
        k = 0
        for task in tasks:
            for seed in seeds:
                for style in (("esopt", "browsergym") if k % 2 == 0 else ("browsergym", "esopt")):
                    rows.append(_episode(envs, task, seed, style, max_turns, measure=style == "esopt"))
                k += 1
            mine = [r for r in rows if r["task"] == task]
            print(f"[bench] observation {task}: solved " + ", ".join(
                f"{s} {sum(r['reward'] > 0 for r in mine if r['style'] == s)}/{len(seeds)}"
                for s in ("esopt", "browsergym")), flush=True)
    finally:
        for env in envs.values():
            env.end_episode()
        close_shared_browsers()
    costs = [c for r in rows for c in r["costs"]]
    solved = {s: sum(r["reward"] > 0 for r in rows if r["style"] == s) / max(1, sum(r["style"] == s for r in rows))
              for s in ("esopt", "browsergym")}
    per_task = {t: {s: sum(r["reward"] > 0 for r in rows if r["task"] == t and r["style"] == s)
                    for s in ("esopt", "browsergym")} for t in tasks}
    results = {"web_obs_solved_esopt": solved["esopt"], "web_obs_solved_browsergym": solved["browsergym"],
               "web_obs_chars_esopt_over_browsergym": median(c["chars_esopt"] / c["chars_browsergym"] for c in costs),
               "web_obs_axtree_ms": median(c["axtree_ms"] for c in costs),
               "web_obs_text_ms_esopt": median(c["text_ms_esopt"] for c in costs),
               "web_obs_text_ms_browsergym": median(c["text_ms_browsergym"] for c in costs),
               "web_obs_dom_snapshot_ms": median(c["dom_snapshot_ms"] for c in costs)}
    details = {"tasks": tasks, "seeds": list(seeds), "per_task_solved": per_task,
               "chars_median": {s: median(c[f"chars_{s}"] for c in costs) for s in ("esopt", "browsergym")},
               "episodes": rows}
    return results, details
