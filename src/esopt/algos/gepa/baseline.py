"""`esopt baseline gepa`: GEPA on the agent's context, on the config's training tasks, under an
episode budget, with the task model (weights frozen) as task and reflection LM; then the best
candidate on the held-out tasks exactly as an ES run's final evaluation plays them.

Run folder (an ordinary one: config.yaml, metrics.jsonl, trajectories/):
    summary.json     an ES run's shape (held-out base / final / paired improvement, validation,
                     generations = GEPA iterations), plus algo=gepa, episodes, lm_calls, gepa
    candidates.json  every candidate (texts, parents, validation scores) and every proposal
                     (reflection reply, proposed text, flags, minibatch scores, outcome)
    reflections.jsonl  every reflection call as it ends: prompt, reply, tokens, seconds, failure
    SKILL.md, context.yaml  the chosen context
    gepa_log.txt     GEPA's own log lines
Touching RUN/gepa.stop stops GEPA after its current iteration; the held-out evaluation still runs.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from ...agent.rollout import AgentContext
from ...agent.skill import skill_md as skill_file
from ...config import ConfigError
from ...models import HFPolicy, load_model
from ...train.evaluate import evaluate, summarize
from ...train.rundir import RunDir
from ...report import refresh_report
from ...train.summary import finish_run
from ...train.tasks import TaskSource
from ...utils.seeding import derive_seed
from ...utils.threads import set_threads
from . import components as comp
from .adapter import EpisodeAdapter, EpisodeBudget, candidate_key
from .lms import CallLog, CountingPolicy, EndpointLM, LocalReflectionLM
from .record import Recorder
from .requires import GEPA_VERSION, require_gepa
from .tasks import TaskPools, valset_size


@dataclass
class GepaOptions:
    budget: int | None = None  # episodes GEPA may play (None: the config's ES training episodes)
    train_tasks: int = 64  # GEPA's trainset: the first N training tasks
    val_tasks: int | None = None  # GEPA's valset size (None: the whole validation split, else 32)
    minibatch: int = 3  # GEPA's reflection minibatch
    components: list[str] | None = None  # None: system_prompt and every example message
    reflection_tokens: int = 256
    reflection_temperature: float = 0.7
    reflection_url: str | None = None  # an OpenAI-compatible endpoint instead of the task model
    reflection_model: str | None = None
    reflection_key_env: str | None = None
    perfect_score: float = 1.0  # GEPA skips a minibatch on which every episode reaches this
    obs_chars: int = 1500  # an observation's characters in the reflective dataset
    extra: dict = field(default_factory=dict)


def es_episodes(cfg) -> int:
    """Training episodes of the config's ES run: the budget that makes GEPA comparable with it."""
    return cfg.es.generations * cfg.es.population * cfg.es.episodes_per_member


def cli_name(option: str) -> str:
    """An option as `esopt baseline gepa` spells it (val_tasks -> --val-tasks)."""
    return "--" + option.replace("_", "-")


def check_options(cfg, opts: GepaOptions, name=cli_name) -> int:
    """The episode budget GEPA gets, once `opts` fit `cfg`; checked from the config alone (no model
    loaded, no env built), so a caller can check every run before starting any. A budget must
    hold at least one pass over GEPA's valset. name(option): how the caller spells an option in
    the ConfigError (default the command line's --flags)."""
    budget = es_episodes(cfg) if opts.budget is None else opts.budget
    for option in ("minibatch", "train_tasks"):
        if getattr(opts, option) < 1:
            raise ConfigError(f"{name(option)} must be at least 1, got {getattr(opts, option)}")
    comp.choose(AgentContext.from_config(cfg.agent), opts.components, name("components"))
    n = valset_size(cfg.tasks.validation * cfg.tasks.heldout_repeats, opts.val_tasks, name("val_tasks"))
    if budget < n:
        raise ConfigError(f"{name('budget')} {budget} episodes is less than one pass over GEPA's valset "
                          f"({n} tasks): raise {name('budget')} or lower {name('val_tasks')}")
    if opts.reflection_url and not opts.reflection_model:
        raise ConfigError(f"{name('reflection_url')} needs {name('reflection_model')} (the endpoint's model name)")
    return budget


class FileLogger:
    """GEPA's logger (anything with .log(str)): its lines go to a file in the run folder."""

    def __init__(self, path: Path):
        self.path = path

    def log(self, message: str) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(str(message).rstrip("\n") + "\n")


class GepaBaseline:
    def __init__(self, cfg, run: RunDir, opts: GepaOptions, model=None, tokenizer=None, policy=None,
                 reflection_lm=None, log=print):
        self.gepa = require_gepa()
        self.cfg, self.run, self.opts, self.log = cfg, run, opts, log
        self.budget = check_options(cfg, opts)  # before a model is loaded
        if cfg.runtime.threads:
            set_threads(cfg.runtime.threads)
        if model is None:
            model, tokenizer = load_model(cfg.model, cfg.runtime.dtype, cfg.runtime.device)
        self.model = model
        raw = policy if policy is not None else HFPolicy.for_agent(model, tokenizer, cfg.agent)
        self.policy = CountingPolicy(raw)
        self.base = AgentContext.from_config(cfg.agent)
        self.names = comp.choose(self.base, opts.components)
        self.tasks = TaskSource(cfg.env, cfg.tasks, cfg.run.seed)
        self.pools = TaskPools(self.tasks, opts.train_tasks, opts.val_tasks, use_validation=cfg.tasks.validation > 0)
        self.adapter = EpisodeAdapter(self.policy, self.pools, cfg, self.base, self.budget, opts.obs_chars)
        self.stopper = EpisodeBudget(self.adapter, opts.minibatch)
        if reflection_lm is None:
            if opts.reflection_url:  # with a model name (check_options)
                try:
                    reflection_lm = EndpointLM(opts.reflection_url, opts.reflection_model, opts.reflection_key_env,
                                               opts.reflection_tokens, opts.reflection_temperature)
                except ValueError as err:
                    raise ConfigError(str(err)) from None
            else:  # the task model itself, not through the counting wrapper (its calls are logged apart)
                reflection_lm = LocalReflectionLM(raw, opts.reflection_tokens, opts.reflection_temperature,
                                                  derive_seed("gepa", cfg.run.seed))
        self.reflection = CallLog(reflection_lm, run.path / "reflections.jsonl")  # appended call by call
        self.recorder = Recorder(self.adapter, self.reflection, log=run.log)

    # ------------------------------------------------------------------ the run
    def optimise(self):
        seed = comp.seed_candidate(self.base, self.names)
        first = len(self.pools.valset) + self.stopper.worst_iteration
        if first > self.budget:
            self.log(f"[esopt] gepa: a budget of {self.budget} episodes leaves no room for an iteration "
                     f"(the seed's valset pass {len(self.pools.valset)} + at most {self.stopper.worst_iteration} "
                     "per iteration): only the seed candidate is evaluated")
        stop_file = self.gepa.FileStopper(str(self.run.path / "gepa.stop"))
        return self.gepa.optimize(
            seed_candidate=seed, trainset=self.pools.trainset, valset=self.pools.valset, adapter=self.adapter,
            reflection_lm=self.reflection, candidate_selection_strategy="pareto",
            reflection_minibatch_size=self.opts.minibatch, perfect_score=self.opts.perfect_score,
            skip_perfect_score=True, stop_callbacks=[self.stopper, stop_file],
            logger=FileLogger(self.run.path / "gepa_log.txt"), callbacks=[self.recorder], seed=self.cfg.run.seed,
            raise_on_exception=True, display_progress_bar=False)

    def train(self, start: int = 0) -> dict:
        """The whole GEPA run (not resumable: `start` is always 0) and its held-out evaluation."""
        cfg, opts = self.cfg, self.opts
        self.run.write_json("baseline.json", {"algo": "gepa", "gepa_version": _version(), "components": self.names,
                                              "budget_episodes": self.budget, **asdict(opts)})
        self.log(f"[esopt] gepa: optimising {', '.join(self.names)} on {len(self.pools.trainset)} training tasks, "
                 f"valset {len(self.pools.valset)} "
                 f"({'validation split' if self.pools.val_is_validation_split else 'further training tasks'}), "
                 f"budget {self.budget} episodes")
        t0 = time.time()
        result = self.optimise()
        self.recorder.check()
        t_opt = time.time() - t0
        opt_counts = self.policy.counts()
        best_idx = result.best_idx
        best = result.candidates[best_idx]
        seed = result.candidates[0]
        self.log(f"[esopt] gepa: {self.recorder.iterations} iterations, {len(result.candidates)} candidates, "
                 f"{self.adapter.episodes} episodes, best candidate {best_idx} (valset "
                 f"{result.val_aggregate_scores[best_idx]:.4f}, seed {result.val_aggregate_scores[0]:.4f}), "
                 f"{t_opt:.0f}s")
        G = self.recorder.iterations

        # held-out: only now, once, for the configured context and the chosen one (same tasks and seed as ES)
        t1 = time.time()
        eval_seed = derive_seed("eval", cfg.run.seed)
        base_h, base_eps = evaluate(self.policy, self.tasks, cfg, seed=eval_seed, split="heldout")
        if candidate_key(best) == candidate_key(seed):
            final_h, final_eps = base_h, base_eps
        else:
            final_h, final_eps = evaluate(self.policy, self.tasks, cfg, seed=eval_seed, split="heldout",
                                          context=comp.apply(self.base, best))
        if cfg.eval.pass_at:  # pass@k: sampled attempts of each context besides the greedy figures (as ES's)
            from ...train.evaluate import evaluate_attempts
            from ...train.summary import ATTEMPTS

            played: dict = {}  # one play per distinct context (the chosen one may be the configured one)
            for gen, stats, ctx in ((0, base_h, None), (G, final_h, None if final_h is base_h else
                                                        comp.apply(self.base, best))):
                if id(stats) not in played:
                    played[id(stats)] = evaluate_attempts(self.policy, self.tasks, cfg, eval_seed, "heldout", ctx)
                    stats.update(played[id(stats)][0])
                self.run.write_trajectories(ATTEMPTS.format(gen),
                                            [{"generation": gen, **ep} for ep in played[id(stats)][1]])
        t_held = time.time() - t1
        evals = {0: {"heldout": base_h}, G: {"heldout": final_h}}
        self.run.write_trajectories("eval_gen0000", [{"generation": 0, **ep} for ep in base_eps])
        self.run.write_trajectories(f"eval_gen{G:04d}", [{"generation": G, **ep} for ep in final_eps])
        if self.pools.val_is_validation_split:  # GEPA's own valset passes are the validation figures
            for gen, cand in ((0, seed), (G, best)):
                eps = self.adapter.full_val[candidate_key(cand)]
                self.run.write_trajectories(f"val_gen{gen:04d}", [{"generation": gen, **ep} for ep in eps])
                evals[gen]["validation"] = summarize(eps)
        for gen in sorted(evals):
            line = {"kind": "eval", "generation": gen}
            for split, stats in evals[gen].items():
                line.update({f"{split}_{k}": v for k, v in stats.items() if k != "per_task"})
            self.run.log(line)
            self.log(f"[esopt] held-out after {gen} GEPA iterations: reward {evals[gen]['heldout']['reward']:.3f} ± "
                     f"{evals[gen]['heldout']['reward_se']:.3f} (n={evals[gen]['heldout']['n']})")

        self.write_files(result, best_idx)
        total = self.policy.counts()
        extra = {
            "algo": "gepa",
            "budget_episodes": self.budget,
            "episodes": {"used": self.adapter.episodes, **self.adapter.by_split,
                         "heldout": base_h["n"] + (0 if final_eps is base_eps else final_h["n"])},
            "lm_calls": {
                "task_optimise": opt_counts,
                "task_heldout": {k: total[k] - opt_counts[k] for k in total},
                "reflection": self.reflection.counts(),
            },
            "gepa": {"version": _version(), "components": self.names, "iterations": G,
                     "candidates": len(result.candidates), "best_candidate": best_idx,
                     "best_val_score": result.val_aggregate_scores[best_idx],
                     "seed_val_score": result.val_aggregate_scores[0],
                     "best_texts": best, "outcomes": self.recorder.outcome_counts(),
                     "reflection_flags": self.recorder.flag_counts()},
            "seconds": {"optimise": t_opt, "heldout": t_held, "total": time.time() - t0},
        }
        summary = finish_run(self.run, self.model, evals, G, self.log, **extra)
        refresh_report(self.run.path, self.log)  # never raises: the run is complete without its report
        return summary

    # ------------------------------------------------------------------ files
    def write_files(self, result, best_idx: int) -> None:
        self.run.write_json("candidates.json", {
            "components": self.names, "best": best_idx, "parents": result.parents,
            "val_aggregate_scores": result.val_aggregate_scores,
            "candidates": self.recorder.candidates, "proposals": self.recorder.proposals})
        ctx = comp.apply(self.base, result.candidates[best_idx])
        score = result.val_aggregate_scores[best_idx]
        (self.run.path / "SKILL.md").write_text(skill_md(ctx, best_idx, len(result.candidates), score),
                                                encoding="utf-8")
        data = {"choice": "gepa_best", "candidate": best_idx, "val_score": score,
                "system_prompt": ctx.system_prompt, "examples": [dict(m) for m in ctx.examples]}
        (self.run.path / "context.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True,
                                                                   width=100), encoding="utf-8")


def skill_md(ctx: AgentContext, idx: int, n: int, score: float) -> str:
    return skill_file("esopt-gepa-context", f"The context GEPA chose (candidate {idx} of {n}, validation score "
                      f"{score:.4f})", ctx.system_prompt,
                      [(f"example {i} ({m.get('role', 'user')})", m.get("content", ""))
                       for i, m in enumerate(ctx.examples)])


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("gepa")
    except Exception:  # noqa: BLE001 - a source checkout without metadata
        return f"unknown (written for {GEPA_VERSION})"
