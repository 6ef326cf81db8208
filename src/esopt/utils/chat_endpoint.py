"""One call to an OpenAI-compatible chat endpoint (POST <base>/chat/completions), urllib only.

Used wherever the user points esopt at an external LLM: coevo.proposer (skills for the library)
and the GEPA baseline's reflection LM. Every failure (HTTP error, unreachable, not a chat
completion, a key variable that is no longer set) raises ChatEndpointError with one line naming it;
callers wrap that in their own error type.
"""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass


class ChatEndpointError(RuntimeError):
    """The endpoint could not be asked or sent no chat completion."""


@dataclass(frozen=True)
class ChatReply:
    text: str
    truncated: bool  # finish_reason "length": stopped at max_tokens
    completion_tokens: int  # as the endpoint's usage reports it (0 when it does not)


def chat_url(url: str) -> str:
    """POST target: `url` itself if it ends with /chat/completions, else <url>/chat/completions."""
    url = url.rstrip("/")
    return url if url.endswith("/chat/completions") else url + "/chat/completions"


def chat_completion(url: str, model: str, messages: list[dict], *, max_tokens: int, temperature: float,
                    timeout_s: float, api_key_env: str | None = None, seed: int | None = None) -> ChatReply:
    body = {"model": model, "temperature": temperature, "max_tokens": max_tokens, "messages": messages}
    if seed is not None:
        body["seed"] = seed % (1 << 31)
    headers = {"Content-Type": "application/json"}
    if api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            raise ChatEndpointError(f"{api_key_env} (the endpoint's key variable) is no longer set")
        headers["Authorization"] = f"Bearer {key}"
    target = chat_url(url)
    request = urllib.request.Request(target, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - the user's endpoint
            data = json.loads(response.read().decode("utf-8"))
        choice = data["choices"][0]
        text = str(choice["message"]["content"] or "")
        usage = data.get("usage") or {}
        return ChatReply(text, choice.get("finish_reason") == "length", int(usage.get("completion_tokens") or 0))
    except urllib.error.HTTPError as err:
        raise ChatEndpointError(f"{target} answered HTTP {err.code}: {err.read()[:200]!r}") from None
    except (urllib.error.URLError, OSError) as err:  # TimeoutError is an OSError
        raise ChatEndpointError(f"{target} unreachable: {err}") from None
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as err:
        raise ChatEndpointError(f"{target} sent no chat completion ({type(err).__name__}: {err})") from None
