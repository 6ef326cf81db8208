"""The table of the heuristic-design runs: each "+ES" method against its method without ES,
per problem x budget, paired by seed (the two runs of one seed share their instances).

Per seed: a win when X+ES's best heuristic has the lower held-out objective, a tie when equal,
a loss otherwise (a best heuristic that fails on the held-out instances loses to one that does
not; two failures tie). Per cell: the mean paired difference of held-out objectives over the
seeds where both are valid (X - X+ES, so positive favours ES) with its SE, and the outcome of
esopt adapt's rule on it (W above 2 SE, L below -2 SE, T otherwise: studies/adapt/table.py).

Below it, what the proposals were, per problem x budget x method summed over seeds: valid and
better than its parent, valid and not better, a copy of the reference, a copy of another
proposal, no function (or none at top level), then what comes before the colon of every
other failure reason (crash, unparseable code, invalid output, wrong signature, ...).
"""
from __future__ import annotations

import math
from collections import Counter

from ..adapt.table import compare
from ...utils.stats import mean_se
from ...ahd.config import METHODS

PAIRS = [("eoh+es", "eoh"), ("sample+es", "sample")]


def _obj(run: dict | None) -> float | None:
    if not run:
        return None
    x = ((run.get("best") or {}).get("heldout") or {}).get("objective")
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


def seed_outcome(es: float | None, base: float | None) -> str:
    if es is None and base is None:
        return "tie"
    if es is None:
        return "loss"
    if base is None:
        return "win"
    tol = 1e-9 * max(1.0, abs(es), abs(base))
    return "win" if es < base - tol else "loss" if es > base + tol else "tie"


def cell(runs: dict, a: str, b: str) -> dict | None:
    """runs: {(method, seed): summary}; the comparison of method a (with ES) against b."""
    seeds = sorted({s for (m, s) in runs if m == a} & {s for (m, s) in runs if m == b})
    if not seeds:
        return None
    per_seed = {s: seed_outcome(_obj(runs[(a, s)]), _obj(runs[(b, s)])) for s in seeds}
    counts = {k: sum(1 for v in per_seed.values() if v == k) for k in ("win", "tie", "loss")}
    both = [s for s in seeds if _obj(runs[(a, s)]) is not None and _obj(runs[(b, s)]) is not None]
    out = {"a": a, "b": b, "seeds": seeds, "per_seed": {str(s): v for s, v in per_seed.items()}, **counts}
    if both:  # rewards are negated objectives: compare()'s A - B is then b's objective - a's
        c = compare({str(s): -_obj(runs[(a, s)]) for s in both}, {str(s): -_obj(runs[(b, s)]) for s in both})
        out.update(diff=c["diff"], se=c["se"], outcome=c["outcome"], paired=len(both))
    return out


BETTER, NOT_BETTER = "better than its parent", "valid, not better"


def proposal_kind(rec: dict) -> str:
    """The class of one proposals.jsonl record (see the module docstring)."""
    if rec.get("valid"):
        child, parent = rec.get("objective"), rec.get("parent_objective")
        if all(isinstance(x, (int, float)) and math.isfinite(x) for x in (child, parent)) \
                and child < parent - 1e-9 * max(1.0, abs(parent)):
            return BETTER
        return NOT_BETTER
    if rec.get("duplicate_of") is not None:
        return "copy of the reference" if rec["duplicate_of"] == "ref" else "copy of another proposal"
    reason = str(rec.get("reason") or "no reason recorded").strip()
    if reason.startswith("no 'def "):
        return "no function"
    if reason.startswith("no top-level 'def "):  # a def nested in a class or function, say
        return "no top-level function"
    return reason.split(":", 1)[0][:40].replace("|", "/")  # a table column's name


def kinds_of(records: list[dict]) -> dict[str, int]:
    return dict(Counter(proposal_kind(r) for r in records))


def build(summaries: list[dict], references: dict) -> dict:
    """summaries: finished runs' summary.json, each with its proposals' kinds_of() under
    "proposal_kinds" where known; references: {problem: {seed: held-out objective}}."""
    grid: dict[tuple, dict] = {}
    for s in summaries:
        grid.setdefault((s["problem"], s["budget"]), {})[(s["method"], s["seed"])] = s
    rows = []
    for (problem, budget), runs in sorted(grid.items()):
        methods = {}
        for m in METHODS:
            vals = [_obj(r) for (mm, _), r in runs.items() if mm == m]
            ok = [v for v in vals if v is not None]
            if vals:
                mean, se = mean_se(ok) if ok else (None, None)
                methods[m] = {"mean": mean, "se": se, "runs": len(vals), "valid": len(ok)}
        ref = [v for v in (references.get(problem) or {}).values() if isinstance(v, (int, float))]
        proposals = {}
        for (m, _), r in sorted(runs.items()):
            if isinstance(r.get("proposal_kinds"), dict):
                proposals.setdefault(m, Counter()).update(r["proposal_kinds"])
        rows.append({"problem": problem, "budget": budget, "methods": methods,
                     "proposals": {m: dict(c) for m, c in proposals.items()},
                     "reference": mean_se(ref)[0] if ref else None,
                     "comparisons": [c for a, b in PAIRS if (c := cell(runs, a, b)) is not None]})
    totals: dict[str, dict[str, int]] = {}
    for row in rows:
        for c in row["comparisons"]:
            t = totals.setdefault(f"{c['a']} vs {c['b']} @ {row['budget']}", {"win": 0, "tie": 0, "loss": 0})
            for k in t:
                t[k] += c[k]
    return {"rows": rows, "totals": totals}


def _fmt(x, se=None) -> str:
    if x is None:
        return "-"
    return f"{x:.4g}" + (f" ± {se:.2g}" if se is not None else "")


def markdown(table: dict) -> str:
    pairs = [f"{a} vs {b}" for a, b in PAIRS]
    head = ["problem", "budget", "reference", *METHODS, *pairs]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in table["rows"]:
        cells = [row["problem"], str(row["budget"]), _fmt(row["reference"])]
        for m in METHODS:
            st = row["methods"].get(m)
            cells.append("-" if st is None else _fmt(st["mean"], st["se"]) + (
                f" ({st['valid']}/{st['runs']} valid)" if st["valid"] < st["runs"] else ""))
        got = {(c["a"], c["b"]): c for c in row["comparisons"]}
        for a, b in PAIRS:
            c = got.get((a, b))
            if c is None:
                cells.append("-")
                continue
            txt = f"W{c['win']}/T{c['tie']}/L{c['loss']}"
            if "diff" in c:
                txt += f"; {c['outcome'][0].upper()} ({c['diff']:+.3g} ± {c['se']:.2g})"
            cells.append(txt)
        lines.append("| " + " | ".join(cells) + " |")
    if table["totals"]:
        lines += ["", "| comparison @ budget | seed wins | ties | losses |", "|---|---|---|---|"]
        lines += [f"| {k} | {v['win']} | {v['tie']} | {v['loss']} |" for k, v in table["totals"].items()]
    return "\n".join(lines + _proposals_lines(table["rows"])) + "\n"


def _proposals_lines(rows: list[dict]) -> list[str]:
    """The proposals table: one line per problem x budget x method, one column per kind."""
    total = Counter()
    for row in rows:
        for c in (row.get("proposals") or {}).values():
            total.update(c)
    if not total:
        return []
    rest = sorted((k for k in total if k not in (BETTER, NOT_BETTER)), key=lambda k: (-total[k], k))
    kinds = [BETTER, NOT_BETTER, *rest]
    head = ["problem", "budget", "method", "proposals", *kinds]
    lines = ["", "Proposals, summed over seeds:", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        for m in METHODS:
            c = (row.get("proposals") or {}).get(m)
            if c:
                lines.append("| " + " | ".join([row["problem"], str(row["budget"]), m, str(sum(c.values())),
                                                *(str(c.get(k, 0)) for k in kinds)]) + " |")
    return lines
