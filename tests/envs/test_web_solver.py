"""Every MiniWoB++ task esopt ships, and more, can be solved from the observation text alone.

A scripted agent (esopt.studies.machine.web_solver) reads only what a model reads,
element ids included; a task it cannot solve from that text fails here. In a real
browser (-m browser); the observation's two additions to BrowserGym's tree and the
solver's reading of the text are checked without one."""
from __future__ import annotations

import pytest

pytest.importorskip("browsergym.core")

from esopt.config import load_config  # noqa: E402
from esopt.envs.browser.obs import page_text  # noqa: E402
from esopt.envs.browser.tasks import expand  # noqa: E402
from esopt.studies.machine.web_solver import SOLVERS, Unsolvable, parse, scripted_reply  # noqa: E402


def _node(node_id, role, name=None, children=(), bid=None, props=()):
    node = {"nodeId": node_id, "role": {"value": role}, "childIds": list(children),
            "properties": [{"name": k, "value": {"value": v}} for k, v in props]}
    if name is not None:
        node["name"] = {"value": name}
    if bid is not None:
        node["browsergym_id"] = bid
    return node


# a page with a scripted <span> link inside a paragraph-like <div>, and a text area beside a text input
TREE = {"nodes": [
    _node("1", "RootWebArea", "Page", ["2", "6", "7"], props=[("focused", True)]),
    _node("2", "generic", "", ["3", "4"], bid="10"),  # text and a span: keeps its text without an id
    _node("3", "StaticText", "Click the"),
    _node("4", "generic", "", ["5"], bid="11"),  # holds only text: lends its id
    _node("5", "StaticText", "link"),
    _node("6", "textbox", "", bid="12", props=[("multiline", True)]),
    _node("7", "textbox", "", bid="13", props=[("multiline", False)]),
]}


def test_text_held_by_a_plain_element_shows_its_id_and_text_areas_are_marked():
    esopt = page_text({"axtree_object": TREE})
    assert "\t[11] StaticText 'link'" in esopt.split("\n")
    assert "\tStaticText 'Click the'" in esopt.split("\n")  # a mixed container lends nothing
    assert "\t[12] textbox '', multiline=True" in esopt.split("\n") and "\t[13] textbox ''" in esopt.split("\n")
    assert "multiline=False" not in esopt
    plain = page_text({"axtree_object": TREE}, style="browsergym")
    assert "[11]" not in plain and "StaticText 'link'" in plain and "multiline" not in plain
    assert TREE["nodes"][4].get("browsergym_id") is None  # the tree itself is left as it was
    with pytest.raises(ValueError, match="observation style 'other'"):
        page_text({"axtree_object": TREE}, style="other")


def test_the_solver_reads_ids_names_and_properties_from_the_text():
    obs = ("Goal: Click on the link \"it's\".\nURL: file:///x.html\nPage:\nRootWebArea 'X', focused\n"
           "\t[4] StaticText \"it's\"\n\t[5] checkbox 'a', checked='true'\n\t[6] textbox '' value='v w'\n"
           "Last action failed: nothing")
    page = parse(obs)
    assert page.goal == "Click on the link \"it's\"." and page.quoted() == ["it's"]
    assert [(e.bid, e.role, e.name) for e in page.elements][1:] == [("4", "StaticText", "it's"),
                                                                   ("5", "checkbox", "a"), ("6", "textbox", "")]
    assert page.elements[2].prop("checked") == "true" and page.elements[3].prop("value") == "v w"
    assert scripted_reply("miniwob.click-link", obs) == "click('4')"
    with pytest.raises(Unsolvable):
        scripted_reply("miniwob.click-link", obs.replace("[4] ", ""))
    with pytest.raises(ValueError, match="no scripted solver for miniwob.nope"):
        scripted_reply("miniwob.nope", obs)


def test_the_solver_covers_every_shipped_miniwob_task_and_at_least_twenty():
    shipped = expand(load_config("configs/miniwob.yaml", []).env.options.task)
    assert set(shipped) <= set(SOLVERS), set(shipped) - set(SOLVERS)
    assert len(SOLVERS) >= 20


@pytest.fixture(scope="module")
def play():
    from esopt.envs import make
    from esopt.envs.browser.browser import close_shared_browsers

    envs = {}

    def run(task, seed, observation="esopt"):
        key = (task, observation)
        if key not in envs:
            envs[key] = make("browsergym", task=task, max_turns=10, timeout_ms=15000, observation=observation)
        env = envs[key]
        obs, _ = env.reset(seed=seed)
        done, reward, finished = [], 0.0, False
        try:
            while not finished:
                done.append(scripted_reply(task, obs, done))
                obs, reward, terminated, truncated, _ = env.step(done[-1])
                finished = terminated or truncated
        finally:
            env.close()
        return reward, done

    yield run
    for env in envs.values():
        env.close()
    close_shared_browsers()


@pytest.mark.browser
@pytest.mark.parametrize("task", sorted(SOLVERS))
def test_every_task_is_solved_from_what_the_observation_shows(play, task):
    for seed in (11, 12):
        reward, actions = play(task, seed)
        assert reward > 0, (task, seed, actions)


@pytest.mark.browser
@pytest.mark.parametrize("task", ["miniwob.click-link", "miniwob.email-inbox-forward-nl"])
def test_browsergyms_own_tree_hides_what_these_tasks_need(play, task):
    with pytest.raises(Unsolvable, match="shows no id|with an id"):
        play(task, 11, observation="browsergym")
