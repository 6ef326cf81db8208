"""GEPA (esopt baseline gepa) as the harness sees it (esopt.train.algorithm): the task model's
weights stay as they are; the optimised context is the run's result. Not resumable."""
from __future__ import annotations

from ...train.algorithm import Algorithm


class GEPA(Algorithm):
    name, title, unit, budget_key, record = "gepa", "GEPA", "iterations", "es.generations", "nothing"
    resumable = False
    run_prefix = "gepa-"

    def check(self, cfg, on_ray: bool = False) -> None:
        from .requires import require_gepa

        super().check(cfg, on_ray)
        require_gepa()  # a missing package is one line naming the extra

    def trainer(self, cfg, run, runner=None, log=print, **options):
        from .baseline import GepaBaseline, GepaOptions

        self.check(cfg, on_ray=runner is not None)
        if cfg.coevo.mode != "weights":
            log(f"[esopt] gepa: coevo.mode={cfg.coevo.mode} is not used here; GEPA starts from agent.system_prompt "
                "and agent.examples and ignores the skill library")
        return GepaBaseline(cfg, run, options.get("gepa") or GepaOptions(), log=log)

    def load_weights(self, run, cfg, model, upto: int | None = None) -> int:
        return 0  # GEPA leaves the weights as they are
