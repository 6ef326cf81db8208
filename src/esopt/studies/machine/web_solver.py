"""A scripted MiniWoB++ agent that reads only the observation text a model sees.

It is the check that an observation shows what a task needs (tests/envs/
test_web_solver.py): a task it cannot solve from the text, ids included, fails
the test. It is also the agent of ``esopt bench web``. Each solver gets the
page (goal and elements parsed from the text) and the actions it already took
in the episode, as a model has its earlier replies, and answers one action.
Nothing reads the DOM, the task's code or its hidden state.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_LINE = re.compile(r"^(\t*)(?:\[(\w+)\] )?(\S+)(?: ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"))?(.*)$")


@dataclass(frozen=True)
class Element:
    bid: str | None
    role: str
    name: str
    rest: str  # value= and properties, as printed
    depth: int

    def prop(self, key: str) -> str | None:
        m = re.search(rf"\b{key}=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\w+)", self.rest)
        if m is None:
            return None
        raw = m.group(1)
        return ast.literal_eval(raw) if raw[0] in "'\"" else raw


@dataclass
class Page:
    goal: str
    elements: list[Element]

    def find(self, role: str | None = None, name: str | None = None, *, fold: bool = False) -> list[Element]:
        """Elements with an id, of ``role`` and named ``name`` (``fold``: case-insensitive, exact matches first)."""
        mine = [e for e in self.elements if e.bid and (role is None or e.role == role)]
        if name is None:
            return mine
        exact = [e for e in mine if e.name.strip() == name]
        return exact + [e for e in mine if fold and e not in exact and e.name.strip().lower() == name.lower()]

    def one(self, role: str | None = None, name: str | None = None, *, fold: bool = False) -> Element:
        found = self.find(role, name, fold=fold)
        if not found:
            raise Unsolvable(f"no element {role or ''} {name!r} with an id on the page")
        return found[0]

    def quoted(self) -> list[str]:
        return re.findall(r'"([^"]*)"', self.goal)


class Unsolvable(Exception):
    """The observation does not show what the next action needs."""


def parse(obs: str) -> Page:
    """The goal and the page's elements of an observation (esopt.envs.browser.obs)."""
    lines = obs.split("\n")
    goal = lines[0][len("Goal: "):] if lines and lines[0].startswith("Goal: ") else ""
    try:
        start = lines.index("Page:") + 1
    except ValueError:
        start = len(lines)
    elements = []
    for line in lines[start:]:
        m = _LINE.match(line)
        if m is None or line.startswith(("Last action failed:", "Your last reply:", "... (")):
            continue
        tabs, bid, role, name, rest = m.groups()
        elements.append(Element(bid, role, ast.literal_eval(name) if name else "", rest or "", len(tabs)))
    return Page(goal, elements)


def click(e: Element) -> str:
    return f"click('{e.bid}')"


def fill(e: Element, text: str) -> str:
    return f"fill('{e.bid}', {text!r})"


def _unchecked(e: Element) -> bool:
    return e.prop("checked") not in ("true", True, "True")


def _filled(e: Element, text: str) -> bool:
    value = e.prop("value")
    return value in (text, "\u2022" * len(text))  # password fields show bullets


def _fill_then(page: Page, texts: list[str], boxes: list[Element], then: Element) -> str:
    """Fill each of ``boxes`` with its text unless it holds it already, then click ``then``."""
    for box, text in zip(boxes, texts):
        if not _filled(box, text):
            return fill(box, text)
    return click(then)


# -- one solver per task: (page, actions already taken) -> action ------------------------------
def click_button(page, done):
    return click(page.one("button", page.quoted()[0], fold=True))


def click_link(page, done):
    target = page.quoted()[0]
    found = page.find("link", target) or page.find("StaticText", target)
    if not found:
        raise Unsolvable(f"the link {target!r} shows no id")
    return click(found[0])


def enter_text(page, done):
    return _fill_then(page, page.quoted()[:1], page.find("textbox"), page.one("button", "Submit"))


def enter_text_2(page, done):
    text = page.quoted()[0]
    text = text.lower() if "lower case" in page.goal else text.upper()
    return _fill_then(page, [text], page.find("textbox"), page.one("button", "Submit"))


def enter_password(page, done):
    text = page.quoted()[0]
    return _fill_then(page, [text, text], page.find("textbox"), page.one("button", "Submit"))


def login_user(page, done):
    return _fill_then(page, page.quoted()[:2], page.find("textbox"), page.one("button", "Login"))


def login_user_popup(page, done):
    if any(e.prop("disabled") == "True" for e in page.find("textbox")):  # a popup holds the form: leave it
        return click(page.one("button", "Cancel"))
    login = page.find("button", "login", fold=True) or page.find("button")[-1:]
    return _fill_then(page, page.quoted()[:2], page.find("textbox"), login[0])


def focus_text(page, done):
    return click(page.find("textbox")[0])


def focus_text_2(page, done):
    nth = int(re.search(r"(\d+)(?:st|nd|rd|th)", page.goal).group(1))
    return click(page.find("textbox")[nth - 1])


def click_test(page, done):
    return click(page.find("button")[0])


def click_test_2(page, done):
    return click(page.one("button", re.search(r"button (\w+)", page.goal).group(1)))


def click_button_sequence(page, done):
    one = page.one("button", "ONE")
    return click(page.one("button", "TWO")) if any(f"'{one.bid}'" in a for a in done) else click(one)


def click_dialog(page, done):  # "the x" is the dialog's close button
    return click(page.one("button", "Close"))


def click_dialog_2(page, done):
    label = page.quoted()[0]
    return click(page.one("button", "Close" if label.lower() == "x" else label, fold=True))


def click_checkboxes(page, done):
    m = re.search(r"Select (.*) and click Submit", page.goal)
    wanted = [] if m.group(1) == "nothing" else [w.strip() for w in m.group(1).split(",")]
    for box in page.find("checkbox"):
        if box.name in wanted and _unchecked(box):
            return click(box)
    return click(page.one("button", "Submit"))


def click_option(page, done):
    want = re.search(r"Select (.*) and click Submit", page.goal).group(1)
    radio = page.one("radio", want)
    return click(radio) if _unchecked(radio) else click(page.one("button", "Submit"))


def choose_list(page, done):
    want = re.search(r"Select (.*) from the list", page.goal).group(1)
    box = page.find("combobox")[0]
    return f"select_option('{box.bid}', {want!r})" if box.prop("value") != want else click(page.one("button", "Submit"))


def click_tab(page, done):
    return click(page.one("tab", re.search(r"(Tab #\d+)", page.goal).group(1)))


def click_tab_2(page, done):
    target = page.quoted()[0]
    panel = [e for e in page.elements if e.role == "tabpanel"]
    inside = page.elements[page.elements.index(panel[0]):] if panel else []
    hit = [e for e in inside if e.bid and e.name.strip() == target and e.role in ("link", "StaticText")]
    if hit:
        return click(hit[0])
    for tab in page.find("tab"):  # the next tab not yet opened
        if click(tab) not in done and tab.prop("selected") != "True":
            return click(tab)
    raise Unsolvable(f"{target!r} is in no tab")


def click_widget(page, done):
    kind = page.quoted()[0]
    if kind in ("text", "textarea"):
        boxes = [e for e in page.find("textbox") if ("multiline=True" in e.rest) == (kind == "textarea")]
        return click(boxes[0])
    return click(page.find(kind)[0])


def click_collapsible(page, done):
    section = [e for e in page.find("tab") if e.name.startswith("Section")]
    if section and section[0].prop("expanded") == "False":
        return click(section[0])
    return click(page.one("button", "Submit"))


def simple_arithmetic(page, done):
    problem = next(e.name for e in page.elements if re.fullmatch(r"\s*-?\d+ [-+x] -?\d+ =\s*", e.name))
    a, op, b = problem.split()[:3]
    value = {"+": int(a) + int(b), "-": int(a) - int(b), "x": int(a) * int(b)}[op]
    return _fill_then(page, [str(value)], page.find("textbox"), page.one("button", "Submit"))


def multi_orderings(page, done):  # a form whose rows come in any order: each field found by its header
    m = re.search(r"Search for (\S+) movies directed by (\S+) from year (\d+)", page.goal)
    wanted = dict(zip(("Genre", "Director", "Year"), m.groups()))
    items = page.elements
    for k, e in enumerate(items):
        if e.role == "rowheader" and e.name in wanted:
            box = next(x for x in items[k + 1:] if x.role == "textbox")
            if not _filled(box, wanted[e.name]):
                return fill(box, wanted[e.name])
    return click(page.one(None, "Submit"))


# words that start MiniWoB's email goals (80 seeds' worth); every other capitalised word is a name
_STOP = {"Please", "Forward", "Send", "The", "Go", "Look", "Locate", "Navigate", "Give", "Find", "Search", "Open"}
_SENDER = (r"\b(?:from|by) ([A-Z][a-z]+)", r"\b(?:email|information|message|mail) ([A-Z][a-z]+) sent",
           r"^([A-Z][a-z]+) wants his or her")


def email_inbox_forward_nl(page, done):
    goal = page.goal
    sender = next(m.group(1) for m in (re.search(p, goal) for p in _SENDER) if m)
    recipient = next(n for n in re.findall(r"\b[A-Z][a-z]+\b", goal) if n not in _STOP and n != sender)
    boxes = page.find("textbox")
    if boxes:  # the forward form: "to" is its first field; send is the image after the back arrow
        if not _filled(boxes[0], recipient):
            return fill(boxes[0], recipient)
        return click(page.find("image")[1])
    forward = page.find("StaticText", "Forward")
    if forward:
        return click(forward[0])
    return click(page.one("StaticText", sender))


SOLVERS = {f"miniwob.{name.replace('_', '-')}": fn for name, fn in dict(
    click_button=click_button, click_link=click_link, enter_text=enter_text, enter_text_2=enter_text_2,
    enter_password=enter_password, login_user=login_user, login_user_popup=login_user_popup,
    focus_text=focus_text, focus_text_2=focus_text_2, click_test=click_test, click_test_2=click_test_2,
    click_button_sequence=click_button_sequence, click_dialog=click_dialog, click_dialog_2=click_dialog_2,
    click_checkboxes=click_checkboxes, click_option=click_option, choose_list=choose_list, click_tab=click_tab,
    click_tab_2=click_tab_2, click_widget=click_widget, click_collapsible=click_collapsible,
    simple_arithmetic=simple_arithmetic, multi_orderings=multi_orderings, unicode_test=click_button,
    enter_text_dynamic=enter_text,
    email_inbox_forward_nl=email_inbox_forward_nl).items()}


def scripted_reply(task: str, obs: str, done: list[str] | tuple = ()) -> str:
    """The solver's next action for ``task`` given the observation text and its earlier actions."""
    if task not in SOLVERS:
        raise ValueError(f"no scripted solver for {task}; it has one for {', '.join(sorted(SOLVERS))}")
    last_click = re.fullmatch(r"click\('(\w+)'\)", done[-1]) if done else None
    if last_click and "Last action failed: TimeoutError: Locator.click" in obs:  # covered by another: use the keyboard
        return f"press('{last_click.group(1)}', 'Enter')"
    try:
        return SOLVERS[task](parse(obs), list(done))
    except Unsolvable:
        raise
    except (IndexError, AttributeError, StopIteration, KeyError) as err:  # what it looked for is not there
        raise Unsolvable(f"{task}: {type(err).__name__} {err}") from None
