"""Reading Sudoku moves out of a model's free-text reply.

Rows, columns and values are 1-based. Explicit moves name the cell:

- ``r2c3=4``, ``R2C3 = 4``, ``r2, c3: 4``, ``r2c3 -> 4`` (also ``is``, ``to``,
  ``with``, ``gets``, or just a space, between the cell and the value);
- ``row 2 col 3 = 4``, ``row 2, column 3: 4``, ``Row 2 and column 3 -> value 4``;
- ``(2,3)=4``, ``(2, 3): 4`` (here a ``=``, ``:``, ``->``, ``=>`` or ``is`` is required);
- ``Put 4 in r2c3``, ``place the digit 4 at row 2, column 3``, ``write 4 into (2,3)``.

A bare triple such as ``2 3 4``, ``(2, 3, 4)``, ``[2 3 4]`` or ``\\boxed{2 3 4}``
is read as row, column, value only when the reply has no explicit move, and
only when it is exactly three numbers: a longer run (an echoed board row
``1 2 3 4``), a decimal (``2.5 3 4``) or numbers glued to letters do not count.
Text inside ``<think>...</think>`` is ignored. The first move in reading order
is the one that counts.

Replies are untrusted text: the patterns use possessive quantifiers, so
matching stays linear in the length of the reply, and digit runs are only
converted to ``int`` when short (Python refuses ``int()`` of more than 4300
digits); longer numbers are kept as digit strings and are simply out of range.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from esopt.envs.sudoku.puzzles import check_size

Move = tuple[int, int, int]

_MAX_DIGITS = 12  # longer numbers are never converted and show as "<N-digit number>"

_CLOSE = r"[\s)\]]*+"  # "(row 2, col 3) = 4", "[r2c3] 4"
_SEP = r"\s*+(?:=>|->|=|:|\bis\b|\bto\b|\bwith\b|\bgets\b)?+\s*+"
_STRICT_SEP = r"\s*+(?:=>|->|=|:|\bis\b)\s*+"


def _rc(r: str, c: str) -> str:
    return rf"(?<![a-z])r\s*+(?P<{r}>\d++)\s*+[,;]?+\s*+c\s*+(?P<{c}>\d++)"


def _rowcol(r: str, c: str) -> str:
    return rf"\brow\s*+(?P<{r}>\d++)\s*+[,;]?+\s*+(?:and\s++)?+(?:col(?:umn)?+|c)\s*+(?P<{c}>\d++)"


def _pair(r: str, c: str) -> str:
    return rf"\(\s*+(?P<{r}>\d++)\s*+,\s*+(?P<{c}>\d++)\s*+\)"


def _value(v: str) -> str:
    return rf"(?:(?:value|digit|number)\s*+)?+(?P<{v}>\d++)"


# One alternation, so finditer yields non-overlapping explicit moves in reading
# order. Group names per form: (row, col, value); the put form has three cell shapes.
_GROUP_NAMES = (
    ("pr", "pc", "pv"),
    ("pr_", "pc_", "pv"),
    ("pr__", "pc__", "pv"),
    ("r1", "c1", "v1"),
    ("r2", "c2", "v2"),
    ("r3", "c3", "v3"),
)
_PUT_CELL = "|".join(
    f"(?:{cell})" for cell in (_rc("pr", "pc"), _rowcol("pr_", "pc_"), _pair("pr__", "pc__"))
)
_EXPLICIT = re.compile(
    "|".join(
        (
            r"\b(?:put|place|write|enter|insert|fill\s++in)\s++(?:(?:a|the)\s++)?+(?:(?:value|digit|number)\s++)?+"
            rf"(?P<pv>\d++)\s++(?:in|at|into|on)\s++(?:(?:the\s++)?+cell\s*+)?+(?:{_PUT_CELL})",
            _rc("r1", "c1") + _CLOSE + _SEP + _value("v1"),
            _rowcol("r2", "c2") + _CLOSE + _SEP + _value("v2"),
            _pair("r3", "c3") + _STRICT_SEP + _value("v3"),
        )
    ),
    re.I,
)
_RUN = re.compile(r"\d++(?:\s*+,?+\s*+\d++)*+")  # maximal run of numbers: "1 2, 3 4"
_NUM = re.compile(r"\d++")
_RUN_START_OK = re.compile(r"(?<!\w)(?<!\d\.)")  # not glued to a word, not after "2."
_RUN_END_OK = re.compile(r"(?!\w|\.\d)")
_THINK_TAG = re.compile(r"<(/?)think>", re.I)


def _normalize(digits: str) -> str:
    """Digit string without leading zeros; ASCII decimal when short enough to convert."""
    if len(digits) > _MAX_DIGITS:
        digits = digits.lstrip("0") or "0"
        if len(digits) > _MAX_DIGITS:
            return digits
    return str(int(digits))


def _label(digits: str) -> str:
    return digits if len(digits) <= _MAX_DIGITS else f"<{len(digits)}-digit number>"


@dataclass(frozen=True)
class FoundMove:
    """A move as written in a reply: row, column and value as normalized digit strings."""

    row: str
    col: str
    value: str
    explicit: bool

    @classmethod
    def of(cls, row: str, col: str, value: str, explicit: bool) -> FoundMove:
        return cls(_normalize(row), _normalize(col), _normalize(value), explicit)

    def in_range(self, size: int) -> Move | None:
        """``(row, col, value)`` if all three are in 1..size, else None."""
        if any(len(p) > _MAX_DIGITS for p in self.cell):
            return None
        row, col, value = (int(p) for p in self.cell)
        return (row, col, value) if all(1 <= x <= size for x in (row, col, value)) else None

    @property
    def cell(self) -> tuple[str, str, str]:
        return self.row, self.col, self.value

    def __str__(self) -> str:
        return f"r{_label(self.row)}c{_label(self.col)}={_label(self.value)}"


def strip_think(text: str) -> str:
    """``text`` without ``<think>...</think>`` spans (each replaced by a space).

    A closing tag without an opening one ends the thinking: only what follows
    the last such tag is kept. An unclosed opening tag drops everything after it.
    """
    kept: list[str] = []
    pos = 0  # start of the current stretch outside thinking
    open_at: int | None = None
    for tag in _THINK_TAG.finditer(text):
        closing = bool(tag.group(1))
        if open_at is None and closing:  # stray closing tag
            kept, pos = [], tag.end()
        elif open_at is None:
            kept.append(text[pos : tag.start()])
            open_at = tag.start()
        elif closing:
            kept.append(" ")
            pos, open_at = tag.end(), None
    if open_at is None:
        kept.append(text[pos:])
    return "".join(kept)


def _explicit_moves(text: str) -> list[FoundMove]:
    found = []
    for m in _EXPLICIT.finditer(text):
        groups = m.groupdict()
        row, col, value = next(
            (groups[r], groups[c], groups[v]) for r, c, v in _GROUP_NAMES if groups[r] is not None
        )
        found.append(FoundMove.of(row, col, value, explicit=True))
    return found


def _bare_triples(text: str) -> list[FoundMove]:
    found = []
    for m in _RUN.finditer(text):
        start, end = m.span()
        if not (_RUN_START_OK.match(text, start) and _RUN_END_OK.match(text, end)):
            continue
        numbers = []
        for num in _NUM.finditer(text, start, end):
            numbers.append(num.group())
            if len(numbers) > 3:
                break
        if len(numbers) == 3:
            found.append(FoundMove.of(*numbers, explicit=False))
    return found


def find_moves(text: str) -> list[FoundMove]:
    """Every move in ``text`` in reading order, without range checks.

    The explicit moves if there is any, otherwise the bare triples; the first
    one is the move of the reply. Non-strings have no moves.
    """
    if not isinstance(text, str):
        return []
    text = strip_think(text)
    return _explicit_moves(text) or _bare_triples(text)


def parse_action(text: str, size: int) -> Move | None:
    """The reply's move as 1-based ``(row, col, value)``; None if absent or out of range."""
    n = check_size(size)
    moves = find_moves(text)
    return moves[0].in_range(n) if moves else None
