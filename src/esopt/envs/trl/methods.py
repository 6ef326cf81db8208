"""Which methods of a TRL environment class are the agent's tools, and the check that each can be one."""
from __future__ import annotations

import inspect

NOT_TOOLS = ("reset", "get_reward")  # the class's own protocol, never offered to the agent


def tool_names(cls: type) -> list[str]:
    """The class's public methods (names not starting with _, besides reset and get_reward), in the order they
    are defined (a base class's first)."""
    found: dict[str, None] = {}
    for klass in reversed(cls.__mro__):
        if klass is object:
            continue
        for name, attr in vars(klass).items():
            if name.startswith("_") or name in NOT_TOOLS:
                continue
            if inspect.isfunction(attr) or isinstance(attr, (staticmethod, classmethod)):
                found[name] = None
            else:  # an attribute or property that hides a base class's method
                found.pop(name, None)
    return list(found)


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def check_class(cls: type, where: str, has_rewards: bool) -> None:
    """ValueError with one line when the class cannot be trained on: it has no tools, a tool method lacks type
    hints or a docstring with an Args: section, it cannot be built with no arguments, or nothing rewards it."""
    from ...agent.tools import Tool, ToolError

    name = cls.__name__
    names = tool_names(cls)
    if not names:
        raise ValueError(f"{where}: {name} has no public methods for the agent to call as tools (methods whose "
                         f"names do not start with _, besides reset and get_reward); without tools use env.id=dataset")
    if not has_rewards and not callable(getattr(cls, "get_reward", None)):
        raise ValueError(f"{where}: nothing rewards {name}: give env.options.reward (TRL-style reward functions) "
                         f"or a get_reward() method")
    try:
        instance = cls()
    except Exception as err:  # noqa: BLE001 (the user's class: anything it raises is named)
        raise ValueError(f"{where}: {name}() raised {type(err).__name__}: {one_line(err)} (TRL builds the class "
                         f"with no arguments, one per rollout)") from None
    for method in names:
        try:
            Tool.of(getattr(instance, method))
        except ToolError as err:
            raise ValueError(f"{where}: tool method {name}.{method}: {one_line(err).removeprefix(f'tool {method}: ')}"
                             ) from None
