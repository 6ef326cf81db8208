"""The shop site without a browser: start/stop, every page, escaping, input limits, fresh deterministic data."""

from __future__ import annotations

import re

import pytest
from shop_client import get, post, raw

from esopt.envs.browser.webshop import ShopSite
from esopt.envs.browser.webshop.database import ShopDatabase
from esopt.envs.browser.webshop.htmlquery import select_texts

PAGES = ["/", "/search?q=kettle", "/search", "/categories", "/category/kitchen",
         "/category/kitchen?sort=price_desc&max_price=50&in_stock=1&page=1", "/product/1", "/product/3?review_sort=lowest",
         "/cart", "/checkout", "/orders", "/orders?status=pending", "/orders/1", "/account", "/forum", "/forum/help",
         "/forum/help?sort=replies", "/forum/help/new", "/forum/thread/1"]


@pytest.fixture
def site():
    with ShopSite(0) as s:
        yield s


def test_start_binds_loopback_on_a_free_port_and_stop_frees_it():
    a, b = ShopSite(0), ShopSite(0)
    try:
        url_a, url_b = a.start(), b.start()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url_a) and url_a != url_b
        assert a._server.server_address[0] == "127.0.0.1"
        with pytest.raises(RuntimeError, match="already running"):
            a.start()
    finally:
        a.stop()
        b.stop()
    a.stop()  # twice is fine
    with pytest.raises(RuntimeError, match="not running"):
        a.db_query("SELECT 1")
    with pytest.raises(OSError):
        get(url_a, "/")


@pytest.mark.parametrize("path", PAGES)
def test_every_page_answers_200_with_a_heading(site, path):
    status, body = get(site.base_url, path)
    assert status == 200, body[:300]
    assert select_texts(body, "main h1"), path
    assert 'lang="en"' in body


@pytest.mark.parametrize("path,status", [("/nope", 404), ("/product/99999", 404), ("/category/nope", 404),
                                         ("/orders/999", 404), ("/forum/thread/999", 404), ("/forum/nope", 404),
                                         ("/category/kitchen?sort=evil", 400), ("/search?q=x&page=abc", 400),
                                         ("/category/kitchen?max_price=-5", 400)])
def test_unknown_records_and_bad_parameters_are_refused(site, path, status):
    assert get(site.base_url, path)[0] == status


HOSTILE = "<script>alert('x')</script>\"><img src=x onerror=alert(1)>&amp;"


def test_request_text_is_escaped_where_it_is_shown(site):
    status, body = get(site.base_url, "/search?q=" + __import__("urllib.parse").parse.quote(HOSTILE))
    assert status == 200
    assert "<script>alert" not in body and "<img src=x" not in body
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in body
    assert "&amp;amp;" in body  # an entity typed by the user is shown, not interpreted


def test_stored_text_is_escaped_forum_reviews_account(site):
    base = site.base_url
    assert post(base, "/forum/help/new", {"title": HOSTILE, "body": HOSTILE})[0] == 200
    assert post(base, "/forum/thread/1/reply", {"body": HOSTILE})[0] == 200
    assert post(base, "/product/1/review", {"rating": "4", "title": HOSTILE, "body": HOSTILE})[0] == 200
    post(base, "/checkout", {"name": HOSTILE, "street": HOSTILE, "city": "X", "shipping": "express"})
    for path in ["/forum/help", "/forum/thread/1", "/product/1", "/orders/21", "/forum/thread/28"]:
        status, body = get(base, path)
        assert status == 200, path
        assert "<script>" not in body and "<img" not in body, path
    assert site.db_query("SELECT title FROM threads WHERE id = 28") == [(" ".join(HOSTILE.split()),)]


def test_sql_metacharacters_are_data(site):
    status, body = get(site.base_url, "/search?q=%27%20OR%201%3D1%20--")
    assert status == 200 and "0 products found" in body
    assert get(site.base_url, "/search?q=%25")[1].count("products found") == 1  # % is literal: no product has it
    assert "0 products found" in get(site.base_url, "/search?q=%25")[1]


def test_foreign_host_header_and_oversized_or_odd_bodies_are_refused(site):
    base = site.base_url
    port = site.port
    assert raw(base, "GET", "/", headers={"Host": "evil.example"})[0] == 400
    assert raw(base, "GET", "/", headers={"Host": f"localhost:{port}"})[0] == 200
    host = {"Host": f"127.0.0.1:{port}"}
    big = b"body=" + b"a" * (70 * 1024)
    assert raw(base, "POST", "/forum/thread/1/reply", big,
               {**host, "Content-Type": "application/x-www-form-urlencoded"})[0] == 413
    assert raw(base, "POST", "/forum/thread/1/reply", b'{"body": "x"}', {**host, "Content-Type": "application/json"})[0] == 400
    assert raw(base, "POST", "/forum/thread/1/reply", b"body=%ff%fe",
               {**host, "Content-Type": "application/x-www-form-urlencoded"})[0] == 400
    assert raw(base, "DELETE", "/", headers=host)[0] == 501
    assert raw(base, "POST", "/", b"x=1", {**host, "Content-Type": "application/x-www-form-urlencoded"})[0] == 405


def test_pages_carry_a_script_free_content_security_policy(site):
    import urllib.request

    with urllib.request.urlopen(site.base_url + "/") as r:
        csp = r.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp


def test_cart_add_update_remove_and_checkout_change_the_database(site):
    base = site.base_url
    cart = lambda: site.db_query("SELECT product_id, quantity FROM cart_items ORDER BY product_id")  # noqa: E731
    before = cart()
    assert post(base, "/cart/add", {"product_id": "2", "quantity": "3"})[2].endswith("/cart?msg=added")
    assert (2, 3) in cart()
    post(base, "/cart/update", {"product_id": "2", "quantity": "5"})
    assert (2, 5) in cart()
    post(base, "/cart/remove", {"product_id": "2"})
    assert cart() == before
    assert post(base, "/cart/add", {"product_id": "2", "quantity": "99"})[0] == 400  # at most 20 at a time
    status, body, url = post(base, "/checkout", {"name": "Ann Lee", "street": "1 Road", "city": "Town",
                                                 "shipping": "pickup"})
    assert status == 200 and url.endswith("/orders/21?msg=placed") and "Status: Pending" in body
    assert site.db_query("SELECT ship_name, ship_address, shipping, shipping_cents FROM orders WHERE id = 21") == [
        ("Ann Lee", "1 Road, Town", "pickup", 0)]
    assert cart() == []
    assert post(base, "/checkout", {"name": "", "street": "x", "city": "y"})[0] == 400


def test_checkout_form_errors_keep_the_typed_values(site):
    status, body, _ = post(site.base_url, "/checkout", {"name": "Ann <b>", "street": "", "city": "Town"})
    assert status == 400 and "Street address must not be empty" in body and 'value="Ann &lt;b&gt;"' in body


def test_account_settings_save_and_validate(site):
    base = site.base_url
    fields = {"full_name": "Casey S", "email": "c@example.test", "phone": "555-1234", "default_shipping": "pickup"}
    assert post(base, "/account", fields)[2].endswith("/account?msg=saved")
    assert site.db_query("SELECT full_name, email, phone, default_shipping, newsletter FROM users WHERE id = 1") == [
        ("Casey S", "c@example.test", "555-1234", "pickup", 0)]
    status, body, _ = post(base, "/account", {**fields, "email": "not-an-email"})
    assert status == 400 and "Email must look like" in body
    assert site.db_query("SELECT email FROM users WHERE id = 1") == [("c@example.test",)]


def test_cancel_needs_a_pending_order(site):
    pending = site.db_query("SELECT id FROM orders WHERE status = 'pending' ORDER BY id")[0][0]
    delivered = site.db_query("SELECT id FROM orders WHERE status = 'delivered' ORDER BY id")[0][0]
    assert "Yes, cancel order" in get(site.base_url, f"/orders/{pending}/cancel")[1]
    assert post(site.base_url, f"/orders/{pending}/cancel", {})[0] == 200
    assert site.db_query("SELECT status FROM orders WHERE id = ?", (pending,)) == [("cancelled",)]
    assert post(site.base_url, f"/orders/{delivered}/cancel", {})[0] == 400


def test_db_query_is_read_only(site):
    import sqlite3

    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        site.db_query("DELETE FROM products")
    assert site.db_query("SELECT COUNT(*) FROM products") == [(128,)]


def test_same_seed_same_world_other_seed_other_world():
    a, b, c = ShopDatabase(0), ShopDatabase(0), ShopDatabase(1)
    try:
        assert a.dump() == b.dump()
        assert a.dump() != c.dump()
        counts = {t: a.one(f"SELECT COUNT(*) FROM {t}")[0] for t in
                  ("categories", "products", "users", "reviews", "orders", "order_items", "cart_items", "boards",
                   "threads", "posts")}
        assert counts["products"] == 128 and counts["orders"] == 20 and counts["threads"] >= 20
        assert min(counts.values()) > 0
    finally:
        for db in (a, b, c):
            db.close()


def test_each_site_gets_a_fresh_database():
    with ShopSite(0) as first:
        post(first.base_url, "/forum/thread/1/reply", {"body": "hello"})
        assert first.db_query("SELECT COUNT(*) FROM posts WHERE body = 'hello'") == [(1,)]
    with ShopSite(0) as second:
        assert second.db_query("SELECT COUNT(*) FROM posts WHERE body = 'hello'") == [(0,)]


def test_bad_seed_is_refused():
    with pytest.raises(ValueError, match="non-negative int"):
        ShopDatabase(-1)
