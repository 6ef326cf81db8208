"""The text a web agent sees each turn, built from a BrowserGym observation dict.

Goal, URL, the page's accessibility tree with element ids (BrowserGym's
``flatten_axtree_to_str``, without the ``InlineTextBox``/``LineBreak`` nodes that
only repeat their parent's text), and the last action's error. Long pages are
cut at ``max_chars`` with a line saying how much was left out.
"""
from __future__ import annotations

# roles that add no information beyond their parent's name
_EXTRA_IGNORED_ROLES = {"InlineTextBox", "LineBreak"}


def page_text(obs: dict) -> str:
    """The accessibility tree of ``obs`` as indented lines ``[bid] role 'name'``."""
    from browsergym.utils.obs import IGNORED_AXTREE_ROLES, flatten_axtree_to_str

    return flatten_axtree_to_str(obs["axtree_object"], extra_properties=obs.get("extra_element_properties"),
                                 ignored_roles=set(IGNORED_AXTREE_ROLES) | _EXTRA_IGNORED_ROLES)


def clip(text: str, max_chars: int) -> str:
    """``text`` cut to at most ``max_chars`` characters plus one line saying what was cut."""
    if len(text) <= max_chars:
        return text
    cut = text.rfind("\n", 0, max_chars)
    cut = cut if cut > max_chars // 2 else max_chars
    return text[:cut] + f"\n... ({len(text) - cut} more characters of the page not shown)"


def observation_text(obs: dict, max_chars: int = 4000, page: str | None = None) -> str:
    """One turn's observation: goal, URL, page (clipped to ``max_chars``), last action's error."""
    goal = obs.get("goal") or ""
    parts = [f"Goal: {goal.strip()}", f"URL: {obs.get('url', '')}", "Page:",
             clip(page_text(obs) if page is None else page, max_chars)]
    error = (obs.get("last_action_error") or "").strip()
    if error:
        parts.append(f"Last action failed: {clip(' '.join(error.split()), 300)}")
    return "\n".join(parts)
