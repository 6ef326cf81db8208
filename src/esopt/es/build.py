"""The perturber a run's `es` config asks for."""
from __future__ import annotations

from .lowrank import LowRankPerturber
from .noise import make_noise
from .optim import make_rule
from .perturb import Perturber


def make_perturber(model, es_cfg):
    if es_cfg.noise == "lowrank":
        return LowRankPerturber(model, es_cfg.rank, es_cfg.scope, es_cfg.lowrank_others, make_noise("gaussian"),
                                rounding=es_cfg.update_rounding, sigma_scale=es_cfg.sigma_scale,
                                rule=make_rule(es_cfg))
    fused = es_cfg.kernels == "numba" or (es_cfg.kernels == "auto" and es_cfg.noise == "table")
    return Perturber(model, es_cfg.scope, make_noise(es_cfg.noise, es_cfg.table_size), fused=fused,
                     rounding=es_cfg.update_rounding, sigma_scale=es_cfg.sigma_scale, rule=make_rule(es_cfg))


def play_mode(es_cfg) -> str:
    """How the perturber es_cfg asks for plays members (its play_mode), known before a model is loaded:
    "in_place" (full-rank noise), "rows" (low-rank side terms) or "rows+others" (es.lowrank_others=full;
    "rows" after all when the scope holds no tensor besides linear weights)."""
    if es_cfg.noise != "lowrank":
        return "in_place"
    return "rows" if es_cfg.lowrank_others == "frozen" else "rows+others"
