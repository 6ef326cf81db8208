"""The model side of the heuristic search: a proposer that writes replies with the model
(perturbed per member in a "+ES" run), and the ES step taken once per operator batch.

Both reuse esopt's ES machinery as the trainer does: Strategy.ask for the batch's members
(antithetic pairs of seeded directions), Perturber.perturbed for each member's generation
(restored bit-exactly, even on error), Strategy.tell for the shaped coefficients,
Perturber.apply_update for the step, and a History whose records replay the final weights
(History.replay on the base model, hash-verified).
"""
from __future__ import annotations

from ..es.build import make_perturber
from ..models.decode import DecodeOptions
from ..es.history import History
from ..es.perturb import weights_hash
from ..es.step import ESStep
from ..es.strategy import Member, Strategy
from ..utils.seeding import derive_seed
from .prompts import conversation


class ModelProposer:
    """propose(prompts, slots): the prompts of slots without an ES member in one batched generate
    call (the unperturbed model; decoding seeded by the first such slot's sample seed), then each
    member's prompt in a call of its own under its perturbation (perturber required then)."""

    def __init__(self, policy, max_new_tokens: int, sampling, perturber=None, stop=None):
        self.policy, self.perturber = policy, perturber
        # stop(reply_so_far) -> bool: end a reply early (code.block_done: after the code); each call decodes with
        # its slot's sample seed
        self.options = DecodeOptions(max_new_tokens, sampling, stop_when=stop)

    def propose(self, prompts: list[str], slots: list) -> list[str]:
        out: list = [None] * len(prompts)
        plain = [i for i, slot in enumerate(slots) if slot.seed is None]
        if plain:
            texts = self.policy.generate([conversation(prompts[i]) for i in plain],
                                         self.options.but(seed=slots[plain[0]].sample_seed))
            for i, text in zip(plain, texts):
                out[i] = text
        for i, (prompt, slot) in enumerate(zip(prompts, slots)):
            if slot.seed is None:
                continue
            if self.perturber is None:
                raise RuntimeError("a slot names an ES member but the proposer has no perturber")
            with self.perturber.perturbed(slot.seed, slot.sigma, slot.sign):
                out[i] = self.policy.generate([conversation(prompt)], self.options.but(seed=slot.sample_seed))[0]
        return out


class WeightSteps:
    """One ES update per operator batch over `steps` batches (sigma and alpha scheduled over them),
    taken through the ES step every ES run takes (es/step.py)."""

    def __init__(self, model, es_cfg, seed: int, steps: int, history: History, perturber=None):
        self.model, self.es, self.steps, self.history = model, es_cfg, steps, history
        self.perturber = perturber or make_perturber(model, es_cfg)
        if self.perturber.play_mode != "in_place":
            raise ValueError("the heuristic search perturbs weights in place: es.noise must be gaussian or table, "
                             "not lowrank")
        strategy = Strategy(es_cfg.population, derive_seed("ahd-strategy", seed), es_cfg.antithetic, es_cfg.shaping)
        self.step = ESStep(strategy, self.perturber.stream_keys, es_cfg.sigma, es_cfg.alpha, steps)
        history.meta.setdefault("base_weights_hash", weights_hash(model))
        history.meta.setdefault("scope_numel", self.perturber.numel)
        history.meta.setdefault("noise", self.perturber.describe())

    def sigma(self, t: int) -> float:
        return self.step.values(t)[0]

    def alpha(self, t: int) -> float:
        return self.step.values(t)[1]

    def ask(self, t: int) -> list[Member]:
        return self.step.ask(t)

    def tell(self, t: int, members: list[Member], rewards: list[float], operator: str = "") -> dict:
        """Shape the rewards, step the weights, append the history record (returned)."""
        def update(seeds, coefs, alpha, population):
            self.perturber.apply_update(seeds, coefs, alpha, population)
            return weights_hash(self.model)

        record = self.step.tell(t, members, rewards, update)
        record = {"generation": t, "operator": operator, **record}
        self.history.append(record)
        return record
