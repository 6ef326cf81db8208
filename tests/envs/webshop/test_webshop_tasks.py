"""The shipped tasks: valid WebArena-format JSON, stratified splits, in step with their templates, and
their evaluation on a live site without a browser (nothing done scores 0; the target state scores 1)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from shop_client import get, post

from esopt.envs.browser.webshop import ShopSite, evaluate, load_tasks
from esopt.envs.browser.webshop.authoring import KINDS, build_tasks, render
from esopt.envs.browser.webshop.evaluate import STATE_TYPES, fill_url
from esopt.envs.browser.webshop.expert import PLANS
from esopt.envs.browser.webshop.taskset import SPLITS, get_task, task_problems

TASKS = load_tasks()
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def site():
    with ShopSite(0) as s:
        yield s


def score(site, task, answer=None, url=None):
    url = url or fill_url(task["start_url"], site.base_url)
    return evaluate(task, answer=answer, url=url, base_url=site.base_url, fetch=lambda u: get(u, "")[1],
                    db_query=site.db_query)


def test_every_task_is_valid_and_ids_run_from_zero():
    assert len(TASKS) >= 60
    assert [t["task_id"] for t in TASKS] == list(range(len(TASKS)))
    problems = {t["task_id"]: task_problems(t) for t in TASKS}
    assert not {k: v for k, v in problems.items() if v}
    assert not [t["task_id"] for t in TASKS if "{{" in t["intent"] or "__SHOP__" in t["intent"]]
    assert len({t["intent"] for t in TASKS}) == len(TASKS)


def test_task_problems_catches_broken_tasks():
    good = get_task(0)
    assert task_problems(good) == []
    assert "split must be one of" in task_problems({**good, "split": "test"})[0]
    leaky = {**good, "intent": good["intent"] + " " + good["eval"]["reference_answers"]["must_include"][0]}
    assert "gives the answer away" in task_problems(leaky)[0]
    bad_sql = get_task(25)
    bad_sql["eval"]["db_match"][0]["sql"] = "DELETE FROM cart_items"
    assert "db_match needs" in task_problems(bad_sql)[0]
    assert "eval.eval_types" in task_problems({**good, "eval": {"eval_types": ["fuzzy_match"]}})[0]
    assert task_problems({**good, "task_id": "0"}) == ["task_id must be a int"]


def test_splits_are_stratified_by_kind():
    counts = Counter(t["split"] for t in TASKS)
    assert counts == {"train": 39, "validation": 13, "heldout": 13}
    by_kind = Counter((t["kind"], t["split"]) for t in TASKS)
    for kind in {t["kind"] for t in TASKS}:
        assert [by_kind[(kind, s)] for s in SPLITS] == [3, 1, 1], kind
    assert [t["task_id"] for t in load_tasks("heldout")] == [t["task_id"] for t in TASKS if t["split"] == "heldout"]
    with pytest.raises(ValueError, match="unknown split"):
        load_tasks("test")


def test_every_kind_has_a_template_id_and_an_expert_plan():
    kinds = {t["kind"] for t in TASKS}
    assert kinds == {k.__name__ for k in KINDS} == set(PLANS)
    assert {t["intent_template_id"] for t in TASKS} == set(range(len(KINDS)))
    types = Counter(ty for t in TASKS for ty in t["eval"]["eval_types"])
    assert set(types) == {"string_match", "url_match", "program_html", "db_match"}


def test_tasks_json_is_what_the_templates_make():
    shipped = (ROOT / "src/esopt/envs/browser/webshop/tasks.json").read_text(encoding="utf-8")
    assert shipped == render(build_tasks()), "rerun: python -m esopt.envs.browser.webshop.authoring"


def test_tasks_json_ships_as_package_data():
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'"esopt\.envs\.browser\.webshop" = \["tasks\.json"\]', text)


def test_start_and_checked_pages_exist(site):
    for task in TASKS:
        urls = [task["start_url"]] + [i["url"] for i in task["eval"]["program_html"]]
        for url in urls:
            assert get(fill_url(url, site.base_url), "")[0] == 200, (task["task_id"], url)


@pytest.mark.parametrize("task", TASKS, ids=lambda t: str(t["task_id"]))
def test_doing_nothing_scores_zero(site, task):
    assert score(site, task).reward == 0.0
    state = [t for t in task["eval"]["eval_types"] if t in STATE_TYPES]
    if state:
        outcome = evaluate(task, answer=None, url=fill_url(task["start_url"], site.base_url), base_url=site.base_url,
                           fetch=lambda u: get(u, "")[1], db_query=site.db_query, types=state)
        assert outcome.reward == 0.0 and not any(outcome.checks.values())


def _product_id(site, name):
    return site.db_query("SELECT id FROM products WHERE name = ?", (name,))[0][0]


def solve_by_http(site, task):
    """Reach the task's target state with plain form posts (no browser); returns the final URL."""
    inst, base, kind = task["instantiation_dict"], site.base_url, task["kind"]
    if kind == "add_to_cart":
        return post(base, "/cart/add", {"product_id": _product_id(site, inst["product"]), "quantity": inst["quantity"]})[2]
    if kind == "checkout":
        post(base, "/cart/add", {"product_id": _product_id(site, inst["product"]), "quantity": 1})
        ship = {"Express": "express", "Standard": "standard", "Store": "pickup"}[inst["shipping"].split()[0]]
        return post(base, "/checkout", {"name": inst["name"], "street": inst["street"], "city": inst["city"],
                                        "shipping": ship})[2]
    if kind == "account_settings":
        name = site.db_query("SELECT full_name FROM users WHERE id = 1")[0][0]
        ship = {"Express": "express", "Standard": "standard", "Store": "pickup"}[inst["shipping"].split()[0]]
        return post(base, "/account", {"full_name": name, "email": inst["email"], "phone": inst["phone"],
                                       "default_shipping": ship, "newsletter": "1"})[2]
    if kind == "forum_new_thread":
        slug = site.db_query("SELECT slug FROM boards WHERE name = ?", (inst["board"],))[0][0]
        return post(base, f"/forum/{slug}/new", {"title": inst["title"], "body": inst["message"]})[2]
    if kind == "forum_reply":
        tid = site.db_query("SELECT id FROM threads WHERE title = ?", (inst["title"],))[0][0]
        return post(base, f"/forum/thread/{tid}/reply", {"body": inst["message"]})[2]
    if kind == "write_review":
        pid = _product_id(site, inst["product"])
        return post(base, f"/product/{pid}/review", {"rating": inst["rating"], "title": inst["title"],
                                                     "body": inst["body"]})[2]
    if kind == "cancel_order":
        oid = site.db_query("SELECT o.id FROM orders o JOIN order_items i ON i.order_id = o.id JOIN products p "
                            "ON p.id = i.product_id WHERE p.name = ? AND o.status = 'pending'", (inst["product"],))[0][0]
        return post(base, f"/orders/{oid}/cancel", {})[2]
    if kind == "filtered_listing":
        return fill_url(task["eval"]["reference_url"], base).replace("?", "?page=&", 1)  # an empty extra parameter
    raise AssertionError(kind)


STATE_TASKS = [t for t in TASKS if "string_match" not in t["eval"]["eval_types"]]


@pytest.mark.parametrize("task", STATE_TASKS, ids=lambda t: str(t["task_id"]))
def test_target_state_scores_one(site, task):
    url = solve_by_http(site, task)
    outcome = score(site, task, url=url)
    assert outcome.reward == 1.0, outcome.checks


def test_target_state_of_another_task_scores_zero(site):
    """Solving task A's sibling (same kind, other instance) does not pass task A."""
    by_kind: dict[str, list] = {}
    for task in STATE_TASKS:
        by_kind.setdefault(task["kind"], []).append(task)
    for kind, tasks in by_kind.items():
        with ShopSite(0) as fresh:
            url = solve_by_http(fresh, tasks[1])
            assert score(fresh, tasks[0], url=url).reward == 0.0, kind


def test_answers_score_by_their_reference(site):
    for task in TASKS:
        if "string_match" not in task["eval"]["eval_types"]:
            continue
        items = task["eval"]["reference_answers"]["must_include"]
        assert score(site, task, answer="The answer is " + ", ".join(items) + ".").reward == 1.0
        assert score(site, task, answer="I could not find it.").reward == 0.0
        if len(items) > 1:
            assert score(site, task, answer=items[0]).reward == 0.0
