"""Requests, responses and the route table shared by the page modules.

A page handler takes ``(db, request, *captures)`` and returns a
:class:`Response`. Routes are full-match regular expressions over the path;
captures are digits or slugs only, so no handler sees arbitrary path text.
Bad input raises :class:`BadRequest` (a 400 page naming the field), an unknown
id raises :class:`NotFound`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlencode

from esopt.envs.browser.webshop.html import el, page

MAX_FIELD = 4000  # characters of any query or form value


class BadRequest(Exception):
    """The request's input is wrong; the message says which field and what is allowed."""


class NotFound(Exception):
    """No such page or record."""


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    form: dict[str, str] = field(default_factory=dict)

    def arg(self, name: str, default: str = "") -> str:
        return (self.form if self.method == "POST" else self.query).get(name, default)

    def text(self, name: str, label: str, *, required: bool = True, limit: int = 200, multiline: bool = False) -> str:
        """A trimmed text field (runs of whitespace made one space unless ``multiline``); ``label`` names it."""
        value = self.arg(name).strip() if multiline else " ".join(self.arg(name).split())
        if required and not value:
            raise BadRequest(f"{label} must not be empty")
        if len(value) > limit:
            raise BadRequest(f"{label} must be at most {limit} characters")
        return value

    def integer(self, name: str, label: str, low: int, high: int, default: int | None = None) -> int:
        raw = self.arg(name).strip()
        if not raw and default is not None:
            return default
        if not re.fullmatch(r"-?\d{1,9}", raw):
            raise BadRequest(f"{label} must be a whole number from {low} to {high}")
        value = int(raw)
        if not low <= value <= high:
            raise BadRequest(f"{label} must be a whole number from {low} to {high}")
        return value

    def choice(self, name: str, label: str, allowed: list[str], default: str) -> str:
        value = self.arg(name) or default
        if value not in allowed:
            raise BadRequest(f"{label} must be one of {', '.join(allowed)}")
        return value


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def html(body: bytes, status: int = 200) -> Response:
    return Response(status, body, {"Content-Type": "text/html; charset=utf-8"})


def redirect(path: str, **query) -> Response:
    """303 See Other to a site path (after a POST), with an optional query string."""
    target = path + ("?" + urlencode(query) if query else "")
    return Response(303, b"", {"Location": target})


def error_page(status: int, message: str) -> Response:
    titles = {400: "Bad request", 404: "Page not found", 405: "Method not allowed", 413: "Request too large"}
    return html(page(titles.get(status, "Error"), el("p", message), el("p", el("a", "Back to the home page", href="/"))),
                status)


Handler = Callable[..., Response]
ROUTES: list[tuple[str, re.Pattern, Handler]] = []


def route(method: str, pattern: str) -> Callable[[Handler], Handler]:
    """Register ``handler`` for ``method`` on paths fully matching ``pattern``."""

    def deco(handler: Handler) -> Handler:
        ROUTES.append((method, re.compile(pattern), handler))
        return handler

    return deco


def dispatch(db, request: Request) -> Response:
    """The response for ``request``: the matching handler's, or an error page."""
    allowed = False
    for method, pattern, handler in ROUTES:
        match = pattern.fullmatch(request.path)
        if match is None:
            continue
        if method != request.method:
            allowed = True
            continue
        try:
            return handler(db, request, *match.groups())
        except BadRequest as exc:
            return error_page(400, str(exc))
        except NotFound as exc:
            return error_page(404, str(exc) or "There is no such page.")
    if allowed:
        return error_page(405, f"{request.method} is not allowed here.")
    return error_page(404, "There is no such page.")
