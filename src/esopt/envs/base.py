"""Text-native environment interface (Gymnasium-shaped, strings in and out)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class TextEnv(ABC):
    """An episodic environment whose observations and actions are text.

    ``reset`` starts an episode and returns ``(observation, info)``.
    ``step`` consumes one action string and returns
    ``(observation, reward, terminated, truncated, info)`` like Gymnasium.
    ``max_turns`` bounds the number of ``step`` calls of one episode.
    A step's info may hold ``action`` (the parsed action), ``feedback`` (a line
    for the agent), ``solved``, and ``record``: a small JSON-ready dict the
    rollout keeps with the turn (e.g. a page excerpt for run reports).
    Run reports draw recorded episodes with the renderer registered for the
    environment (``esopt.envs.register_renderer``), or as a plain turn table.
    """

    max_turns: int

    @abstractmethod
    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start a new episode; return the first observation and an info dict."""

    @abstractmethod
    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one text action; return (obs, reward, terminated, truncated, info)."""

    @abstractmethod
    def render_text(self) -> str:
        """Return the current state as text (the latest observation)."""

    def close(self) -> None:
        """Release resources (nothing to do for pure-Python envs)."""
