"""The ``python`` tool's parent side: a call's code run in the sandbox (esopt.sandbox.parent), its answer as
the text the model reads."""
from __future__ import annotations

from ...sandbox.parent import Limits, run_candidate

DRIVER = "esopt.envs.codetool.runner:run"
_ENTRY_CODE = "def main():\n    return None\n"  # the sandbox wants an entry; the driver runs the call's code


def run_python(code: str, limits: Limits) -> str:
    """What the code printed (stdout and stderr), then ``error: ...`` if it raised; a sandbox refusal or
    limit (time, memory, a blocked system call) is ``error: <reason>``. Never raises for what the code does."""
    outcome = run_candidate(_ENTRY_CODE, "main", DRIVER, [{"code": code}], limits)
    if not outcome.ok:
        return f"error: {outcome.reason}"
    got = outcome.outputs[0] if isinstance(outcome.outputs[0], dict) else {}
    text = str(got.get("output") or "")
    if got.get("error"):
        text = (text.rstrip("\n") + "\n" if text.strip() else "") + f"error: {got['error']}"
    return text if text.strip() else "(no output: print the value you want to see)"


def failed(result: str) -> bool:
    """Whether a python tool result reports an error (the call ran, but the code did not)."""
    return result.startswith("error:") or "\nerror: " in result
