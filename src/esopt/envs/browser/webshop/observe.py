"""Reading a BrowserGym observation: element ids (bids) by role and name, table cells, the page's text.

Everything here works on ``obs["axtree_object"]`` (the accessibility tree
BrowserGym extracts), the same view an LLM agent gets, flattened, as text.
"""

from __future__ import annotations


def _nodes(obs: dict) -> list[dict]:
    return obs["axtree_object"]["nodes"]


def _role(node: dict) -> str:
    return node.get("role", {}).get("value", "")


def _name(node: dict) -> str:
    return str(node.get("name", {}).get("value", ""))


def find_bid(obs: dict, role: str, name: str) -> str:
    """The bid of the first element with accessibility ``role`` and exactly the accessible ``name``.

    Raises LookupError naming the elements of that role that do exist.
    """
    for node in _nodes(obs):
        if _role(node) == role and _name(node) == name and node.get("browsergym_id"):
            return str(node["browsergym_id"])
    seen = sorted({_name(n) for n in _nodes(obs) if _role(n) == role})
    raise LookupError(f"no {role} named {name!r} on {obs.get('url')}; {role}s here: {seen[:30]}")


def options(obs: dict, combobox: str) -> list[str]:
    """The option texts of the combobox (``<select>``) named ``combobox``."""
    nodes = {n["nodeId"]: n for n in _nodes(obs)}
    box = next((n for n in _nodes(obs) if _role(n) == "combobox" and _name(n) == combobox), None)
    if box is None:
        raise LookupError(f"no combobox named {combobox!r} on {obs.get('url')}")
    out, stack = [], list(box.get("childIds", []))
    while stack:
        node = nodes.get(stack.pop(0))
        if node is None:
            continue
        if _role(node) == "option":
            out.append(_name(node))
        stack[:0] = node.get("childIds", [])
    return out


def _text(node: dict, nodes: dict) -> str:
    """Accessible name of ``node``, else the text of its StaticText descendants."""
    if _name(node):
        return _name(node)
    parts, stack = [], list(node.get("childIds", []))
    while stack:
        child = nodes.get(stack.pop(0))
        if child is None:
            continue
        if _role(child) == "StaticText":
            parts.append(_name(child))
        else:
            stack[:0] = child.get("childIds", [])
    return " ".join(" ".join(parts).split())


def table_rows(obs: dict, caption: str) -> list[list[str]]:
    """Cell texts of the body rows of the table named ``caption`` (header rows left out)."""
    nodes = {n["nodeId"]: n for n in _nodes(obs)}
    table = next((n for n in _nodes(obs) if _role(n) == "table" and _name(n) == caption), None)
    if table is None:
        seen = [_name(n) for n in _nodes(obs) if _role(n) == "table"]
        raise LookupError(f"no table named {caption!r} on {obs.get('url')}; tables here: {seen}")
    rows, stack = [], list(table.get("childIds", []))
    while stack:
        node = nodes.get(stack.pop(0))
        if node is None:
            continue
        if _role(node) == "row":
            cells = [nodes[c] for c in node.get("childIds", []) if c in nodes]
            if any(_role(c) == "columnheader" for c in cells):
                continue
            rows.append([_text(c, nodes) for c in cells if _role(c) in ("cell", "gridcell")])
        else:
            stack[:0] = node.get("childIds", [])
    return rows


def page_text(obs: dict) -> str:
    """The page as BrowserGym's flattened accessibility tree (what a text agent reads)."""
    from browsergym.utils.obs import flatten_axtree_to_str

    return flatten_axtree_to_str(obs["axtree_object"])
