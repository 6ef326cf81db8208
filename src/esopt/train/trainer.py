"""The ES trainer: wires strategy, perturber, policy, tasks and the run folder.

One generation: ask -> for each member (perturbed, always restored) play its
episodes -> tell -> apply_update -> append the history record (the checkpoint)
-> metrics, trajectories, periodic held-out evaluation.
"""
from __future__ import annotations

import math
import time
import traceback

import numpy as np
import torch
from tqdm import tqdm

from ..agent.rollout import AgentContext
from ..config import Config
from ..es.build import make_perturber
from ..es.history import RunFolderError
from ..es.perturb import weights_hash
from ..es.rounding import precision_check, precision_warnings
from ..es.schedules import scheduled
from ..es.strategy import Member, Strategy
from ..models import HFPolicy, load_model
from ..utils.seeding import derive_seed
from .evaluate import run_episodes
from .loop import train_loop
from .rundir import RunDir
from .summary import finish_run, record_eval
from .tasks import TaskSource


def schedule_values(cfg: Config, t: int) -> tuple[float, float]:
    T = cfg.es.generations
    s, a = cfg.es.sigma, cfg.es.alpha
    return (scheduled(s.schedule, s.start, s.end, t, T, s.warmup), scheduled(a.schedule, a.start, a.end, t, T, a.warmup))


class Trainer:
    def __init__(self, cfg: Config, run: RunDir, model=None, tokenizer=None, log=print):
        self.cfg, self.run, self.log = cfg, run, log
        if cfg.runtime.threads:
            torch.set_num_threads(cfg.runtime.threads)
        if model is None:
            model, tokenizer = load_model(cfg.model, cfg.runtime.dtype, cfg.runtime.device)
            from ..export import start_from

            start_from(run, model)  # a run begun from another run's weights (esopt adapt --from): those first
        self.model = model
        self.policy = HFPolicy(model, tokenizer, cfg.agent.batch_size)
        self.perturber = make_perturber(model, cfg.es)
        self.warn_precision()
        self.strategy = Strategy(cfg.es.population, derive_seed("strategy", cfg.run.seed), cfg.es.antithetic, cfg.es.shaping)
        self.tasks = TaskSource(cfg.env, cfg.tasks, cfg.run.seed)
        # coevo.mode context/both: each member also plays a sampled context (coevo/search.py);
        # context: the weights are neither perturbed nor updated
        self.coevo = None
        if cfg.coevo.mode != "weights":
            from ..coevo.search import ContextSearch

            self.coevo = ContextSearch(cfg, AgentContext.from_config(cfg.agent))
        self.moves_weights = cfg.coevo.mode != "context"
        meta = {"model": cfg.model, "base_weights_hash": weights_hash(model), "scope_numel": self.perturber.numel,
                "noise": self.perturber.describe()}
        if self.coevo is not None:
            meta["context"] = self.coevo.meta()
        self.history = run.history(meta=meta)
        self.rollout_fn = run_episodes  # replaceable in tests

    def warn_precision(self) -> list[str]:
        """In bf16/fp16, say so at startup when the run's smallest sigma would leave most elements
        unperturbed, or (with es.update_rounding=nearest) an update would be mostly rounded away."""
        es = self.cfg.es
        if es.noise == "lowrank" or self.cfg.runtime.dtype == "float32":
            return []  # side terms are not rounded into the weights; float32 keeps both
        sigma = min(v for v in (es.sigma.start, es.sigma.end) if v > 0)
        alpha = min((v for v in (es.alpha.start, es.alpha.end) if v > 0), default=es.alpha.start)
        check = precision_check(self.perturber.params, sigma, alpha, es.population, es.update_rounding)
        lines = precision_warnings(check, self.cfg.runtime.dtype, sigma, alpha)
        for line in lines:
            self.log(line)
        return lines

    # ------------------------------------------------------------------ resume
    def resume(self) -> int:
        """Replay the history onto the freshly loaded base weights; returns the next generation."""
        t0 = time.time()
        if self.coevo is not None:
            self.coevo.check_meta(self.history.meta, self.history.path)
        elif "context" in self.history.meta:
            mode = self.history.meta["context"].get("mode")
            raise RunFolderError(f"{self.history.path} was trained with coevo.mode={mode}: resume it with that mode, "
                                 "not coevo.mode=weights")
        done = self.history.replay(self.perturber)
        if self.coevo is not None:
            self.coevo.replay(self.history.records[:done])
        if done:
            self.log(f"[esopt] resumed {self.run.path}: replayed {done} generations in {time.time() - t0:.1f}s, "
                     f"weights hash {self.history.records[-1]['weights_hash'][:12]} verified")
        self.run.truncate_metrics(done)
        return done

    # --------------------------------------------------------------- evaluation
    def evaluate(self, generation: int, boundary: bool = True) -> dict:
        """With a context search: the most likely context under the current logits (said in the record)."""
        context, note = self.coevo.eval_context() if self.coevo is not None else (None, None)
        return record_eval(self.run, self.policy, self.tasks, self.cfg, generation, self.log, boundary=boundary,
                           context=context, context_note=note)

    # --------------------------------------------------------------- generation
    def play_member(self, m, sigma: float, t: int, times: dict, progress=None, context=None):
        """(reward, episodes, error traceback) of one member; the weights are restored whatever happens.
        context: the member's AgentContext (coevo), None for the agent's own."""
        cfg = self.cfg
        envs, ids, obs = self.tasks.train(cfg.es.episodes_per_member, t)
        extra = {} if context is None else {"context": context}
        t0 = time.time()
        marks = []
        try:
            with self.perturber.perturbed(m.seed, sigma, m.sign):
                marks.append(time.time())
                episodes = self.rollout_fn(self.policy, envs, ids, obs, cfg,
                                           seed=derive_seed("rollout", cfg.run.seed, t, m.index), on_turn=progress,
                                           **extra)
                marks.append(time.time())
        except Exception:  # the member counts as the worst (NaN reward); the weights were restored
            error = traceback.format_exc()
            self.log(f"[esopt] member {m.index} of generation {t} failed:\n{error}")
            return float("nan"), [], error
        finally:
            end = time.time()
            marks += [end] * (2 - len(marks))
            times["perturb"] += marks[0] - t0
            times["rollout"] += marks[1] - marks[0]
            times["restore"] += end - marks[1]
        return float(np.mean([ep.reward for ep in episodes])), episodes, None

    def play_sequential(self, members, sigma: float, t: int, times: dict, bar=None, contexts=None):
        """Full-rank noise: members one after another, each with perturbed weights."""
        rewards, traj, errors = [], [], {}
        for k, m in enumerate(members):
            progress = None
            if bar is not None:
                so_far = f"{np.nanmean(rewards):.3f}" if rewards else "-"

                def progress(turn, done, m=m, so_far=so_far):
                    bar.set_postfix_str(f"gen {t} member {m.index} episodes {done}/{self.cfg.es.episodes_per_member} "
                                        f"reward {so_far}", refresh=False)
            reward, episodes, error = self.play_member(m, sigma, t, times, progress,
                                                       None if contexts is None else contexts[k])
            rewards.append(reward)
            traj += [{"generation": t, "member": m.index, **ep.to_json()} for ep in episodes]
            if error:
                errors[str(m.index)] = error
            if bar is not None:
                bar.update(1)
        return rewards, traj, errors

    def play_lowrank(self, members, sigma: float, t: int, times: dict, bar=None, contexts=None):
        """Low-rank noise: every member's episodes decode together, one member per batch row.
        With es.lowrank_others=full each member's other tensors are perturbed in place, so the
        members decode one after another (each batch holds one member's rows)."""
        if self.perturber.others is None:
            return self._play_rows(members, sigma, t, times, bar, derive_seed("rollout", self.cfg.run.seed, t), contexts)
        rewards, traj, errors = [], [], {}
        for k, m in enumerate(members):
            t0 = time.time()
            with self.perturber.others_perturbed(m.seed, sigma, m.sign):
                t1 = time.time()
                r, tr, err = self._play_rows([m], sigma, t, times, bar,  # records a failed rollout, never raises
                                             derive_seed("rollout", self.cfg.run.seed, t, m.index),
                                             None if contexts is None else [contexts[k]])
                t2 = time.time()
            times["perturb"] += t1 - t0
            times["restore"] += time.time() - t2
            rewards += r
            traj += tr
            if err:
                errors[str(m.index)] = err["all"]
        return rewards, traj, errors

    def play_contexts(self, members, sigma: float, t: int, times: dict, bar=None, contexts=None):
        """coevo.mode=context: the weights stay as they are; every member's episodes decode together,
        each row with its member's context."""
        return self._play_rows(members, sigma, t, times, bar, derive_seed("rollout", self.cfg.run.seed, t), contexts,
                               side_terms=False)

    def _play_rows(self, members, sigma: float, t: int, times: dict, bar, rollout_seed: int, contexts=None,
                   side_terms: bool = True):
        """These members' episodes in one rollout, row j under its member's side terms (unless not
        side_terms) and with its member's context (contexts: one per member; None: the agent's own)."""
        cfg = self.cfg
        envs, ids, obs, row_member = [], [], [], []
        for k, _ in enumerate(members):
            e, i, o = self.tasks.train(cfg.es.episodes_per_member, t)
            envs += e
            ids += i
            obs += o
            row_member += [k] * len(e)
        rows = torch.tensor(row_member)
        seeds, scales = [m.seed for m in members], [m.sign * sigma for m in members]

        def row_context(idx):
            return self.perturber.side_terms(seeds, scales, rows[idx])

        extra = {"row_context": row_context, "row_groups": row_member} if side_terms else {}
        if contexts is not None:
            extra["context"] = [contexts[k] for k in row_member]
        progress = None
        if bar is not None:
            def progress(turn, done):
                bar.set_postfix_str(f"gen {t} turn {turn} episodes {done}/{len(envs)}", refresh=False)
        t0 = time.time()
        try:
            episodes = self.rollout_fn(self.policy, envs, ids, obs, cfg, seed=rollout_seed, on_turn=progress, **extra)
        except Exception:
            error = traceback.format_exc()
            self.log(f"[esopt] generation {t} rollout of members {[m.index for m in members]} failed:\n{error}")
            return [float("nan")] * len(members), [], {"all": error}
        finally:
            times["rollout"] += time.time() - t0
            if bar is not None:
                bar.update(len(members))
        rewards = [float(np.mean([ep.reward for ep, r in zip(episodes, row_member) if r == k])) for k in range(len(members))]
        traj = [{"generation": t, "member": members[r].index, **ep.to_json()} for ep, r in zip(episodes, row_member)]
        return rewards, traj, {}

    def generation(self, t: int, bar=None) -> dict:
        cfg = self.cfg
        if self.moves_weights:
            sigma, alpha = schedule_values(cfg, t)
            members = self.strategy.ask(t, self.perturber.stream_keys)
            play = self.play_lowrank if cfg.es.noise == "lowrank" else self.play_sequential
        else:  # coevo.mode=context: members differ only in their contexts; no weight noise, no update
            sigma, alpha = 0.0, 0.0
            members = [Member(k, 0, +1) for k in range(cfg.es.population)]
            play = self.play_contexts
        draws = units = contexts = None
        if self.coevo is not None:
            draws, units, contexts = self.coevo.ask(t, members)
        times = {"perturb": 0.0, "rollout": 0.0, "restore": 0.0}
        tokens0 = self.policy.tokens_generated
        rewards, traj, errors = play(members, sigma, t, times, bar, contexts=contexts)
        coefs, n_bad = self.strategy.tell(members, rewards)
        shaped = [c * m.sign for c, m in zip(coefs.tolist(), members)]
        t0 = time.time()
        if self.moves_weights:
            self.perturber.apply_update([m.seed for m in members], coefs, alpha, len(members))
        times["update"] = time.time() - t0
        t0 = time.time()
        digest = weights_hash(self.model)
        times["hash"] = time.time() - t0
        record = {
            "generation": t, "sigma": sigma, "alpha": alpha, "population": len(members),
            "seeds": [m.seed for m in members], "signs": [m.sign for m in members],
            "rewards": [r if math.isfinite(r) else None for r in rewards],
            "shaped": shaped,
            "coefficients": coefs.tolist(), "nonfinite_rewards": n_bad, "weights_hash": digest,
        }
        if not self.moves_weights:  # nothing for replay to apply: no seeds, no coefficients
            record.update(seeds=[], signs=[], coefficients=[])
        if errors:
            record["member_errors"] = errors
        if self.coevo is not None:
            t0 = time.time()
            record["context"] = self.coevo.tell(draws, units, shaped)
            times["context"] = time.time() - t0
        self.history.append(record)  # the checkpoint: written atomically before anything else
        self.run.write_trajectories(f"gen{t:04d}", traj)
        finite = np.array([r for r in rewards if math.isfinite(r)] or [float("nan")])
        stats = {
            "kind": "train", "generation": t, "reward_mean": float(finite.mean()), "reward_max": float(finite.max()),
            "reward_min": float(finite.min()), "reward_std": float(finite.std()), "sigma": sigma, "alpha": alpha,
            "nonfinite_rewards": n_bad, "episodes": len(traj), "tokens": self.policy.tokens_generated - tokens0,
            **{f"time_{k}": v for k, v in times.items()},
        }
        if self.coevo is not None:
            stats["context_probs"] = self.coevo.probs()  # after this generation's update
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
                    f"(rollout {s['time_rollout']:.0f}s, noise {s['time_perturb'] + s['time_restore'] + s['time_update']:.0f}s)")

        return train_loop(self, start, T, bar, describe)  # the history record is the checkpoint

    def finish(self, evals: dict) -> dict:
        return finish_run(self.run, self.model, evals, self.cfg.es.generations, self.log)
