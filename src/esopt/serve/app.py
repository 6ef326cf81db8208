"""The HTTP routes of esopt serve (Starlette), served by uvicorn in a thread of its own.

OpenAI-compatible: GET /v1/models, POST /v1/chat/completions (model ``member-K`` or ``center``).
The ES loop: POST /es/generation/start (the members and the episodes each must play; waits for the
generation to be published), GET /es/generation (the same, with the rewards posted so far), POST
/es/reward, POST /es/generation/finish (the update, the history record, metrics), GET /es/status.
Errors are OpenAI's shape, ``{"error": {"message": one line, "type", "code"}}``, and change nothing.
Bound to 127.0.0.1 by default; any other address needs a token, sent as ``Authorization: Bearer``.
Nothing a client sends is evaluated as code: bodies are parsed as JSON into typed fields, within the
admission limits of serve/limits.py (body size, reply tokens, prompt tokens, n, stop strings, metadata).
"""
from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import threading
import time

from ..es.history import atomic_write_text
from .protocol import FinishPost, RewardPost, ServeError, chat_request, chunks, parse

LOOPBACK = ("127.0.0.1", "localhost", "::1")
DISCONNECT_POLL_S = 0.25  # how often a waiting chat request looks whether its client is still there
# on stop, requests still being read or answered (a slow or hostile client's) get this long, then are cut off
SHUTDOWN_S = 2.0


MAX_DEPTH = 32  # JSON nesting a request body may have (a chat's deepest is ~6: messages, tool calls, schemas)


def checked_json(body):
    """A parsed body whose nesting is at most MAX_DEPTH and whose strings are valid Unicode (JSON lets a lone
    surrogate such as "\\ud800" through, which no tokenizer can encode); ServeError 400 naming what is wrong."""
    stack = [(body, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ServeError(400, f"the request body nests deeper than {MAX_DEPTH} levels")
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as err:
                raise ServeError(400, f"the request body holds a lone surrogate ({value[err.start]!a}), which is "
                                      "not valid Unicode") from None
        elif isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
            stack.extend((k, depth) for k in value)
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return body


def needs_token(host: str) -> bool:
    if host in LOOPBACK:
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


def build_app(desk, token: str | None = None):
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    def error(err: ServeError) -> JSONResponse:
        return JSONResponse(err.body(), status_code=err.status)

    async def body_of(request):
        """The body as JSON; past serve.max_body_bytes a 413 before more of it is read or parsed."""
        limits = desk.limits
        limits.check_length(request.headers.get("content-length"))
        from starlette.requests import ClientDisconnect

        parts, size = [], 0
        try:
            async for part in request.stream():
                size += len(part)
                if size > limits.max_body_bytes:
                    limits.too_large()
                parts.append(part)
        except ClientDisconnect:
            raise ServeError(400, "the client disconnected before its request body was complete") from None
        raw = b"".join(parts)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            raise ServeError(400, "the request body is not JSON") from None
        except RecursionError:
            raise ServeError(400, f"the request body nests deeper than {MAX_DEPTH} levels") from None
        return checked_json(body)

    def route(fn):
        async def handler(request):
            try:
                out = await fn(request)
                return out if isinstance(out, Response) else JSONResponse(out)
            except ServeError as err:
                return error(err)
        return handler

    async def wait(future):
        return await asyncio.wrap_future(future)

    async def models(request):
        status = desk.status()
        gen = desk.gen
        names = ["center"] + ([f"member-{k}" for k in range(len(gen.members))] if gen is not None else [])
        return {"object": "list", "data": [{"id": n, "object": "model", "created": int(time.time()),
                                            "owned_by": "esopt", "generation": status["generation"]} for n in names]}

    async def chat(request):
        req = chat_request(await body_of(request))
        desk.limits.check_chat(req)
        await asyncio.to_thread(desk.check_prompt, req)
        job = desk.submit_chat(req)
        answer = asyncio.wrap_future(job.future)
        while not answer.done():  # a client that leaves has its decoding stopped (scheduler: Job.gone)
            await asyncio.wait([answer], timeout=DISCONNECT_POLL_S)
            if not answer.done() and await request.is_disconnected():
                job.gone.set()
                answer.add_done_callback(lambda f: f.cancelled() or f.exception())  # nobody reads it: no warning
                return Response(status_code=499)
        done = answer.result()
        if not req.stream:
            return done
        usage = bool(req.stream_options and req.stream_options.include_usage)
        return StreamingResponse(chunks(done, usage), media_type="text/event-stream")

    async def start(request):
        return await asyncio.to_thread(desk.assignment)

    async def current(request):
        return await asyncio.to_thread(desk.assignment, 0.0)

    async def reward(request):
        return desk.post_reward(parse(RewardPost, await body_of(request)))

    async def finish(request):
        return await wait(desk.submit_finish(parse(FinishPost, await body_of(request))))

    async def status(request):
        return desk.status()

    class Auth:
        """The token check, as plain ASGI: Starlette's BaseHTTPMiddleware wraps `receive`, and a request
        behind it never hears that its client disconnected (request.is_disconnected stays false)."""

        def __init__(self, app):
            self.app = app

        async def __call__(self, scope, receive, send):
            if scope["type"] == "http" and token is not None:
                given = dict(scope.get("headers") or []).get(b"authorization", b"")
                if not hmac.compare_digest(given, f"Bearer {token}".encode()):
                    response = error(ServeError(401, "a valid token is required: send Authorization: Bearer <token>",
                                                "authentication_error"))
                    await response(scope, receive, send)
                    return
            await self.app(scope, receive, send)

    async def not_found(request, exc):
        return error(ServeError(404, f"no route {request.method} {request.url.path}"))

    async def method(request, exc):
        return error(ServeError(405, f"{request.method} is not allowed on {request.url.path}"))

    routes = [Route("/v1/models", route(models), methods=["GET"]),
              Route("/v1/chat/completions", route(chat), methods=["POST"]),
              Route("/es/generation/start", route(start), methods=["POST"]),
              Route("/es/generation", route(current), methods=["GET"]),
              Route("/es/reward", route(reward), methods=["POST"]),
              Route("/es/generation/finish", route(finish), methods=["POST"]),
              Route("/es/status", route(status), methods=["GET"])]
    return Starlette(routes=routes, middleware=[Middleware(Auth)], exception_handlers={404: not_found, 405: method})


class Server:
    """uvicorn in a daemon thread; ``url`` once started (port 0: the port the system chose)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8000, token: str | None = None, log=print):
        if needs_token(host) and not token:
            raise ServeError(400, f"esopt serve --host {host} listens beyond this machine: give --token (or "
                                  "ESOPT_SERVE_TOKEN), which clients send as their API key")
        self.host, self.port, self.token, self.log = host, port, token, log
        self.server = self.thread = None
        self.url = self.info = None

    def start(self, desk) -> None:
        import uvicorn

        config = uvicorn.Config(build_app(desk, self.token), host=self.host, port=self.port, log_level="warning",
                                access_log=False, lifespan="off", timeout_graceful_shutdown=SHUTDOWN_S)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="esopt-serve", daemon=True)
        self.thread.start()
        deadline = time.time() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.time() > deadline:
                raise ServeError(500, f"the HTTP server did not start on {self.host}:{self.port} (in use?)",
                                 "server_error")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{host}:{port}"
        run_path = desk.run_path
        self.info = run_path / "serve.json"  # removed again when the server stops
        # whole or absent: a client waiting for the file never reads it half written
        atomic_write_text(self.info, json.dumps({"url": self.url, "base_url": f"{self.url}/v1"}))
        self.log(f"[esopt] serving on {self.url}/v1 (members as models member-0.., the unperturbed weights as "
                 f"center; ES routes under {self.url}/es); this address is also in {run_path / 'serve.json'}")

    def stop(self) -> None:
        if self.server is not None:
            time.sleep(0.05)  # the last responses leave first
            self.server.should_exit = True
            if self.thread is not None:
                self.thread.join(timeout=10)
        if self.info is not None:  # the address is no longer served: a client must not find it
            self.info.unlink(missing_ok=True)
