"""Text of the elements of an HTML page matching a small CSS selector (for ``program_html`` checks).

Supported selectors: compound parts joined by spaces (descendant combinator),
each part an optional tag name or ``*`` followed by any of ``#id``, ``.class``,
``[attr]``, ``[attr=value]`` and ``[attr="value"]``. Groups (``a, b``) are
allowed. Anything else (``>``, ``+``, pseudo-classes) is refused with
ValueError, so a locator never silently means something else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
_SKIP_TEXT = {"script", "style", "head", "title"}
_SELF_CLOSING_SIBLINGS = {"li", "p", "option", "tr", "td", "th", "dt", "dd"}  # an open one ends at the next
_SCOPES = {"ul", "ol", "table", "tbody", "thead", "select", "dl", "body", "article", "main", "form", "div"}
_PART = re.compile(r"""([a-zA-Z][a-zA-Z0-9-]*|\*)?((?:\#[\w-]+|\.[\w-]+|\[[\w-]+(?:=(?:"[^"]*"|'[^']*'|[\w-]+))?\])*)""")
_SIMPLE = re.compile(r"""\#([\w-]+)|\.([\w-]+)|\[([\w-]+)(?:=(?:"([^"]*)"|'([^']*)'|([\w-]+)))?\]""")


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    parent: "Node | None" = None
    children: list = field(default_factory=list)  # Node or str

    def text(self) -> str:
        parts: list[str] = []

        def walk(node: Node) -> None:
            for child in node.children:
                if isinstance(child, str):
                    parts.append(child)
                elif child.tag not in _SKIP_TEXT:
                    walk(child)

        walk(self)
        return " ".join(" ".join(parts).split())


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.current = self.root

    def handle_starttag(self, tag, attrs):
        if tag in _SELF_CLOSING_SIBLINGS:  # <li>a<li>b: the second <li> ends the first
            node = self.current
            while node is not self.root and node.tag not in _SCOPES:
                if node.tag == tag:
                    self.current = node.parent
                    break
                node = node.parent
        node = Node(tag, {k: v or "" for k, v in attrs}, self.current)
        self.current.children.append(node)
        if tag not in _VOID:
            self.current = node

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Node(tag, {k: v or "" for k, v in attrs}, self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not self.root and node.tag != tag:
            node = node.parent
        if node is not self.root:  # close it (and anything left open inside it)
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def parse(html: str) -> Node:
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


@dataclass(frozen=True)
class _Compound:
    tag: str | None
    tests: tuple[tuple[str, str, str | None], ...]  # (kind, name, value)

    def matches(self, node: Node) -> bool:
        if self.tag and node.tag != self.tag:
            return False
        for kind, name, value in self.tests:
            if kind == "id" and node.attrs.get("id") != name:
                return False
            if kind == "class" and name not in node.attrs.get("class", "").split():
                return False
            if kind == "attr" and (name not in node.attrs or (value is not None and node.attrs[name] != value)):
                return False
        return True


def _compile(selector: str) -> list[list[_Compound]]:
    groups = []
    for group in selector.split(","):
        parts = []
        for word in group.split():
            m = _PART.fullmatch(word)
            if m is None or not word:
                raise ValueError(f"unsupported CSS selector part {word!r} in {selector!r}; use tag, #id, .class, "
                                 "[attr=value] joined by spaces")
            tag = None if m.group(1) in (None, "*") else m.group(1).lower()
            tests = []
            for s in _SIMPLE.finditer(m.group(2)):
                if s.group(1):
                    tests.append(("id", s.group(1), None))
                elif s.group(2):
                    tests.append(("class", s.group(2), None))
                else:
                    value = next((v for v in s.group(4, 5, 6) if v is not None), None)
                    tests.append(("attr", s.group(3).lower(), value))
            parts.append(_Compound(tag, tuple(tests)))
        if not parts:
            raise ValueError(f"empty CSS selector in {selector!r}")
        groups.append(parts)
    return groups


def _elements(node: Node):
    for child in node.children:
        if isinstance(child, Node):
            yield child
            yield from _elements(child)


def _matches(node: Node, chain: list[_Compound]) -> bool:
    if not chain[-1].matches(node):
        return False
    rest, ancestor = chain[:-1], node.parent
    while rest and ancestor is not None:
        if rest[-1].matches(ancestor):
            rest = rest[:-1]
        ancestor = ancestor.parent
    return not rest


def select_texts(html: str, selector: str) -> list[str]:
    """Whitespace-collapsed text of each element matching ``selector``, in document order.

    An empty selector means the whole ``<body>`` (or document).
    """
    root = parse(html)
    if not selector.strip():
        body = next((n for n in _elements(root) if n.tag == "body"), root)
        return [body.text()]
    groups = _compile(selector)
    return [n.text() for n in _elements(root) if any(_matches(n, chain) for chain in groups)]
