"""Extracting the candidate function from model text, rejecting with reasons, fingerprints; prompts."""
import pytest

from esopt.ahd.code import extract, fingerprint, normalise, signature_arity
from esopt.ahd.prompts import OPERATORS, Shown, operator_prompt, sample_prompt

from ahd_search_fakes import ToyProblem

SIG = "def select_next_node(current_node: int, destination_node: int, unvisited_nodes, distance_matrix) -> int:"


def test_fenced_code_with_imports_and_helper_drops_stray_statements():
    text = """Idea: go to the nearest node.
```python
import numpy as np
from math import sqrt

SCALE = 2.0

def helper(d):
    return d * SCALE

def unused():
    return 0

def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix):
    '''nearest'''
    best = min(unvisited_nodes, key=lambda n: helper(distance_matrix[current_node][n]))
    return best

best = select_next_node(0, 0, [1], [[0, 1], [1, 0]])
print(best)
```
Hope this helps!"""
    got = extract(text, "select_next_node", SIG)
    assert got.ok and got.reason is None
    assert got.idea == "go to the nearest node."
    assert "import numpy as np" in got.code and "from math import sqrt" in got.code
    assert "def helper" in got.code and "SCALE = 2.0" in got.code  # used, transitively
    assert "def unused" not in got.code and "print(" not in got.code
    assert "best = select_next_node" not in got.code  # a local name is not a top-level need
    scope = {}
    exec(got.code, scope)
    assert scope["select_next_node"](0, 0, [1, 2], [[0, 5, 1], [5, 0, 1], [1, 1, 0]]) == 2


def test_last_definition_wins_and_last_block_with_entry():
    text = ("```python\ndef entry(x):\n    return 1\n```\nBetter:\n```python\ndef entry(x):\n    return 2\n\n"
            "def entry(x):\n    return 3\n```\n```\nentry(4)\n```")
    got = extract(text, "entry")
    assert got.ok
    scope = {}
    exec(got.code, scope)
    assert scope["entry"](0) == 3 and got.code.count("def entry") == 1


def test_bare_code_and_prose_after_it_and_cut_off_fence():
    bare = "import math\ndef entry(x):\n    return math.sqrt(x)\nThis function returns the root."
    got = extract(bare, "entry")
    assert got.ok and "import math" in got.code and "This function" not in got.code
    cut = "Idea: x.\n```python\ndef entry(x):\n    y = x + 1\n    return y\n"  # the token limit ended the reply
    assert extract(cut, "entry").ok


@pytest.mark.parametrize("text,reason", [
    ("", "empty reply"),
    ("I would pick the nearest node.", "no 'def entry('"),
    ("```python\ndef entry(x)\n    return (\n```", "unparseable code"),
    ("```python\ndef entry(x):\n    return x\n```\n".replace("def entry", "async def entry"), "async"),
    ("```python\nclass A:\n    def entry(self, x):\n        return 1\n```", "top-level"),
    ("```python\ndef entry():\n    return 1\n```", "wrong signature"),
    ("```python\ndef entry(x, y):\n    return 1\n```", "wrong signature"),
    ("```python\ndef entry(x, *, k):\n    return 1\n```", "wrong signature"),
])
def test_rejections_name_the_reason(text, reason):
    got = extract(text, "entry", "def entry(x: float) -> float:")
    assert not got.ok and got.code is None and reason in got.reason


def test_signature_arity_and_flexible_parameters():
    assert signature_arity(SIG) == 4
    assert signature_arity("def f(a, b=1)") == 2
    assert extract("```python\ndef entry(x, y=2, *rest):\n    return x\n```", "entry", "def entry(x):").ok
    assert extract("```python\ndef entry(*args):\n    return 1\n```", "entry", "def entry(x, y):").ok


def test_fingerprint_ignores_comments_docstrings_layout_but_not_logic():
    a = "def entry(x):\n    return x + 1\n"
    b = 'def entry(x):\n    """Adds one."""\n    # a comment\n    return (x +\n            1)\n'
    c = "def entry(x):\n    return x + 2\n"
    typed = "def entry(x: float) -> float:\n    return x + 1\n"  # the reference echoed with the signature's types
    assert fingerprint(a) == fingerprint(b) == fingerprint(typed) and normalise(a) == normalise(b)
    assert fingerprint(a) != fingerprint(c)


def test_prompts_show_task_signature_parents_and_objectives():
    p = ToyProblem()
    parents = [Shown("def entry(x):\n    return 1\n", 1.25, "one"), Shown("def entry(x):\n    return 2\n", 2.5)]
    texts = {op: operator_prompt(p, op, parents if op in ("e1", "e2") else parents[:1]) for op in OPERATORS}
    for op, text in texts.items():
        assert p.description in text and p.signature in text and "Idea:" in text and "```python" in text
        assert "1.25" in text and "return 1" in text
    assert "2.5" in texts["e2"] and "return 2" in texts["e2"]
    assert len(set(texts.values())) == 4  # each operator asks for something else
    s = sample_prompt(p, Shown(p.reference, 5.0))
    assert p.reference.strip() in s and "5" in s and p.signature in s
    with pytest.raises(ValueError, match="unknown operator"):
        operator_prompt(p, "x1", parents)


def test_block_done_stops_after_a_closed_fence_with_the_entry():
    from esopt.ahd.code import block_done

    done = block_done("select_next_node")
    assert not done("Idea: nearest city.\n```python\ndef select_next_node(a, b, c, d):\n    return 1\n")
    assert done("Idea: nearest city.\n```python\ndef select_next_node(a, b, c, d):\n    return 1\n```")
    assert not done("```python\nimport numpy as np\n```\n")  # a closed block without the function goes on
    assert not done("```python\ndef select_next_node_v2(a):\n    pass\n```")


def test_policy_stop_ends_each_row_where_the_rule_says_and_keeps_the_text_before():
    import torch

    from esopt.models.decode import DecodeOptions
    from esopt.models.policy import HFPolicy
    from esopt.models.tiny import build_tiny

    torch.manual_seed(0)
    model, tok = build_tiny("llama", hidden=32, layers=1)
    model.eval().requires_grad_(False)
    tok.padding_side = "left"
    policy = HFPolicy(model, tok, batch_size=4)
    convs = [[{"role": "user", "content": text}] for text in ("abc", "hello there", "x", "0123")]
    full = policy.generate(convs, DecodeOptions(30))
    cut = policy.generate(convs, DecodeOptions(30, stop_when=lambda t: len(t) >= 5))
    assert any(len(f) > 5 for f in full)  # without the rule the replies run on
    for f, c in zip(full, cut):
        assert c == f[: len(c)]  # the same greedy reply, ended early
        if len(f) > 5:
            assert 5 <= len(c) < len(f)
