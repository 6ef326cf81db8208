"""The heuristic search loop: EoH-style (a population, four LLM operators) or independent
sampling, with or without an ES step on the proposing model's weights per operator batch.

The loop knows nothing of models. A proposer turns prompts into reply texts:

    proposer.propose(prompts: list[str], slots: list[Slot]) -> list[str]

one text per prompt, one LLM call each. A Slot says which proposal it is, its decoding seed,
and, in a "+ES" run, the member (seed, sign, sigma) whose perturbed weights must write it.
The ES step (esopt.ahd.weights.WeightSteps) asks for the batch's members and takes their
rewards after the batch; without it the same batches are written by the unperturbed model.

The budget is the number of LLM calls (the paper's "evaluations"): every proposal counts,
whatever comes of it (unparseable, a duplicate, crashing in the sandbox), so no output can
make the search loop. The budget is a whole number of batches.

EoH: the population starts as the reference heuristic, then batches of e1 fill it
(ceil((population - 1) / batch) of them), then the operators e1, e2, m1, m2 take turns, one
batch each. Parents are drawn by rank (the k-th best with weight 1 / k). The two proposals of
an antithetic pair share a prompt. A valid child that is no duplicate joins the population,
which keeps its `population` best. Sample: every batch uses the sample prompt (task and
reference only), the best valid reply so far wins. Children are scored on the validation
instances only; the held-out instances score the final best heuristic once, at the end.

Reward of a proposal (what ES maximises): parent objective - child objective (objectives are
minimised), where the parent objective is the parent's (m1, m2), the better parent's (e2),
the population's best at the time of the batch (e1), or the reference's (sample); with
reward="relative" the difference is divided by |parent objective|; with reward="bounded" it is
d / (|d| + |parent objective|), in (-1, 1), so that with invalid_reward <= -1 no valid child
ranks below an invalid one (however much worse it is). An invalid child (no code,
unparseable, wrong signature, failing in the sandbox, an invalid output) or a duplicate of a
heuristic seen in an earlier batch gets `invalid_reward` (-1). A duplicate of an earlier reply
in the same batch (the two members of a pair wrote the same code) gets that reply's reward,
so identical behaviour never counts as a difference between directions.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Literal

import numpy as np

from ..utils.seeding import derive_seed
from .code import extract, fingerprint
from .prompts import E1_SHOWN, OPERATORS, PARENTS, Shown, operator_prompt, sample_prompt

MAX_TEXT = 6000  # characters of a reply kept in its record


@dataclass(frozen=True)
class Slot:
    index: int  # the proposal's number in the run (0-based): its LLM call
    sample_seed: int  # decoding seed
    seed: int | None = None  # ES member seed (None: the unperturbed model writes it)
    sign: int = 1
    sigma: float = 0.0


@dataclass(frozen=True)
class Settings:
    method: Literal["eoh", "sample"]
    budget: int  # LLM calls
    batch: int  # proposals per operator batch (= ES members with +ES)
    population: int = 4  # EoH population size
    seed: int = 0
    reward: Literal["absolute", "relative", "bounded"] = "absolute"
    invalid_reward: float = -1.0
    pair_prompts: bool = True  # proposals 2j and 2j+1 share a prompt (an antithetic pair)

    def __post_init__(self):
        if self.method not in ("eoh", "sample"):
            raise ValueError(f"unknown search method {self.method!r}; allowed: eoh, sample")
        if self.batch < 1 or self.budget < self.batch or self.budget % self.batch:
            raise ValueError(f"the budget ({self.budget} LLM calls) must be a positive multiple of the batch "
                             f"({self.batch} proposals)")
        if self.population < 1:
            raise ValueError(f"the EoH population must hold at least 1 heuristic, got {self.population}")
        if self.reward not in ("absolute", "relative", "bounded"):
            raise ValueError(f"unknown reward {self.reward!r}; allowed: absolute, relative, bounded")

    @property
    def batches(self) -> int:
        return self.budget // self.batch


@dataclass
class Heuristic:
    id: str  # "ref" or "p<index>"
    code: str
    objective: float  # mean over the validation instances, lower is better
    idea: str | None
    fingerprint: str

    def shown(self) -> Shown:
        return Shown(self.code, self.objective, self.idea)


@dataclass
class Outcome:
    """What came of the search."""
    reference: dict  # validation objective of the reference
    best: dict  # id, code, idea, validation objective, held-out evaluation
    calls: int
    counts: dict  # valid / invalid / duplicate / kept
    population: list[dict] = field(default_factory=list)
    es_steps: int = 0


@dataclass
class _Failed:
    reason: str
    wall_s: float
    valid: bool = False
    objective: None = None
    per_instance: None = None


def _fatal(err: Exception) -> bool:
    """A sandbox that cannot run anything on this machine stops the search (nothing was run)."""
    try:
        from ..sandbox.parent import SandboxUnavailable
    except ImportError:
        return False
    return isinstance(err, SandboxUnavailable)


def _num(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


def operator_plan(settings: Settings) -> list[str]:
    """The operator of every batch of the run."""
    if settings.method == "sample":
        return ["sample"] * settings.batches
    init = -(-(settings.population - 1) // settings.batch) if settings.population > 1 else 0
    plan = ["e1"] * min(init, settings.batches)
    while len(plan) < settings.batches:
        plan.append(OPERATORS[(len(plan) - init) % len(OPERATORS)])
    return plan


def rank_select(population: list[Heuristic], k: int, rng: np.random.Generator) -> list[Heuristic]:
    """k distinct heuristics (all of them if fewer), the r-th best (r = 1, 2, ...) with weight 1/r."""
    ranked = sorted(population, key=lambda h: h.objective)
    k = min(k, len(ranked))
    w = 1.0 / np.arange(1, len(ranked) + 1)
    picks = rng.choice(len(ranked), size=k, replace=False, p=w / w.sum())
    return [ranked[i] for i in sorted(picks)]


def reward_of(parent: float, child: float | None, settings: Settings) -> float:
    if child is None:
        return settings.invalid_reward
    diff = parent - child
    if settings.reward == "relative":
        diff /= max(abs(parent), 1e-12)
    elif settings.reward == "bounded":  # kept above -1 where the division rounds to it (a child 1e17x worse)
        diff = max(diff / (abs(diff) + max(abs(parent), 1e-12)), math.nextafter(-1.0, 0.0))
    return float(diff)


class Search:
    """One run of the search. evaluate(problem, code, instances) -> an Evaluation (valid,
    objective, per_instance, reason, wall_s); on_record(dict) receives each proposal's record."""

    def __init__(self, problem, proposer, settings: Settings, evaluate: Callable, validation: list, heldout: list,
                 steps=None, on_record: Callable[[dict], None] | None = None, log=print):
        self.problem, self.proposer, self.s = problem, proposer, settings
        self.evaluate_fn, self.validation, self.heldout = evaluate, validation, heldout
        self.steps = steps  # WeightSteps for "+ES", or None
        self.on_record = on_record or (lambda rec: None)
        self.log = log
        self.calls = 0
        self.population: list[Heuristic] = []
        self.seen: dict[str, str] = {}  # fingerprint -> id of the first heuristic with it
        self.best: Heuristic | None = None
        self.counts = {"valid": 0, "invalid": 0, "duplicate": 0, "kept": 0}
        self.heldout_evaluations = 0

    # ------------------------------------------------------------------ pieces
    def _evaluate(self, code: str, instances: list):
        """The evaluator's result; an evaluator that raises (a bug there, not in the candidate)
        makes this candidate invalid with the error as its reason, and the search goes on."""
        t0 = time.time()
        try:
            return self.evaluate_fn(self.problem, code, instances)
        except Exception as err:  # noqa: BLE001 - recorded in the proposal's reason
            if _fatal(err):
                raise
            return _Failed(f"evaluator error: {type(err).__name__}: {err}", time.time() - t0)

    def _reference(self) -> Heuristic:
        ev = self._evaluate(self.problem.reference, self.validation)
        if not ev.valid or _num(ev.objective) is None:
            raise RuntimeError(f"the reference heuristic of {self.problem.name} is invalid on the validation "
                               f"instances: {ev.reason}")
        ref = Heuristic("ref", self.problem.reference, float(ev.objective), "the problem's reference heuristic",
                        fingerprint(self.problem.reference))
        self.seen[ref.fingerprint] = ref.id
        return ref

    def _prompt(self, op: str, t: int, j: int) -> tuple[str, list[Heuristic], float]:
        """(prompt, parents shown, parent objective for the reward) of prompt j of batch t."""
        if op == "sample":
            return sample_prompt(self.problem, self.ref.shown()), [self.ref], self.ref.objective
        rng = np.random.default_rng(derive_seed("ahd-parents", self.s.seed, t, j))
        k = PARENTS[op] or E1_SHOWN
        parents = rank_select(self.population, k, rng)
        if op == "e1":
            base = min(h.objective for h in self.population)
        else:
            base = min(h.objective for h in parents)
        return operator_prompt(self.problem, op, [p.shown() for p in parents]), parents, base

    def _slots(self, t: int, members) -> list[Slot]:
        n = self.s.batch
        first = self.calls
        if members is None:
            return [Slot(first + k, derive_seed("ahd-decode", self.s.seed, t, k)) for k in range(n)]
        sigma = self.steps.sigma(t)
        # an antithetic pair decodes with one seed: the two directions are the only difference
        return [Slot(first + k, derive_seed("ahd-decode", self.s.seed, t, k // 2 if self.s.pair_prompts else k),
                     m.seed, m.sign, sigma) for k, m in enumerate(members)]

    def _keep(self, child: Heuristic) -> None:
        self.population.append(child)
        self.population.sort(key=lambda h: h.objective)  # stable: among equals, the older first
        del self.population[self.s.population:]

    # ------------------------------------------------------------------ a batch
    def batch(self, t: int, op: str) -> list[dict]:
        n = self.s.batch
        members = self.steps.ask(t) if self.steps is not None else None
        slots = self._slots(t, members)
        group = 2 if self.s.pair_prompts and n % 2 == 0 else 1
        prompts, parents, bases = [], [], []
        for j in range(0, n, group):
            p, par, base = self._prompt(op, t, j // group)
            prompts += [p] * group
            parents += [par] * group
            bases += [base] * group
        t0 = time.time()
        texts = list(self.proposer.propose(prompts, slots))
        gen_s = (time.time() - t0) / n
        if len(texts) != n:
            raise RuntimeError(f"the proposer returned {len(texts)} texts for {n} prompts")
        self.calls += n
        records, batch_seen = [], {}
        for k, (text, slot, par, base) in enumerate(zip(texts, slots, parents, bases)):
            t1 = time.time()
            cand = extract(text if isinstance(text, str) else "", self.problem.entry, self.problem.signature)
            rec = {"index": slot.index, "batch": t, "operator": op, "parents": [p.id for p in par],
                   "parent_objectives": [p.objective for p in par], "parent_objective": base,
                   "text": (text if isinstance(text, str) else repr(text))[:MAX_TEXT], "idea": cand.idea,
                   "code": cand.code, "valid": False, "objective": None, "reason": cand.reason,
                   "member": None if slot.seed is None else {"seed": slot.seed, "sign": slot.sign, "sigma": slot.sigma},
                   "gen_s": gen_s}
            fp = fingerprint(cand.code) if cand.ok else None
            if fp is not None and fp in batch_seen:  # the same code as an earlier reply of this batch
                twin = batch_seen[fp]
                rec.update(reason=f"duplicate of {twin['id']} (same batch)", duplicate_of=twin["id"],
                           reward=twin["reward"])
                self.counts["duplicate"] += 1
            elif fp is not None and fp in self.seen:
                rec.update(reason=f"duplicate of {self.seen[fp]}", duplicate_of=self.seen[fp],
                           reward=self.s.invalid_reward)
                self.counts["duplicate"] += 1
            elif not cand.ok:
                rec["reward"] = self.s.invalid_reward
                self.counts["invalid"] += 1
            else:
                ev = self._evaluate(cand.code, self.validation)
                obj = _num(ev.objective) if ev.valid else None
                rec.update(valid=obj is not None, objective=obj,
                           reason=None if obj is not None else (ev.reason or "no finite objective"),
                           reward=reward_of(base, obj, self.s), eval_s=_num(getattr(ev, "wall_s", None)))
                self.seen[fp] = f"p{slot.index}"
                batch_seen[fp] = {"id": f"p{slot.index}", "reward": rec["reward"]}
                if obj is None:
                    self.counts["invalid"] += 1
                else:
                    self.counts["valid"] += 1
                    child = Heuristic(f"p{slot.index}", cand.code, obj, cand.idea, fp)
                    if self.best is None or obj < self.best.objective:
                        self.best = child
                    if self.s.method == "eoh":
                        self._keep(child)
                        rec["kept"] = any(h.id == child.id for h in self.population)
                        self.counts["kept"] += rec["kept"]
            rec["fingerprint"] = fp
            rec["best_id"], rec["best_so_far"] = self.best.id, self.best.objective
            rec["wall_s"] = gen_s + (time.time() - t1)
            records.append(rec)
        if self.steps is not None:
            step = self.steps.tell(t, members, [r["reward"] for r in records], op)
            for r in records:
                r["weights_hash"] = step["weights_hash"]
        for r in records:
            self.on_record(r)
        return records

    # ------------------------------------------------------------------ the run
    def run(self) -> Outcome:
        self.ref = self._reference()
        self.best = self.ref
        self.population = [self.ref]
        plan = operator_plan(self.s)
        for t, op in enumerate(plan):
            records = self.batch(t, op)
            valid = [r["objective"] for r in records if r["valid"]]
            self.log(f"[esopt] ahd {self.s.method} batch {t + 1}/{len(plan)} ({op}): {len(valid)}/{len(records)} "
                     f"valid, best so far {self.best.objective:.6g} ({self.best.id}), calls {self.calls}/{self.s.budget}")
        ev = self._evaluate(self.best.code, self.heldout)  # the only use of the held-out instances
        self.heldout_evaluations += 1
        best = {"id": self.best.id, "code": self.best.code, "idea": self.best.idea,
                "objective": self.best.objective, "heldout": {
                    "valid": bool(ev.valid), "objective": _num(ev.objective) if ev.valid else None,
                    "per_instance": list(ev.per_instance) if ev.valid and ev.per_instance is not None else None,
                    "reason": ev.reason, "wall_s": _num(getattr(ev, "wall_s", None))}}
        return Outcome(reference={"objective": self.ref.objective}, best=best, calls=self.calls,
                       counts=dict(self.counts),
                       population=[{"id": h.id, "objective": h.objective} for h in self.population],
                       es_steps=len(plan) if self.steps is not None else 0)


def outcome_json(outcome: Outcome) -> dict:
    return asdict(outcome)
