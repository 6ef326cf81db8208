"""Sudoku puzzles: validity, a counting solver, a seeded generator and task splits.

Boards are 4x4 (2x2 boxes) or 9x9 (3x3 boxes). Grids are tuples of row
tuples; 0 marks a blank.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from esopt.utils.seeding import derive_seed

Grid = tuple[tuple[int, ...], ...]

BOX_SIZES = {4: 2, 9: 3}  # board size -> box side
MAX_BLANKS = {4: 12, 9: 55}  # most blanks the generator reaches reliably (4 and 26 givens)
_MAX_ATTEMPTS = 64


def check_size(size: int) -> int:
    if isinstance(size, bool) or size not in BOX_SIZES:
        raise ValueError(f"size must be one of {sorted(BOX_SIZES)}, got size={size!r}")
    return size


def check_blanks(size: int, blanks: int) -> int:
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
    n = check_size(len(grid))
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
    n = check_size(size)
    check_blanks(n, blanks)
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
        self.size = check_size(size)
        self.blanks = check_blanks(size, blanks)
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

    def heldout(self, n: int, skip: int = 0) -> list[Puzzle]:
        """Distinct puzzles ``skip`` .. ``skip + n - 1`` of the held-out stream (same list every call)."""
        return self._first("heldout", skip + n)[skip:]

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
