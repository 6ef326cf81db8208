"""The text a web agent sees each turn, built from a BrowserGym observation dict.

Goal, URL, the page's accessibility tree with element ids (BrowserGym's
``flatten_axtree_to_str``, without the ``InlineTextBox``/``LineBreak`` nodes that
only repeat their parent's text), and the last action's error. Long pages are
cut at ``max_chars`` with a line saying how much was left out.

Two things BrowserGym's tree leaves out that a task can hinge on are shown
(``style="esopt"``, the default; ``"browsergym"`` prints the tree as BrowserGym does):
- text a page made clickable with a script has no id: BrowserGym hides plain
  ``generic`` elements (a ``<span>`` or ``<div>`` with no role of its own), so
  MiniWoB's links in click-link or the messages of its email inbox could not be
  clicked by any agent. A generic element that holds only text lends its id to
  that text: ``[13] StaticText 'nisl'``;
- a text area looks like a text input: ``multiline=True`` marks it (click-widget
  asks for one or the other).
Neither adds a browser call: both are in the tree BrowserGym reads already.
BrowserGym's own remedy for the first, element properties from a DOM snapshot
(``with_clickable``), costs one more call per step and still misses handlers a
page attaches to an ancestor, as MiniWoB's are (bench web).
"""
from __future__ import annotations

# roles that add no information beyond their parent's name
_EXTRA_IGNORED_ROLES = {"InlineTextBox", "LineBreak"}


def _role(node: dict) -> str:
    return (node.get("role") or {}).get("value", "")


def _multiline(node: dict) -> bool:
    return any(p.get("name") == "multiline" and (p.get("value") or {}).get("value") for p in node.get("properties", ()))


def _esopt_style(axtree: dict) -> dict:
    """``axtree`` with the text of each generic, text-only element carrying that element's id, and the
    ``multiline`` property kept where it is true (see the module docstring)."""
    nodes = axtree["nodes"]
    by_id = {node["nodeId"]: node for node in nodes}
    lent: dict[str, str] = {}  # StaticText nodeId -> the bid of the generic element holding it
    for node in nodes:
        bid = node.get("browsergym_id")
        if bid is None or _role(node) != "generic":
            continue
        kids = [by_id[c] for c in node.get("childIds", ()) if c in by_id]
        if kids and all(_role(k) == "StaticText" and str((k.get("name") or {}).get("value", "")).strip() for k in kids):
            lent.update((k["nodeId"], bid) for k in kids)
    shown = []
    for node in nodes:
        if node["nodeId"] in lent:
            node = {**node, "browsergym_id": lent[node["nodeId"]]}
        props = node.get("properties")
        if props and any(p.get("name") == "multiline" for p in props) and not _multiline(node):
            node = {**node, "properties": [p for p in props if p.get("name") != "multiline"]}
        shown.append(node)
    return {**axtree, "nodes": shown}


STYLES = ("esopt", "browsergym")


def page_text(obs: dict, style: str = "esopt") -> str:
    """The accessibility tree of ``obs`` as indented lines ``[bid] role 'name'`` (``style``: STYLES)."""
    from browsergym.utils.obs import IGNORED_AXTREE_PROPERTIES, IGNORED_AXTREE_ROLES, flatten_axtree_to_str

    if style not in STYLES:
        raise ValueError(f"observation style {style!r} is not one of {', '.join(STYLES)}")
    esopt = style == "esopt"
    return flatten_axtree_to_str(_esopt_style(obs["axtree_object"]) if esopt else obs["axtree_object"],
                                 extra_properties=obs.get("extra_element_properties"),
                                 ignored_roles=set(IGNORED_AXTREE_ROLES) | _EXTRA_IGNORED_ROLES,
                                 ignored_properties=set(IGNORED_AXTREE_PROPERTIES) - ({"multiline"} if esopt else set()))


def clip(text: str, max_chars: int) -> str:
    """``text`` cut to at most ``max_chars`` characters plus one line saying what was cut."""
    if len(text) <= max_chars:
        return text
    cut = text.rfind("\n", 0, max_chars)
    cut = cut if cut > max_chars // 2 else max_chars
    return text[:cut] + f"\n... ({len(text) - cut} more characters of the page not shown)"


def shown_url(url: str, how: str = "short") -> str:
    """The URL an observation shows. short: a local file (MiniWoB's task pages, which lie inside the installed
    package) from its task folder on, e.g. file://miniwob/click-test.html, so the text is the same wherever
    esopt is installed; http(s) URLs and full: as they are."""
    if how != "short" or not url.startswith("file://"):
        return url
    parts = url[len("file://"):].split("/")
    keep = parts[-2:] if len(parts) >= 2 else parts
    return "file://" + "/".join(keep)


def observation_text(obs: dict, max_chars: int = 4000, page: str | None = None, style: str = "esopt",
                     url: str = "short") -> str:
    """One turn's observation: goal, URL (shown_url), page (clipped to ``max_chars``), last action's error."""
    goal = obs.get("goal") or ""
    parts = [f"Goal: {goal.strip()}", f"URL: {shown_url(obs.get('url', ''), url)}", "Page:",
             clip(page_text(obs, style) if page is None else page, max_chars)]
    error = (obs.get("last_action_error") or "").strip()
    if error:
        parts.append(f"Last action failed: {clip(' '.join(error.split()), 300)}")
    return "\n".join(parts)
