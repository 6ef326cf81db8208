"""Sudoku as a multi-turn text environment.

Rows, columns and values are 1-based in all text (``r2c3=4`` puts 4 in row 2,
column 3). Puzzles, the solver and the task splits live in
``esopt.envs.sudoku.puzzles``; reading moves out of replies lives in
``esopt.envs.sudoku.moves``. Both are re-exported here.
"""

from __future__ import annotations

from typing import Any

from esopt.envs.base import TextEnv
from esopt.envs.sudoku.moves import FoundMove, Move, find_moves, parse_action, strip_think
from esopt.envs.sudoku.puzzles import (
    BOX_SIZES,
    MAX_BLANKS,
    Grid,
    Puzzle,
    SudokuTasks,
    _search,  # re-exported: older code imports it from here
    check_blanks,
    check_size,
    count_solutions,
    generate_puzzle,
    is_valid_complete,
)
from esopt.utils.seeding import derive_seed

__all__ = [
    "BOX_SIZES",
    "MAX_BLANKS",
    "FoundMove",
    "Grid",
    "Move",
    "Puzzle",
    "SudokuEnv",
    "SudokuTasks",
    "count_solutions",
    "find_moves",
    "generate_puzzle",
    "is_valid_complete",
    "parse_action",
    "strip_think",
]


def _extra_moves_note(moves: list[FoundMove], placed: bool) -> str:
    """Feedback addition when a reply holds more than one different move (only the first counts)."""
    different = len({m.cell for m in moves})
    if different < 2:
        return ""
    outcome = "applied" if placed else "tried"
    return (
        f" Your reply had {different} different moves; only the first move, {moves[0]}, was {outcome}."
        " Answer with one move per turn."
    )


class SudokuEnv(TextEnv):
    """Fill one cell per turn; reward only at the end of the episode.

    Moves must target an empty cell with a value in 1..size. A move that
    conflicts with its row, column or box is rejected; a non-conflicting move
    is placed even if it is not the solution value, and placed cells are final.
    Every step consumes a turn. Only the first move of a reply counts (see
    ``sudoku_moves`` for the accepted forms); when a reply holds several
    different moves the feedback says that only the first one was applied.
    Unparseable or out-of-range replies get feedback, never an exception.
    ``reward="binary"`` pays 1.0 for a complete,
    valid board; ``"partial"`` pays the share of originally blank cells whose
    final value equals the solution.
    """

    def __init__(
        self,
        size: int = 4,
        blanks: int = 2,
        max_turns: int | None = None,
        reward: str = "binary",
        seed: int = 0,
        puzzle: Puzzle | None = None,
    ):
        if reward not in ("binary", "partial"):
            raise ValueError(f"reward must be 'binary' or 'partial', got reward={reward!r}")
        if max_turns is not None and (isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1):
            raise ValueError(f"max_turns must be a positive int or None, got max_turns={max_turns!r}")
        if puzzle is not None:
            size, blanks = puzzle.size, puzzle.blanks
        self.size = check_size(size)
        self.blanks = check_blanks(self.size, blanks) if puzzle is None else blanks
        self.box = BOX_SIZES[self.size]
        self.reward_mode = reward
        self.seed = seed
        self._max_turns_arg = max_turns
        self.max_turns = max_turns if max_turns is not None else 3 * self.blanks
        self._fixed_puzzle = puzzle
        self._episodes = 0
        self.puzzle: Puzzle | None = None
        self.board: list[list[int]] = []
        self.turn = 0
        self.done = False
        self._feedback = ""
        self._obs = ""

    # ---------------------------------------------------------------- episode

    def reset(self, seed: int | None = None, *, puzzle: Puzzle | None = None) -> tuple[str, dict[str, Any]]:
        puzzle = puzzle if puzzle is not None else self._fixed_puzzle
        if puzzle is None:
            if seed is None:
                seed = derive_seed("sudoku-env", self.seed, self._episodes)
            puzzle = generate_puzzle(self.size, self.blanks, seed)
        elif puzzle.size != self.size:
            raise ValueError(f"puzzle size {puzzle.size} does not match env size={self.size}")
        self._episodes += 1
        self.puzzle = puzzle
        self.board = [list(row) for row in puzzle.grid]
        if self._max_turns_arg is None:
            self.max_turns = 3 * puzzle.blanks
        self.turn = 0
        self.done = False
        self._feedback = "No moves yet."
        self._obs = self._render()
        info = {"seed": seed, "puzzle": puzzle, "turn": 0, "max_turns": self.max_turns, "blanks": puzzle.blanks}
        return self._obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.puzzle is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            raise RuntimeError("episode is over; call reset()")
        self.turn += 1
        moves = find_moves(action)
        first = moves[0] if moves else None
        move = first.in_range(self.size) if first is not None else None
        valid, self._feedback = self._apply(first, move)
        self._feedback += _extra_moves_note(moves, valid)
        solved = is_valid_complete(self.board)
        terminated = not self._empty_cells()
        truncated = not terminated and self.turn >= self.max_turns
        self.done = terminated or truncated
        reward = self._final_reward() if self.done else 0.0
        self._obs = self._render()
        info = {
            "action": move,
            "valid": valid,
            "feedback": self._feedback,
            "solved": solved,
            "turn": self.turn,
            "turns_left": self.max_turns - self.turn,
            "blanks_left": len(self._empty_cells()),
        }
        return self._obs, reward, terminated, truncated, info

    def render_text(self) -> str:
        return self._obs

    # ----------------------------------------------------------------- rules

    def _apply(self, raw: FoundMove | None, move: Move | None) -> tuple[bool, str]:
        """Apply ``move`` (``raw`` in range) if legal; return (placed, feedback)."""
        if raw is None:
            return False, "Last move: could not parse your answer; answer like r2c3=4."
        n = self.size
        head = f"Last move {raw}:"
        if move is None:
            return False, f"{head} rejected: row, column and value must each be between 1 and {n}."
        r, c, v = move[0] - 1, move[1] - 1, move[2]
        if self.puzzle.grid[r][c]:
            return False, f"{head} rejected: r{r + 1}c{c + 1} is a given cell and cannot be changed."
        if self.board[r][c]:
            return False, f"{head} rejected: r{r + 1}c{c + 1} is already filled with {self.board[r][c]}; filled cells are final."
        conflict = self._conflict(r, c, v)
        if conflict:
            return False, f"{head} rejected: {v} already in {conflict}."
        self.board[r][c] = v
        return True, f"{head} accepted."

    def _conflict(self, r: int, c: int, v: int) -> str | None:
        n, b = self.size, self.box
        for cc in range(n):
            if self.board[r][cc] == v:
                return f"row {r + 1} (at r{r + 1}c{cc + 1})"
        for rr in range(n):
            if self.board[rr][c] == v:
                return f"column {c + 1} (at r{rr + 1}c{c + 1})"
        br, bc = r - r % b, c - c % b
        for rr in range(br, br + b):
            for cc in range(bc, bc + b):
                if self.board[rr][cc] == v:
                    return f"its box (at r{rr + 1}c{cc + 1})"
        return None

    def _empty_cells(self) -> list[tuple[int, int]]:
        return [(r, c) for r in range(self.size) for c in range(self.size) if self.board[r][c] == 0]

    def _final_reward(self) -> float:
        if self.reward_mode == "binary":
            return 1.0 if is_valid_complete(self.board) else 0.0
        cells = self.puzzle.blank_cells
        right = sum(self.board[r][c] == self.puzzle.solution[r][c] for r, c in cells)
        return right / len(cells) if cells else 1.0

    # ---------------------------------------------------------------- render

    def _board_text(self) -> list[str]:
        n, b = self.size, self.box
        header = "    " + "  ".join("".join(f" c{c + 1}" for c in range(bc, bc + b)) for bc in range(0, n, b))
        rule = "   +" + "+".join("-" * (3 * b + 1) for _ in range(0, n, b)) + "+"
        lines = [header, rule]
        for r in range(n):
            chunks = [
                "".join(f"  {self.board[r][c] or '.'}" for c in range(bc, bc + b)) + " |" for bc in range(0, n, b)
            ]
            lines.append(f"r{r + 1} |" + "".join(chunks))
            if (r + 1) % b == 0:
                lines.append(rule)
        return lines

    def _render(self) -> str:
        n, b = self.size, self.box
        empty = self._empty_cells()
        lines = [
            f"Sudoku {n}x{n} with {b}x{b} boxes. Fill every empty cell (.) with a digit 1-{n} so that "
            f"each row, column and box contains every digit exactly once. Filled cells are final.",
            "",
            *self._board_text(),
            "",
            "Empty cells: " + (", ".join(f"r{r + 1}c{c + 1}" for r, c in empty) or "none"),
            f"Turns left: {self.max_turns - self.turn}",
            self._feedback,
        ]
        if not self.done:
            lines.append("Answer with one move: r<row>c<col>=<digit>, e.g. r1c2=3.")
        elif not empty:
            lines.append("Board complete: " + ("solved!" if is_valid_complete(self.board) else "not a valid solution."))
        else:
            lines.append("Out of turns: episode over.")
        return "\n".join(lines)
