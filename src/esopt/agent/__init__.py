"""Multi-turn rollout of text agents."""
from .rollout import Episode, rollout

__all__ = ["Episode", "rollout"]
