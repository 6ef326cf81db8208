"""Hostile clients of an esopt serve, for the hostile-load test and `esopt bench serve`'s hostile section.

Each of `threads` threads sends, in turn and without pause beyond `pause_s`, the requests that broke the
server before its admission limits (serve/limits.py): a body past serve.max_body_bytes (declared, so the
server can refuse it before reading), a `max_tokens` far above the ceiling, a prompt near the body limit (the
server tokenizes it to refuse it), a long reply whose client gives up after a fraction of a second (its
decoding must stop), a body sent a byte at a time and then dropped, and a burst of rewards for episodes that
were never assigned or are not JSON. Counts of the answers by kind and status come back from stop().
"""
from __future__ import annotations

import collections
import json
import socket
import threading
import time
from urllib.parse import urlsplit

KINDS = ("oversized_body", "huge_max_tokens", "long_prompt", "disconnect", "slow_body", "bad_rewards")


class Hostile:
    def __init__(self, url: str, threads: int = 2, pause_s: float = 0.05, body_bytes: int = 2 << 20,
                 prompt_chars: int = 200_000, reply_tokens: int = 256, give_up_s: float = 0.3):
        self.url, self.threads, self.pause_s = url.rstrip("/"), threads, pause_s
        self.body_bytes, self.prompt_chars = body_bytes, prompt_chars
        self.reply_tokens, self.give_up_s = reply_tokens, give_up_s
        self.counts: collections.Counter = collections.Counter()
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.workers: list[threading.Thread] = []

    def start(self) -> "Hostile":
        for k in range(self.threads):
            thread = threading.Thread(target=self._run, args=(k,), daemon=True)
            thread.start()
            self.workers.append(thread)
        return self

    def stop(self) -> dict:
        """Stop every attack (each ends within its request's timeout); the answers, as snapshot() gives them."""
        self.done.set()
        for thread in self.workers:
            thread.join(10)
        return self.snapshot()

    def snapshot(self) -> dict:
        """{kind: {status: count}} of the answers so far."""
        out: dict = {}
        with self.lock:
            for (kind, status), n in sorted(self.counts.items()):
                out.setdefault(kind, {})[status] = n
        return out

    def _count(self, kind: str, status) -> None:
        with self.lock:
            self.counts[kind, str(status)] += 1

    def _run(self, k: int) -> None:
        import httpx

        with httpx.Client(base_url=self.url, timeout=30) as http:
            turn = k
            while not self.done.is_set():
                kind = KINDS[turn % len(KINDS)]
                turn += 1
                try:
                    self._count(kind, getattr(self, kind)(http))
                except Exception as err:  # noqa: BLE001 (a refused connection, a server stopping: counted)
                    self._count(kind, type(err).__name__)
                self.done.wait(self.pause_s)

    def _chat(self, **fields) -> dict:
        return {"model": "center", "messages": [{"role": "user", "content": "hi"}], **fields}

    def oversized_body(self, http) -> int | str:
        """413; or "reset" when the server's refusal closed the connection before the client had sent it all."""
        import httpx

        body = json.dumps(self._chat(messages=[{"role": "user", "content": "x" * self.body_bytes}])).encode()
        try:
            return http.post("/v1/chat/completions", content=body,
                             headers={"content-type": "application/json"}).status_code
        except (httpx.WriteError, httpx.ReadError, httpx.RemoteProtocolError):
            return "reset"

    def huge_max_tokens(self, http) -> int:
        return http.post("/v1/chat/completions", json=self._chat(max_tokens=1_000_000)).status_code

    def long_prompt(self, http) -> int:
        chat = self._chat(messages=[{"role": "user", "content": "ab " * (self.prompt_chars // 3)}], max_tokens=2)
        return http.post("/v1/chat/completions", json=chat).status_code

    def disconnect(self, http) -> str | int:
        import httpx

        chat = self._chat(max_tokens=self.reply_tokens, ignore_eos=True)
        try:
            return http.post("/v1/chat/completions", json=chat, timeout=self.give_up_s).status_code
        except httpx.TimeoutException:
            return "gave_up"

    def slow_body(self, http) -> str:
        parts = urlsplit(self.url)
        body = json.dumps(self._chat()).encode()
        with socket.create_connection((parts.hostname, parts.port), timeout=5) as s:
            s.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: {parts.hostname}\r\nContent-Type: application/json"
                      f"\r\nContent-Length: {len(body)}\r\n\r\n".encode())
            for byte in body[: len(body) // 2]:  # half the body, a byte at a time, then the connection is dropped
                if self.done.is_set():
                    break
                s.send(bytes([byte]))
                time.sleep(0.01)
        return "dropped"

    def bad_rewards(self, http) -> int:
        status = 0
        for j in range(10):
            status = http.post("/es/reward", json={"episode": f"g999-m0-e{j}", "reward": 1.0}).status_code
            http.post("/es/reward", content=b"{not json", headers={"content-type": "application/json"})
        return status
