"""Sudoku as a multi-turn text environment, with a seeded puzzle generator.

Boards are 4x4 (2x2 boxes) or 9x9 (3x3 boxes). Grids are tuples of row
tuples; 0 marks a blank. Rows, columns and values are 1-based in all text
(``r2c3=4`` puts 4 in row 2, column 3).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any, Sequence

from esopt.envs.base import TextEnv
from esopt.utils.seeding import derive_seed

Grid = tuple[tuple[int, ...], ...]
Move = tuple[int, int, int]

BOX_SIZES = {4: 2, 9: 3}  # board size -> box side
MAX_BLANKS = {4: 12, 9: 55}  # most blanks the generator reaches reliably (4 and 26 givens)
_MAX_ATTEMPTS = 64


def _check_size(size: int) -> int:
    if isinstance(size, bool) or size not in BOX_SIZES:
        raise ValueError(f"size must be one of {sorted(BOX_SIZES)}, got size={size!r}")
    return size


def _check_blanks(size: int, blanks: int) -> int:
    hi = MAX_BLANKS[size]
    if isinstance(blanks, bool) or not isinstance(blanks, int) or not 1 <= blanks <= hi:
        raise ValueError(f"blanks must be an int in 1..{hi} for size={size}, got blanks={blanks!r}")
    return blanks


# --------------------------------------------------------------------------- solver


_GEOMETRY: dict[int, tuple[list[int], list[int], list[int]]] = {}


def _geometry(n: int) -> tuple[list[int], list[int], list[int]]:
    """Row, column and box index of every flat cell index of an n x n board."""
    if n not in _GEOMETRY:
        b = BOX_SIZES[n]
        rows = [i // n for i in range(n * n)]
        cols = [i % n for i in range(n * n)]
        boxes = [(r // b) * b + c // b for r, c in zip(rows, cols)]
        _GEOMETRY[n] = (rows, cols, boxes)
    return _GEOMETRY[n]


def _search(cells: list[int], n: int, limit: int, rng: random.Random | None = None) -> tuple[int, list[int] | None]:
    """Count solutions of flat ``cells`` up to ``limit``; also return the first one.

    Bitmask backtracking with minimum-remaining-values; digit order is shuffled
    when ``rng`` is given (used to draw random full grids). ``cells`` is
    restored before returning.
    """
    R, C, B = _geometry(n)
    full = (1 << n) - 1
    row_m, col_m, box_m = [0] * n, [0] * n, [0] * n
    empties = []
    for i, v in enumerate(cells):
        if v == 0:
            empties.append(i)
            continue
        bit = 1 << (v - 1)
        if (row_m[R[i]] | col_m[C[i]] | box_m[B[i]]) & bit:
            return 0, None  # the givens already conflict
        row_m[R[i]] |= bit
        col_m[C[i]] |= bit
        box_m[B[i]] |= bit

    count = 0
    first: list[int] | None = None

    def rec() -> bool:  # True = stop (limit reached)
        nonlocal count, first
        best, best_mask, best_k = -1, 0, n + 1
        for i in empties:
            if cells[i]:
                continue
            m = full & ~(row_m[R[i]] | col_m[C[i]] | box_m[B[i]])
            k = m.bit_count()
            if k < best_k:
                best, best_mask, best_k = i, m, k
                if k <= 1:
                    break
        if best < 0:
            count += 1
            if first is None:
                first = list(cells)
            return count >= limit
        if best_k == 0:
            return False
        digits = [d for d in range(1, n + 1) if best_mask >> (d - 1) & 1]
        if rng is not None:
            rng.shuffle(digits)
        r, c, b = R[best], C[best], B[best]
        for d in digits:
            bit = 1 << (d - 1)
            cells[best] = d
            row_m[r] |= bit
            col_m[c] |= bit
            box_m[b] |= bit
            stop = rec()
            row_m[r] &= ~bit
            col_m[c] &= ~bit
            box_m[b] &= ~bit
            cells[best] = 0
            if stop:
                return True
        return False

    rec()
    return count, first


def _flatten(grid: Sequence[Sequence[int]]) -> tuple[int, list[int]]:
    n = _check_size(len(grid))
    flat: list[int] = []
    for row in grid:
        if len(row) != n:
            raise ValueError(f"grid must be {n}x{n}, got a row of length {len(row)}")
        for v in row:
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= n:
                raise ValueError(f"grid values must be ints in 0..{n}, got {v!r}")
            flat.append(v)
    return n, flat


def _to_grid(flat: Sequence[int], n: int) -> Grid:
    return tuple(tuple(flat[r * n : (r + 1) * n]) for r in range(n))


def count_solutions(grid: Sequence[Sequence[int]], limit: int = 2) -> int:
    """Number of completions of ``grid`` (0 = blank), counting at most ``limit``."""
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got limit={limit!r}")
    n, flat = _flatten(grid)
    return _search(flat, n, limit)[0]


def is_valid_complete(grid: Sequence[Sequence[int]]) -> bool:
    """True iff ``grid`` is a full board whose rows, columns and boxes are permutations."""
    n = len(grid)
    if n not in BOX_SIZES or any(len(row) != n for row in grid):
        return False
    b, digits = BOX_SIZES[n], set(range(1, n + 1))
    units = [list(row) for row in grid]
    units += [[grid[r][c] for r in range(n)] for c in range(n)]
    units += [
        [grid[br + r][bc + c] for r in range(b) for c in range(b)]
        for br in range(0, n, b)
        for bc in range(0, n, b)
    ]
    return all(set(u) == digits and len(u) == n for u in units)


# ------------------------------------------------------------------------ generator


@dataclass(frozen=True)
class Puzzle:
    """A Sudoku puzzle with a unique ``solution``; ``grid`` uses 0 for blanks."""

    size: int
    grid: Grid
    solution: Grid

    @property
    def blanks(self) -> int:
        return sum(v == 0 for row in self.grid for v in row)

    @property
    def blank_cells(self) -> list[tuple[int, int]]:
        """0-based (row, col) of the blank cells in reading order."""
        return [(r, c) for r in range(self.size) for c in range(self.size) if self.grid[r][c] == 0]


def _random_solution(n: int, rng: random.Random) -> list[int]:
    _, first = _search([0] * (n * n), n, 1, rng)
    assert first is not None
    return first


def _carve(solution: list[int], n: int, blanks: int, rng: random.Random) -> list[int] | None:
    """Blank cells of ``solution`` in random order while the solution stays unique."""
    cells = list(solution)
    order = list(range(n * n))
    rng.shuffle(order)
    made = 0
    for i in order:
        if made == blanks:
            break
        value, cells[i] = cells[i], 0
        if _search(cells, n, 2)[0] == 1:
            made += 1
        else:
            cells[i] = value
    return cells if made == blanks else None


def generate_puzzle(size: int, blanks: int, seed: int) -> Puzzle:
    """Deterministic puzzle with exactly ``blanks`` blanks and a unique solution."""
    n = _check_size(size)
    _check_blanks(n, blanks)
    for attempt in range(_MAX_ATTEMPTS):
        rng = random.Random(derive_seed("sudoku-puzzle", n, blanks, seed, attempt))
        solution = _random_solution(n, rng)
        cells = _carve(solution, n, blanks, rng)
        if cells is not None:
            return Puzzle(size=n, grid=_to_grid(cells, n), solution=_to_grid(solution, n))
    raise RuntimeError(
        f"could not generate a {n}x{n} puzzle with {blanks} blanks and a unique solution "
        f"in {_MAX_ATTEMPTS} attempts (seed={seed!r}); use fewer blanks"
    )


class SudokuTasks:
    """Deterministic, disjoint train, validation and held-out puzzle sets.

    ``heldout(n)`` is the first ``n`` distinct puzzles of a held-out seed
    stream. ``validation(n)`` is the first ``n`` distinct puzzles of a
    validation stream that are not among the first ``heldout_reserve``
    held-out puzzles. ``train(n, key)`` draws from a stream seeded by
    ``(seed, key)`` and never returns a puzzle whose grid is among the first
    ``heldout_reserve`` held-out or the first ``validation_reserve``
    validation puzzles. With ``validation_reserve=0`` (no validation split)
    training draws are exactly those of a pool without one.
    """

    def __init__(self, size: int, blanks: int, seed: int = 0, heldout_reserve: int = 256, validation_reserve: int = 0):
        self.size = _check_size(size)
        self.blanks = _check_blanks(size, blanks)
        self.seed = seed
        for name, value in (("heldout_reserve", heldout_reserve), ("validation_reserve", validation_reserve)):
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {name}={value!r}")
        self.heldout_reserve = heldout_reserve
        self.validation_reserve = validation_reserve
        self._streams: dict[str, tuple[list[Puzzle], set[Grid], list[int]]] = {}
        self._reserved: frozenset[Grid] | None = None

    def _gen(self, *stream: object) -> Puzzle:
        return generate_puzzle(self.size, self.blanks, derive_seed("sudoku-tasks", self.seed, *stream))

    def _first(self, stream: str, n: int, exclude: frozenset[Grid] = frozenset()) -> list[Puzzle]:
        """First ``n`` distinct puzzles of a named seed stream, skipping ``exclude`` (same list every call)."""
        found, grids, nxt = self._streams.setdefault(stream, ([], set(), [0]))
        budget = 50 * n + 1000
        while len(found) < n:
            if nxt[0] >= budget:
                raise RuntimeError(f"only {len(found)} distinct {stream} puzzles found, {n} requested")
            puzzle = self._gen(stream, nxt[0])
            nxt[0] += 1
            if puzzle.grid not in grids and puzzle.grid not in exclude:
                grids.add(puzzle.grid)
                found.append(puzzle)
        return found[:n]

    def heldout(self, n: int) -> list[Puzzle]:
        """First ``n`` distinct puzzles of the held-out stream (same list every call)."""
        return self._first("heldout", n)

    def validation(self, n: int) -> list[Puzzle]:
        """First ``n`` distinct validation puzzles: never held-out (reserve) nor training puzzles."""
        if n > self.validation_reserve:
            raise ValueError(f"validation({n}) needs validation_reserve >= {n}, got {self.validation_reserve}")
        return self._first("validation", n, frozenset(p.grid for p in self.heldout(self.heldout_reserve)))

    @property
    def reserved_grids(self) -> frozenset[Grid]:
        """Grids that training sets never contain."""
        if self._reserved is None:
            grids = {p.grid for p in self.heldout(self.heldout_reserve)}
            if self.validation_reserve:
                grids |= {p.grid for p in self.validation(self.validation_reserve)}
            self._reserved = frozenset(grids)
        return self._reserved

    def train(self, n: int, key: object) -> list[Puzzle]:
        """``n`` training puzzles, deterministic in ``(seed, key)``.

        Distinct within the call when enough distinct puzzles turn up within a
        bounded number of draws; otherwise repeats fill the rest.
        """
        reserved = self.reserved_grids
        out: list[Puzzle] = []
        seen: set[Grid] = set()
        repeats: list[Puzzle] = []
        budget = 20 * n + 200
        i = 0
        while len(out) < n and i < budget:
            puzzle = self._gen("train", key, i)
            i += 1
            if puzzle.grid in reserved:
                continue
            if puzzle.grid in seen:
                repeats.append(puzzle)
                continue
            seen.add(puzzle.grid)
            out.append(puzzle)
        if len(out) < n:
            if not out:
                raise RuntimeError("no training puzzle outside the held-out reserve was found")
            pool = repeats or out
            out.extend(pool[j % len(pool)] for j in range(n - len(out)))
        return out


# --------------------------------------------------------------------------- parser

_SEP = r"\s*(?:=>|->|=|:|\bis\b|\bto\b|\bwith\b|\bgets\b)?\s*"
_RC = re.compile(r"(?<![a-z])r\s*(\d++)\s*[,;]?\s*c\s*(\d++)" + _SEP + r"(\d++)", re.I)
_ROWCOL = re.compile(
    r"\brow\s*(\d++)\s*[,;]?\s*(?:and\s+)?(?:col(?:umn)?|c)\s*(\d++)[\s)\]]*"
    + _SEP
    + r"(?:(?:value|digit|number)\s*)?(\d++)",
    re.I,
)
_TRIPLE = re.compile(r"(?<!\w)(?<!\d\.)(\d++)\s*[,\s]\s*(\d++)\s*[,\s]\s*(\d++)(?!\w|\.\d)(?!\s*,?\s*\d)")
_THINK = re.compile(r"<think>.*?</think>", re.I | re.S)


def _strip_think(text: str) -> str:
    text = _THINK.sub(" ", text)
    low = text.lower()
    if "</think>" in low:  # closing tag without opening: keep what follows
        text = text[low.rindex("</think>") + len("</think>") :]
        low = text.lower()
    if "<think>" in low:  # unclosed: everything after it is still thinking
        text = text[: low.index("<think>")]
    return text


def _first_match(pattern: re.Pattern[str], text: str, triple: bool = False) -> tuple[int, Move] | None:
    for m in pattern.finditer(text):
        if triple and re.search(r"\d\s*,?\s*$", text[: m.start()]):
            continue  # part of a longer run of numbers
        return m.start(), (int(m.group(1)), int(m.group(2)), int(m.group(3)))
    return None


def find_move(text: str) -> Move | None:
    """First move-shaped ``(row, col, value)`` in ``text``, without range checks."""
    if not isinstance(text, str):
        return None
    text = _strip_think(text)
    hits = [
        h
        for h in (_first_match(_RC, text), _first_match(_ROWCOL, text), _first_match(_TRIPLE, text, True))
        if h is not None
    ]
    return min(hits)[1] if hits else None


def parse_action(text: str, size: int) -> Move | None:
    """Parse one move as 1-based ``(row, col, value)``; None if absent or out of range."""
    n = _check_size(size)
    move = find_move(text)
    if move is None or not all(1 <= x <= n for x in move):
        return None
    return move


# ------------------------------------------------------------------------------ env


class SudokuEnv(TextEnv):
    """Fill one cell per turn; reward only at the end of the episode.

    Moves must target an empty cell with a value in 1..size. A move that
    conflicts with its row, column or box is rejected; a non-conflicting move
    is placed even if it is not the solution value, and placed cells are final.
    Every step consumes a turn. ``reward="binary"`` pays 1.0 for a complete,
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
        self.size = _check_size(size)
        self.blanks = _check_blanks(self.size, blanks) if puzzle is None else blanks
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
        move = parse_action(action, self.size)
        valid, self._feedback = self._apply(find_move(action), move)
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

    def _apply(self, raw: Move | None, move: Move | None) -> tuple[bool, str]:
        """Apply ``move`` if legal; return (placed, feedback)."""
        if raw is None:
            return False, "Last move: could not parse your answer; answer like r2c3=4."
        n = self.size
        head = f"Last move r{raw[0]}c{raw[1]}={raw[2]}:"
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
