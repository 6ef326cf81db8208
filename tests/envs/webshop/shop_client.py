"""A tiny HTTP client for the shop tests (urllib; redirects followed, errors returned, not raised)."""

from __future__ import annotations

import http.client
import urllib.error
import urllib.parse
import urllib.request
from urllib.parse import urlsplit


def get(base: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(base + path, timeout=10) as r:
            return r.status, r.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8")


def post(base: str, path: str, fields: dict) -> tuple[int, str, str]:
    """(status, body, final URL) after a form POST and its redirect."""
    data = urllib.parse.urlencode(fields).encode()
    try:
        with urllib.request.urlopen(base + path, data=data, timeout=10) as r:
            return r.status, r.read().decode("utf-8"), r.url
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8"), base + path


def raw(base: str, method: str, path: str, body: bytes = b"", headers: dict | None = None) -> tuple[int, str]:
    """A request with exactly these headers (no redirect following)."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for key, value in (headers or {}).items():
            conn.putheader(key, value)
        if body:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body or None)
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()
