"""Browser action parsing: accepted forms, hostile forms, safe re-serialisation, URL checks."""

from __future__ import annotations

import ast
import random
import re
from pathlib import Path

import pytest

from esopt.envs.browser import actions as web_actions
from esopt.envs.browser.actions import ACTIONS, ParseError, ParsedAction, check_url, parse_action

# reply -> the string BrowserGym gets
ACCEPTED = [
    ("click('12')", "click('12')"),
    ('click("12")', "click('12')"),
    ("click(18)", "click('18')"),
    ("Action: click('a51')", "click('a51')"),
    ("```python\nclick('b22', button=\"right\")\n```", "click('b22', button='right')"),
    ("click('48', button='middle', modifiers=['Shift'])", "click('48', button='middle', modifiers=['Shift'])"),
    ("click('48', 'left', ['Control', 'Alt'])", "click('48', modifiers=['Control', 'Alt'])"),
    ("dblclick('ca42')", "dblclick('ca42')"),
    ("hover('b8')", "hover('b8')"),
    ("fill('237', 'example value')", "fill('237', 'example value')"),
    ("fill('45', \"multi-line\\nexample\")", "fill('45', 'multi-line\\nexample')"),
    ("fill('a12', \"example with \\\"quotes\\\"\")", "fill('a12', 'example with \"quotes\"')"),
    ("fill(bid='14', value='x')", "fill('14', 'x')"),
    ("fill(value='x', bid='14')", "fill('14', 'x')"),
    ("select_option('a48', \"blue\")", "select_option('a48', 'blue')"),
    ("select_option('c48', [\"red\", \"green\", 'blue',],)", "select_option('c48', ['red', 'green', 'blue'])"),
    ("press('88', 'Backspace')", "press('88', 'Backspace')"),
    ("press('a26', 'Control+a')", "press('a26', 'Control+a')"),
    ("focus('b455')", "focus('b455')"),
    ("clear('996')", "clear('996')"),
    ("check('55')", "check('55')"),
    ("uncheck('a5289')", "uncheck('a5289')"),
    ("scroll(0, 200)", "scroll(0, 200)"),
    ("scroll(-50.2, -100.5)", "scroll(-50.2, -100.5)"),
    ("scroll(+1e3, .5)", "scroll(1000.0, 0.5)"),
    ("goto('http://localhost:8000/page?q=1#top')", "goto('http://localhost:8000/page?q=1#top')"),
    ("goto(\"https://127.0.0.1/\")", "goto('https://127.0.0.1/')"),
    ("go_back()", "go_back()"),
    ("go_forward( )", "go_forward()"),
    ("send_msg_to_user(\"The city was built in 1751.\")", "send_msg_to_user('The city was built in 1751.')"),
    ("report_infeasible('There is no email field.')", "report_infeasible('There is no email field.')"),
    ("noop()", "noop()"),
    ("noop(500)", "noop(wait_ms=500)"),
    ("noop(wait_ms=1000)", "noop()"),
    ("<think>maybe click('3')? no</think>\nAction: fill('14', 'hi')", "fill('14', 'hi')"),
    ("  click (  '12'  )  ", "click('12')"),
    ("fill(\n    '14',\n    'multi line call',\n)", "fill('14', 'multi line call')"),
    ("The search box is [14]. I will fill('14', 'pizza') and then press Enter.", "fill('14', 'pizza')"),
    ("click('12')\nclick('13')", "click('12')"),
    ("click('12'). Then I wait.", "click('12')"),
    ("I'll click('12'), which opens the menu (the top one).", "click('12')"),
    ("`click('7')`", "click('7')"),
    ("- click('7')", "click('7')"),
    ("* click('7')", "click('7')"),
    ("> click('7')", "click('7')"),
    ("Action: \"click('7')\"", "click('7')"),
    ("I think (maybe) press('3', 'Enter')", "press('3', 'Enter')"),
    # values a weaker parser might have passed on as code
    ("fill('1', '\\'); import os; (\\'')", "fill('1', \"'); import os; ('\")"),
    ("fill('1', \"'); __import__('os').system('ls'); ('\")", "fill('1', \"'); __import__('os').system('ls'); ('\")"),
    ("fill('1', 'back\\\\slash \\\\')", "fill('1', 'back\\\\slash \\\\')"),
    ("fill('1', 'tab\\there \\u00e9 \\x41')", "fill('1', 'tab\\there é A')"),
    ("fill('1', 'keeps \\d unknown escapes')", "fill('1', 'keeps \\\\d unknown escapes')"),
    ("fill('1', 'café ☕ \"both\" \\'quotes\\'')", "fill('1', 'café ☕ \"both\" \\'quotes\\'')"),
    ("send_msg_to_user('line1\\nline2\\r\\n\\0end')", "send_msg_to_user('line1\\nline2\\r\\n\\x00end')"),
]

HOSTILE = [
    "",
    "I will click the submit button.",
    "__import__('os').system('ls')",
    "os.system('rm -rf /')",
    "type_text('1', 'x')",
    "Click('1')",
    "click('1'); import os",
    "click('1');__import__('os').system('ls')",
    "click('1'), __import__('os')",
    "click('1') or click('2')",
    "click('1') # then exec('x')",
    "import os; click('1')",
    "os.click('1')",
    "page.click('1')",
    "print(click('1'))",
    "exec(\"click('1')\")",
    "x = click('1')",
    "lambda: click('1')",
    "click(lambda: '1')",
    "click(click('1'))",
    "click(open('/etc/passwd'))",
    "fill('1', f'{open(\"/etc/passwd\").read()}')",
    "fill('1', r'raw')",
    "fill('1', b'bytes')",
    "fill('1', '''triple''')",
    "click(1+1)",
    "click('1' + '2')",
    "click('1' if True else '2')",
    "click(bid)",
    "click(True)",
    "click(None)",
    "click(*['1'])",
    "click(**{'bid': '1'})",
    "click('1\")')",
    "click('a(1)')",
    "click('1 2')",
    "click(\"1'\")",
    "click('" + "a" * 33 + "')",
    "click(-1)",
    "click(1.5)",
    "click(['1'])",
    "click('１２')",
    "click('1').__class__",
    "click('1')('x')",
    "click('1')[0]",
    "fill('1', 'a'\nimport os\n)",
    "fill('1', 'a\nb')",
    "fill('1', 'a\\\nb')",
    "fill('1', '" + "x" * 5000 + "')",
    "fill('1', 'unclosed)",
    "click('1'",
    "scroll(" + "9" * 5000 + ", 0)",
    "scroll(1e999, 0)",
    "scroll(0x10, 0)",
    "scroll(1_000, 0)",
    "scroll('0', '200')",
    "scroll(0)",
    "noop(-5)",
    "noop(10**9)",
    "fill('1')",
    "fill('1', 'a', 'b')",
    "fill(value='x', '1')",
    "fill('1', value='x', bid='2')",
    "click('1', foo='x')",
    "click('1', button='left; rm')",
    "click('1', modifiers=['Shift', 'os'])",
    "select_option('1', [])",
    "select_option('1', ['a', 1])",
    "select_option('1', [open('x')])",
    "press('1', '')",
    "fill('1', 'bad \\x4 escape')",
    "fill('1', '\\ud800 surrogate')",
    "goto('file:///etc/passwd')",
    "goto('javascript:alert(1)')",
    "goto('https://evil.example/')",
    "go_back('now')",
]


def _literal_node(node: ast.expr) -> object:
    """The value of a literal argument node; fails the test for anything else."""
    if isinstance(node, ast.Constant) and type(node.value) in (str, int, float):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) in (int, float)
    ):
        return -node.operand.value
    if isinstance(node, ast.List) and all(isinstance(e, ast.Constant) and type(e.value) is str for e in node.elts):
        return tuple(e.value for e in node.elts)
    raise AssertionError(f"not a literal: {ast.dump(node)}")


def assert_single_safe_call(out: str, action: ParsedAction) -> None:
    """``out`` is exactly one call of an allowed bare name with literal arguments equal to ``action``'s."""
    tree = ast.parse(out)  # parsed for inspection only, never compiled
    assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr)
    call = tree.body[0].value
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
    assert call.func.id == action.name and call.func.id in ACTIONS
    params = [p.name for p in ACTIONS[action.name]]
    got = {params[i]: _literal_node(a) for i, a in enumerate(call.args)}
    for kw in call.keywords:
        assert kw.arg in params and kw.arg not in got
        got[kw.arg] = _literal_node(kw.value)
    expected = dict(action.args)
    for name, value in got.items():
        assert value == expected[name] and type(value) is type(expected[name])


@pytest.mark.parametrize(("reply", "expected"), ACCEPTED)
def test_accepted_forms(reply, expected):
    action = parse_action(reply)
    assert isinstance(action, ParsedAction), action
    assert action.to_browsergym() == expected
    assert_single_safe_call(action.to_browsergym(), action)


@pytest.mark.parametrize("reply", HOSTILE)
def test_hostile_forms_are_refused(reply):
    result = parse_action(reply)
    assert isinstance(result, ParseError), result
    assert result.message and "\n" not in result.message and len(result.message) <= 300


def test_feedback_lines():
    assert "no action found" in parse_action("hello").message
    assert "click('12')" in parse_action("hello").message
    assert "unknown action '__import__'" in parse_action("__import__('os')").message
    assert "fill(bid, value)" in parse_action("fill('1')").message
    assert "one action per reply" in parse_action("click('1'); click('2')").message
    assert "must be an element id" in parse_action("click('a b')").message
    assert "http and https" in parse_action("goto('javascript:alert(1)')").message


def test_typed_fields():
    action = parse_action("select_option('c48', ['red', 'blue'])")
    assert action.name == "select_option" and action["bid"] == "c48" and action["options"] == ("red", "blue")
    click = parse_action("click(18)")
    assert click["bid"] == "18" and click["button"] == "left" and click["modifiers"] == ()
    scroll = parse_action("scroll(0, -2.5)")
    assert scroll["delta_x"] == 0 and type(scroll["delta_x"]) is int and scroll["delta_y"] == -2.5


def test_reserialisation_of_arbitrary_strings():
    """Random text with quotes, backslashes, newlines and non-ASCII survives the round trip as data."""
    rng = random.Random(0)
    alphabet = "ab'\"\\\n\r\t;()[]{}#=+ é☕\x00\x7f"
    for _ in range(300):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        reply = f"Action: fill('a1', {value!r})"
        action = parse_action(reply)
        assert isinstance(action, ParsedAction), (reply, action)
        assert action["value"] == value
        assert_single_safe_call(action.to_browsergym(), action)


@pytest.mark.parametrize(
    "value",
    ["'); import os; ('", "\\'); import os; #", '"""', "'''", "\n__import__('os').system('ls')\n", "\\", "x\\"],
)
def test_hand_built_hostile_values_serialise_as_data(value):
    """Even values no parser produced (a weaker parser upstream) come out as one literal argument."""
    for action in (
        ParsedAction("fill", (("bid", "1"), ("value", value))),
        ParsedAction("send_msg_to_user", (("text", value),)),
        ParsedAction("select_option", (("bid", "1"), ("options", (value, value)))),
    ):
        assert_single_safe_call(action.to_browsergym(), action)


def test_hand_built_unknown_or_non_literal_is_refused():
    with pytest.raises(ValueError):
        ParsedAction("__import__", (("name", "os"),)).to_browsergym()
    with pytest.raises(ValueError):
        ParsedAction("click", (("bid", "1"),)).to_browsergym()
    with pytest.raises(TypeError):
        ParsedAction("hover", (("bid", object()),)).to_browsergym()
    with pytest.raises(TypeError):
        ParsedAction("scroll", (("delta_x", float("nan")), ("delta_y", 0))).to_browsergym()


def test_module_never_evaluates_text():
    source = Path(web_actions.__file__).read_text()
    assert not re.search(r"(?<![.\w])(eval|exec|compile|__import__)\(", source)
    tree = ast.parse(source)
    imported = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"ast", "importlib", "builtins", "subprocess", "os", "pickle"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            assert name not in {"eval", "exec", "literal_eval", "__import__", "getattr", "system"}, name


def test_long_replies_parse_in_linear_time():
    """100,000-character replies (patterns that would make a backtracking regex explode) still parse."""
    n = 100_000
    action = parse_action("x " * (n // 2) + "fill('14', 'deep')")
    assert isinstance(action, ParsedAction) and action["value"] == "deep"
    action = parse_action("<think>" + "click(" * (n // 6) + "</think>" + "a" * n + " hover('3')")
    assert isinstance(action, ParsedAction) and action.to_browsergym() == "hover('3')"
    assert isinstance(parse_action("a" * n + "("), ParseError)
    assert isinstance(parse_action("click('" + "a" * n), ParseError)
    assert isinstance(parse_action("click(" + " " * n + "'" + "\\'" * n), ParseError)
    assert isinstance(parse_action("scroll(" + "1" * n + ", 0)"), ParseError)
    assert isinstance(parse_action("select_option('1', [" + "'a', " * n + "])"), ParseError)
    assert isinstance(parse_action("fill('1', 'x')" + ";" * n), ParseError)
    assert isinstance(parse_action("(" * n + "click('1')"), ParseError)
    value = "y" * 3999
    assert parse_action(f"{'z' * n} fill('2', '{value}')")["value"] == value


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost",
        "http://localhost/",
        "http://localhost:8000/shop?q=a&b=1#frag",
        "https://127.0.0.1/",
        "http://127.0.0.1:5000",
        "HTTP://LOCALHOST/Path",
    ],
)
def test_allowed_urls(url):
    assert check_url(url) is None
    assert check_url(url, ["localhost", "127.0.0.1"]) is None


@pytest.mark.parametrize(
    "url",
    [
        "",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "chrome://settings",
        "about:blank",
        "ftp://localhost/",
        "view-source:http://localhost/",
        "http://evil.example/",
        "http://localhost.evil.example/",
        "http://127.0.0.1.nip.io/",
        "http://localhost@evil.example/",
        "http://user:pw@localhost/",
        "http://evil.example\\@localhost/",
        "http://local host/",
        " http://localhost/",
        "http://localhost/\nx",
        "http://localhost:99999/",
        "http://",
        "//localhost/x",
        "localhost:8000/x",
        "http://0x7f000001/",
        "http://localhost/" + "a" * 3000,
    ],
)
def test_refused_urls(url):
    message = check_url(url)
    assert isinstance(message, str) and message and "\n" not in message


def test_custom_allowed_hosts():
    assert check_url("http://shop.test:8080/", ("shop.test",)) is None
    assert check_url("http://shop.test/", "shop.test") is None
    assert "not allowed" in check_url("http://localhost/", ("shop.test",))
    assert isinstance(parse_action("goto('http://shop.test/')"), ParseError)
    action = parse_action("goto('http://shop.test/')", allowed_hosts=("shop.test",))
    assert isinstance(action, ParsedAction) and action.to_browsergym() == "goto('http://shop.test/')"


def test_mutated_replies_never_raise_and_serialise_safely():
    """Random edits of accepted replies: each result is a ParseError or a single safe literal call."""
    rng = random.Random(1)
    alphabet = "'\"\\()[],;=.+-_ \n\tax019é:`#<>"
    parsed = 0
    for _ in range(3000):
        chars = list(rng.choice(ACCEPTED)[0])
        for _ in range(rng.randint(1, 4)):
            i = rng.randint(0, len(chars))
            if rng.random() < 0.5 and i < len(chars):
                del chars[i]
            else:
                chars.insert(i, rng.choice(alphabet))
        result = parse_action("".join(chars))
        if isinstance(result, ParsedAction):
            parsed += 1
            assert_single_safe_call(result.to_browsergym(), result)
        else:
            assert isinstance(result, ParseError) and "\n" not in result.message
    assert parsed > 300  # the edits leave many replies readable
