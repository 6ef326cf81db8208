"""Held-out evaluation with the current (unperturbed) weights."""
from __future__ import annotations

import time

from tqdm import tqdm

from ..agent.rollout import AgentContext, RolloutSettings, rollout, turn_limit
from ..agent.tools import ToolSettings
from ..envs.spec import resolve
from ..models.decode import DecodeOptions, Sampling
from ..utils.stats import mean_se, pass_at_k, pass_at_ks

format_interval = tqdm.format_interval  # seconds as tqdm writes them: mm:ss, or h:mm:ss


def max_live_of(cfg) -> int | None:
    """Episodes under way at once, as the env's spec says (browser episodes: env.options.web.max_live;
    None: all of them)."""
    return resolve(cfg.env.id).live_limit(cfg.env)


def turn_limit_of(cfg) -> tuple[int | None, int]:
    """(env.max_turns, the spec's default): the rollout truncates an episode at env.max_turns, else at
    the env's own max_turns, else at the spec's default."""
    return cfg.env.max_turns, resolve(cfg.env.id).default_max_turns


def rollout_settings(cfg, sampling: Sampling | None = None, record_ids: bool = False) -> RolloutSettings:
    """How the config's episodes are played (agent/rollout.py RolloutSettings): the agent's decoding (with
    `sampling` instead of agent.sampling, if given), the run's failure reward, the env's turn limit and
    live episodes, agent.kv_reuse, agent.tools, run.call_timeout_s."""
    t = cfg.agent.tools
    return RolloutSettings(DecodeOptions.of_agent(cfg.agent, sampling), failure_reward=cfg.run.failure_reward,
                           max_live=max_live_of(cfg), kv_reuse=cfg.agent.kv_reuse, max_turns=turn_limit_of(cfg),
                           record_ids=record_ids,
                           tools=ToolSettings(t.format, t.call_timeout, t.max_result_chars, t.max_calls),
                           call_timeout=cfg.run.call_timeout_s, max_observation_chars=cfg.agent.max_observation_chars)


def run_episodes(policy, envs, ids, obs, cfg, seed: int, on_turn=None, rows=None, context=None, abort=None):
    """The config's episodes played with rollout (the default ``rollout_fn`` of a replica): rows (RowWeights):
    rows under their members' weights; context: None (the agent's configured one), an AgentContext, or one per
    episode (coevo); abort: rollout's."""
    context = AgentContext.from_config(cfg.agent) if context is None else context
    return rollout(policy, envs, ids, obs, context, rollout_settings(cfg).seeded(seed), rows=rows, on_turn=on_turn,
                   abort=abort)


def summarize(episodes: list[dict]) -> dict:
    """Evaluation figures from episode records (Episode.to_json() dicts).

    Episodes of the same task (tasks.heldout_repeats > 1) are averaged first:
    `per_task` holds one mean per task, in order of first appearance, and the
    standard error is over those task means (repeats of one puzzle are not
    independent samples of the task distribution). Episodes that called tools add
    `tool_use` (the share of episodes with at least one call that ran without an
    error) and `tool_calls` (calls per episode); other runs' figures are unchanged.
    """
    by_task: dict[str, list[float]] = {}
    for k, ep in enumerate(episodes):
        by_task.setdefault(str(ep.get("task", k)), []).append(ep["reward"])
    per_task = [sum(v) / len(v) for v in by_task.values()]
    mean, se = mean_se(per_task)
    return tool_figures(episodes) | {
        "reward": sum(ep["reward"] for ep in episodes) / len(episodes),
        "reward_se": se,
        "solved": sum(ep["solved"] for ep in episodes) / len(episodes),
        "errors": sum(ep["error"] is not None for ep in episodes),
        "n": len(episodes),
        "tasks": len(per_task),
        "per_task": per_task,
    }


def tool_figures(episodes: list[dict]) -> dict:
    """tool_use and tool_calls (summarize's docstring) when any episode called a tool, else {}."""
    calls = [[c for t in ep.get("turns") or [] if isinstance(t, dict) for c in t.get("tool_calls") or []]
             for ep in episodes]
    if not any(calls):
        return {}
    return {"tool_use": sum(any("result" in c for c in cs) for cs in calls) / len(episodes),
            "tool_calls": sum(map(len, calls)) / len(episodes)}


# episodes done / total, the time so far and, after it, eval_progress's postfix (the turn and the ETA); tqdm's own
# rate and ETA are left out: they count episodes, which may all end in the last turn
EVAL_BAR = "{desc}: {n_fmt}/{total_fmt} episodes |{bar}| {elapsed}{postfix}"


def eval_progress(bar, episodes: int, limit: int):
    """A rollout's on_turn for an evaluation's bar: the bar counts episodes done of `episodes`; its postfix
    gives the turn and an ETA from the turns played so far. A turn's cost is its rows (the episodes under
    way), so the time left is the time so far x the turns still possible (episodes under way x turns left
    before `limit`, the turn limit) / the turns played: it is there after the first turn, whenever the first
    episodes end, and it shrinks as early endings remove the turns they would have played."""
    start, played_total = time.monotonic(), 0

    def progress(turn, done, played):
        nonlocal played_total
        played_total += played
        left = (episodes - done) * max(limit - turn, 0)
        eta = (time.monotonic() - start) * left / played_total if played_total else 0.0
        bar.set_postfix_str(f"turn {turn}/{limit}, ETA {format_interval(eta)}", refresh=False)
        bar.update(done - bar.n)  # drawn at most once per tqdm's mininterval...
        if turn == 1:
            bar.refresh()  # ...but the first ETA at once

    return progress


def evaluate(policy, tasks, cfg, seed: int = 0, split: str = "heldout", context=None,
             abort=None) -> tuple[dict, list]:
    """Play the split's tasks with the current weights (and `context`, default the agent's own);
    (figures, episode records). abort() true ends it at once with DecodeAborted (a stop asked for)."""
    if split not in ("heldout", "validation"):
        raise ValueError(f"unknown task split {split!r}; allowed: heldout, validation")
    envs, ids, obs = getattr(tasks, split)()
    t0 = time.time()
    limit = max((turn_limit(env, turn_limit_of(cfg)) or 1) for env in envs) if envs else 1
    bar = tqdm(total=len(envs), desc=f"{'held-out' if split == 'heldout' else split} evaluation", unit="episode",
               dynamic_ncols=True, mininterval=1.0, leave=False, bar_format=EVAL_BAR,
               postfix=f"turn 1/{limit} under way, ETA after it")
    progress = eval_progress(bar, len(envs), limit)

    try:
        episodes = [ep.to_json() for ep in run_episodes(policy, envs, ids, obs, cfg, seed, on_turn=progress,
                                                        context=context, abort=abort)]
    finally:
        bar.close()
    stats = summarize(episodes)
    stats["seconds"] = time.time() - t0
    return stats, episodes


def attempt_sampling(cfg) -> Sampling:
    """The decoding of pass@k's attempts: eval.pass_at_temperature (none: agent.sampling.temperature) with the
    agent's top_p and top_k."""
    s = cfg.agent.sampling
    return Sampling(cfg.eval.pass_at_temperature or s.temperature, s.top_p, s.top_k)


def evaluate_attempts(policy, tasks, cfg, seed: int, split: str = "heldout", context=None,
                      abort=None) -> tuple[dict, list]:
    """pass@k (eval.pass_at) of the current weights: the split's episodes played n = eval.attempts() more
    times with sampling (attempt_sampling), besides and apart from the greedy evaluate(): attempt a
    (0..n-1) is one rollout of every episode, its decoding seeded derive_seed("attempt", seed, a), so the
    attempts are reproducible and differ from each other. (figures, episode records, each with its
    "attempt"): pass_at_figures', pass_at_n and pass_at_seconds. Costs n x the split's episodes."""
    from ..utils.seeding import derive_seed

    n, t0 = cfg.eval.attempts(), time.time()
    settings = rollout_settings(cfg, attempt_sampling(cfg))
    context = AgentContext.from_config(cfg.agent) if context is None else context
    name = "held-out" if split == "heldout" else split
    episodes: list[dict] = []
    for a in range(n):
        envs, ids, obs = getattr(tasks, split)()
        limit = max((turn_limit(env, turn_limit_of(cfg)) or 1) for env in envs) if envs else 1
        bar = tqdm(total=len(envs), desc=f"{name} pass@k attempt {a + 1}/{n}", unit="episode", dynamic_ncols=True,
                   mininterval=1.0, leave=False, bar_format=EVAL_BAR, postfix=f"turn 1/{limit} under way, ETA after it")
        try:
            played = rollout(policy, envs, ids, obs, context, settings.seeded(derive_seed("attempt", seed, a)),
                             on_turn=eval_progress(bar, len(envs), limit), abort=abort)
        finally:
            bar.close()
        episodes += [{"attempt": a, **ep.to_json()} for ep in played]
    figures = pass_at_figures(episodes, cfg.eval.pass_at)
    figures.update(pass_at_n=n, pass_at_seconds=time.time() - t0)
    return figures, episodes


def pass_at_figures(episodes: list[dict], ks: list[int]) -> dict:
    """pass_at_<k> and pass_at_<k>_se for each k from sampled episode records: per task (its id; the episodes of
    one task are its attempts, and its repeats with tasks.heldout_repeats > 1), c solved of n episodes
    (ep["solved"], the env's success flag, as summarize's "solved"; a failed episode is unsolved) gives
    pass_at_k(n, c, k); the figure is the mean over tasks and its standard error over tasks."""
    by_task: dict[str, list[bool]] = {}
    for i, ep in enumerate(episodes):
        by_task.setdefault(str(ep.get("task", i)), []).append(bool(ep["solved"]))
    out: dict = {}
    for k in ks:
        mean, se = mean_se([pass_at_k(len(v), sum(v), k) for v in by_task.values()])
        out[f"pass_at_{k}"], out[f"pass_at_{k}_se"] = mean, se
    return out


def pass_at_note(stats: dict) -> str:
    """pass@k figures as the console writes them ("pass@1 0.250 ± 0.100, pass@4 ..."); "" without them."""
    return ", ".join(f"pass@{k} {stats[f'pass_at_{k}']:.3f} ± {stats[f'pass_at_{k}_se']:.3f}" for k in pass_at_ks(stats))


def by_task_family(episodes: list[dict]) -> dict[str, tuple[float, int]]:
    """(reward sum, episodes) per task family for episodes whose ids are <task>#<seed> (web tasks);
    empty for ids without one (Sudoku puzzles)."""
    out: dict[str, tuple[float, int]] = {}
    for ep in episodes:
        family, sep, _ = str(ep.get("task", "")).rpartition("#")
        if not sep:
            return {}
        total, n = out.get(family, (0.0, 0))
        out[family] = (total + ep["reward"], n + 1)
    return out


def paired_difference(after: list[float], before: list[float]) -> tuple[float, float]:
    """Mean and standard error of the per-task difference (same tasks, same order; per-task
    means when tasks repeat, so the SE counts each task once)."""
    if len(after) != len(before):
        raise ValueError(f"paired difference needs the same tasks: {len(after)} vs {len(before)} episodes")
    return mean_se([a - b for a, b in zip(after, before)])


def evaluate_weights(run_dir=None, config=None, overrides=(), model_name: str | None = None,
                     split: str = "heldout") -> tuple[dict, list, str]:
    """(figures, episode records, label) of a run's final weights (run_dir; overrides on its config,
    e.g. another env.task) or of a model (config + overrides, model_name replacing cfg.model) on
    a split. A run whose algorithm plays a context of its own (ES with coevo) is played with it. With
    eval.pass_at the figures also hold pass@k (evaluate_attempts; the episodes are the greedy ones)."""
    from ..config import load_config
    from ..models import HFPolicy, load_model
    from ..utils.seeding import derive_seed
    from ..utils.settings import ConfigError
    from ..utils.threads import set_threads
    from . import stop
    from .preflight import check_env, check_plays, check_run_config
    from .tasks import TaskSource

    context = None
    if run_dir is not None:
        from .algorithm import algorithm
        from .rundir import RunDir
        from .weights import load_run_weights

        recorded = RunDir(run_dir).load_config()
        if recorded.serve.evaluations == "harness" and not overrides:
            raise ConfigError(f"{run_dir}'s evaluations were played by its harness (serve.evaluations=harness), on "
                              "tasks esopt cannot play: its figures are in its summary.json; to play the weights on "
                              "an env of esopt's, name it (e.g. env.id=sudoku)")
        if overrides:
            recorded = RunDir(run_dir).load_config(list(overrides))
        check_env(recorded.env, recorded.tasks, (split,))  # the env, before seconds of loading and replaying
        check_plays(recorded, (split,))
        model, tok, cfg, n = load_run_weights(run_dir)
        if overrides:
            cfg = recorded
        label = f"{run_dir} after {n} generations"
        found = algorithm(cfg.algo).final_context(RunDir(run_dir), cfg, n)
        if found is not None:
            context = found[0]
            print(f"[esopt] context: the most likely draw after {n} generations, skills "
                  f"{found[1]['draw']['skills']}, slots {found[1]['draw']['slots']}", flush=True)
    else:
        cfg = load_config(config, list(overrides) + ([f"model={model_name}"] if model_name else []))
        check_run_config(cfg, splits=(split,))
        model, tok = load_model(cfg.model, cfg.runtime.dtype, cfg.runtime.device)
        label = cfg.model
    if cfg.runtime.threads:
        set_threads(cfg.runtime.threads)
    if split == "validation" and not cfg.tasks.validation:
        raise ConfigError("--split validation needs a validation split: add tasks.validation=N (e.g. 64)")
    name = "held-out" if split == "heldout" else split
    policy, source, seed = (HFPolicy.for_agent(model, tok, cfg.agent), TaskSource(cfg.env, cfg.tasks, cfg.run.seed),
                            derive_seed("eval", cfg.run.seed))
    with stop.phase(f"the {name} evaluation", kept="nothing of it was written (its figures and episodes are written "
                                                   "when it ends)"):
        stats, episodes = evaluate(policy, source, cfg, seed=seed, split=split, context=context)
        if cfg.eval.pass_at:  # pass@k: sampled attempts besides the greedy figures (of whichever split is asked)
            figures, _ = evaluate_attempts(policy, source, cfg, seed, split, context)
            stats.update(figures)
    return stats, episodes, label
