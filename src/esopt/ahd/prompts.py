"""The prompts of the heuristic search: four EoH-style operators and independent sampling.

    e1  new        write a heuristic unlike the ones shown
    e2  crossover  build one heuristic out of the ideas of two (or more) parents
    m1  mutation   change how one parent works
    m2  tuning     keep one parent's logic, change its parameters and constants
    sample         the task and the reference heuristic only (the Sample baseline)

Every prompt states the task (the problem's description), the exact signature to implement,
the code shown with its objective on the validation instances (lower is better), and the
answer format: one sentence of idea, then one Python code block.
"""
from __future__ import annotations

from dataclasses import dataclass

OPERATORS = ("e1", "e2", "m1", "m2")
PARENTS = {"e1": None, "e2": 2, "m1": 1, "m2": 1}  # parents shown (e1: the whole population, at most E1_SHOWN)
E1_SHOWN = 3
SYSTEM = "You write short, correct Python functions. You answer with one idea sentence and one code block."

ASK = {
    "e1": ("Write a new heuristic whose idea is clearly different from every heuristic above. Do not "
           "repeat their logic with small changes: find another way to decide."),
    "e2": ("Write a new heuristic that combines the ideas of the heuristics above: keep what makes each "
           "of them good and merge those parts into one function."),
    "m1": ("Write a changed version of the heuristic above: alter how it decides (what it scores, "
           "how it weighs the inputs) so that it reaches a lower objective."),
    "m2": ("Keep the logic of the heuristic above but change its parameters: its constants, weights, "
           "thresholds and exponents. Pick values you expect to reach a lower objective."),
    "sample": "Write a heuristic that reaches a lower objective than the reference heuristic above.",
}


@dataclass(frozen=True)
class Shown:
    """A heuristic shown in a prompt."""
    code: str
    objective: float | None
    idea: str | None = None


def _format(problem) -> str:
    return (f"Write the Python function with exactly this signature:\n\n{problem.signature}\n\n"
            "Answer in this form: first one sentence that starts with 'Idea:' and says what your heuristic does, "
            f"then one ```python code block that defines {problem.entry} (with the imports it needs; only "
            "numpy and the standard library are available). Nothing after the code block.")


def _shown(items: list[Shown], label: str) -> str:
    parts = []
    for k, item in enumerate(items, 1):
        obj = "invalid" if item.objective is None else f"{item.objective:.6g}"
        head = f"{label} {k}" if len(items) > 1 else label
        idea = f"\nIdea: {item.idea}" if item.idea else ""
        parts.append(f"{head} (objective {obj}, lower is better):{idea}\n```python\n{item.code.strip()}\n```")
    return "\n\n".join(parts)


def operator_prompt(problem, operator: str, parents: list[Shown]) -> str:
    """The prompt of one EoH operator with its parents (e1: the heuristics it must differ from)."""
    if operator not in OPERATORS:
        raise ValueError(f"unknown operator {operator!r}; allowed: {', '.join(OPERATORS)}")
    if not parents:
        raise ValueError(f"operator {operator} needs at least one heuristic to show")
    label = {"e1": "Existing heuristic", "e2": "Parent heuristic", "m1": "Heuristic", "m2": "Heuristic"}[operator]
    return (f"{problem.description.strip()}\n\n{_shown(parents, label)}\n\n{ASK[operator]}\n\n{_format(problem)}")


def sample_prompt(problem, reference: Shown) -> str:
    """Independent sampling: the task and the reference heuristic only."""
    return (f"{problem.description.strip()}\n\n{_shown([reference], 'Reference heuristic')}\n\n{ASK['sample']}\n\n"
            f"{_format(problem)}")


def conversation(prompt: str) -> list[dict]:
    """The chat a policy generates from for one prompt."""
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
