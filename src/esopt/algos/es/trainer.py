"""The ES trainer: the ES step (es/step.py) over a model replica, a runner and the run folder.

One generation: ask -> the runner plays each member (perturbed, always restored; here, or
on Ray workers: train/runner.py) -> tell (the update, here and on every replica, hashes
compared) -> with co-evolution, the context search's own tell -> append the history record
(the checkpoint) -> metrics, trajectories, periodic held-out evaluation. With es.drop_tied_rounds,
the members also play fresh tasks in place of tied ones before the tell (droptied.py).
"""
from __future__ import annotations

import math
import time

import numpy as np
from tqdm import tqdm

from ...config import Config
from ...es.perturb import weights_hash
from ...es.rounding import precision_check, precision_warnings
from ...es.step import ESStep
from ...es.strategy import Strategy
from ...models import load_model
from ...train import failures
from ...train.loop import train_loop
from ...train.replica import ModelReplica
from ...train.resume_check import record_settings
from ...train.rundir import RunDir
from ...train.runner import LocalRunner, MemberRunner
from ...report import refresh_report
from ...train.summary import finish_run, record_eval
from ...train.weights import replay, start_from
from ...utils.memory import peak_rss_mb
from ...utils.seeding import derive_seed
from ...utils.threads import set_threads
from .coevo.component import context_component
from .diagnostics import describe as describe_signal, signal_diagnostics
from .droptied import play_dropping_tied


def es_step(cfg: Config, perturber, moves_weights: bool = True) -> ESStep:
    """The run's ES step: its strategy (seeded by the run seed) over es.generations."""
    es = cfg.es
    strategy = Strategy(es.population, derive_seed("strategy", cfg.run.seed), es.antithetic, es.shaping)
    return ESStep(strategy, perturber.stream_keys, es.sigma, es.alpha, es.schedule_generations or es.generations,
                  moves_weights)


class Trainer(ModelReplica):
    def __init__(self, cfg: Config, run: RunDir, model=None, tokenizer=None, log=print, runner: MemberRunner | None = None):
        """runner: where members are played (default: here, LocalRunner; dist.RayRunner: on Ray workers)."""
        self.cfg, self.run, self.log = cfg, run, log
        self.runner = runner or LocalRunner()
        threads = self.runner.driver_threads or cfg.runtime.threads
        if threads:
            set_threads(threads)  # torch's, and numba's pool (the kernels of table noise)
        if model is None:
            model, tokenizer = load_model(cfg.model, cfg.runtime.dtype, self.runner.driver_device or cfg.runtime.device)
            start_from(run, model)  # a run begun from another run's weights (esopt adapt --from): those first
        ModelReplica.__init__(self, cfg, model, tokenizer, log)  # policy, perturber, tasks, rollout_fn
        self.warn_precision()
        self.setup_times = {"kernels": self.perturber.prepare()}  # one-off: the first generation's own phase
        # coevo.mode context/both: each member also plays a sampled context, a component of the ES step
        # (algos/es/coevo/component.py); context: the weights are neither perturbed nor updated
        self.context = context_component(cfg, log)
        self.moves_weights = self.context.moves_weights
        self.step = es_step(cfg, self.perturber, self.moves_weights)
        self.history = run.history(meta={"model": cfg.model, "base_weights_hash": weights_hash(model),
                                         "settings": record_settings(cfg),
                                         "scope_numel": self.perturber.numel, "noise": self.perturber.describe(),
                                         **self.context.meta()})
        self.runner.start(self)  # rollout_fn is replaceable in tests until here (a RayRunner sends it to its workers)

    def warn_precision(self) -> list[str]:
        """In bf16/fp16, say so at startup when the run's smallest sigma would leave most elements
        unperturbed, or (with es.update_rounding=nearest) an update would be mostly rounded away."""
        es = self.cfg.es
        if self.perturber.play_mode != "in_place" or self.cfg.runtime.dtype == "float32":
            return []  # side terms are not rounded into the weights; float32 keeps both
        sigma = min(v for v in (es.sigma.start, es.sigma.end) if v > 0)
        alpha = min((v for v in (es.alpha.start, es.alpha.end) if v > 0), default=es.alpha.start)
        check = precision_check(self.perturber.params, sigma, alpha, es.population, es.update_rounding,
                                scales=getattr(self.perturber, "scales", None))  # es.sigma_scale: each tensor's own
        lines = precision_warnings(check, self.cfg.runtime.dtype, sigma, alpha)
        for line in lines:
            self.log(line)
        return lines

    # ------------------------------------------------------------------ resume
    def resume(self) -> int:
        """Replay the history onto the freshly loaded base weights; returns the next generation."""
        t0 = time.time()
        self.context.check_resume(self.history.meta, self.history.path)
        done = replay(self.history, self.perturber)
        self.context.replay(self.history.records[:done])
        if done:
            self.log(f"[esopt] resumed {self.run.path}: replayed {done} generations in {time.time() - t0:.1f}s, "
                     f"weights hash {self.history.records[-1]['weights_hash'][:12]} verified")
        self.run.truncate_metrics(done)
        return done

    # --------------------------------------------------------------- evaluation
    def evaluate(self, generation: int, boundary: bool = True) -> dict:
        """With a context search: the most likely context under the current logits (said in the record),
        played here; otherwise wherever the runner plays (here, or split across Ray workers)."""
        found = self.context.eval_context()
        if found is not None:
            context, note = found
            return record_eval(self, generation, boundary, context=context, context_note=note, command=self.command)
        return record_eval(self, generation, boundary=boundary, play=self.runner.evaluate, command=self.command)

    @property
    def command(self) -> str:
        """How this run is continued (esopt train, or esopt serve for a served one)."""
        return getattr(self.runner, "command", "esopt train")

    # --------------------------------------------------------------- generation
    def generation(self, t: int, bar=None) -> dict:
        sigma, alpha = self.step.values(t)
        members = self.step.ask(t)
        contexts = self.context.ask(t, members)  # one per member (coevo), else None: the agent's own
        times = {"perturb": 0.0, "rollout": 0.0, "restore": 0.0}
        times.update({k: v for k, v in self.setup_times.items() if v})  # once per process
        self.setup_times = {}
        dropping = None
        if self.cfg.es.drop_tied_rounds:  # tied tasks dropped, fresh ones played (droptied.py; local runs only)
            played, dropping = play_dropping_tied(self, members, sigma, t, times, bar, contexts)
        else:
            played = self.runner.play(members, sigma, t, times, bar, contexts=contexts)  # here, or on Ray workers
        rewards, traj = played.rewards, played.traj
        failed, first = failures.count(traj)
        if traj and failed == len(traj):  # nothing to learn from: the episodes stay on disk, the history as it was
            self.run.write_trajectories(f"gen{t:04d}", traj)
            failures.stop_if_all_failed(traj, f"generation {t}", self.run.path, self.command)
        # the update, here and on every replica; a replica whose weights hash differs stops the run
        check = self.cfg.es.diagnostics == "full" and hasattr(self.perturber, "check_update")  # full-rank only
        if check:
            self.perturber.check_update = True  # the update made vs meant, measured here (replay leaves it off)
        try:
            record = self.step.tell(t, members, rewards, lambda *update: self.runner.update(t, *update, times))
        finally:
            if check:
                self.perturber.check_update = False
        if played.errors:
            record["member_errors"] = played.errors
        if dropping is not None:
            record["drop_tied"] = dropping["record"]  # tasks dropped, ids drawn per further round
        extra = self.context.tell(self, t, record, traj, times)  # the context logits (and growth), into the record
        self.history.append(record)  # the checkpoint: written atomically before anything else
        self.run.write_trajectories(f"gen{t:04d}", traj)
        finite = np.array([r for r in rewards if math.isfinite(r)] or [float("nan")])
        stats = {
            "kind": "train", "generation": t, "reward_mean": float(finite.mean()), "reward_max": float(finite.max()),
            "reward_min": float(finite.min()), "reward_std": float(finite.std()), "sigma": sigma, "alpha": alpha,
            "nonfinite_rewards": record["nonfinite_rewards"], "episodes": len(traj) + extra.pop("extra_episodes", 0),
            "tokens": played.tokens, **{f"time_{k}": v for k, v in times.items()}, **played.extra, **extra,
            "peak_rss_mb": peak_rss_mb(),  # this process's peak so far (with Ray: the driver's); the report's memory
            **signal_diagnostics(traj, members),  # diag_*: ties, identical pairs, distinct replies (diagnostics.py)
            **(dropping["metrics"] if dropping is not None else {}),  # tasks played, dropped, share kept
        }
        made = self.perturber.last_update_check if check else None  # es.diagnostics=full
        if made:
            stats.update({f"diag_update_{k}": v for k, v in made.items()})
        if self.step.moves_weights and not np.any(np.asarray(record.get("coefficients") or [0.0])):
            stats["no_update"] = True  # every member's shaped reward is 0: the weights did not move
        if failed:
            stats.update(failed_episodes=failed, first_failure=first)
        self.run.log(stats)
        return stats

    # --------------------------------------------------------------------- run
    def train(self, start: int = 0) -> dict:
        T = self.cfg.es.generations
        bar = tqdm(total=(T - start) * self.cfg.es.population, desc="ES", unit="member", dynamic_ncols=True,
                   mininterval=1.0)

        def describe(t, s, seconds):
            return (f"[esopt] gen {t + 1}/{T}: reward mean {s['reward_mean']:.3f} max {s['reward_max']:.3f} "
                    f"min {s['reward_min']:.3f} | sigma {s['sigma']:.2e} alpha {s['alpha']:.2e} | {seconds:.0f}s "
                    f"(rollout {s['time_rollout']:.0f}s, noise {s['time_perturb'] + s['time_restore'] + s['time_update']:.0f}s)"
                    + (" | no update: every member scored alike" if s.get("no_update") else describe_signal(s))
                    + (f" | {s['failed_episodes']}/{s['episodes']} episodes failed (first: {s['first_failure']})"
                       if s.get("failed_episodes") else ""))

        return train_loop(self, start, T, bar, describe)  # the history record is the checkpoint

    def finish(self, evals: dict) -> dict:
        self.runner.close()  # Ray workers are not needed for the summary and report
        summary = finish_run(self.run, self.model, evals, self.cfg.es.generations, self.log)
        refresh_report(self.run.path, self.log)  # never raises: the run is complete without its report
        return summary
