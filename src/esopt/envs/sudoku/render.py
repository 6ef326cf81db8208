"""Run-report view of a recorded Sudoku episode: the board after every turn,
with the cell the move filled (or tried to fill) highlighted, the reply, the
parsed move and the environment's feedback.

Registered for ``sudoku`` in ``esopt.envs`` (see ``registry.register_renderer``).
"""
from __future__ import annotations

import math
import re
from html import escape

from esopt.envs.sudoku.puzzles import BOX_SIZES, _search

MAX_REPLY_CHARS = 600
LEGEND = ("grey bold: given; blue: filled by the agent; red underlined: not the solution value; green box: "
          "the cell this turn filled; red box: the cell this turn tried and was refused (struck through: the "
          "digit it tried)")

_ROW = re.compile(r"^r(\d+) \|(.*)$")

CSS = """
.sdk-turns{display:flex;flex-direction:column;gap:.5em}
.sdk-turn{display:flex;gap:1em;align-items:flex-start;border-top:1px solid #ddd;padding-top:.4em}
.sdk{border-collapse:collapse;border:2px solid #333;font:14px monospace}
.sdk td{width:1.6em;height:1.6em;text-align:center;border:1px solid #bbb;padding:0}
.sdk td.vb{border-left:2px solid #333}.sdk tr.hb td{border-top:2px solid #333}
.sdk td.g{color:#000;background:#f3f3f3;font-weight:bold}.sdk td.a{color:#1a56c4}
.sdk td.new{background:#b8f0b8;outline:2px solid #2a8f2a}.sdk td.rej{background:#f6c2c2;outline:2px solid #c22}
.sdk td.bad{color:#c22;text-decoration:underline}.sdk td s{color:#c22}
.sdk-info{font-size:13px;max-width:48em}.sdk-info pre{white-space:pre-wrap;margin:.2em 0;background:#f8f8f8;padding:.2em}
.sdk-legend{font-size:12px;color:#555}
"""


def initial_grid(episode: dict) -> list[list[int]] | None:
    """The puzzle as rows of ints (0 = blank): from the task id, else the first observation."""
    task = str(episode.get("task", ""))
    n = math.isqrt(len(task))
    if n in BOX_SIZES and n * n == len(task) and task.isdigit():
        return [[int(ch) for ch in task[r * n:(r + 1) * n]] for r in range(n)]
    rows = []
    for line in str(episode.get("observation0", "")).splitlines():
        m = _ROW.match(line.strip())
        if m:
            tokens = [t for t in m.group(2).split() if t != "|"]
            if not all(t == "." or t.isdigit() for t in tokens):
                return None
            rows.append([0 if t == "." else int(t) for t in tokens])
    n = len(rows)
    if n not in BOX_SIZES or any(len(r) != n for r in rows):
        return None
    return rows


def _solution(grid: list[list[int]]) -> list[list[int]] | None:
    n = len(grid)
    count, first = _search([v for row in grid for v in row], n, 1)
    return None if not count else [first[r * n:(r + 1) * n] for r in range(n)]


def _board(board, givens, solution, target, accepted, tried=None) -> str:
    n = len(board)
    b = BOX_SIZES[n]
    rows = []
    for r in range(n):
        cells = []
        for c in range(n):
            cls = ["vb"] if c and c % b == 0 else []
            v = board[r][c]
            if (r, c) in givens:
                cls.append("g")
            elif v:
                cls.append("a")
                if solution is not None and solution[r][c] != v:
                    cls.append("bad")
            if target == (r, c):
                cls.append("new" if accepted else "rej")
            attr = f' class="{" ".join(cls)}"' if cls else ""
            text = str(v) if v else (f"<s>{tried}</s>" if tried is not None and target == (r, c) else "")
            cells.append(f"<td{attr}>{text}</td>")
        rule = ' class="hb"' if r and r % b == 0 else ""
        rows.append(f'<tr{rule}>{"".join(cells)}</tr>')
    return f'<table class="sdk sdk{n}">{"".join(rows)}</table>'


def _move(action) -> tuple[int, int, int] | None:
    if isinstance(action, (list, tuple)) and len(action) == 3 and all(isinstance(x, int) for x in action):
        return action[0], action[1], action[2]
    return None


def render_sudoku_episode(episode: dict) -> str:
    """HTML: the start board, then one row per turn (board after the turn, reply, move, feedback, reward)."""
    grid = initial_grid(episode)
    if grid is None:
        raise ValueError("no Sudoku board in the episode's task or first observation")
    n = len(grid)
    givens = {(r, c) for r in range(n) for c in range(n) if grid[r][c]}
    solution = _solution(grid)
    board = [list(row) for row in grid]
    blanks = n * n - len(givens)
    out = [f'<div class="sdk-turns"><div class="sdk-turn">{_board(board, givens, solution, None, False)}'
           f'<div class="sdk-info"><b>Start</b>: {n}x{n}, {blanks} blank(s).'
           f'<div class="sdk-legend">{LEGEND}</div></div></div>']
    for k, turn in enumerate(episode.get("turns") or [], 1):
        move = _move(turn.get("action"))
        feedback = str(turn.get("feedback") or "")
        target, accepted = None, False
        if move and all(1 <= x <= n for x in move):
            target = (move[0] - 1, move[1] - 1)
            accepted = "accepted" in feedback and "rejected" not in feedback and not board[target[0]][target[1]]
            if accepted:
                board[target[0]][target[1]] = move[2]
        reply = str(turn.get("response") or "")
        if len(reply) > MAX_REPLY_CHARS:
            reply = reply[:MAX_REPLY_CHARS] + f" ... ({len(reply) - MAX_REPLY_CHARS} more characters)"
        move_text = f"r{move[0]}c{move[1]}={move[2]}" if move else "none parsed"
        tried = move[2] if move and not accepted else None
        out.append(f'<div class="sdk-turn">{_board(board, givens, solution, target, accepted, tried)}'
                   f'<div class="sdk-info"><b>Turn {k}</b> · move {escape(move_text)} · reward '
                   f'{escape(_num(turn.get("reward")))}<pre class="reply">{escape(reply)}</pre>'
                   f'<div class="feedback">{escape(feedback)}</div></div></div>')
    out.append("</div>")
    return "".join(out)


def _num(x) -> str:
    return f"{x:.3g}" if isinstance(x, (int, float)) and not isinstance(x, bool) else str(x)


render_sudoku_episode.css = CSS
