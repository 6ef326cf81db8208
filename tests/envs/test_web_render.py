"""The run report's web episode view: page seen, reply, action, error, turn by turn, all escaped."""
from esopt.envs import renderer_for
from esopt.envs.browser.env import excerpt


def test_web_episodes_render_turn_by_turn_and_escaped():
    obs0 = "Goal: Click on the <b> button.\nURL: file:///x.html\nPage:\nRootWebArea 'x'\n\t[13] button '<script>'"
    episode = {"task": "miniwob.click-button#2", "observation0": obs0, "reward": 1.0, "turns": [
        {"response": "I think click", "action": None, "feedback": "Not an action: no call found", "reward": 0.0},
        {"response": "click('13')", "action": "click('13')", "feedback": None, "reward": 0.0,
         "page": "URL: file:///y.html\nPage:\nRootWebArea 'second page'"},
        {"response": "click('99')", "action": "click('99')", "feedback": "TimeoutError: no element 99",
         "reward": 1.0, "page": "URL: file:///z.html"}]}
    html = renderer_for("browsergym")(episode)
    rows = html.split("<tr>")[2:]
    assert len(rows) == 3
    assert "none (not an action)" in rows[0] and "Not an action: no call found" in rows[0]
    assert "[13] button" in rows[1] and "second page" not in rows[1]  # the page as turn 2 saw it
    assert "second page" in rows[2] and "TimeoutError: no element 99" in rows[2]
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "Goal:" not in html  # the goal line repeats every turn: left out of the excerpts
    assert renderer_for("browsergym").css


def test_excerpt_keeps_url_and_start_of_page():
    obs = "Goal: g\nURL: http://127.0.0.1/\nPage:\n" + "x" * 2000
    got = excerpt(obs, 100)
    assert got.startswith("URL: http://127.0.0.1/") and got.endswith("more characters)") and len(got) < 140
