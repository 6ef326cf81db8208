"""A tiny HTML builder that escapes by construction.

Every ``str`` handed to :func:`el` as a child or an attribute value is escaped;
only :class:`Markup` (what :func:`el` itself returns) passes through as is. Page
code therefore never writes raw HTML around data that came from the database
or the request, so nothing an agent types can become markup.
"""

from __future__ import annotations

from html import escape

_VOID = {"input", "br", "hr", "meta", "img", "link"}


class Markup(str):
    """Text that is already HTML (built by :func:`el`); never escaped again."""

    __slots__ = ()


def render(child) -> Markup:
    """``child`` as HTML: Markup kept, text escaped, lists joined, None and False dropped."""
    if child is None or child is False:
        return Markup("")
    if isinstance(child, Markup):
        return child
    if isinstance(child, (list, tuple)):
        return Markup("".join(render(c) for c in child))
    return Markup(escape(str(child), quote=True))


def el(tag: str, *children, **attrs) -> Markup:
    """``<tag attrs>children</tag>``; attribute names take ``_`` for ``-`` and a trailing ``_`` (``class_``).

    An attribute whose value is True is written bare (``checked``); None or False
    leaves it out.
    """
    parts = [tag]
    for name, value in attrs.items():
        if value is None or value is False:
            continue
        name = name.rstrip("_").replace("_", "-")
        parts.append(name if value is True else f'{name}="{escape(str(value), quote=True)}"')
    opening = "<" + " ".join(parts) + ">"
    if tag in _VOID:
        return Markup(opening)
    return Markup(f"{opening}{render(list(children))}</{tag}>")


def money(cents: int) -> str:
    """``1250`` -> ``$12.50``."""
    return f"${cents // 100}.{cents % 100:02d}"


def labelled(label: str, field_id: str, control: Markup) -> Markup:
    """A form row: a ``<label for>`` naming the control (its accessible name)."""
    return el("p", el("label", label, for_=field_id), " ", control)


def text_input(label: str, name: str, value: str = "", *, kind: str = "text", required: bool = False,
               field_id: str | None = None, **extra) -> Markup:
    field_id = field_id or f"f-{name}"
    return labelled(label, field_id, el("input", type=kind, id=field_id, name=name, value=value,
                                        required=required, **extra))


def textarea(label: str, name: str, value: str = "", *, required: bool = False) -> Markup:
    field_id = f"f-{name}"
    return labelled(label, field_id, el("textarea", value, id=field_id, name=name, rows=4, cols=60,
                                        required=required))


def select(label: str, name: str, options: list[tuple[str, str]], selected: str = "",
           field_id: str | None = None) -> Markup:
    """A ``<select>``; ``options`` are (value, shown text) pairs."""
    field_id = field_id or f"f-{name}"
    opts = [el("option", text, value=value, selected=value == selected) for value, text in options]
    return labelled(label, field_id, el("select", opts, id=field_id, name=name))


def checkbox(label: str, name: str, checked: bool) -> Markup:
    field_id = f"f-{name}"
    return el("p", el("input", type="checkbox", id=field_id, name=name, value="1", checked=checked), " ",
              el("label", label, for_=field_id))


def form(action: str, *children, method: str = "post", label: str | None = None) -> Markup:
    return el("form", *children, action=action, method=method, aria_label=label)


def button(text: str, *, aria_label: str | None = None, name: str | None = None, value: str | None = None) -> Markup:
    return el("button", text, type="submit", aria_label=aria_label, name=name, value=value)


def table(caption: str, headers: list[str], rows: list[list], *, class_: str | None = None) -> Markup:
    """A data table with a caption (its accessible name) and column headers."""
    head = el("thead", el("tr", [el("th", h, scope="col") for h in headers]))
    body = el("tbody", [el("tr", [el("td", cell) for cell in row]) for row in rows])
    return el("table", el("caption", caption), head, body, class_=class_)


NAV = [("/", "Home"), ("/categories", "Categories"), ("/cart", "Cart"), ("/account", "My account"),
       ("/orders", "Order history"), ("/forum", "Forum")]

_STYLE = """
body{font-family:sans-serif;margin:0 auto;max-width:960px;padding:0 1em}
header nav a{margin-right:1em} table{border-collapse:collapse} td,th{border:1px solid #ccc;padding:.2em .5em}
.notice{background:#eef;padding:.5em} .error{background:#fee;padding:.5em} article{border-top:1px solid #ddd}
"""


def page(title: str, *body, notice: str | None = None, error: str | None = None, query: str = "") -> bytes:
    """A whole page: site header (name, navigation, product search), a notice line, the body, as UTF-8."""
    header = el(
        "header",
        el("p", el("a", "Harbor Goods", href="/"), " - an offline test shop"),
        el("nav", [el("a", text, href=href) for href, text in NAV], aria_label="Main"),
        form("/search", el("label", "Search products", for_="q"), " ",
             el("input", type="search", id="q", name="q", value=query), " ", button("Search"),
             method="get", label="Product search"),
    )
    main = el("main", el("h1", title),
              el("p", notice, class_="notice", role="status") if notice else None,
              el("p", error, class_="error", role="alert") if error else None,
              *body)
    doc = el("html", el("head", el("meta", charset="utf-8"), el("title", f"{title} - Harbor Goods"),
                        el("style", Markup(_STYLE))),
             el("body", header, main), lang="en")
    return ("<!DOCTYPE html>\n" + doc).encode("utf-8")
