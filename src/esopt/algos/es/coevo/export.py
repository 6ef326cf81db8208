"""A context run's final context, from history.json alone: the most likely draw under the last
recorded logits, written as SKILL.md (the chosen system prompt and skills) and context.yaml (the
choice, its probabilities and the full assembled context) next to exported weights."""
from __future__ import annotations

from pathlib import Path

import yaml

from ....agent.rollout import AgentContext
from .assemble import assemble, skill_md
from .grow import genome_at


def final_context(history, base: AgentContext, upto: int | None = None) -> tuple[AgentContext, dict] | None:
    """(assembled context, description) of the most likely draw after `upto` generations (default
    all); None for a run without a context search."""
    meta = history.meta.get("context")
    if meta is None:
        return None
    records = history.records[:upto]
    genome = genome_at(meta, records)  # the configured library plus the skills grown in these records
    lib = genome.lib
    draw = genome.most_likely()
    info = {"choice": "most_likely", "generations": len(records), "draw": draw.to_json(lib),
            "probabilities": genome.probs_json(), "library_hash": meta["library_hash"]}
    return assemble(base, lib, draw), info | {"skill_md": skill_md(lib, draw, base, "esopt-context",
                                                                   "The context an esopt run chose")}


def write_context_files(folder: Path, history, base: AgentContext) -> dict | None:
    """SKILL.md and context.yaml in `folder`; returns the description (None: not a context run)."""
    found = final_context(history, base)
    if found is None:
        return None
    ctx, info = found
    text = info.pop("skill_md")
    (Path(folder) / "SKILL.md").write_text(text, encoding="utf-8")
    data = {**info, "system_prompt": ctx.system_prompt, "examples": [dict(m) for m in ctx.examples]}
    (Path(folder) / "context.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100),
                                               encoding="utf-8")
    return info
