"""The candidate heuristic inside a model's reply: extraction, checks, duplicate fingerprints.

    got = extract(text, "select_next_node", signature)   # Candidate(ok, code, reason, idea)
    fingerprint(got.code)                                 # equal for codes differing only in
                                                          # comments, docstrings and layout

Where the code is: the last ```python (or bare ```) fence that defines the entry function;
an unclosed last fence (a reply cut off by the token limit) counts up to the end of the text;
without any fence, the text itself. Which parts are kept: module imports, the last top-level
`def <entry>(` (Python's own rule: a later def replaces an earlier one), and the top-level
functions, classes and assignments the entry function uses, directly or through them. Stray
top-level statements (a test call, a print) are dropped, so they never run in the sandbox.
If the block does not parse as a whole (prose after the code), the entry function is cut out
by indentation with the imports before it, and that must parse.

A reply is rejected, with the reason, when it has no `def <entry>(`, when the code does not
parse, or when the function's positional parameters cannot take the signature's arguments.
Nothing here runs the code: the sandbox (esopt.sandbox.parent) does.
"""
from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass

FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
IDEA = re.compile(r"^\s*(?:\*\*)?idea(?:\*\*)?\s*[:\-]\s*(.+)$", re.I | re.M)
MAX_IDEA = 300


@dataclass(frozen=True)
class Candidate:
    ok: bool
    code: str | None  # the program to run (imports, helpers, the entry function)
    reason: str | None  # why it was rejected (ok False)
    idea: str | None = None  # the reply's one-sentence idea, if it gave one


CLOSED = re.compile(r"```[^\n]*\n(.*?)```", re.S)


def block_done(entry: str):
    """A stop rule for generation: True once the reply has a closed code fence defining `entry`
    (what follows is prose the extraction drops; stopping there saves most of a reply's tokens)."""
    pattern = re.compile(rf"\bdef\s+{re.escape(entry)}\s*\(")

    def done(text: str) -> bool:
        return "```" in text and any(pattern.search(b) for b in CLOSED.findall(text))

    return done


def _blocks(text: str) -> list[str]:
    """Code blocks of the reply, in order; the whole text when it has no fence."""
    found = [m.group(2) for m in FENCE.finditer(text) if m.group(1).lower() in ("", "python", "py", "python3")]
    return found or [text]


def _idea(text: str) -> str | None:
    m = IDEA.search(text)
    if m:
        line = m.group(1).strip()
    else:
        before = text.split("```", 1)[0] if "```" in text else ""
        lines = [x.strip() for x in before.splitlines() if x.strip()]
        line = lines[0] if lines else ""
    line = line.strip(" *{}`")
    return line[:MAX_IDEA] or None


def _names(node: ast.AST) -> set[str]:
    """Names the statement reads but does not bind itself (its arguments and local variables
    are not taken for top-level definitions it needs)."""
    loads, bound = set(), set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            (loads if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not node:
            bound.add(n.name)
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        bound -= _defined(node)  # a top-level assignment binds module names, not locals
    return loads - bound


def _defined(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _segment(lines: list[str], stmt: ast.stmt) -> str:
    first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
    return "\n".join(lines[first - 1 : stmt.end_lineno])


def _select(tree: ast.Module, source: str, entry: str) -> str | None:
    """Imports, the last def of `entry` and the top-level definitions it needs, in source order."""
    body = tree.body
    defs = [i for i, s in enumerate(body) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == entry]
    if not defs:
        return None
    main = defs[-1]
    keep = {main}
    need = _names(body[main])
    changed = True
    while changed:  # the top-level definitions the kept code uses, transitively
        changed = False
        for i, stmt in enumerate(body):
            if i not in keep and i not in defs and _defined(stmt) & need:
                keep.add(i)
                need |= _names(stmt)
                changed = True
    lines = source.splitlines()
    parts = [_segment(lines, s) for i, s in enumerate(body)
             if i in keep or isinstance(s, (ast.Import, ast.ImportFrom))]
    return "\n".join(parts) + "\n"


def _cut(block: str, entry: str) -> str | None:
    """The imports before the last `def entry(` line and that function, cut by indentation."""
    lines = block.splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(rf"(async\s+)?def\s+{re.escape(entry)}\s*\(", line)]
    if not starts:
        return None
    s = starts[-1]
    while s > 0 and lines[s - 1].startswith("@"):
        s -= 1
    end = s + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][:1] in (" ", "\t")
                                or lines[end].lstrip().startswith(")")):
        end += 1
    imports = [line for line in lines[:s] if re.match(r"(import|from)\s+\w", line)]
    return "\n".join(imports + lines[s:end]).rstrip() + "\n"


def _parse(code: str) -> tuple[ast.Module | None, str | None]:
    try:
        return ast.parse(code), None
    except (SyntaxError, ValueError) as err:  # ValueError: null bytes
        where = f" (line {err.lineno})" if getattr(err, "lineno", None) else ""
        return None, f"unparseable code: {getattr(err, 'msg', None) or err}{where}"


def signature_arity(signature: str) -> int | None:
    """How many positional arguments the signature's function takes (None if it does not parse)."""
    text = signature.strip()
    if not text.endswith(":"):
        text += ":"
    try:
        fn = ast.parse(text + "\n    pass\n").body[0]
    except SyntaxError:
        return None
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return len(fn.args.posonlyargs) + len(fn.args.args)


def _arity_problem(fn: ast.FunctionDef, want: int) -> str | None:
    a = fn.args
    positional = len(a.posonlyargs) + len(a.args)
    required = positional - len(a.defaults)
    kw_required = sum(1 for d in a.kw_defaults if d is None)
    if required > want or (positional < want and a.vararg is None) or kw_required:
        return (f"wrong signature: {fn.name} takes {required}..{'*' if a.vararg else positional} positional "
                f"argument(s){' and required keyword-only ones' if kw_required else ''}; it is called with {want}")
    return None


def extract(text: str, entry: str, signature: str | None = None) -> Candidate:
    """The candidate program in a model's reply, or the reason there is none."""
    if not isinstance(text, str) or not text.strip():
        return Candidate(False, None, "empty reply")
    idea = _idea(text)
    blocks = _blocks(text)
    pattern = re.compile(rf"\bdef\s+{re.escape(entry)}\s*\(")
    with_entry = [b for b in blocks if pattern.search(b)]
    if not with_entry:
        return Candidate(False, None, f"no 'def {entry}(' in the reply", idea)
    block = with_entry[-1]
    tree, err = _parse(block)
    code = _select(tree, block, entry) if tree is not None else None
    if code is None:
        cut = _cut(block, entry)
        if cut is None:  # def entry( only inside something else (a class, an indented block)
            return Candidate(False, None, err or f"no top-level 'def {entry}(' in the code", idea)
        tree, err2 = _parse(cut)
        if tree is None:
            return Candidate(False, None, err or err2, idea)
        code = _select(tree, cut, entry)
        if code is None:
            return Candidate(False, None, f"no top-level 'def {entry}(' in the code", idea)
    tree, err = _parse(code)
    if tree is None:  # cannot happen for segments of a parsed module, but never trust it
        return Candidate(False, None, err, idea)
    fn = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == entry][-1]
    if isinstance(fn, ast.AsyncFunctionDef):
        return Candidate(False, None, f"{entry} is async; it must be a plain def", idea)
    want = signature_arity(signature) if signature else None
    if want is not None:
        problem = _arity_problem(fn, want)
        if problem:
            return Candidate(False, None, problem, idea)
    return Candidate(True, code, None, idea)


class _StripDocstrings(ast.NodeTransformer):
    """Drops docstrings and the annotations of arguments and return values (they do not change
    what a function does: a copy of the reference with the signature's types is the reference)."""

    def visit_arg(self, node):
        node.annotation = None
        return node

    def _strip(self, node):
        self.generic_visit(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        return node

    visit_Module = visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _strip


def normalise(code: str) -> str:
    """The code's syntax tree without docstrings, comments, layout, or argument and return
    annotations: two codes with the same normal form behave the same (used to detect duplicates)."""
    tree = _StripDocstrings().visit(ast.parse(code))
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def fingerprint(code: str) -> str:
    """A short hash of normalise(code)."""
    return hashlib.sha256(normalise(code).encode()).hexdigest()[:16]
