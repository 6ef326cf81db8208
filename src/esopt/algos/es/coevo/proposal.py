"""The proposal prompt: a few of the generation's best and worst episodes, shown compactly
(first observation, the actions, the reward), and a request for one short, general skill in a
fixed two-line format:

    NAME: <a few words>
    SKILL: <one or two sentences>

`pick_sources` chooses which episodes each candidate sees (candidate j: the j-th slice of the
best and of the worst, ranked by reward, ties in trajectory order), so several candidates
from one generation see different episodes even when the proposer decodes greedily.
"""
from __future__ import annotations

FORMAT = "NAME: <a name of two to five words>\nSKILL: <the skill: one or two sentences>"

EXAMPLE = ("NAME: avoid repeated mistakes\n"
           "SKILL: If an action was rejected earlier in the episode, do not repeat it; choose a different one.")


def rank(traj: list[dict]) -> list[int]:
    """Indices of the scored episodes, best first (ties keep trajectory order)."""
    scored = [k for k, ep in enumerate(traj) if isinstance(ep.get("reward"), (int, float)) and not ep.get("error")]
    return sorted(scored, key=lambda k: -float(traj[k]["reward"]))


def pick_sources(traj: list[dict], candidate: int, best: int, worst: int) -> list[tuple[str, int]] | None:
    """[(role, trajectory index)] shown to candidate `candidate`: `best` from the top half of the
    ranking (none at the lowest reward) and `worst` from the bottom half (none at the highest), each
    worst one scoring below every best one shown; None when there is no contrast (every scored
    episode has the same reward, or fewer than two are scored)."""
    order = rank(traj)
    if len(order) < 2 or traj[order[0]]["reward"] == traj[order[-1]]["reward"]:
        return None
    lo, hi = traj[order[-1]]["reward"], traj[order[0]]["reward"]
    half = max(1, len(order) // 2)
    top = [k for k in order[:half] if traj[k]["reward"] > lo]  # never an episode at the lowest reward
    bottom = sorted((k for k in order[half:] if traj[k]["reward"] < hi), key=lambda k: float(traj[k]["reward"]))
    b0, w0 = (candidate * best) % len(top), (candidate * worst) % len(bottom)
    chosen_best = [top[(b0 + i) % len(top)] for i in range(min(best, len(top)))]
    chosen_worst = [bottom[(w0 + i) % len(bottom)] for i in range(min(worst, len(bottom)))]
    best_r = min(traj[k]["reward"] for k in chosen_best)
    # every worst episode shown scores below every best one (bottom[0] is at the lowest reward)
    chosen_worst = [k for k in chosen_worst if traj[k]["reward"] < best_r] or bottom[:1]
    return [("best", k) for k in chosen_best] + [("worst", k) for k in chosen_worst]


def _cut(text: str, limit: int) -> str:
    text = str(text or "").strip()
    return text if len(text) <= limit else text[:limit].rstrip() + " [...]"


def render_episode(ep: dict, obs_chars: int) -> str:
    actions = []
    for turn in ep.get("turns") or []:
        act = turn.get("action") if turn.get("action") not in (None, "") else turn.get("response")
        note = f" ({_cut(turn['feedback'], 80)})" if turn.get("feedback") else ""
        actions.append(f"- {_cut(act, 100)}{note}")
    return (f"First observation:\n{_cut(ep.get('observation0'), obs_chars)}\n"
            f"Actions:\n" + ("\n".join(actions) or "- (none)") + f"\nReward: {float(ep['reward']):.3g}")


def proposal_prompt(traj: list[dict], sources: list[tuple[str, int]], skills: list[tuple[str, str]],
                    obs_chars: int, max_chars: int) -> str:
    """The prompt for one candidate: the source episodes, the skills the agent already has, the format."""
    parts = ["An agent played episodes of a task. Below are some of its best and some of its worst episodes: "
             "what it saw first, the actions it took, and the reward it got (higher is better)."]
    for role in ("best", "worst"):
        eps = [traj[k] for r, k in sources if r == role]
        parts.append(f"\n{role.upper()} EPISODES")
        parts += [f"\nEpisode {i + 1}\n{render_episode(ep, obs_chars)}" for i, ep in enumerate(eps)]
    if skills:
        parts.append("\nSkills the agent already has (do not repeat them):\n"
                     + "\n".join(f"- {name}: {_cut(text, 160)}" for name, text in skills))
    parts.append(f"\nWrite ONE new skill that would help the agent score higher on new episodes of this task: "
                 f"a short, general rule or strategy (not the answer to one episode), at most {max_chars} "
                 f"characters. Reply in exactly this format and nothing else:\n{FORMAT}\n\n"
                 f"For example (for another task):\n{EXAMPLE}")
    return "\n".join(parts)
