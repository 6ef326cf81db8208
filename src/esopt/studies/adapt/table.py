"""The table of `esopt adapt`: paired comparisons between settings (win / tie / loss) and the
Markdown table over tasks x budgets.

A comparison of setting A against setting B on one task and budget pairs their held-out
per-task rewards (the same puzzles, same order); A wins when the mean paired difference is
above 2 standard errors of that difference, loses when below -2 SE, and ties otherwise.
"""
from __future__ import annotations

from ...utils.stats import mean_se

# (A, B): A is compared against its matched baseline B. both vs weights asks whether adding the
# context search helps ES; both vs context whether adding ES helps the context search (+ES);
# context vs gepa and both vs gepa set ES's context search, alone and with the weights, against
# the prompt optimiser GEPA at the same episodes (only when gepa is among the settings).
COMPARISONS = [("weights", "none"), ("context", "none"), ("both", "none"), ("both", "weights"),
               ("both", "context"), ("context", "gepa"), ("both", "gepa")]
SETTINGS = ("none", "context", "weights", "both", "gepa")


def outcome(diff: float, se: float, z: float = 2.0) -> str:
    """'win' if diff > z*se, 'loss' if diff < -z*se, else 'tie'."""
    if diff > z * se:
        return "win"
    if diff < -z * se:
        return "loss"
    return "tie"


def compare(a: dict[str, float], b: dict[str, float]) -> dict:
    """Paired comparison of per-task rewards {task id: mean reward} of A against B."""
    if set(a) != set(b):
        raise ValueError(f"paired comparison needs the same held-out tasks: {len(set(a) ^ set(b))} task id(s) "
                         "differ between the two sub-runs")
    if not a:
        raise ValueError("paired comparison of no tasks")
    diff, se = mean_se([a[k] - b[k] for k in a])
    return {"diff": diff, "se": se, "outcome": outcome(diff, se)}


def comparisons(per_task: dict[str, dict[str, float] | None]) -> list[dict]:
    """All COMPARISONS whose two settings have per-task rewards ({setting: {task id: reward} or None})."""
    out = []
    for a, b in COMPARISONS:
        if per_task.get(a) is not None and per_task.get(b) is not None:
            out.append({"a": a, "b": b, **compare(per_task[a], per_task[b])})
    return out


def totals(rows: list[dict]) -> dict[str, dict[str, int]]:
    """{"A vs B @ budget": {win, tie, loss}} summed over tasks (rows: adapt.json's table rows)."""
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        for c in row["comparisons"]:
            key = f"{c['a']} vs {c['b']} @ {row['budget']}"
            out.setdefault(key, {"win": 0, "tie": 0, "loss": 0})[c["outcome"]] += 1
    return out


def _cell(fig: dict | None) -> str:
    if fig is None:
        return "-"
    if fig.get("error"):
        return "failed"
    return f"{fig['reward']:.3f} ± {fig['reward_se']:.3f}"


def markdown(rows: list[dict], settings: list[str]) -> str:
    """Rows task x budget: held-out mean ± SE per setting, then W / T / L per comparison (the
    outcome of that row), and a last block of win/tie/loss counts over tasks per budget."""
    pairs = [(a, b) for a, b in COMPARISONS if a in settings and b in settings]
    head = ["task", "budget", *settings, *[f"{a} vs {b}" for a, b in pairs]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    letter = {"win": "W", "tie": "T", "loss": "L"}
    for row in rows:
        got = {(c["a"], c["b"]): c for c in row["comparisons"]}
        cells = [row["task"], str(row["budget"]), *[_cell(row["settings"].get(s)) for s in settings]]
        for p in pairs:
            c = got.get(p)
            cells.append("-" if c is None else f"{letter[c['outcome']]} ({c['diff']:+.3f} ± {c['se']:.3f})")
        lines.append("| " + " | ".join(cells) + " |")
    tot = totals(rows)
    if tot:
        lines += ["", "| comparison @ budget | wins | ties | losses |", "|---|---|---|---|"]
        lines += [f"| {k} | {v['win']} | {v['tie']} | {v['loss']} |" for k, v in tot.items()]
    return "\n".join(lines) + "\n"
