"""The GRPO baseline trainer: the ES harness (model loading, tasks, rollout,
held-out evaluation, run folder) with a gradient update instead of ES.

One step: play group_size episodes of each of puzzles_per_step puzzles (sampled,
one batched rollout) -> group-normalised trajectory advantages -> per-turn
samples (env text masked) -> inner_steps AdamW updates of the clipped objective,
gradient accumulated over micro-batches -> metrics, trajectories, checkpoint.
"""
from __future__ import annotations

import copy
import time
import traceback

import numpy as np
import torch
from tqdm import tqdm

from ...agent.rollout import AgentContext, rollout
from ...config import Config, ConfigError
from ...es.perturb import weights_hash
from ...es.schedules import scheduled
from ...models import HFPolicy, load_model
from ...models.policy import Sampling
from ...utils.memory import peak_rss_mb
from ...utils.seeding import derive_seed
from ...train import failures
from ...train.evaluate import rollout_settings
from ...train.loop import train_loop, turn_progress
from ...report import refresh_report
from ...train.summary import finish_run, record_eval
from ...train.resume_check import record_settings
from ...train.rundir import RunDir
from ...train.tasks import TaskSource
from . import checkpoint
from .grpo import (clipped_loss, group_advantages, micro_batches, response_logprobs, set_token_weights,
                   turn_samples)


def training_sampling(cfg: Config) -> Sampling:
    """Sampling of GRPO's training episodes: grpo.temperature (or agent's), agent's top-p/top-k."""
    s = cfg.agent.sampling
    temperature = cfg.grpo.temperature if cfg.grpo.temperature is not None else s.temperature
    if temperature <= 0:
        raise ConfigError("GRPO needs sampled episodes (a group of equal greedy episodes has no signal): "
                          "set grpo.temperature > 0 or agent.sampling.temperature > 0")
    return Sampling(temperature, s.top_p, s.top_k)


class GRPOTrainer:
    """Same shape as the ES Trainer: GRPOTrainer(cfg, run, model=None, tokenizer=None, log=print),
    step(t) / generation(t) for one update, train(start), evaluate(n), resume().

    A model passed in is trained in place (its parameters get requires_grad=True).
    Episodes per step: grpo.puzzles_per_step x grpo.group_size (episodes_per_step).
    """

    algo = "grpo"

    def __init__(self, cfg: Config, run: RunDir, model=None, tokenizer=None, log=print):
        self.cfg, self.run, self.log = cfg, run, log
        self.sampling = training_sampling(cfg)
        self.settings = rollout_settings(cfg, self.sampling, record_ids=True)  # how its training episodes are played
        if cfg.runtime.threads:
            torch.set_num_threads(cfg.runtime.threads)
        if model is None:
            model, tokenizer = load_model(cfg.model, cfg.runtime.dtype, cfg.runtime.device)
        self.model, self.tokenizer = model, tokenizer
        self.base_weights_hash = weights_hash(model)
        g = cfg.grpo
        # a frozen copy of the base model, only when the KL term is on
        self.reference = copy.deepcopy(model).eval().requires_grad_(False) if g.kl_coef > 0 else None
        model.eval()  # no dropout: rollout and loss see the same function
        model.requires_grad_(True)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=g.lr, weight_decay=g.weight_decay)
        self.policy = HFPolicy.for_agent(model, tokenizer, cfg.agent)
        self.tasks = TaskSource(cfg.env, cfg.tasks, cfg.run.seed)
        self.context = AgentContext.from_config(cfg.agent)

    @property
    def steps(self) -> int:
        return self.cfg.grpo.steps

    def lr_at(self, t: int) -> float:
        """The learning rate of step t (grpo.lr_schedule over grpo.schedule_steps, or grpo.steps)."""
        g = self.cfg.grpo
        return scheduled(g.lr_schedule, g.lr, g.lr_end, t, g.schedule_steps or g.steps)

    @property
    def episodes_per_step(self) -> int:
        return self.cfg.grpo.puzzles_per_step * self.cfg.grpo.group_size

    # ------------------------------------------------------------------ resume
    def resume(self) -> int:
        """Load the last checkpoint (weights + optimizer); returns the next step."""
        folder = checkpoint.locate(self.run.path)
        if folder is None:
            self.log(f"[esopt] {self.run.path} has no GRPO checkpoint yet: starting from step 0")
            self.run.truncate_metrics(0)
            return 0
        state = checkpoint.read_state(self.run.path)
        if folder.name != checkpoint.NAME:
            self.log(f"[esopt] {self.run.path}: {checkpoint.NAME}/ is missing or incomplete (a crash while it was being "
                     f"replaced): resuming from the last complete one, {folder.name}/ (step {state['step']})")
        if state.get("base_weights_hash") != self.base_weights_hash:
            raise RuntimeError(f"the loaded model is not the base model of {self.run.path} (weights hash differs)")
        checkpoint.load_weights(self.run.path, self.model)
        checkpoint.load_optimizer(self.run.path, self.optimizer)
        if weights_hash(self.model) != state["weights_hash"]:
            raise RuntimeError(f"checkpoint of {self.run.path} is corrupt: weights hash differs from state.json")
        done = int(state["step"])
        self.log(f"[esopt] resumed {self.run.path} at step {done} (weights {state['weights_hash'][:12]})")
        self.run.truncate_metrics(done)
        return done

    def save_checkpoint(self, done: int) -> None:
        checkpoint.save(self.run.path, self.model, self.optimizer,
                        {"step": done, "weights_hash": weights_hash(self.model), "base_weights_hash": self.base_weights_hash,
                         "model": self.cfg.model, "settings": record_settings(self.cfg)})

    # --------------------------------------------------------------- evaluation
    def evaluate(self, generation: int, boundary: bool = True) -> dict:
        return record_eval(self, generation, boundary, unit="GRPO steps")

    # -------------------------------------------------------------------- step
    def play(self, t: int, on_turn=None):
        """group_size episodes of each of puzzles_per_step puzzles, all decoded together."""
        g = self.cfg.grpo
        envs, ids, obs = self.tasks.train(g.puzzles_per_step, t, repeat=g.group_size)
        return rollout(self.policy, envs, ids, obs, self.context,
                       self.settings.seeded(derive_seed("grpo-rollout", self.cfg.run.seed, t)), on_turn=on_turn)

    def update(self, samples) -> dict:
        """inner_steps optimizer steps on these samples; gradients accumulated over micro-batches."""
        g = self.cfg.grpo
        batches = micro_batches(samples, g.micro_batch, self.tokenizer.pad_token_id)
        times = {"ref": 0.0, "update": 0.0}
        ref = [None] * len(batches)
        if self.reference is not None:
            t0 = time.time()
            with torch.no_grad():
                ref = [response_logprobs(self.reference, b, self.sampling.temperature) for b in batches]
            times["ref"] = time.time() - t0
        old: list = [None] * len(batches)  # log-probs of the policy that played: weights are unchanged until the first step
        inner = []
        t0 = time.time()
        for k in range(g.inner_steps):
            self.optimizer.zero_grad(set_to_none=True)
            acc = {"loss": 0.0, "weight": 0.0, "clipped": 0.0, "kl": 0.0, "ratio_max_dev": 0.0, "tokens": 0}
            for j, b in enumerate(batches):
                logp = response_logprobs(self.model, b, self.sampling.temperature)
                if old[j] is None:
                    old[j] = logp.detach()
                loss, st = clipped_loss(logp, old[j], b, g.clip_eps, ref[j], g.kl_coef)
                loss.backward()
                acc["loss"] += float(loss.detach())
                acc["ratio_max_dev"] = max(acc["ratio_max_dev"], st.pop("ratio_max_dev"))
                for key, v in st.items():
                    acc[key] += v
            max_norm = g.max_grad_norm if g.max_grad_norm > 0 else float("inf")
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, max_norm))
            self.optimizer.step()
            w = acc["weight"] or 1.0
            inner.append({"loss": acc["loss"], "kl": acc["kl"] / w, "clip_frac": acc["clipped"] / w,
                          "grad_norm": grad_norm, "ratio_max_dev": acc["ratio_max_dev"], "tokens": acc["tokens"]})
        self.optimizer.zero_grad(set_to_none=True)  # free the gradients before the next rollout
        times["update"] = time.time() - t0
        return {"inner": inner, "times": times}

    def generation(self, t: int, bar=None) -> dict:
        """One GRPO step (named like the ES Trainer's, so benchmarks drive both alike)."""
        return self.step(t, bar)

    def step(self, t: int, bar=None) -> dict:
        g = self.cfg.grpo
        tokens0 = self.policy.tokens_generated
        progress = turn_progress(bar, f"step {t}", self.episodes_per_step)
        t0 = time.time()
        try:
            episodes = self.play(t, progress)
        except Exception:  # like a failed ES member: recorded, no update this step, the run goes on
            return self._failed_step(t, traceback.format_exc(), time.time() - t0, bar)
        t_rollout = time.time() - t0
        played = [ep.to_json() for ep in episodes]
        failed, first_failure = failures.count(played)
        if failed == len(played):  # nothing to learn from: the episodes stay on disk, the weights as they were
            self.run.write_trajectories(f"gen{t:04d}", [{"generation": t, **_public(ep)} for ep in played])
            failures.stop_if_all_failed(played, f"GRPO step {t}", self.run.path)
        rewards = np.array([ep.reward for ep in episodes], dtype=np.float64).reshape(g.puzzles_per_step, g.group_size)
        adv = group_advantages(rewards, g.scale_std).reshape(-1).tolist()
        samples = turn_samples(episodes, adv)
        upd = {"inner": [], "times": {"ref": 0.0, "update": 0.0}}
        lr = self.lr_at(t)
        for group in self.optimizer.param_groups:  # set every step: a resumed optimizer's own lr is not trusted
            group["lr"] = lr
        if samples:
            set_token_weights(samples, g.loss_norm)
            if g.kl_coef == 0:  # zero-advantage turns add nothing to the loss or its gradient
                samples = [s for s in samples if s.advantage != 0.0]
            if samples:
                try:
                    upd = self.update(samples)
                except Exception:  # e.g. out of memory in a backward pass: skip this step's update
                    self.optimizer.zero_grad(set_to_none=True)
                    upd["error"] = traceback.format_exc()
                    self.log(f"[esopt] GRPO step {t}: update failed, weights left as they were before it "
                             f"(unless an inner step had already been taken):\n{upd['error']}")
        self.run.write_trajectories(f"gen{t:04d}", [
            {"generation": t, "group": i // g.group_size, **_public(ep.to_json())} for i, ep in enumerate(episodes)])
        first = upd["inner"][0] if upd["inner"] else {}
        last = upd["inner"][-1] if upd["inner"] else {}
        finite = rewards[np.isfinite(rewards)]
        flat_groups = int(sum(np.ptp(r) == 0 for r in rewards))
        stats = {
            "kind": "train", "generation": t, "algo": "grpo", "episodes": len(episodes),
            "reward_mean": float(finite.mean()), "reward_max": float(finite.max()), "reward_min": float(finite.min()),
            "reward_std": float(finite.std()), "solved": float(np.mean([ep.solved for ep in episodes])),
            "errors": sum(ep.error is not None for ep in episodes), "flat_groups": flat_groups,
            "loss": first.get("loss", 0.0), "kl": first.get("kl", 0.0), "clip_frac": last.get("clip_frac", 0.0),
            "grad_norm": first.get("grad_norm", 0.0), "ratio_max_dev": last.get("ratio_max_dev", 0.0),
            "trained_tokens": first.get("tokens", 0), "lr": lr,
            "tokens": self.policy.tokens_generated - tokens0,
            "time_rollout": t_rollout, "time_ref": upd["times"]["ref"], "time_update": upd["times"]["update"],
            "peak_rss_mb": peak_rss_mb(),  # this process's peak so far: the report's memory
        }
        if "error" in upd:
            stats["update_error"] = upd["error"]
        if failed:
            stats["first_failure"] = first_failure
        self.run.log(stats)
        self.last_update = upd
        if bar is not None:
            bar.update(1)
        return stats

    def _failed_step(self, t: int, error: str, seconds: float, bar=None) -> dict:
        """A step whose rollout raised: recorded (metrics line, empty trajectory file), weights unchanged."""
        self.log(f"[esopt] GRPO step {t}: rollout failed, no update this step:\n{error}")
        self.run.write_trajectories(f"gen{t:04d}", [])
        nan = float("nan")
        stats = {"kind": "train", "generation": t, "algo": "grpo", "episodes": 0, "rollout_error": error,
                 "reward_mean": nan, "reward_max": nan, "reward_min": nan, "reward_std": nan, "solved": nan,
                 "errors": self.episodes_per_step, "flat_groups": 0, "loss": 0.0, "kl": 0.0, "clip_frac": 0.0,
                 "grad_norm": 0.0, "ratio_max_dev": 0.0, "trained_tokens": 0, "lr": self.lr_at(t), "tokens": 0,
                 "time_rollout": seconds, "time_ref": 0.0, "time_update": 0.0}
        self.run.log(stats)
        self.last_update = {"inner": [], "times": {"ref": 0.0, "update": 0.0}}
        if bar is not None:
            bar.update(1)
        return stats

    # --------------------------------------------------------------------- run
    def train(self, start: int = 0) -> dict:
        T, g = self.steps, self.cfg.grpo
        bar = tqdm(total=T - start, desc="GRPO", unit="step", dynamic_ncols=True, mininterval=1.0)

        def describe(t, s, seconds):
            if s.get("rollout_error"):
                return f"[esopt] grpo step {t + 1}/{T}: rollout failed, no update ({seconds:.0f}s)"
            return (f"[esopt] grpo step {t + 1}/{T}: reward mean {s['reward_mean']:.3f} max {s['reward_max']:.3f} "
                    f"min {s['reward_min']:.3f} ({s['flat_groups']}/{g.puzzles_per_step} flat groups) | "
                    f"loss {s['loss']:+.4f} kl {s['kl']:.4f} clip {s['clip_frac']:.3f} grad {s['grad_norm']:.3f} | "
                    f"{seconds:.0f}s (rollout {s['time_rollout']:.0f}s, update {s['time_update']:.0f}s)"
                    + (" | update FAILED, skipped" if s.get("update_error") else "")
                    + (f" | {s['errors']}/{s['episodes']} episodes failed (first: {s['first_failure']})"
                       if s.get("errors") else ""))

        return train_loop(self, start, T, bar, describe, self.save_checkpoint, g.checkpoint_every)

    def finish(self, evals: dict) -> dict:
        summary = finish_run(self.run, self.model, evals, self.steps, self.log, algo="grpo",
                             episodes_per_generation=self.episodes_per_step)
        refresh_report(self.run.path, self.log)  # never raises: the run is complete without its report
        return summary


def _public(ep: dict) -> dict:
    """An episode record without the token ids (trajectory files stay as ES writes them)."""
    ep["turns"] = [{k: v for k, v in turn.items() if k not in ("prompt_ids", "token_ids")} for turn in ep["turns"]]
    return ep
