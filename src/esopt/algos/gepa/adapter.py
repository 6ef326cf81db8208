"""GEPA's adapter over esopt episodes (duck-typed gepa.core.adapter.GEPAAdapter).

evaluate(batch, candidate): the candidate's texts go into the agent's AgentContext, and each
TaskRef of the batch is played as one episode through esopt's own rollout (run_episodes:
the config's max_new_tokens, sampling, history, failure reward); a task's score is its
episode reward. One task is one episode is one of GEPA's metric calls, so the episode budget
and GEPA's metric-call count are the same number (EpisodeBudget stops GEPA before an
iteration could pass it).

make_reflective_dataset: one record per episode, from its turns (what the agent saw, its
reply, the env's feedback, the turn reward) and the episode's outcome; every component
reflects on the same records (they all shape the same replies).
"""
from __future__ import annotations

from ...agent.rollout import AgentContext
from ...train.evaluate import run_episodes
from ...utils.seeding import derive_seed
from .components import apply
from .requires import evaluation_batch
from .tasks import ObservedEnv, TaskPools, TaskRef


class BudgetExceeded(RuntimeError):
    """An evaluation would play more episodes than the budget allows (EpisodeBudget prevents it)."""


def candidate_key(candidate: dict[str, str]) -> tuple:
    return tuple(sorted(candidate.items()))


def clip(text: str, limit: int) -> str:
    text = str(text or "")
    return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} more characters]"


class EpisodeAdapter:
    # GEPA calls adapter.propose_new_texts when it is not None; None lets GEPA's own reflective
    # proposer (the reflection LM and its prompt) write the new texts. The attribute must exist.
    propose_new_texts = None

    def __init__(self, policy, pools: TaskPools, cfg, base: AgentContext, budget: int, obs_chars: int = 1500):
        self.policy, self.pools, self.cfg, self.base = policy, pools, cfg, base
        self.budget = budget
        self.obs_chars = obs_chars
        self.episodes = 0  # played so far (GEPA's metric calls)
        self.evaluations = 0
        self.by_split = {"train": 0, "validation": 0}
        self.valset_key = tuple(pools.valset)
        self.full_val: dict[tuple, list[dict]] = {}  # candidate -> its latest full-valset episodes

    # ------------------------------------------------------------------ GEPA's calls
    def evaluate(self, batch: list[TaskRef], candidate: dict[str, str], capture_traces: bool = False):
        episodes, watched = self.play(batch, candidate)
        scores = [float(ep.reward) for ep in episodes]
        outputs = [{"task": ep.task, "reward": ep.reward, "solved": ep.solved, "error": ep.error is not None}
                   for ep in episodes]
        traces = [self.trace(ep, w) for ep, w in zip(episodes, watched)] if capture_traces else None
        if tuple(batch) == self.valset_key:
            self.full_val[candidate_key(candidate)] = [ep.to_json() for ep in episodes]
        return evaluation_batch(outputs, scores, traces)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch, components_to_update: list[str]):
        records = [self.record(t) for t in eval_batch.trajectories or []]
        return {name: records for name in components_to_update}

    # ------------------------------------------------------------------ episodes
    def play(self, batch: list[TaskRef], candidate: dict[str, str]):
        """(episodes, observed envs) of the batch under the candidate's context."""
        if self.episodes + len(batch) > self.budget:
            raise BudgetExceeded(f"GEPA asked for {len(batch)} more episodes after {self.episodes}; the budget is "
                                 f"{self.budget}")
        envs, ids, obs = self.pools.envs(batch)
        watched = [ObservedEnv(e) for e in envs]
        seed = derive_seed("rollout", self.cfg.run.seed, "gepa", self.evaluations)
        episodes = run_episodes(self.policy, watched, ids, obs, self.cfg, seed, context=apply(self.base, candidate))
        self.evaluations += 1
        self.episodes += len(batch)
        for ref in batch:
            self.by_split[ref.split] += 1
        return episodes, watched

    def trace(self, ep, watched: ObservedEnv) -> dict:
        seen = watched.observations(ep.observation0, len(ep.turns))
        turns = [{"observation": o, "reply": t.get("response", ""), "feedback": t.get("feedback"),
                  "reward": t.get("reward")} for o, t in zip(seen, ep.turns)]
        return {"task": ep.task, "reward": ep.reward, "solved": ep.solved, "error": ep.error, "turns": turns}

    def record(self, trace: dict) -> dict:
        """One reflective record (GEPA renders it as Markdown for the reflection prompt)."""
        turns = []
        for k, t in enumerate(trace["turns"]):  # the first turn's observation is the Task: not repeated
            seen = {"Observation": clip(t["observation"], self.obs_chars)} if k else {}
            turns.append({**seen, "Reply": t["reply"] or "(empty)", "Feedback": t["feedback"] or "(none)",
                          "Reward": f"{float(t['reward'] or 0):.3f}"})
        outcome = (f"Episode reward {float(trace['reward']):.3f} after {len(turns)} turn(s); "
                   f"{'solved' if trace['solved'] else 'not solved'}.")
        if trace["error"]:
            outcome += " The episode failed: " + str(trace["error"]).strip().splitlines()[-1]
        return {"Task": clip(trace["turns"][0]["observation"] if turns else "", self.obs_chars),
                "Turns": turns or "(no turns)", "Feedback": outcome}


class EpisodeBudget:
    """GEPA stopper: stop before an iteration could pass the budget. An iteration plays at most
    the parent's and the child's minibatch and, if the child is accepted, the whole valset."""

    def __init__(self, adapter: EpisodeAdapter, minibatch: int):
        self.adapter = adapter
        self.worst_iteration = 2 * minibatch + len(adapter.pools.valset)

    def __call__(self, gepa_state=None) -> bool:
        return self.adapter.episodes + self.worst_iteration > self.adapter.budget
