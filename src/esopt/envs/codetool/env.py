"""CodeToolEnv: one arithmetic question; the agent may call ``python`` (run in the sandbox) and ends the
episode with a reply holding its answer as ``\\boxed{N}``: reward 1.0 when it is right, else 0."""
from __future__ import annotations

from ...sandbox.parent import Limits
from ..base import TextEnv
from .answer import boxed, correct
from .problems import problem
from .tool import failed, run_python


class CodeToolEnv(TextEnv):
    """Compute an arithmetic expression with the help of a sandboxed python tool; answer as \\boxed{N}."""

    max_turns = 4

    def __init__(self, family: str = "product", digits: int = 3, terms: int = 2, cpu_s: float = 2.0,
                 wall_s: float = 5.0, memory_mb: int = 512, tool: bool = True, max_turns: int | None = None):
        self.family, self.digits, self.terms, self.tool = family, digits, terms, tool
        self.limits = Limits(cpu_s=cpu_s, wall_s=wall_s, memory_mb=memory_mb)
        if max_turns is not None:
            self.max_turns = max_turns
        self.question, self.answer = "", 0
        self.results: list[str] = []  # this episode's python results, in order

    def reset(self, seed: int | None = None):
        self.question, self.answer = problem(seed or 0, self.family, self.digits, self.terms)
        self.results = []
        return self.question, {"answer": self.answer}

    def tools(self) -> list:
        return [self.python] if self.tool else []  # tool=False: the same questions answered in the head

    def python(self, code: str) -> str:
        """Run Python code in a sandbox and return what it prints (a last bare expression is printed too).

        Args:
            code: The Python source to run.
        """
        result = run_python(code, self.limits)
        self.results.append(result)
        return result

    def step(self, action: str):
        ok = correct(action, self.answer)
        valid = sum(not failed(r) for r in self.results)
        record = {"python_calls": len(self.results), "python_ok": valid, "answer": self.answer}
        info = {"action": boxed(action), "solved": ok, "valid_tool_call": valid > 0, "record": record,
                "feedback": "correct" if ok else f"wrong: the answer is {self.answer}"}
        return "Done.", 1.0 if ok else 0.0, True, False, info

    def render_text(self) -> str:
        return self.question
