"""The GRPO baseline as the harness sees it (esopt.train.algorithm): a checkpoint of weights and
optimizer, resumed from its last complete copy; one process."""
from __future__ import annotations

from pathlib import Path

from ...train.algorithm import Algorithm, product


class GRPO(Algorithm):
    name, title, unit, budget_key, record = "grpo", "GRPO", "GRPO steps", "grpo.steps", "checkpoint"
    step_name = "step"

    def trainer(self, cfg, run, runner=None, log=print, **options):
        from .trainer import GRPOTrainer

        self.check(cfg, on_ray=runner is not None)
        return GRPOTrainer(cfg, run, log=log, **options)

    def done(self, run, cfg) -> int:
        from . import checkpoint

        state = checkpoint.read_state(run.path)
        return int(state["step"]) if state else 0

    def holds(self, path: Path) -> bool:
        from . import checkpoint

        return checkpoint.exists(path)

    def recorded_settings(self, path: Path) -> dict | None:
        from . import checkpoint

        state = checkpoint.read_state(path)
        settings = state.get("settings") if isinstance(state, dict) else None
        return settings if isinstance(settings, dict) else None

    def load_weights(self, run, cfg, model, upto: int | None = None) -> int:
        from .checkpoint import load_weights

        step = int(load_weights(run.path, model)["step"])
        if upto is not None and upto != step:  # a gradient run keeps its weights, not a seed history
            raise ValueError(f"a GRPO run keeps only its last checkpoint (step {step}): weights after {upto} steps "
                             "are not available")
        return step

    def episodes_per_update(self, c) -> int | None:
        return product(c, "grpo.puzzles_per_step", "grpo.group_size")
