"""WebArena-format configs (written here) pointed at the local shop through WA_SHOPPING, played through
env.id=browsergym with scripted replies: the right actions score 1 and wrong ones 0 for string_match,
url_match and program_html (another page and the agent's own), fuzzy_match asks a stand-in judge
server on 127.0.0.1, and report_infeasible answers N/A. Run with: pytest -m browser."""
from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("browsergym.core")

from esopt.envs import make  # noqa: E402
from esopt.envs.browser.browser import close_shared_browsers  # noqa: E402
from esopt.envs.browser.webshop import ShopSite  # noqa: E402

pytestmark = pytest.mark.browser
_FIELD = re.compile(r"^\s*\[(\w+)\] (textbox|button) '([^']*)'", re.M)


def wa_config(task_id, intent, start, **spec):
    return {"task_id": task_id, "sites": ["shopping"], "intent": intent, "intent_template_id": task_id,
            "start_url": "__SHOPPING__" + start, "require_login": False, "storage_state": None,
            "geolocation": None, "require_reset": False, "eval": spec}


def bid(obs: str, role: str, name: str) -> str:
    found = [b for b, r, n in _FIELD.findall(obs) if r == role and n == name]
    assert found, f"no {role} {name!r} in\n{obs}"
    return found[0]


@pytest.fixture
def shop(monkeypatch):
    with ShopSite(0) as site:
        monkeypatch.setenv("WA_SHOPPING", site.base_url)
        yield site


@pytest.fixture
def play(tmp_path):
    made = []

    def run(configs: list[dict], task_id: int, replies, judge=None):
        """Play ``replies`` (strings, or callables of the observation) in a fresh episode of one config;
        returns the observation and (reward, terminated) after each step."""
        path = tmp_path / "tasks.json"
        path.write_text(json.dumps(configs))
        env = make("browsergym", task=f"webarena-file:{path}#{task_id}", seed=0, max_turns=10, timeout_ms=10000,
                   judge=judge)
        made.append(env)
        obs, _ = env.reset()
        steps = []
        for reply in replies:
            obs, reward, done, _, info = env.step(reply(obs) if callable(reply) else reply)
            steps.append((reward, done))
        return obs, steps, info

    yield run
    for env in made:
        env.close()
    close_shared_browsers()


def test_string_match(shop, play):
    email = shop.db_query("SELECT email FROM users WHERE id = 1")[0][0]
    tasks = [wa_config(1, "What email address is on my account?", "/account", eval_types=["string_match"],
                       reference_answers={"must_include": [email]})]
    obs, steps, info = play(tasks, 1, [f"send_msg_to_user('It is {email}.')"])
    assert steps == [(1.0, True)] and info["solved"]
    assert f"URL: {shop.base_url}/account" in obs
    _, steps, _ = play(tasks, 1, ["send_msg_to_user('nobody@example.com')"])
    assert steps == [(0.0, True)]


def test_url_match(shop, play):
    tasks = [wa_config(2, "Show the Toys that are in stock, priciest first.", "/",
                       eval_types=["url_match"], reference_url="__SHOPPING__/category/toys?sort=price_desc&in_stock=1")]
    base = shop.base_url
    _, steps, _ = play(tasks, 2, [f"goto('{base}/category/toys?in_stock=1&sort=price_desc&max_price=')"])
    assert steps == [(1.0, True)]  # the state is reached: done without a message
    _, steps, _ = play(tasks, 2, [f"goto('{base}/category/toys?sort=price_desc')", "send_msg_to_user('Done.')"])
    assert steps == [(0.0, False), (0.0, True)]


def reply_to(thread: int, text: str, base: str):
    return [f"goto('{base}/forum/thread/{thread}')",
            lambda obs: f"fill('{bid(obs, 'textbox', 'Your reply')}', {text!r})",
            lambda obs: f"click('{bid(obs, 'button', 'Post reply')}')"]


def test_program_html_on_another_page_and_on_the_agents_page(shop, play):
    base = shop.base_url
    posts = "[...document.querySelectorAll('article.post p.body')].map(p => p.outerText).join(' / ')"
    draft = "document.querySelector('textarea[name=\"body\"]').value"
    tasks = [wa_config(3, "Reply to thread 3 with 'Seen it: kestrel-41'.", "/forum", eval_types=["program_html"],
                       program_html=[{"url": "__SHOPPING__/forum/thread/3", "locator": posts,
                                      "required_contents": {"must_include": ["kestrel-41"]}}]),
             wa_config(4, "Write (do not post) the reply 'draft-77' on thread 1.", "/forum/thread/1",
                       eval_types=["program_html"], program_html=[
                           {"url": "last", "locator": draft, "required_contents": {"exact_match": "draft-77"}}])]
    obs, steps, _ = play(tasks, 3, reply_to(2, "Seen it: kestrel-41", base))  # the wrong thread
    assert steps == [(0.0, False)] * 3
    assert f"URL: {base}/forum/thread/2" in obs  # grading read thread 3 elsewhere: the agent's page stayed
    obs, steps, info = play(tasks, 3, reply_to(3, "Seen it: kestrel-41", base))
    assert steps == [(0.0, False), (0.0, False), (1.0, True)] and info["solved"]

    fill = lambda text: lambda obs: f"fill('{bid(obs, 'textbox', 'Your reply')}', {text!r})"  # noqa: E731
    _, steps, _ = play(tasks, 4, [fill("draft-78"), fill("draft-77")])
    assert steps == [(0.0, False), (1.0, True)]
    assert not shop.db_query("SELECT id FROM posts WHERE body LIKE 'draft-7%'")  # read from the page, never posted


class _Judge(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint: 'correct' when the reference occurs in the graded answer."""

    seen: list = []

    def log_message(self, format, *args):  # noqa: A002
        pass

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        reference = prompt.split("The correct answer is:\n", 1)[1].split("\n\n", 1)[0]
        answer = prompt.split("The assistant answered:\n", 1)[1].split("\n\n", 1)[0]
        verdict = "Correct." if reference.lower() in answer.lower() else "Incorrect."
        _Judge.seen.append((self.path, self.headers.get("Authorization"), body["model"], reference, answer))
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": verdict}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def judge(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Judge)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Judge.seen = []
    monkeypatch.setenv("ESOPT_TEST_JUDGE_KEY", "sekret")
    yield {"base_url": f"http://127.0.0.1:{server.server_port}/v1", "model": "judge-test",
           "api_key_env": "ESOPT_TEST_JUDGE_KEY"}
    server.shutdown()
    server.server_close()


def test_fuzzy_match_asks_the_judge_and_na_needs_none(shop, play, judge):
    name = shop.db_query("SELECT full_name FROM users WHERE id = 1")[0][0]
    tasks = [wa_config(5, "What is the full name on my account?", "/account", eval_types=["string_match"],
                       reference_answers={"fuzzy_match": [name]}),
             wa_config(6, "What is the store manager's phone number?", "/", eval_types=["string_match"],
                       reference_answers={"fuzzy_match": "N/A"}, string_note="The site lists no staff.")]
    _, steps, _ = play(tasks, 5, [f"send_msg_to_user('The account belongs to {name}.')"], judge=judge)
    assert steps == [(1.0, True)]
    _, steps, _ = play(tasks, 5, ["send_msg_to_user('The account belongs to Nobody.')"], judge=judge)
    assert steps == [(0.0, True)]
    assert [s[:4] for s in _Judge.seen] == [("/v1/chat/completions", "Bearer sekret", "judge-test", name)] * 2
    assert _Judge.seen[1][4] == "The account belongs to Nobody."
    _, steps, _ = play(tasks, 6, ["report_infeasible('There is no such number on the site.')"], judge=judge)
    assert steps == [(1.0, True)] and len(_Judge.seen) == 2  # N/A matched without asking
    with pytest.raises(ValueError, match="needs an LLM judge"):
        play(tasks, 5, [])
