"""The driver the sandbox child runs (esopt.sandbox.parent run_candidate's ``driver``): it executes the tool
call's code as a script, REPL-style (a last expression statement is printed, as a notebook shows it), and
returns what it printed and the error it ended with. Runs inside the locked-down child: standard
library only."""
from __future__ import annotations

import ast
import contextlib
import io
import traceback

FILE = "<python>"


def run(_entry, instance: dict) -> dict:
    """{"output": stdout and stderr text, "error": the last traceback line or None}."""
    out = io.StringIO()
    error = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            _execute(str(instance.get("code", "")))
        except BaseException as err:  # SystemExit too: the script ends, the tool answers
            error = _last_line(err)
    return {"output": out.getvalue(), "error": error}


def _execute(code: str) -> None:
    tree = ast.parse(code, FILE, "exec")
    tail = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    exec(compile(tree, FILE, "exec"), namespace)
    if tail is not None:
        value = eval(compile(ast.Expression(tail.value), FILE, "eval"), namespace)
        if value is not None:
            print(repr(value))


def _last_line(err: BaseException) -> str:
    """The exception as one line, as a traceback's last line reads (a syntax error with its line)."""
    text = traceback.format_exception_only(type(err), err)[-1].strip()
    if isinstance(err, SyntaxError) and err.lineno:
        text += f" (line {err.lineno})"
    return text[-300:]
