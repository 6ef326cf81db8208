"""Context co-evolution as a component of the ES step: ask draws each member's context, tell moves
the context logits by the same shaped rewards (and grows the library when due), the history's
metadata says what was searched, and evaluation plays the most likely context. With
coevo.mode=weights the component is NoContext, which does nothing, so the trainer has one path."""
from __future__ import annotations

import time

from ....agent.rollout import AgentContext
from ....es.history import RunFolderError


class NoContext:
    """coevo.mode=weights: the agent's own context for every member."""

    moves_weights = True

    def meta(self) -> dict:
        return {}

    def check_resume(self, meta: dict, path) -> None:
        if "context" in meta:
            mode = meta["context"].get("mode")
            raise RunFolderError(f"{path} was trained with coevo.mode={mode}: resume it with that mode, "
                                 "not coevo.mode=weights")

    def replay(self, records: list[dict]) -> None:
        pass

    def ask(self, t: int, members: list) -> list | None:
        return None  # the agent's own context

    def tell(self, trainer, t: int, record: dict, traj: list[dict], times: dict) -> dict:
        return {}

    def eval_context(self):
        return None


class ContextComponent:
    """coevo.mode both (weights too) or context (contexts alone): ContextSearch's draws and logits,
    and with coevo.grow.every a Grower that proposes, screens and gates new skills."""

    def __init__(self, cfg, log=print):
        from .search import ContextSearch

        self.cfg = cfg
        self.search = ContextSearch(cfg, AgentContext.from_config(cfg.agent))
        self.moves_weights = cfg.coevo.mode != "context"
        self.grower = None
        if cfg.coevo.grow.every:
            from .grow import Grower

            self.grower = Grower(cfg, log)
        self.pending = None

    def meta(self) -> dict:
        return {"context": self.search.meta()}

    def check_resume(self, meta: dict, path) -> None:
        self.search.check_meta(meta, path)

    def replay(self, records: list[dict]) -> None:
        self.search.replay(records)

    def ask(self, t: int, members: list) -> list[AgentContext]:
        """One context per member (antithetic pairs share a draw), kept for tell."""
        draws, units, contexts = self.search.ask(t, members)
        self.pending = (draws, units)
        return contexts

    def tell(self, trainer, t: int, record: dict, traj: list[dict], times: dict) -> dict:
        """The logits moved by the record's shaped rewards (record["context"]); then, when due, the
        library grown (after the update: the gate plays the weights the next generation starts
        from). Returns what the generation's metrics line adds."""
        from .grow import due

        t0 = time.time()
        record["context"] = self.search.tell(*self.pending, record["shaped"])
        times["context"] = time.time() - t0
        stats: dict = {}
        if self.grower is not None and due(self.cfg, t):
            t0 = time.time()
            growth = record["growth"] = self.grower.step(trainer, self.search, t, traj)
            record["context"]["logits"] = self.search.genome.to_json()  # the grown library's logits
            times["grow"] = time.time() - t0
            stats["extra_episodes"] = growth["episodes"]
            stats["grow"] = {"gate_episodes": growth["episodes"], "admitted": [a["name"] for a in growth["admitted"]],
                             "rejected": [c.get("reason") for c in growth["candidates"] if c.get("verdict") == "rejected"]}
        stats["context_probs"] = self.search.probs()  # after this generation's update (and growth)
        return stats

    def eval_context(self):
        """(context, note): the most likely context under the current logits."""
        return self.search.eval_context()


def context_component(cfg, log=print):
    """The run's context component: NoContext with coevo.mode=weights, else the context search."""
    return NoContext() if cfg.coevo.mode == "weights" else ContextComponent(cfg, log)
