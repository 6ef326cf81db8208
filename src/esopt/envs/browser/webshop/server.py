"""``ShopSite``: the shop served over HTTP on 127.0.0.1, one fresh database per site.

    site = ShopSite(seed=0)
    base_url = site.start()          # http://127.0.0.1:<free port>
    site.db_query("SELECT ...", ())  # read-only, for evaluators
    site.stop()

The server binds the loopback address only, refuses requests whose ``Host``
header is not its own address (DNS rebinding), reads at most
:data:`MAX_BODY` bytes of URL-encoded form data, and answers every page with a
Content-Security-Policy that allows no scripts, frames or outside resources.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

# the page modules register their routes on import
from esopt.envs.browser.webshop import pages_account, pages_cart, pages_forum, pages_shop  # noqa: F401
from esopt.envs.browser.webshop.database import ShopDatabase
from esopt.envs.browser.webshop.routing import MAX_FIELD, Request, Response, dispatch, error_page

MAX_BODY = 64 * 1024
MAX_FIELDS = 32
HOST = "127.0.0.1"
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; "
       "base-uri 'none'; frame-ancestors 'none'")


def _fields(text: str) -> dict[str, str]:
    """First value of each field in URL-encoded ``text``; ValueError when there are too many or too long."""
    pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=False, max_num_fields=MAX_FIELDS,
                      encoding="utf-8", errors="strict")
    out: dict[str, str] = {}
    for key, value in pairs:
        if len(key) > 64 or len(value) > MAX_FIELD:
            raise ValueError("a field is too long")
        out.setdefault(key, value)
    return out


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"
    server_version = "HarborGoods/1"
    sys_version = ""

    def log_message(self, format, *args):  # noqa: A002 - quiet: no per-request lines on stderr
        pass

    def _respond(self, response: Response) -> None:
        self.send_response(response.status)
        headers = {"Content-Length": str(len(response.body)), "Cache-Control": "no-store",
                   "X-Content-Type-Options": "nosniff", "Content-Security-Policy": CSP, **response.headers}
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    def _handle(self, method: str) -> None:
        if self.headers.get("Host", "") not in self.server.allowed_hosts:
            self.close_connection = True
            return self._respond(error_page(400, "Unknown host."))
        parts = urlsplit(self.path)
        if len(self.path) > 4096:
            return self._respond(error_page(400, "The address is too long."))
        try:
            query = _fields(parts.query)
            form: dict[str, str] = {}
            if method == "POST":
                length = int(self.headers.get("Content-Length") or 0)
                if length < 0 or length > MAX_BODY:
                    self.close_connection = True
                    return self._respond(error_page(413, "The form is too large."))
                raw = self.rfile.read(length)
                kind = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
                if kind != "application/x-www-form-urlencoded":
                    return self._respond(error_page(400, "Forms must be sent URL-encoded."))
                form = _fields(raw.decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            return self._respond(error_page(400, "The request could not be read."))
        request = Request(method, parts.path or "/", query, form)
        self._respond(dispatch(self.server.db, request))

    def do_GET(self):  # noqa: N802 - http.server's naming
        self._handle("GET")

    def do_HEAD(self):  # noqa: N802
        self._handle("GET")

    def do_POST(self):  # noqa: N802
        self._handle("POST")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    db: ShopDatabase
    allowed_hosts: set[str]


class ShopSite:
    """The shop for one episode: a fresh database built from ``seed`` and a server on a free loopback port."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.db: ShopDatabase | None = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the shop is not running; call start() first")
        return f"http://{HOST}:{self.port}"

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the shop is not running; call start() first")
        return self._server.server_address[1]

    def start(self) -> str:
        """Build a fresh database, serve it on 127.0.0.1:<free port>; returns the base URL."""
        if self._server is not None:
            raise RuntimeError("the shop is already running; stop() it before starting again")
        self.db = ShopDatabase(self.seed)
        server = _Server((HOST, 0), _Handler)
        port = server.server_address[1]
        server.db = self.db
        server.allowed_hosts = {f"{HOST}:{port}", f"localhost:{port}"}
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"shop-{port}", daemon=True)
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        """Stop serving and drop the database; safe to call twice."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = self._thread = None
        if self.db is not None:
            self.db.close()
            self.db = None

    def db_query(self, sql: str, params=()) -> list[tuple]:
        """Rows of one read-only SQL statement with ``params`` (for evaluators)."""
        if self.db is None:
            raise RuntimeError("the shop is not running; call start() first")
        return self.db.query(sql, params)

    def __enter__(self) -> "ShopSite":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
