"""The shop's SQLite database: schema, a fresh copy per site, locked access.

Building a world (:func:`catalog.populate`) takes tens of milliseconds; each
seed is built once per process into an in-memory template and every
:class:`ShopDatabase` starts as a byte copy of it (``Connection.backup``), so a
new episode's database is fresh and fast. All access goes through one lock
(the server answers requests on several threads) and takes parameters, never
formatted SQL.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence

from esopt.envs.browser.webshop import catalog

SCHEMA = """
CREATE TABLE categories (id INTEGER PRIMARY KEY, slug TEXT UNIQUE NOT NULL, name TEXT NOT NULL);
CREATE TABLE products (id INTEGER PRIMARY KEY, sku TEXT UNIQUE NOT NULL, name TEXT UNIQUE NOT NULL,
    category_id INTEGER NOT NULL REFERENCES categories(id), price_cents INTEGER NOT NULL,
    stock INTEGER NOT NULL, description TEXT NOT NULL);
CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT UNIQUE NOT NULL, full_name TEXT NOT NULL,
    email TEXT NOT NULL, phone TEXT NOT NULL, default_shipping TEXT NOT NULL, newsletter INTEGER NOT NULL);
CREATE TABLE reviews (id INTEGER PRIMARY KEY, product_id INTEGER NOT NULL REFERENCES products(id),
    user_id INTEGER NOT NULL REFERENCES users(id), rating INTEGER NOT NULL, title TEXT NOT NULL,
    body TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id), created TEXT NOT NULL,
    status TEXT NOT NULL, ship_name TEXT NOT NULL, ship_address TEXT NOT NULL, shipping TEXT NOT NULL,
    shipping_cents INTEGER NOT NULL, total_cents INTEGER NOT NULL);
CREATE TABLE order_items (order_id INTEGER NOT NULL REFERENCES orders(id),
    product_id INTEGER NOT NULL REFERENCES products(id), quantity INTEGER NOT NULL, unit_cents INTEGER NOT NULL);
CREATE TABLE cart_items (user_id INTEGER NOT NULL, product_id INTEGER NOT NULL REFERENCES products(id),
    quantity INTEGER NOT NULL, PRIMARY KEY (user_id, product_id));
CREATE TABLE boards (id INTEGER PRIMARY KEY, slug TEXT UNIQUE NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL);
CREATE TABLE threads (id INTEGER PRIMARY KEY, board_id INTEGER NOT NULL REFERENCES boards(id),
    user_id INTEGER NOT NULL REFERENCES users(id), title TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE posts (id INTEGER PRIMARY KEY, thread_id INTEGER NOT NULL REFERENCES threads(id),
    user_id INTEGER NOT NULL REFERENCES users(id), body TEXT NOT NULL, created TEXT NOT NULL);
"""

TODAY = "2026-03-01"  # the site's fixed clock: rows made during an episode carry this date

_TEMPLATES_KEPT = 8  # worlds kept in memory per process (oldest dropped first)
_templates: dict[int, sqlite3.Connection] = {}
_templates_lock = threading.Lock()


def _copy_world(seed: int, target: sqlite3.Connection) -> None:
    """Copy the world of ``seed`` into ``target``, building (and caching) it first if needed."""
    with _templates_lock:
        conn = _templates.get(seed)
        if conn is None:
            conn = sqlite3.connect(":memory:", check_same_thread=False)
            conn.executescript(SCHEMA)
            with conn:
                catalog.populate(conn, seed)
            while len(_templates) >= _TEMPLATES_KEPT:
                _templates.pop(next(iter(_templates))).close()
            _templates[seed] = conn
        conn.backup(target)


class ShopDatabase:
    """One site's private database, a fresh copy of the world of ``seed``."""

    def __init__(self, seed: int) -> None:
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"the shop seed must be a non-negative int, got {seed!r}")
        self.seed = seed
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        _copy_world(seed, self._conn)
        self._conn.execute("PRAGMA foreign_keys = ON")

    def query(self, sql: str, params: Sequence = ()) -> list[tuple]:
        """Rows of one read-only statement (``PRAGMA query_only`` is on while it runs)."""
        with self._lock:
            self._conn.execute("PRAGMA query_only = ON")
            try:
                return self._conn.execute(sql, tuple(params)).fetchall()
            finally:
                self._conn.execute("PRAGMA query_only = OFF")

    def one(self, sql: str, params: Sequence = ()) -> tuple | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def write(self, statements: Sequence[tuple[str, Sequence]]) -> int | None:
        """Run (sql, params) statements in one transaction; returns the last row id."""
        with self._lock, self._conn:
            cursor = None
            for sql, params in statements:
                cursor = self._conn.execute(sql, tuple(params))
            return cursor.lastrowid if cursor is not None else None

    def dump(self) -> str:
        """The whole database as SQL text (for determinism checks)."""
        with self._lock:
            return "\n".join(self._conn.iterdump())

    def close(self) -> None:
        with self._lock:
            self._conn.close()
