"""env.id=code-tool for the harness: its options and its checks; tasks are seeds of reset (SeedTasks)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...utils.settings import Strict
from ..spec import EnvSpec


class CodeToolOptions(Strict):
    """env.options of env.id=code-tool."""

    family: Literal["product", "sum"] = "product"  # the product or the sum of `terms` numbers
    digits: int = Field(3, ge=1, le=12)  # digits of each number
    terms: int = Field(2, ge=2, le=12)  # numbers per question
    cpu_s: float = Field(2.0, gt=0)  # CPU seconds one python call may use
    wall_s: float = Field(5.0, gt=0)  # wall seconds one python call may take, the sandbox's start included
    memory_mb: int = Field(512, ge=128)  # address space of the sandbox child
    tool: bool = True  # false: no python tool (the same questions, answered without it: a baseline)


def code_tool_env(max_turns: int | None = None, **options):
    from .env import CodeToolEnv

    return CodeToolEnv(**CodeToolOptions.model_validate(options).model_dump(), max_turns=max_turns)


def preflight(env_cfg) -> None:
    """The sandbox's protections hold on this machine (one line saying which does not, if not)."""
    from ...sandbox.parent import protections

    found = protections()
    if not found.get("available"):
        raise ValueError(f"env.id=code-tool runs its python tool in the sandbox, which cannot run here: "
                         f"{found.get('refusal') or 'the probe failed'} (docs/sandbox.md)")


def distinct(env_cfg) -> int:
    o = env_cfg.options
    return (9 * 10 ** (o.digits - 1)) ** o.terms


SPEC = EnvSpec(id="code-tool", factory=code_tool_env, options=CodeToolOptions, preflight=preflight,
               default_max_turns=4, distinct_tasks=distinct, summary_keys=("family", "digits", "terms"),
               description="arithmetic with a sandboxed python tool; answer as \\boxed{N}")
