"""Library growth, Trace2Skill-style: after every coevo.grow.every-th generation (not the last),
a proposer writes candidate skills from the generation's best and worst episodes
(algos/es/coevo/proposal.py); each reply is screened (algos/es/coevo/screen.py) and each surviving candidate
gated on a minibatch of training tasks (algos/es/coevo/gate.py); an admitted skill joins the library
after the other skills, its logit starting at logit(coevo.grow.init_prob) (clipped to
+-coevo.logit_clip): low, so the context search must find it useful before the most likely
context includes it.

Everything is recorded in the generation's history record under "growth": every candidate
(the reply, its source episodes, the verdict and reason, the gate's figures) and the admitted
skills with their lineage. Resume, export, eval and the report rebuild the library from these
records alone (grown_skills, library_at); the proposer is never asked again.
"""
from __future__ import annotations

import math
import traceback

from ....utils.seeding import derive_seed
from .assemble import assemble
from .gate import decide, play_arms
from .genome import Draw, Genome
from .library import Skill, SkillLibrary
from .proposal import EXAMPLE, pick_sources, proposal_prompt
from .proposer import ProposerError, make_proposer
from .screen import screen

REPLY_CHARS = 2000  # a reply is kept in the record up to this many characters


def due(cfg, t: int) -> bool:
    """Whether growth follows generation t (0-based): every coevo.grow.every generations, never after
    the run's last (a skill admitted then would never be searched)."""
    every = cfg.coevo.grow.every
    return bool(every) and (t + 1) % every == 0 and t + 1 < cfg.es.generations


def grown_skills(record: dict) -> list[tuple[Skill, float]]:
    """(skill, starting logit) of the skills a history record admitted, in order."""
    return [(Skill(a["name"], a["text"]), float(a["init_logit"])) for a in (record.get("growth") or {}).get("admitted", [])]


def library_at(meta_context: dict, records: list[dict]) -> SkillLibrary:
    """The library after these records: the run's configured library plus every skill they grew."""
    lib = SkillLibrary.from_json(meta_context["library"], "history.json's skill library")
    for rec in records:
        for skill, _ in grown_skills(rec):
            lib = lib.with_skill(skill)
    return lib


def genome_at(meta_context: dict, records: list[dict]) -> Genome:
    """The logits after these records (the last one's, over the library grown so far)."""
    lib = library_at(meta_context, records)
    return Genome.from_json(lib, records[-1]["context"]["logits"] if records else meta_context["initial_logits"])


def unique_name(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    k = 2
    while f"{name} {k}" in taken:
        k += 1
    return f"{name} {k}"


def _source(traj: list[dict], role: str, k: int) -> dict:
    ep = traj[k]
    return {"role": role, "generation": ep.get("generation"), "member": ep.get("member"), "task": ep.get("task"),
            "reward": ep.get("reward")}


class Grower:
    """One run's library growth; the trainer calls step() after each due generation's update."""

    def __init__(self, cfg, log=print):
        self.cfg, self.log = cfg, log
        self.proposer = None  # made on first use (never on resume); tests may set their own

    def _proposer(self, policy):
        if self.proposer is None:
            self.proposer = make_proposer(self.cfg, policy)
        return self.proposer

    def step(self, replica, search, t: int, traj: list[dict]) -> dict:
        """Propose, screen and gate candidates from generation t's episodes `traj`; admitted skills join
        `search`'s library. Returns the history record's "growth" entry. replica: what plays the
        gate's episodes (cfg, policy, tasks, rollout_fn) with its current, unperturbed weights."""
        g, run_seed = self.cfg.coevo.grow, self.cfg.run.seed
        out = {"proposer": None, "candidates": [], "admitted": [], "episodes": 0}
        if len(search.lib.skills) >= g.max_skills:
            out["skipped"] = f"the library holds {len(search.lib.skills)} skills (coevo.grow.max_skills={g.max_skills})"
            return self._done(out, t)
        sources = [pick_sources(traj, j, g.best, g.worst) for j in range(g.candidates)]
        if sources[0] is None:
            out["skipped"] = "no contrast: every scored episode of the generation has the same reward"
            return self._done(out, t)
        existing = [(s.name, s.text) for s in search.lib.skills]
        prompts = [proposal_prompt(traj, src, existing, g.obs_chars, g.max_chars) for src in sources]
        proposer = self._proposer(replica.policy)
        out["proposer"] = proposer.name
        try:
            replies = proposer.propose(prompts, seed=derive_seed("grow", run_seed, t))
        except ProposerError as err:
            out["error"] = str(err)
            self.log(f"[esopt] growth after generation {t}: the proposer failed: {err}")
            return self._done(out, t)
        base = search.base
        seen = [base.system_prompt] + [m["content"] for m in base.examples]  # what the agent already sees
        for slot in search.lib.slots:
            for alt in slot.alternatives:
                seen += [alt] if isinstance(alt, str) else [m["content"] for m in alt]
        known_skills = list(existing)
        taken = set(search.lib.names)
        survivors = []
        for j, (reply, src) in enumerate(zip(replies, sources)):
            shown = [str(traj[k].get("observation0") or "") for _, k in src]
            cand, reason = screen(reply, [s for s in seen + shown if s.strip()], known_skills, g.max_chars, [EXAMPLE])
            entry = {"candidate": j, "reply": reply.text[:REPLY_CHARS], "truncated": reply.truncated,
                     "sources": [_source(traj, role, k) for role, k in src]}
            if cand is None:
                entry.update(verdict="rejected", reason=reason)
                self.log(f"[esopt] growth after generation {t}: candidate {j} rejected ({reason})")
            else:
                name = unique_name(cand[0], taken)
                taken.add(name)
                known_skills.append((name, cand[1]))
                entry.update(name=name, text=cand[1])
                survivors.append(entry)
            out["candidates"].append(entry)
        if survivors:
            self._gate(replica, search, t, survivors, out)
        return self._done(out, t)

    def _gate(self, replica, search, t: int, survivors: list[dict], out: dict) -> None:
        g = self.cfg.coevo.grow
        draw = search.genome.most_likely()
        lib = search.lib
        arms = [assemble(search.base, lib, draw)]
        for e in survivors:  # the same most likely context plus the candidate
            arms.append(assemble(search.base, lib.with_skill(Skill(e["name"], e["text"])),
                                 Draw(draw.skills + (True,), draw.slots)))
        out["episodes"] = len(arms) * g.minibatch  # they count in the run's episodes, whatever happens
        try:
            rewards = play_arms(replica, t, arms)
        except Exception:  # the candidates are rejected, with the traceback; the run goes on
            error = traceback.format_exc()
            self.log(f"[esopt] growth after generation {t}: the gate's rollout failed:\n{error}")
            for e in survivors:
                e.update(verdict="rejected", reason="gate: its rollout failed", error=error[-REPLY_CHARS:])
            return
        out["gate_context"] = draw.to_json(lib)
        logit = float(min(max(math.log(g.init_prob) - math.log1p(-g.init_prob), -search.clip), search.clip))
        for e, with_r in zip(survivors, rewards[1:]):
            gate = decide(with_r, rewards[0], g.tolerance_se)
            gate.update(rewards_with=with_r, rewards_without=rewards[0])
            e["gate"] = gate
            e["verdict"] = "admitted" if gate["admitted"] else "rejected"
            if not gate["admitted"]:
                e["reason"] = (f"gate: mean reward {gate['mean_with']:.4g} with it < {gate['mean_without']:.4g} "
                               f"without - tolerance {gate['tolerance']:.3g} on {gate['n']} training tasks")
                self.log(f"[esopt] growth after generation {t}: candidate {e['candidate']} {e['name']!r} rejected "
                         f"({e['reason']})")
                continue
            search.add_skill(Skill(e["name"], e["text"]), logit)
            out["admitted"].append({"name": e["name"], "text": e["text"], "init_logit": logit, "lineage": {
                "generation": t, "proposer": out["proposer"], "candidate": e["candidate"], "sources": e["sources"],
                "gate": {k: v for k, v in gate.items() if not k.startswith("rewards_")}}})
            self.log(f"[esopt] growth after generation {t}: skill {e['name']!r} admitted (mean reward "
                     f"{gate['mean_with']:.4g} with it, {gate['mean_without']:.4g} without, SE {gate['se']:.3g}, "
                     f"{gate['n']} training tasks)")

    def _done(self, out: dict, t: int) -> dict:
        if "skipped" in out:
            self.log(f"[esopt] growth after generation {t}: skipped ({out['skipped']})")
        return out
