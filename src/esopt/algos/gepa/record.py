"""GEPA's callbacks, recorded: every candidate (texts, parents, validation scores, the episodes
spent when it was found) and every proposal (parent, component, the reflection's raw reply and
the text GEPA took from it, malformation flags, minibatch scores before and after, outcome).

GEPA catches and only warns about exceptions raised inside callbacks; this recorder keeps
them and `check()` raises the first one after the run, so a broken record is never silent.
"""
from __future__ import annotations

import functools
import time

from .reflections import flags

EVENTS = ("on_iteration_start", "on_candidate_selected", "on_minibatch_sampled", "on_evaluation_end",
          "on_evaluation_skipped", "on_proposal_end", "on_candidate_accepted", "on_candidate_rejected",
          "on_valset_evaluated", "on_error", "on_iteration_end")


class Recorder:
    def __init__(self, adapter, call_log, log=None):
        self.adapter, self.call_log, self.log = adapter, call_log, log
        self.candidates: list[dict] = []
        self.proposals: list[dict] = []
        self.iterations = 0
        self.errors: list[str] = []
        self._current: dict | None = None
        self._calls_at_start = 0
        for name in EVENTS:  # each handler records its own failure instead of GEPA swallowing it
            setattr(self, name, self._guard(getattr(self, "_" + name)))

    def _guard(self, fn):
        @functools.wraps(fn)
        def run(event):
            try:
                fn(event)
            except Exception as err:  # noqa: BLE001 - kept and raised by check()
                self.errors.append(f"{fn.__name__}: {type(err).__name__}: {err}")
        return run

    def check(self) -> None:
        if self.errors:
            raise RuntimeError(f"recording GEPA's progress failed: {self.errors[0]}")

    # ------------------------------------------------------------------ iterations
    def _on_iteration_start(self, e):
        self.iterations += 1
        self._calls_at_start = len(self.call_log.calls)
        self._current = {"iteration": e["iteration"], "episodes_before": self.adapter.episodes, "parent": None,
                         "outcome": "no proposal"}

    def _on_candidate_selected(self, e):
        self._current["parent"] = e["candidate_idx"]
        self._current["parent_val_score"] = e["score"]

    def _on_minibatch_sampled(self, e):
        self._current["minibatch"] = [self._task(i) for i in e["minibatch_ids"]]

    def _task(self, i):
        return self.adapter.pools.trainset[i].task

    def _on_evaluation_end(self, e):
        if self._current is None:
            return
        key = "parent_scores" if e["candidate_idx"] is not None else "child_scores"
        self._current.setdefault(key, list(e["scores"]))

    def _on_evaluation_skipped(self, e):
        self._current["outcome"] = f"skipped: {e['reason']}"

    def _on_proposal_end(self, e):
        cur = self._current
        cur["components"] = {}
        for name, text in e["new_instructions"].items():
            raw = e["raw_lm_outputs"].get(name, "")
            parent_text = self.candidates[cur["parent"]]["texts"].get(name, "") if cur["parent"] is not None else ""
            call = self._call_for(raw)
            cur["components"][name] = {"raw_reply": raw, "proposed": text,
                                       "flags": flags(raw, text, parent_text, bool(call and call.get("truncated")))}
        cur["outcome"] = "proposed"

    def _call_for(self, raw: str) -> dict | None:
        for call in reversed(self.call_log.calls[self._calls_at_start:]):
            if call.get("reply") == raw:
                return call
        return None

    def _on_candidate_accepted(self, e):
        self._current.update(outcome="accepted", new_candidate=e["new_candidate_idx"])

    def _on_candidate_rejected(self, e):
        self._current.update(outcome="rejected", reason=e["reason"])

    def _on_error(self, e):
        if self._current is not None:
            self._current.update(outcome="error", error=f"{type(e['exception']).__name__}: {e['exception']}")

    def _on_iteration_end(self, e):
        cur, self._current = self._current, None
        if cur is None:
            return
        failed = [c["error"] for c in self.call_log.calls[self._calls_at_start:] if "error" in c]
        if failed:
            cur["reflection_errors"] = failed
        cur["episodes_after"] = self.adapter.episodes
        self.proposals.append(cur)
        if self.log:
            best = max(self.candidates, key=lambda c: c["val_score"]) if self.candidates else None
            self.log({"kind": "gepa", "generation": cur["iteration"], "outcome": cur["outcome"],
                      "parent": cur["parent"], "episodes": self.adapter.episodes,
                      "candidates": len(self.candidates),
                      "best_val_score": best["val_score"] if best else None,
                      "reflection_calls": len(self.call_log.calls)})

    # ------------------------------------------------------------------ candidates
    def _on_valset_evaluated(self, e):
        idx = e["candidate_idx"]
        refs = self.adapter.pools.valset
        entry = {"index": idx, "parents": [p for p in e["parent_ids"] if p is not None],
                 "iteration": e["iteration"], "texts": dict(e["candidate"]), "val_score": e["average_score"],
                 "val_scores": {refs[i].task if isinstance(i, int) and i < len(refs) else str(i): s
                                for i, s in e["scores_by_val_id"].items()},
                 "episodes_at_discovery": self.adapter.episodes, "time": time.time()}
        if idx < len(self.candidates):
            self.candidates[idx] = entry
        else:
            self.candidates.append(entry)

    # ------------------------------------------------------------------ summary
    def flag_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.proposals:
            for comp in (p.get("components") or {}).values():
                for f in comp["flags"]:
                    out[f] = out.get(f, 0) + 1
        return out

    def outcome_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.proposals:
            key = p["outcome"].split(":")[0]
            out[key] = out.get(key, 0) + 1
        return out
