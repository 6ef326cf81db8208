"""Fakes for the search tests: a toy problem, an in-process evaluator of trusted canned code,
and scripted proposers. The real runs use esopt.ahd.problems and the sandbox."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ToyProblem:
    """entry(x) returns a number per instance; the objective is that number (lower is better)."""
    name: str = "toy"
    entry: str = "entry"
    signature: str = "def entry(x: float) -> float:"
    description: str = "Write entry(x): it returns a number; the objective is the mean of the numbers (lower is better)."
    reference: str = "def entry(x):\n    return 5.0 + 0 * x\n"
    driver: str = "tests:none"

    def instances(self, split: str, n: int, seed: int = 0) -> list[dict]:
        base = 0 if split == "validation" else 1000
        return [{"x": base + seed * 100 + i, "split": split} for i in range(n)]

    def objective(self, instance: dict, output) -> float:
        if not isinstance(output, (int, float)) or output != output:
            raise ValueError(f"not a number: {output!r}")
        return float(output)


@dataclass
class Evaluation:
    valid: bool
    objective: float | None
    per_instance: list | None
    reason: str | None
    wall_s: float = 0.0


@dataclass
class FakeEvaluator:
    """Runs trusted canned code in this process; records every call (code, split, n)."""
    calls: list = field(default_factory=list)

    def __call__(self, problem, code, instances):
        self.calls.append((code, instances[0]["split"] if instances else None, len(instances)))
        scope: dict = {}
        try:
            exec(compile(code, "<candidate>", "exec"), scope)
            outs = [scope[problem.entry](inst["x"]) for inst in instances]
            per = [problem.objective(i, o) for i, o in zip(instances, outs)]
        except Exception as err:  # noqa: BLE001 - a fake of the sandbox's failure result
            return Evaluation(False, None, None, f"{type(err).__name__}: {err}")
        return Evaluation(True, sum(per) / len(per), per, None)


def const(value, comment: str = "") -> str:
    """A reply with a heuristic returning `value`."""
    note = f"    # {comment}\n" if comment else ""
    return f"Idea: return {value}.\n```python\ndef entry(x):\n{note}    return {value} + 0 * x\n```"


GOOD = [const(v) for v in (4.0, 3.0, 2.5, 2.0, 1.5, 1.0, 0.5, 0.25)]
BAD = const(9.0)
CRASH = "Idea: divide by zero.\n```python\ndef entry(x):\n    return 1 / 0\n```"
UNPARSEABLE = "```python\ndef entry(x)\n    return (\n```"
GARBAGE = "I cannot help with that. ###$$$ {{{ lorem ipsum"


class ScriptedProposer:
    """Returns canned texts in order, cycling; records the prompts and slots it was given."""

    def __init__(self, texts):
        self.texts = itertools.cycle(texts)
        self.prompts, self.slots = [], []

    def propose(self, prompts, slots):
        self.prompts += prompts
        self.slots += slots
        return [next(self.texts) for _ in prompts]


class CodeFromModel:
    """Wraps a model proposer: each reply (random text of a tiny model) becomes a heuristic
    returning a number derived from the reply, so perturbed members get different rewards."""

    def __init__(self, inner):
        self.inner = inner
        self.texts = []

    def propose(self, prompts, slots):
        texts = self.inner.propose(prompts, slots)
        self.texts += texts
        return [const(float(sum(map(ord, t)) % 97)) for t in texts]
