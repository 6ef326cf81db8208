"""The context search a Trainer holds (coevo.mode context or both): per generation it gives each
member a context (ask), moves the logits with the members' shaped rewards (tell), and rebuilds
the logits from history.json on resume (replay).

Draw units. With coevo.mode=both and es.antithetic=true, the two members of an antithetic
pair (same weight seed, opposite signs) share one draw: unit = index // 2. Their reward
difference then estimates the weight direction with the context held fixed (the context's
effect cancels in it), and their mean estimates the context's effect with the first-order
weight term cancelled (R(theta + s eps, c) + R(theta - s eps, c) = 2 R(theta, c) + O(s^2)).
Without pairs, or with coevo.mode=context (no weight noise: a pair would play the same policy
twice), every member draws its own context: unit = index. The draw of unit u in generation t
is seeded with derive_seed("context", run seed, t, u), like the weight noise from the run seed.
"""
from __future__ import annotations

from ....agent.rollout import AgentContext
from ....config import ConfigError
from ....es.history import RunFolderError
from ....utils.seeding import derive_seed
from .assemble import assemble
from .genome import Draw, Genome
from .library import Skill, SkillLibrary, load_library
from .update import context_step


class ContextSearch:
    def __init__(self, cfg, base: AgentContext, lib: SkillLibrary | None = None):
        c = cfg.coevo
        if c.mode == "weights":
            raise ValueError("ContextSearch is for coevo.mode context or both")
        self.mode, self.lr, self.clip, self.run_seed = c.mode, c.lr, c.logit_clip, cfg.run.seed
        lib = lib if lib is not None else load_library(c)
        self.base = base
        self.genome = self.initial = Genome.initial(lib, c.init_prob, c.init_logits)
        if abs(self.initial.logits).max(initial=0.0) > self.clip:
            raise ConfigError(f"coevo.init_prob / coevo.init_logits give initial logits up to "
                              f"{abs(self.initial.logits).max():.3g}, beyond coevo.logit_clip={self.clip}: "
                              "raise the clip or give smaller initial logits")
        self.paired = c.mode == "both" and cfg.es.antithetic

    @property
    def lib(self) -> SkillLibrary:
        """The library now: the configured one plus any skills grown so far (algos/es/coevo/grow.py)."""
        return self.genome.lib

    def add_skill(self, skill: Skill, logit: float) -> None:
        """A grown skill joins the library (after the other skills) with this starting logit."""
        self.genome = self.genome.with_skill(skill, logit)

    # ------------------------------------------------------------------ history meta
    def meta(self) -> dict:
        """What history.json's meta records of the search: enough to rebuild any generation's context."""
        lib = self.initial.lib  # the configured library; grown skills are in the records (algos/es/coevo/grow.py)
        return {"mode": self.mode, "library_hash": lib.digest, "library": lib.to_json(),
                "initial_logits": self.initial.to_json()}

    def check_meta(self, meta: dict, path) -> None:
        """The run's recorded search must be this one (same mode, library and initial logits)."""
        rec = meta.get("context")
        if rec is None:
            raise RunFolderError(f"{path} was trained without a context search (coevo.mode=weights); it cannot "
                                 f"resume with coevo.mode={self.mode}")
        if rec.get("mode") != self.mode:
            raise RunFolderError(f"{path} was trained with coevo.mode={rec.get('mode')}, not {self.mode}")
        if rec.get("library_hash") != self.initial.lib.digest:
            raise RunFolderError(f"the skill library differs from the one {path} was trained with (hash "
                                 f"{str(rec.get('library_hash'))[:12]} recorded, {self.initial.lib.digest[:12]} now): restore "
                                 "its coevo.skills / coevo.slots / coevo.library file, or start a new run")
        if rec.get("initial_logits") != self.initial.to_json():
            raise RunFolderError(f"coevo.init_prob / coevo.init_logits differ from those {path} was trained with")

    # ------------------------------------------------------------------ one generation
    def units(self, members) -> list[int]:
        return [m.index // 2 if self.paired else m.index for m in members]

    def ask(self, t: int, members) -> tuple[list[Draw], list[int], list[AgentContext]]:
        """Each member's draw, unit and assembled context for generation t."""
        units = self.units(members)
        by_unit: dict[int, Draw] = {}
        for u in units:
            if u not in by_unit:
                by_unit[u] = self.genome.sample(derive_seed("context", self.run_seed, t, u))
        draws = [by_unit[u] for u in units]
        return draws, units, [assemble(self.base, self.lib, d) for d in draws]

    def tell(self, draws: list[Draw], units: list[int], shaped: list[float]) -> dict:
        """Update the logits; the generation record's "context" entry (draws, units, logits after)."""
        self.genome = context_step(self.genome, draws, units, shaped, self.lr, self.clip)
        return {"draws": [d.to_json(self.lib) for d in draws], "units": list(units), "logits": self.genome.to_json()}

    def probs(self) -> dict:
        return self.genome.probs_json()

    # ------------------------------------------------------------------ resume
    def replay(self, records: list[dict]) -> None:
        """Recompute the logits from the records' draws and shaped rewards, and the library from
        the skills they record as grown (never asking a proposer), checking each generation's
        result against the logits it recorded (after that generation's growth)."""
        from .grow import grown_skills

        g = self.initial
        for rec in records:
            ctx = rec.get("context")
            if not isinstance(ctx, dict):
                raise RunFolderError(f"history generation {rec['generation']} has no context record: it was not "
                                     f"trained with coevo.mode={self.mode}")
            draws = [Draw.from_json(d, g.lib) for d in ctx["draws"]]
            g = context_step(g, draws, ctx["units"], rec["shaped"], self.lr, self.clip)
            for skill, logit in grown_skills(rec):
                g = g.with_skill(skill, logit)
            if g.to_json() != ctx["logits"]:
                raise RunFolderError(f"replaying the context update of generation {rec['generation']} gave other "
                                     "logits than history.json records: coevo.lr / coevo.logit_clip changed, or a "
                                     "different esopt version")
        self.genome = g

    # ------------------------------------------------------------------ evaluation
    def eval_context(self) -> tuple[AgentContext, dict]:
        """The most likely context under the current logits, and a note for the eval record."""
        draw = self.genome.most_likely()
        return assemble(self.base, self.lib, draw), {"choice": "most_likely", "draw": draw.to_json(self.lib)}
