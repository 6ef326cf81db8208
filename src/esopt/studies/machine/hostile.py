"""Hostile clients of an esopt serve, for the hostile-load test and `esopt bench serve`'s hostile section.

Each of `threads` threads sends, in turn and without pause beyond `pause_s`, the requests that broke the
server before its admission limits (serve/limits.py): a body past serve.max_body_bytes (declared, so the
server can refuse it before reading), a `max_tokens` far above the ceiling, a prompt of `prompt_chars`
characters, past the model's positions, a long reply whose client gives up after a fraction of a second (its
decoding must stop), a body sent a byte at a time and then dropped, a burst of rewards for episodes that
were never assigned or are not JSON, and a flood.

The flood: `flood_requests` (30) chats sent at once, each on a connection of its own, each with a prompt of
`flood_chars` (1,000,000) characters: a body of 1,000,082 bytes, under serve.max_body_bytes' default of 1 MiB,
far past the model's positions. Each must be refused (400, one JSON line) before it is tokenized, and the
server must not keep the bodies' memory (issue 51: before the character bound, 30 of them were each tokenized
for seconds and grew the server by 1.4 GB that stayed). `flood_timeout_s` (60) is each one's client timeout.
Given `server_pid` (the server's process, this one's in `esopt bench serve`), `flood_growth_mb` is the most its
resident memory rose during one flood over what it was as the flood began (sampled every 20 ms).

`kinds` picks the attacks a thread takes in turn (default KINDS, all of them; ("flood",): floods only).
Counts of the answers by kind and status come back from stop(): one per attack, one per request of a flood.
"""
from __future__ import annotations

import collections
import json
import socket
import threading
import time
from urllib.parse import urlsplit

from ...utils.memory import rss_mb

KINDS = ("oversized_body", "huge_max_tokens", "long_prompt", "disconnect", "slow_body", "bad_rewards", "flood")


class Hostile:
    def __init__(self, url: str, threads: int = 2, pause_s: float = 0.05, body_bytes: int = 2 << 20,
                 prompt_chars: int = 200_000, reply_tokens: int = 256, give_up_s: float = 0.3,
                 flood_requests: int = 30, flood_chars: int = 1_000_000, flood_timeout_s: float = 60.0,
                 kinds: tuple[str, ...] = KINDS, server_pid: int | None = None):
        assert kinds and set(kinds) <= set(KINDS), kinds
        self.url, self.threads, self.pause_s = url.rstrip("/"), threads, pause_s
        self.body_bytes, self.prompt_chars = body_bytes, prompt_chars
        self.reply_tokens, self.give_up_s = reply_tokens, give_up_s
        self.flood_requests, self.flood_chars, self.flood_timeout_s = flood_requests, flood_chars, flood_timeout_s
        self.kinds, self.server_pid = tuple(kinds), server_pid
        self.flood_growth_mb = 0.0  # the most the server's RSS rose during one flood, over its RSS as it began
        self.flood_body = json.dumps(self._chat(messages=[{"role": "user", "content": "ab " * (flood_chars // 3)}],
                                                max_tokens=2)).encode()  # one body, sent by every request of a flood
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
                kind = self.kinds[turn % len(self.kinds)]
                turn += 1
                try:
                    answer = getattr(self, kind)(http)
                    for status in answer if isinstance(answer, list) else [answer]:
                        self._count(kind, status)
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

    def flood(self, http) -> list:
        """`flood_requests` chats sent at once, each on a connection of its own with a prompt of `flood_chars`
        characters; their statuses (400 expected: refused for length before tokenizing), "<status> not JSON" for
        an error that is not one JSON error line, or the client's exception's name (ReadTimeout past
        `flood_timeout_s`)."""
        import httpx

        start = threading.Barrier(self.flood_requests)
        answers: list = [None] * self.flood_requests

        def one(k):
            try:
                with httpx.Client(base_url=self.url, timeout=self.flood_timeout_s) as own:
                    start.wait(10)
                    answer = own.post("/v1/chat/completions", content=self.flood_body,
                                      headers={"content-type": "application/json"})
                ok = answer.status_code < 400 or json_error(answer)
                answers[k] = answer.status_code if ok else f"{answer.status_code} not JSON"
            except Exception as err:  # noqa: BLE001 (counted)
                answers[k] = type(err).__name__

        senders = [threading.Thread(target=one, args=(k,), daemon=True) for k in range(self.flood_requests)]
        flooding = threading.Event()
        if self.server_pid is not None:
            threading.Thread(target=self._flood_rss, args=(flooding,), daemon=True).start()
        for thread in senders:
            thread.start()
        for thread in senders:
            thread.join(self.flood_timeout_s + 30)
        flooding.set()
        return answers

    def _flood_rss(self, flooding: threading.Event) -> None:
        start = peak = rss_mb(self.server_pid)
        while not flooding.wait(0.02):
            peak = max(peak, rss_mb(self.server_pid))
        with self.lock:
            self.flood_growth_mb = max(self.flood_growth_mb, peak - start)


def json_error(answer) -> bool:
    """The answer is OpenAI's error shape, {"error": {"message": one line, ...}}."""
    try:
        body = answer.json()
        return set(body) == {"error"} and "\n" not in body["error"]["message"]
    except (ValueError, TypeError, KeyError):
        return False
