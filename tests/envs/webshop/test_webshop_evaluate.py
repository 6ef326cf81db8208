"""The evaluator: each eval type right and wrong, normalisation, the CSS locator subset, and when
WebShopTask.validate ends an episode (with a stand-in page, no browser)."""

from __future__ import annotations

import pytest
from shop_client import get, post

from esopt.envs.browser.webshop import ShopSite, evaluate
from esopt.envs.browser.webshop.evaluate import check_contents, includes, normalise, rows_match, url_matches
from esopt.envs.browser.webshop.htmlquery import select_texts


def test_normalise_folds_case_space_quotes_and_final_stop():
    assert normalise('  "Cedar  Kettle\tMini".  ') == "cedar kettle mini"
    assert normalise("\u201cÉcole\u201d") == "école"
    assert normalise("ﬁve") == "five"  # NFKC


@pytest.mark.parametrize("text,item,expected", [
    ("There are 7 products", "7", True), ("There are 17 products", "7", False), ("7.5 stars", "7", False),
    ("cost: $7", "7", True), ("about 7.", "7", True), ("1,207", "207", False), ("total $243.15", "243.15", True),
    ("Cycling routes nearby!", "cycling routes nearby", True), ("Is the X worth it? yes", "Is the X worth it?", True),
    ("Kai Okafor", "Kai", True), ("Kaiser", "Kai", False), ("anything", "", True),
])
def test_includes_matches_whole_words_and_numbers(text, item, expected):
    assert includes(text, item) is expected


def test_check_contents_exact_and_must_include():
    assert check_contents("Nimbus Webcam Plus.", {"exact_match": "nimbus webcam plus"})
    assert not check_contents("It is the Nimbus Webcam Plus", {"exact_match": "Nimbus Webcam Plus"})
    assert check_contents("Express, $15.00", {"must_include": ["express", "15.00"]})
    assert not check_contents("Express", {"must_include": ["express", "15.00"]})
    assert not check_contents("Express 15.00", {"exact_match": "Express", "must_include": ["15.00"]})
    with pytest.raises(ValueError, match="exact_match and/or must_include"):
        check_contents("x", {"fuzzy_match": ["x"]})
    with pytest.raises(ValueError):
        check_contents("x", {})


def test_url_matches_path_and_nonempty_parameters_in_any_order():
    ref = "http://127.0.0.1:5/category/toys?sort=price_desc&in_stock=1"
    assert url_matches("http://127.0.0.1:5/category/toys?in_stock=1&sort=price_desc&max_price=", ref)
    assert not url_matches("http://127.0.0.1:5/category/toys?sort=price_desc", ref)
    assert not url_matches("http://127.0.0.1:5/category/toys?sort=price_desc&in_stock=1&max_price=9", ref)
    assert not url_matches("http://127.0.0.1:6/category/toys?sort=price_desc&in_stock=1", ref)
    assert not url_matches("http://127.0.0.1:5/category/garden?sort=price_desc&in_stock=1", ref)
    assert url_matches("http://127.0.0.1:5", "http://127.0.0.1:5/")


def test_rows_match_compares_text_normalised_and_numbers_as_numbers():
    assert rows_match([("Ann  Lee", 2, 3.0)], [["ann lee", 2, 3]])
    assert not rows_match([("Ann Lee", 2)], [["Ann Lee", 3]])
    assert not rows_match([("Ann Lee", 2)], [["Ann Lee", 2], ["x", 1]])
    assert not rows_match([("2",)], [[2]])
    assert rows_match([(1, 0)], [[True, False]])  # SQLite keeps booleans as 1/0


HTML = """<html><head><title>T</title><style>p{}</style></head><body>
<main><h1 id="top">Title <b>bold</b></h1>
<article class="post first"><p class="byline">ann wrote</p><p class="body">Hello &amp; welcome</p></article>
<article class="post"><p class="body">Second<br>line</p><input name="q" value="v"></article>
<ul class="facts"><li>Status: Pending<li>Total: $5.00</ul></main></body></html>"""


@pytest.mark.parametrize("selector,texts", [
    ("article.post p.body", ["Hello & welcome", "Second line"]),
    ("#top", ["Title bold"]), ("h1 b", ["bold"]), (".first .byline", ["ann wrote"]),
    ("ul.facts li", ["Status: Pending", "Total: $5.00"]), ("input[name=q]", [""]), ('[name="q"]', [""]),
    ("article, h1", ["Title bold", "ann wrote Hello & welcome", "Second line"]), ("main nav", []),
])
def test_select_texts(selector, texts):
    assert select_texts(HTML, selector) == texts


def test_select_texts_whole_body_and_refusals():
    assert select_texts(HTML, "")[0].startswith("Title bold ann wrote")
    for bad in ("article > p", "p:last-child", "a + b", "p::before", "li ~ li"):
        with pytest.raises(ValueError, match="unsupported CSS selector"):
            select_texts(HTML, bad)


@pytest.fixture
def site():
    with ShopSite(0) as s:
        yield s


def run(site, task, answer=None, url=None):
    return evaluate(task, answer=answer, url=url or site.base_url + "/", base_url=site.base_url,
                    fetch=lambda u: get(u, "")[1], db_query=site.db_query)


def test_each_eval_type_positive_and_negative(site):
    base = site.base_url
    string = {"task_id": "s", "eval": {"eval_types": ["string_match"], "reference_answers": {"must_include": ["42"]}}}
    assert run(site, string, "It is 42.").reward == 1.0
    assert run(site, string, "It is 421.").reward == 0.0
    assert run(site, string, None).reward == 0.0

    url = {"task_id": "u", "eval": {"eval_types": ["url_match"], "reference_url": "__SHOP__/forum/help?sort=replies"}}
    assert run(site, url, url=f"{base}/forum/help?sort=replies").reward == 1.0
    assert run(site, url, url=f"{base}/forum/help").reward == 0.0

    html = {"task_id": "h", "eval": {"eval_types": ["program_html"], "program_html": [
        {"url": "__SHOP__/forum/thread/3", "locator": "article.post p.body",
         "required_contents": {"must_include": ["brand new reply"]}}]}}
    assert run(site, html).reward == 0.0
    post(base, "/forum/thread/2/reply", {"body": "brand new reply"})
    assert run(site, html).reward == 0.0  # wrong thread
    post(base, "/forum/thread/3/reply", {"body": "A brand new reply!"})
    assert run(site, html).reward == 1.0
    last = {"task_id": "l", "eval": {"eval_types": ["program_html"], "program_html": [
        {"url": "last", "locator": "main h1", "required_contents": {"exact_match": "Forum"}}]}}
    assert run(site, last, url=f"{base}/forum").reward == 1.0
    assert run(site, last, url=f"{base}/cart").reward == 0.0

    db = {"task_id": "d", "eval": {"eval_types": ["db_match"], "db_match": [
        {"sql": "SELECT phone FROM users WHERE id = ?", "params": [1], "expected": [["555-0000"]]}]}}
    assert run(site, db).reward == 0.0
    name = site.db_query("SELECT full_name FROM users WHERE id = 1")[0][0]
    post(base, "/account", {"full_name": name, "email": "a@b.test", "phone": "555-0000", "default_shipping": "pickup"})
    outcome = run(site, db)
    assert outcome.reward == 1.0 and outcome.checks == {"db_match": True}

    both = {"task_id": "b", "eval": {**db["eval"], **url["eval"], "eval_types": ["db_match", "url_match"]}}
    assert run(site, both, url=f"{base}/forum/help?sort=replies").reward == 1.0
    assert run(site, both, url=f"{base}/").checks == {"db_match": True, "url_match": False}

    with pytest.raises(ValueError, match="unknown eval type"):
        run(site, {"task_id": "x", "eval": {"eval_types": ["fuzzy_match"]}})


SHIP = {"Express": "express", "Standard": "standard", "Store": "pickup"}


class FakePage:
    """What WebShopTask.validate reads from a Playwright page: url and the context's pages."""

    def __init__(self, url):
        self.url = url
        self.context = type("Ctx", (), {"pages": [self]})()

    def goto(self, url):
        self.url = url


def chat(*assistant):
    return [{"role": "assistant", "message": "Hi! I am your UI assistant"}, {"role": "user", "message": "goal"}] + \
        [{"role": "assistant", "message": m} for m in assistant]


def test_validate_done_rules():
    pytest.importorskip("browsergym.core.task")
    from esopt.envs.browser.webshop.task import WebShopTask, final_answer

    assert final_answer(chat()) is None
    assert final_answer(chat("a", "b")) == "b"

    answer_task = WebShopTask(seed=0, task_id=0)  # string_match
    state_task = WebShopTask(seed=0, task_id=35)  # db_match: account settings
    for task in (answer_task, state_task):
        task.site = ShopSite(0)
        task.site.start()
    try:
        page = FakePage(answer_task.site.base_url + "/")
        assert answer_task.validate(page, chat())[:2] == (0.0, False)
        wrong = answer_task.validate(page, chat("Aurora Kettle"))
        assert wrong[:2] == (0.0, True) and wrong[3]["checks"] == {"string_match": False}
        right = answer_task.config["eval"]["reference_answers"]["must_include"][0]
        assert answer_task.validate(page, chat(f"It is the {right}."))[:2] == (1.0, True)

        page = FakePage(state_task.site.base_url + "/")
        assert state_task.validate(page, chat())[:2] == (0.0, False)  # nothing done: the episode goes on
        assert state_task.validate(page, chat("done"))[:2] == (0.0, True)  # claims done: ends, unrewarded
        inst = state_task.config["instantiation_dict"]
        name = state_task.site.db_query("SELECT full_name FROM users WHERE id = 1")[0][0]
        post(state_task.site.base_url, "/account", {"full_name": name, "email": inst["email"], "phone": inst["phone"],
                                                     "default_shipping": SHIP[inst["shipping"].split()[0]],
                                                     "newsletter": "1"})
        assert state_task.validate(page, chat())[:2] == (1.0, True)  # goal met: done without a message

        off = FakePage("chrome://version/")
        result = state_task.validate(off, chat())
        assert result[:2] == (0.0, True) and result[3]["left_site"] == ["chrome://version/"] and off.url == "about:blank"
        assert state_task.validate(FakePage("chrome-error://chromewebdata/"), chat())[1] is True  # state still met
        assert state_task.fetch("http://example.com/") == ""
    finally:
        for task in (answer_task, state_task):
            task.teardown()
    assert answer_task.site is None


def test_register_is_idempotent():
    pytest.importorskip("browsergym.core.registration")
    import gymnasium as gym

    from esopt.envs.browser.webshop import register_webshop_tasks

    ids = register_webshop_tasks()
    assert register_webshop_tasks() == ids
    assert len(ids) == len(set(ids)) >= 60 and all(i in gym.envs.registry for i in ids)
    assert ids[7] == "browsergym/esopt-webshop.7"

