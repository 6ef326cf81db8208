"""Failed episodes where the user looks: every generation line, evaluation line and the final summary say
how many episodes failed and the first one's reason in one line; when every episode of a generation or an
evaluation fails, the run stops with EpisodesFailed (one line, exit 2; the history as it was)."""
from __future__ import annotations

REASON_CHARS = 200


class EpisodesFailed(Exception):
    """Every episode of a generation or an evaluation failed: nothing would be learned or measured."""


def reason(error: str | None) -> str:
    """A failure's one-line reason: the last line of its traceback (the exception and its message)."""
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    text = lines[-1] if lines else "unknown failure"
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS] + "..."


def count(episodes: list[dict]) -> tuple[int, str | None]:
    """(failed episodes, the first one's reason) of episode records (Episode.to_json() dicts)."""
    failed = [ep for ep in episodes if ep.get("error")]
    return len(failed), (reason(failed[0]["error"]) if failed else None)


def note(episodes: list[dict]) -> str:
    """' | k/n episodes failed (first: reason)', or '' when none did."""
    n, first = count(episodes)
    return f" | {n}/{len(episodes)} episodes failed (first: {first})" if n else ""


def stop_if_all_failed(episodes: list[dict], what: str, run_path, command: str = "esopt train") -> None:
    """EpisodesFailed when every one of `episodes` failed (`what`: e.g. "generation 3")."""
    n, first = count(episodes)
    if episodes and n == len(episodes):
        raise EpisodesFailed(f"every episode of {what} failed ({n} of {n}; first: {first}); {run_path} keeps what "
                             f"was recorded before it; fix the env or reward function, then {command} --resume "
                             f"{run_path}")
