"""The context genome: one logit per skill (Bernoulli inclusion, p = sigmoid(logit)) and one
logit per slot alternative (categorical choice, p = softmax over the slot's logits).

A draw is sampled from a seed with a local Philox generator: the same seed and logits give the
same draw on any machine where numpy's float ops agree; the draws are recorded anyway, so resume
and export never depend on sampling again.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....config import ConfigError
from .library import SkillLibrary


TIE = 1e-9  # logits this close count as equal when choosing the most likely draw


@dataclass(frozen=True)
class Draw:
    """One sampled context: which skills are in, which alternative each slot takes."""

    skills: tuple[bool, ...]
    slots: tuple[int, ...]

    def to_json(self, lib: SkillLibrary) -> dict:
        return {"skills": [s.name for s, x in zip(lib.skills, self.skills) if x],
                "slots": {s.name: i for s, i in zip(lib.slots, self.slots)}}

    @classmethod
    def from_json(cls, data: dict, lib: SkillLibrary) -> "Draw":
        names = set(lib.names)
        unknown = [n for n in list(data["skills"]) + list(data["slots"]) if n not in names]
        if unknown:
            raise ValueError(f"a recorded context draw names {unknown[0]!r}, which is not in the run's skill library")
        inc = set(data["skills"])
        return cls(tuple(s.name in inc for s in lib.skills), tuple(int(data["slots"][s.name]) for s in lib.slots))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


class Genome:
    """Logits over a library's skills and slot alternatives, as one float64 vector."""

    def __init__(self, lib: SkillLibrary, logits):
        self.lib = lib
        self.n_skills = len(lib.skills)
        sizes = [len(s.alternatives) for s in lib.slots]
        self.bounds: list[tuple[int, int]] = []  # each slot's [lo, hi) in the logit vector
        lo = self.n_skills
        for n in sizes:
            self.bounds.append((lo, lo + n))
            lo += n
        self.logits = np.array(logits, dtype=np.float64)
        if self.logits.shape != (self.n_skills + sum(sizes),):
            raise ValueError(f"genome needs {self.n_skills + sum(sizes)} logits, got {self.logits.shape}")

    @classmethod
    def initial(cls, lib: SkillLibrary, init_prob: float, init_logits: dict | None = None) -> "Genome":
        """Every skill at init_prob, every slot uniform, then coevo.init_logits by name."""
        g = cls(lib, np.zeros(len(lib.skills) + sum(len(s.alternatives) for s in lib.slots)))
        g.logits[: g.n_skills] = np.log(init_prob) - np.log1p(-init_prob)
        skills = {s.name: i for i, s in enumerate(lib.skills)}
        slots = {s.name: k for k, s in enumerate(lib.slots)}
        for name, value in (init_logits or {}).items():
            if name in skills:
                if not isinstance(value, (int, float)):
                    raise ConfigError(f"coevo.init_logits.{name}: skill {name!r} takes one number, got {value!r}")
                g.logits[skills[name]] = float(value)
            elif name in slots:
                lo, hi = g.bounds[slots[name]]
                if not isinstance(value, list) or len(value) != hi - lo:
                    raise ConfigError(f"coevo.init_logits.{name}: slot {name!r} takes a list of {hi - lo} numbers "
                                      f"(one per alternative), got {value!r}")
                g.logits[lo:hi] = value
            else:
                raise ConfigError(f"coevo.init_logits names {name!r}, which is no skill or slot of the library "
                                  f"(known: {', '.join(lib.names)})")
        return g

    def with_skill(self, skill, logit: float) -> "Genome":
        """The genome of the library grown by `skill` (appended after the other skills), whose
        logit starts at `logit`; every other logit is kept."""
        logits = np.concatenate([self.logits[: self.n_skills], [float(logit)], self.logits[self.n_skills :]])
        return Genome(self.lib.with_skill(skill), logits)

    # ------------------------------------------------------------------ probabilities
    def skill_probs(self) -> np.ndarray:
        return sigmoid(self.logits[: self.n_skills])

    def slot_probs(self) -> list[np.ndarray]:
        return [softmax(self.logits[lo:hi]) for lo, hi in self.bounds]

    def probs_json(self) -> dict:
        return {"skills": {s.name: float(p) for s, p in zip(self.lib.skills, self.skill_probs())},
                "slots": {s.name: [float(x) for x in p] for s, p in zip(self.lib.slots, self.slot_probs())}}

    def to_json(self) -> dict:
        return {"skills": {s.name: float(x) for s, x in zip(self.lib.skills, self.logits[: self.n_skills])},
                "slots": {s.name: [float(x) for x in self.logits[lo:hi]]
                          for s, (lo, hi) in zip(self.lib.slots, self.bounds)}}

    @classmethod
    def from_json(cls, lib: SkillLibrary, data: dict) -> "Genome":
        flat = [data["skills"][s.name] for s in lib.skills]
        for s in lib.slots:
            flat += data["slots"][s.name]
        return cls(lib, flat)

    # ------------------------------------------------------------------ draws
    def sample(self, seed: int) -> Draw:
        """Bernoulli per skill, categorical per slot, from a Philox generator seeded with `seed`."""
        rng = np.random.Generator(np.random.Philox(int(seed)))
        u_skills = rng.random(self.n_skills)
        u_slots = rng.random(len(self.bounds))
        skills = tuple(bool(u < p) for u, p in zip(u_skills, self.skill_probs()))
        slots = tuple(min(int(np.searchsorted(np.cumsum(p), u, side="right")), len(p) - 1)
                      for u, p in zip(u_slots, self.slot_probs()))
        return Draw(skills, slots)

    def most_likely(self) -> Draw:
        """The mode: skills with p > 0.5, each slot's most probable alternative. Logits within
        TIE of a tie count as tied (updates that cancel exactly on paper leave ~1e-17 of float
        residue, which must not decide a skill): a tied skill is left out, a tied slot takes its
        first tied alternative."""
        return Draw(tuple(bool(x > TIE) for x in self.logits[: self.n_skills]),
                    tuple(int(np.flatnonzero(z >= z.max() - TIE)[0]) for z in
                          (self.logits[lo:hi] for lo, hi in self.bounds)))

    def grad_log_prob(self, draw: Draw) -> np.ndarray:
        """d log p(draw) / d logits: x - p per skill, onehot - softmax per slot."""
        g = np.empty_like(self.logits)
        g[: self.n_skills] = np.array(draw.skills, dtype=np.float64) - self.skill_probs()
        for (lo, hi), choice, p in zip(self.bounds, draw.slots, self.slot_probs()):
            g[lo:hi] = -p
            g[lo + choice] += 1.0
        return g
