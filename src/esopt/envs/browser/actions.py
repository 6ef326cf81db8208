"""Browser actions read out of a model's free-text reply, without running its text.

BrowserGym executes an agent's action as Python source (``click('18')``). esopt
never passes it what the model wrote: :func:`parse_action` reads the first
action call of a reply with a small tokenizer of its own (quoted strings with
escapes, numbers, lists of strings; no ``eval``, ``exec``, ``compile`` or
``ast`` evaluation), checks the function name, the number, names and types of
the arguments against a fixed table modelled on BrowserGym's high-level action
set, and returns a typed :class:`ParsedAction`. :meth:`ParsedAction.to_browsergym`
then writes a fresh call from those typed fields only (``repr`` of ``str``,
``int`` and ``float`` values), so the string BrowserGym runs is always exactly
one call of an allowed function with literal arguments.

Grammar (whitespace, including newlines, is allowed between tokens)::

    action  := NAME "(" [arg ("," arg)* [","]] ")"
    arg     := [PARAM "="] literal
    literal := STRING | NUMBER | "[" [STRING ("," STRING)* [","]] "]"

``STRING`` is a one-line literal in single or double quotes with the escapes
``\\\\ \\' \\" \\n \\r \\t \\0 \\xhh \\uhhhh \\Uhhhhhhhh`` (another escaped character
keeps its backslash, as in Python); string prefixes (``f''``, ``r''``, ``b''``)
and triple quotes are refused. ``NUMBER`` is a decimal int or float of at most
32 characters. An element id (bid) may be written unquoted when it is all
digits: ``click(18)``. Text inside ``<think>...</think>`` is ignored; the call
may sit in a code fence, after ``Action:``, in backticks or in prose, but not
inside another expression: a call right after ``.``, ``(``, ``=``, ``;``, an
operator or ``lambda ...:``, directly followed by ``.name``, ``(`` or ``[``, or
sharing its line with ``;`` or another call (``name(``) is refused. The first
action call decides: when it is malformed the reply is refused, even if a later
line holds a valid one. Everything is linear in the length of the reply. Every
refusal is a :class:`ParseError` whose message is one line of feedback for the
model.

:func:`check_url` limits ``goto`` to http(s) URLs on an allow-list of hosts
(default ``127.0.0.1`` and ``localhost``). This is a check on the action text
only; blocking navigation inside the browser (links, redirects, scripts) is
the browser side's job.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from esopt.envs.sudoku.moves import strip_think

Value = str | int | float | tuple[str, ...]

MAX_STRING = 4000  # characters of any decoded string argument
MAX_BID = 32
MAX_KEY = 64
MAX_URL = 2048
MAX_NUMBER_CHARS = 32  # longer number literals are refused before any conversion
MAX_LIST = 32
MAX_ARGS = 8
DEFAULT_ALLOWED_HOSTS: tuple[str, ...] = ("127.0.0.1", "localhost")

EXAMPLE = "click('12') or fill('14', 'hello')"
_BUTTONS = ("left", "middle", "right")
_MODIFIERS = ("Alt", "Control", "ControlOrMeta", "Meta", "Shift")
_REQUIRED = object()


@dataclass(frozen=True)
class Param:
    """One parameter of an action: name, kind of value, default (``_REQUIRED`` if none), bounds for numbers."""

    name: str
    kind: str  # bid | text | key | url | number | options | button | modifiers
    default: object = _REQUIRED
    low: float = 0.0
    high: float = 0.0


def _bid(name: str = "bid") -> Param:
    return Param(name, "bid")


_CLICK = (_bid(), Param("button", "button", "left"), Param("modifiers", "modifiers", ()))

# name -> parameters, in BrowserGym's order (keyword names are BrowserGym's too)
ACTIONS: dict[str, tuple[Param, ...]] = {
    "click": _CLICK,
    "dblclick": _CLICK,
    "hover": (_bid(),),
    "fill": (_bid(), Param("value", "text")),
    "select_option": (_bid(), Param("options", "options")),
    "press": (_bid(), Param("key_comb", "key")),
    "focus": (_bid(),),
    "clear": (_bid(),),
    "check": (_bid(),),
    "uncheck": (_bid(),),
    "scroll": (Param("delta_x", "number", low=-1e5, high=1e5), Param("delta_y", "number", low=-1e5, high=1e5)),
    "goto": (Param("url", "url"),),
    "go_back": (),
    "go_forward": (),
    "send_msg_to_user": (Param("text", "text"),),
    "report_infeasible": (Param("reason", "text"),),
    "noop": (Param("wait_ms", "number", 1000, low=0, high=10000),),
}


def signature(name: str) -> str:
    """``fill(bid, value)``, ``noop(wait_ms=1000)``: the form shown in feedback."""
    parts = [p.name if p.default is _REQUIRED else f"{p.name}={_literal(p.default)}" for p in ACTIONS[name]]
    return f"{name}({', '.join(parts)})"


@dataclass(frozen=True)
class ParseError:
    """Why a reply holds no usable action: ``message`` is one line of feedback for the model."""

    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class ParsedAction:
    """A checked action: its name and every parameter's value (defaults filled in), in signature order."""

    name: str
    args: tuple[tuple[str, Value], ...]

    def __getitem__(self, param: str) -> Value:
        for key, value in self.args:
            if key == param:
                return value
        raise KeyError(param)

    def to_browsergym(self) -> str:
        """The call as BrowserGym's action string, written from the typed fields only.

        Required parameters are positional; optional ones are written as keywords
        when they differ from the default. Raises ``ValueError``/``TypeError`` for
        an action that is not in :data:`ACTIONS` or a value of another type, so a
        hand-built object cannot smuggle anything either.
        """
        if self.name not in ACTIONS:
            raise ValueError(f"unknown action {self.name!r}")
        params = ACTIONS[self.name]
        if tuple(k for k, _ in self.args) != tuple(p.name for p in params):
            raise ValueError(f"{self.name} needs exactly the parameters of {signature(self.name)}")
        parts = []
        for param, (_, value) in zip(params, self.args):
            if param.default is _REQUIRED:
                parts.append(_literal(value))
            elif value != param.default:
                parts.append(f"{param.name}={_literal(value)}")
        return f"{self.name}({', '.join(parts)})"


def _literal(value: object) -> str:
    if type(value) is str:
        return str.__repr__(value)
    if type(value) is int:
        return int.__repr__(value)
    if type(value) is float and math.isfinite(value):
        return float.__repr__(value)
    if type(value) is tuple and all(type(v) is str for v in value):
        return "[" + ", ".join(str.__repr__(v) for v in value) + "]"
    raise TypeError(f"not a plain literal: {type(value).__name__}")


class _Refused(Exception):
    """Internal: carries the feedback line out of the tokenizer."""


# --- tokenizer ---------------------------------------------------------------

_NUMBER = re.compile(r"[+-]?+(?:\d++(?:\.\d*+)?+|\.\d++)(?:[eE][+-]?+\d++)?+", re.ASCII)
_IDENT = re.compile(r"[A-Za-z_]\w*+")
_WS = re.compile(r"\s*+")
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "r": "\r", "t": "\t", "0": "\0"}
_HEX_LEN = {"x": 2, "u": 4, "U": 8}
_EXPR_CHARS = set("+-*/%@&|^<>=!~.([{")


@dataclass(frozen=True)
class _Tok:
    """A literal argument: ``kind`` is str, number or list; ``text`` is the number as written."""

    kind: str
    value: Value
    text: str = ""


def _short(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


class _Scanner:
    def __init__(self, text: str, pos: int) -> None:
        self.text, self.pos = text, pos

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_ws(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()

    def string(self) -> str:
        text, quote = self.text, self.text[self.pos]
        if text.startswith(quote * 3, self.pos):
            raise _Refused("triple-quoted strings are not allowed; write strings as 'text' with \\n for newlines")
        i, out = self.pos + 1, []
        while True:
            if len(out) > MAX_STRING:
                raise _Refused(f"a string argument is longer than {MAX_STRING} characters")
            if i >= len(text):
                raise _Refused("a string argument is not closed; close it with the same quote")
            ch = text[i]
            if ch == quote:
                self.pos = i + 1
                value = "".join(out)
                if len(value) > MAX_STRING:
                    raise _Refused(f"a string argument is longer than {MAX_STRING} characters")
                return value
            if ch in "\r\n":
                raise _Refused("a string argument runs over a line break; write newlines as \\n")
            if ch != "\\":
                out.append(ch)
                i += 1
                continue
            esc = text[i + 1 : i + 2]
            if esc in _ESCAPES:
                out.append(_ESCAPES[esc])
                i += 2
            elif esc in _HEX_LEN:
                digits = text[i + 2 : i + 2 + _HEX_LEN[esc]]
                if len(digits) != _HEX_LEN[esc] or not all(c in "0123456789abcdefABCDEF" for c in digits):
                    raise _Refused(f"bad \\{esc} escape in a string argument")
                code = int(digits, 16)
                if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                    raise _Refused(f"bad \\{esc} escape in a string argument")
                out.append(chr(code))
                i += 2 + len(digits)
            elif esc in ("", "\r", "\n"):
                raise _Refused("a string argument runs over a line break; write newlines as \\n")
            else:  # unknown escape: kept with its backslash, as Python does
                out.append("\\" + esc)
                i += 2

    def number(self) -> _Tok:
        m = _NUMBER.match(self.text, self.pos)
        if m is None:
            raise _Refused("arguments must be quoted strings, numbers or lists of strings")
        literal = m.group()
        if len(literal) > MAX_NUMBER_CHARS:
            raise _Refused(f"a number argument is longer than {MAX_NUMBER_CHARS} characters")
        self.pos = m.end()
        if _IDENT.match(self.text, self.pos):  # 0x1f, 1_000, 12abc
            raise _Refused("numbers must be plain decimals such as 200 or -50.5; quote element ids such as 'a12'")
        digits = literal.lstrip("+-")
        if digits.isdigit():
            return _Tok("number", int(literal), literal)
        value = float(literal)
        if not math.isfinite(value):
            raise _Refused("a number argument is out of range")
        return _Tok("number", value, literal)

    def literal(self) -> _Tok:
        ch = self.peek()
        if ch in ("'", '"'):
            return _Tok("str", self.string())
        if ch == "[":
            return self.string_list()
        if ch and (ch.isdigit() or ch in "+-."):
            return self.number()
        name = _IDENT.match(self.text, self.pos)
        if name is not None:
            after = self.text[name.end() : name.end() + 1]
            word = name.group()
            if after in ("'", '"'):
                raise _Refused("string prefixes such as f'...', r'...' or b'...' are not allowed; use a plain 'string'")
            if word == "lambda":
                raise _Refused("lambda is not allowed; arguments must be plain literals")
            if after == "(":
                raise _Refused("nested calls are not allowed; arguments must be plain literals")
            raise _Refused(f"argument {_short(word)} is a name, not a literal; quote strings, e.g. {EXAMPLE}")
        raise _Refused("arguments must be quoted strings, numbers or lists of strings")

    def string_list(self) -> _Tok:
        self.pos += 1
        items: list[str] = []
        while True:
            self.skip_ws()
            if self.peek() == "]":
                break
            if self.peek() not in ("'", '"'):
                raise _Refused("a list argument may only hold quoted strings, e.g. ['red', 'blue']")
            if len(items) >= MAX_LIST:
                raise _Refused(f"a list argument has more than {MAX_LIST} items")
            items.append(self.string())
            self.skip_ws()
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != "]":
                raise _Refused("a list argument must be strings separated by commas and closed with ]")
        self.pos += 1
        return _Tok("list", tuple(items))

    def arguments(self) -> list[tuple[str | None, _Tok]]:
        """Arguments after the opening parenthesis, up to and including the closing one."""
        args: list[tuple[str | None, _Tok]] = []
        while True:
            self.skip_ws()
            if self.peek() == ")":
                self.pos += 1
                return args
            if len(args) >= MAX_ARGS:
                raise _Refused("too many arguments")
            keyword = None
            name = _IDENT.match(self.text, self.pos)
            if name is not None:
                after = _WS.match(self.text, name.end()).end()
                if self.text.startswith("=", after) and not self.text.startswith("==", after):
                    keyword, self.pos = name.group(), after + 1
                    self.skip_ws()
            args.append((keyword, self.literal()))
            self.skip_ws()
            ch = self.peek()
            if ch == ",":
                self.pos += 1
            elif ch == ")":
                continue
            elif ch == "":
                raise _Refused("the action is not closed; end it with )")
            elif ch in _EXPR_CHARS:
                raise _Refused("arguments must be plain literals, not expressions such as 1+1")
            else:
                raise _Refused("arguments must be separated by commas and the action closed with )")


# --- checking arguments --------------------------------------------------------

_BID = re.compile(r"[A-Za-z0-9]{1,%d}" % MAX_BID)


def _convert(action: str, param: Param, tok: _Tok, allowed_hosts: Iterable[str]) -> Value:
    where = f"{signature(action)}: {param.name}"
    if param.kind == "bid":
        if tok.kind == "number" and tok.text.isdigit():
            text = tok.text
        elif tok.kind == "str":
            text = str(tok.value)
        else:
            text = ""
        if not _BID.fullmatch(text):
            raise _Refused(f"{where} must be an element id such as '12' or 'a51' (letters and digits, at most {MAX_BID})")
        return text
    if param.kind == "number":
        if tok.kind != "number" or not (param.low <= tok.value <= param.high):
            raise _Refused(f"{where} must be a number from {param.low:g} to {param.high:g}")
        return tok.value
    if param.kind == "options":
        if tok.kind == "str":
            return tok.value
        if tok.kind == "list" and tok.value:
            return tok.value
        raise _Refused(f"{where} must be a quoted string or a list of strings, e.g. 'blue' or ['red', 'blue']")
    if param.kind == "modifiers":
        if tok.kind != "list" or any(v not in _MODIFIERS for v in tok.value):
            raise _Refused(f"{where} must be a list of keys from {', '.join(_MODIFIERS)}")
        return tok.value
    if tok.kind != "str":
        raise _Refused(f"{where} must be a quoted string")
    value = str(tok.value)
    if param.kind == "button" and value not in _BUTTONS:
        raise _Refused(f"{where} must be one of {', '.join(map(repr, _BUTTONS))}")
    if param.kind == "key" and not (0 < len(value) <= MAX_KEY and value.isprintable()):
        raise _Refused(f"{where} must be a key such as 'Enter' or 'Control+a'")
    if param.kind == "url":
        problem = check_url(value, allowed_hosts)
        if problem is not None:
            raise _Refused(problem)
    return value


def _bind(action: str, args: list[tuple[str | None, _Tok]], allowed_hosts: Iterable[str]) -> ParsedAction:
    params = ACTIONS[action]
    by_name = {p.name: p for p in params}
    given: dict[str, _Tok] = {}
    keywords_seen = False
    for index, (keyword, tok) in enumerate(args):
        keywords_seen = keywords_seen or keyword is not None
        if keyword is None:
            if keywords_seen:
                raise _Refused(f"positional arguments must come before keywords in {signature(action)}")
            if index >= len(params):
                raise _Refused(f"too many arguments: the action is {signature(action)}")
            keyword = params[index].name
        elif keyword not in by_name:
            raise _Refused(f"{action} has no argument {_short(keyword)}: the action is {signature(action)}")
        if keyword in given:
            raise _Refused(f"argument {keyword} given twice in {signature(action)}")
        given[keyword] = tok
    values = []
    for param in params:
        if param.name in given:
            values.append((param.name, _convert(action, param, given[param.name], allowed_hosts)))
        elif param.default is _REQUIRED:
            raise _Refused(f"missing argument {param.name}: the action is {signature(action)}")
        else:
            values.append((param.name, param.default))
    return ParsedAction(action, tuple(values))


# --- finding the call in a reply -----------------------------------------------

_ACTION_CALL = re.compile(r"\b(" + "|".join(sorted(ACTIONS, key=len, reverse=True)) + r")[ \t]*+\(")
_ANY_CALL = re.compile(r"\b([A-Za-z_]\w*+)\(")
_LAMBDA = re.compile(r"\blambda\b")
_BEFORE_REFUSED = set("([{,=/%&|^~@;")  # not - * + >: markdown bullets and quotes


def _check_surroundings(text: str, start: int, end: int) -> None:
    """Refuse a call that is part of a larger expression on its line."""
    prefix = text[text.rfind("\n", 0, start) + 1 : start]
    if prefix.endswith("."):
        raise _Refused("attribute access is not allowed; write the action alone, e.g. " + EXAMPLE)
    other = _ANY_CALL.search(prefix)
    if other is not None:
        raise _Refused(f"write one action alone on its line; found a call of {_short(other.group(1))} before it")
    if _LAMBDA.search(prefix):
        raise _Refused("lambda is not allowed; write the action alone, e.g. " + EXAMPLE)
    before = prefix.rstrip()
    if before[-1:] in ("'", '"', "`"):
        before = before[:-1].rstrip()
    line_end = text.find("\n", end)
    suffix = text[end : line_end if line_end >= 0 else len(text)]
    if before[-1:] == ";" or suffix.lstrip()[:1] == ";" or _ANY_CALL.search(suffix) or _ACTION_CALL.search(suffix):
        raise _Refused("one action per reply; write it alone, without ; or a second call on its line")
    if before[-1:] in _BEFORE_REFUSED:
        raise _Refused("the action must stand alone, not inside another expression, e.g. " + EXAMPLE)
    after = text[end : end + 2]
    if after[:1] in ("(", "[") or (after[:1] == "." and (after[1:].isalpha() or after[1:] == "_")):
        raise _Refused("the action must stand alone: no attribute access, call or index after it")


def parse_action(reply: str, allowed_hosts: Iterable[str] = DEFAULT_ALLOWED_HOSTS) -> ParsedAction | ParseError:
    """The first action call in ``reply`` as a checked :class:`ParsedAction`, or a :class:`ParseError`.

    ``allowed_hosts`` is the host allow-list for ``goto`` (see :func:`check_url`).
    Never raises for any string; never evaluates anything the reply contains.
    """
    if not isinstance(reply, str):
        return ParseError(f"no action found; reply with one action such as {EXAMPLE}")
    text = strip_think(reply)
    found = _ACTION_CALL.search(text)
    if found is None:
        other = _ANY_CALL.search(text)
        if other is not None:
            return ParseError(f"unknown action {_short(other.group(1))}; use one of: {', '.join(ACTIONS)}")
        return ParseError(f"no action found; reply with one action such as {EXAMPLE}")
    action = found.group(1)
    scanner = _Scanner(text, found.end())
    try:
        args = scanner.arguments()
        _check_surroundings(text, found.start(), scanner.pos)
        parsed = _bind(action, args, allowed_hosts)
    except _Refused as refused:
        return ParseError(_one_line(str(refused)))
    return parsed


def count_actions(reply: str) -> int:
    """How many action calls (``name(``) the reply holds outside ``<think>``; only the first is ever applied."""
    return len(_ACTION_CALL.findall(strip_think(reply))) if isinstance(reply, str) else 0


def _one_line(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= 300 else message[:297] + "..."


# --- URLs ----------------------------------------------------------------------


def check_url(url: str, allowed_hosts: Iterable[str] = DEFAULT_ALLOWED_HOSTS) -> str | None:
    """None if ``goto(url)`` may go ahead, else one line of feedback saying why not.

    Only ``http``/``https`` URLs whose host is exactly one of ``allowed_hosts``
    (case-insensitive; any port) pass. Refused: other schemes (``file:``,
    ``javascript:``, ``data:``, ``chrome:``...), URLs without a host, user names
    or passwords in the URL (``http://localhost@evil.example``), and spaces,
    control characters or backslashes anywhere (browsers read ``\\`` as ``/``, so
    ``http://evil.example\\@localhost`` would go to evil.example).
    """
    if isinstance(allowed_hosts, str):
        allowed_hosts = (allowed_hosts,)
    hosts = sorted({h.lower().strip("[]") for h in allowed_hosts})
    if not isinstance(url, str) or not url:
        return "goto needs a URL such as 'http://localhost:8000/'"
    if len(url) > MAX_URL:
        return f"the URL is longer than {MAX_URL} characters"
    if any(c.isspace() or c == "\\" or not c.isprintable() for c in url):
        return "the URL must not contain spaces, backslashes or control characters"
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return "the URL is malformed"
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        shown = f"{_short(scheme)} URLs are" if scheme else "a URL without http:// is"
        return f"only http and https URLs are allowed; {shown} refused"
    if "@" in parts.netloc:
        return "URLs with a user name or password are not allowed"
    if not host:
        return "the URL has no host; write it as http://localhost:8000/path"
    if host not in hosts:
        return f"host {_short(host)} is not allowed; allowed hosts: {', '.join(hosts)}"
    return None
