"""One dataset row played with a TRL environment class: a TextEnv around one instance of the class."""
from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any

from ..base import TextEnv
from .methods import tool_names
from .rewards import RewardFn, total


class TrlEnv(TextEnv):
    """reset() builds an instance and calls its ``reset(**row)`` (the row's columns as keywords); its string
    answer follows the row's prompt (or is the prompt, for a row without one). tools() are the instance's
    public methods. step(reply) ends the episode: the reply is the final answer, and the reward is the reward
    functions' weighted sum plus get_reward(). Anything raised fails the episode, not the run."""

    def __init__(self, cls: type, row: dict, prompt: str | None, rewards: list[RewardFn], task: str = ""):
        self.cls, self.row, self.prompt, self.rewards, self.task = cls, row, prompt, rewards, task
        self.instance: Any = None
        self.completion: list[dict] = []  # the episode's tool calls and results, as chat messages
        self.observation, self.over = "", False

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        name = self.cls.__name__
        self.instance, self.completion, self.over = None, [], False
        instance = self.cls()
        extra = instance.reset(**_taken(instance.reset, self.row))
        if extra is not None and not isinstance(extra, str):
            raise TypeError(f"{name}.reset returned {type(extra).__name__}; it returns a string (added to the "
                            f"prompt) or None")
        observation = "\n\n".join(p for p in (self.prompt, extra) if p)
        if not observation:
            raise ValueError(f"task {self.task}: the row has no prompt and {name}.reset returned none; give the "
                             f"row a prompt column (env.options.prompt or template) or return the prompt from reset")
        self.instance, self.observation = instance, observation
        return observation, {"task": self.task}

    def tools(self) -> list:
        from ...agent.tools import Tool

        if self.instance is None:
            raise RuntimeError("reset() builds the instance whose methods are the tools; call it first")
        return [self._recorded(Tool.of(getattr(self.instance, n))) for n in tool_names(self.cls)]

    def _recorded(self, tool):
        """The tool, its calls and results kept as chat messages (the ``completions`` reward functions read)."""
        from ...agent.tools import result_text

        log = self.completion

        def run(**arguments):
            log.append({"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": tool.name, "arguments": arguments}}]})
            try:
                value = tool.fn(**arguments)
            except Exception as err:
                log.append({"role": "tool", "name": tool.name, "content": f"error: {type(err).__name__}: {err}"})
                raise
            log.append({"role": "tool", "name": tool.name, "content": result_text(value, 1 << 20)})
            return value

        return replace(tool, fn=run)

    def step(self, action: str):
        if self.instance is None or self.over:
            raise RuntimeError(f"task {self.task}: step() needs a reset() episode that is not over")
        self.over = True
        completion = [*self.completion, {"role": "assistant", "content": action}]
        reward, parts = total(self.rewards, self.instance, self.row, self.observation, completion, self.task)
        self.observation = ""
        return "", reward, True, False, {"solved": reward >= 1.0, "record": {"rewards": parts}}

    def render_text(self) -> str:
        return self.observation

    def close(self) -> None:  # the instance's own methods are its tools: none of them is called here
        pass


def _taken(method, row: dict) -> dict:
    """The row's columns that reset takes (all of them when it takes **kwargs)."""
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return dict(row)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(row)
    return {k: v for k, v in row.items() if k in params}
