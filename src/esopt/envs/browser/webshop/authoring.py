"""How ``tasks.json`` was written: templates instantiated against the world of seed 0.

    python -m esopt.envs.browser.webshop.authoring            # rewrite tasks.json
    python -m esopt.envs.browser.webshop.authoring --check    # exit 1 if tasks.json differs

Each kind below picks five instances with a local RNG, reads their reference
answers or target states from the database, and the five are split 3 / 1 / 1
into train / validation / heldout, so every split holds every kind. The
scripted expert (:mod:`expert`) solves the tasks by reading the pages, so a
wrong reference here shows up as an expert failure.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from esopt.envs.browser.webshop.catalog import BOARDS, DEFAULT_USER, FIRST, LAST, SHIPPING
from esopt.envs.browser.webshop.database import ShopDatabase
from esopt.envs.browser.webshop.html import money

SEED = 0
PER_KIND = 5
SPLIT_PATTERN = ["train", "train", "train", "validation", "heldout"]
SHIP_TEXT = {k: t for k, t, _ in SHIPPING}
STREETS = ["18 Birch Avenue", "3 Quay Street", "250 Old Mill Road", "41 Lantern Way", "7 Orchard Close",
           "92 Harbour View", "15 Copper Lane", "60 Signal Hill"]
CITIES = ["Portville", "Easthaven", "Millbrook", "Northcliff", "Riverton"]
SENTENCES = ["Thanks for the tips, they worked for me.", "I had the same problem last month.",
             "Has anyone compared the prices in store?", "Great thread, bookmarking it.",
             "The support team answered me within a day.", "Mine still works after a year."]
THREAD_IDEAS = [("Gift ideas under $30", "Looking for small gifts for a colleague. Any favourites?"),
                ("Delivery to the islands", "Does express shipping reach the islands?"),
                ("Sizes for the yoga mats", "Are the yoga mats long enough for tall people?"),
                ("Favourite kitchen gadget", "Which gadget do you use every day?"),
                ("Returns after thirty days", "Can I still return something after a month?"),
                ("Weekend hiking gear", "What do you pack for a weekend hike?")]
REVIEW_IDEAS = [("Works as promised", "Setup took five minutes and it has worked every day since."),
                ("Good value", "For the price it is hard to beat."),
                ("Not for me", "It is smaller than I expected from the pictures."),
                ("Sturdy and simple", "Feels solid and does exactly one thing well."),
                ("Would buy again", "Second one I have bought; still happy.")]


def _products(db, where: str = "", params=()) -> list[tuple]:
    """(id, name, category name, price cents, stock, review count)."""
    return db.query("SELECT p.id, p.name, c.name, p.price_cents, p.stock, "
                    "(SELECT COUNT(*) FROM reviews r WHERE r.product_id = p.id) FROM products p "
                    f"JOIN categories c ON c.id = p.category_id {where} ORDER BY p.id", params)


def _categories(db) -> list[tuple]:
    return db.query("SELECT id, slug, name FROM categories ORDER BY id")


def _task(kind: str, template: str, inst: dict, ev: dict, start: str = "/", reset: bool = False) -> dict:
    intent = template
    for key, value in inst.items():
        intent = intent.replace("{{%s}}" % key, str(value))
    return {"sites": ["esopt-shop"], "require_login": False, "storage_state": None, "start_url": "__SHOP__" + start,
            "geolocation": None, "intent_template": template, "instantiation_dict": inst, "intent": intent,
            "require_reset": reset, "eval": ev, "kind": kind, "site_seed": SEED}


def _answer(items: list[str]) -> dict:
    return {"eval_types": ["string_match"], "reference_answers": {"must_include": items}, "reference_url": "",
            "program_html": []}


def _state(db_checks: list[dict] | None = None, html_checks: list[dict] | None = None, url: str = "") -> dict:
    types = (["url_match"] if url else []) + (["program_html"] if html_checks else []) + \
            (["db_match"] if db_checks else [])
    out = {"eval_types": types, "reference_answers": None, "reference_url": url, "program_html": html_checks or []}
    if db_checks:
        out["db_match"] = db_checks
    return out


def cheapest_in_category(db, rng):
    out = []
    for cid, _, name in _categories(db):
        rows = db.query("SELECT name, price_cents FROM products WHERE category_id = ? ORDER BY price_cents", (cid,))
        if rows[0][1] != rows[1][1]:
            out.append(_task("cheapest_in_category", "In the {{category}} category, which product has the lowest price?",
                             {"category": name}, _answer([rows[0][0]])))
    return out


def count_under_price(db, rng):
    out = []
    for cid, _, name in _categories(db):
        prices = sorted(p for (p,) in db.query("SELECT price_cents FROM products WHERE category_id = ?", (cid,)))
        dollars = rng.choice([d for d in range(10, 400, 5) if 3 <= sum(p <= d * 100 for p in prices) <= 9])
        n = sum(p <= dollars * 100 for p in prices)
        out.append(_task("count_under_price", "How many products in the {{category}} category cost at most ${{price}}?",
                         {"category": name, "price": dollars}, _answer([str(n)])))
    return out


def lowest_review_author(db, rng):
    out = []
    for pid, name, *_ in _products(db):
        rows = db.query("SELECT r.rating, u.full_name FROM reviews r JOIN users u ON u.id = r.user_id "
                        "WHERE r.product_id = ? ORDER BY r.rating", (pid,))
        if len(rows) >= 3 and rows[0][0] < rows[1][0]:
            out.append(_task("lowest_review_author", "Who wrote the lowest-rated review of the {{product}}?",
                             {"product": name}, _answer([rows[0][1]])))
    return out


def order_info(db, rng):
    out = []
    for status in ("delivered", "shipped", "cancelled", "pending"):
        rows = db.query("SELECT shipping, total_cents FROM orders WHERE status = ? AND user_id = ? "
                        "ORDER BY created DESC, id DESC", (status, DEFAULT_USER))
        for which, row in (("most recent", rows[0]), ("oldest", rows[-1])):
            ship = {"standard": "Standard", "express": "Express", "pickup": "pickup"}[row[0]]
            out.append(_task("order_info", "Which shipping method did my {{which}} {{status}} order use, "
                             "and what was its total?", {"which": which, "status": status},
                             _answer([ship, money(row[1])[1:]])))
    return out


def forum_thread_pick(db, rng):
    out = []
    for bid, (_, board, _) in enumerate(BOARDS, start=1):
        rows = db.query("SELECT t.title, COUNT(p.id), t.created FROM threads t JOIN posts p ON p.thread_id = t.id "
                        "WHERE t.board_id = ? GROUP BY t.id", (bid,))
        for what, key in (("has the most replies", 1), ("was started most recently", 2)):
            ranked = sorted(rows, key=lambda r: r[key], reverse=True)
            if ranked[0][key] != ranked[1][key]:
                out.append(_task("forum_thread_pick", "In the forum's {{board}} board, which thread {{question}}?",
                                 {"board": board, "question": what}, _answer([ranked[0][0]])))
    return out


def _cart(db) -> list[list[int]]:
    return [list(r) for r in db.query("SELECT product_id, quantity FROM cart_items WHERE user_id = ? "
                                      "ORDER BY product_id", (DEFAULT_USER,))]


def add_to_cart(db, rng):
    cart = _cart(db)
    out = []
    for pid, name, _, _, stock, _ in _products(db, "WHERE p.stock >= 5"):
        if pid in {c[0] for c in cart}:
            continue
        qty = rng.randrange(2, 5)
        want = sorted(cart + [[pid, qty]])
        out.append(_task("add_to_cart", "Add {{quantity}} units of the {{product}} to my cart.",
                         {"quantity": qty, "product": name},
                         _state([{"sql": "SELECT product_id, quantity FROM cart_items WHERE user_id = ? "
                                         "ORDER BY product_id", "params": [DEFAULT_USER], "expected": want}]),
                         reset=True))
    return out


def checkout(db, rng):
    cart = _cart(db)
    last = db.one("SELECT MAX(id) FROM orders")[0]
    out = []
    for pid, name, _, _, stock, _ in _products(db, "WHERE p.stock >= 2"):
        if pid in {c[0] for c in cart}:
            continue
        who = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        street, city = rng.choice(STREETS), rng.choice(CITIES)
        ship = rng.choice(SHIPPING)[0]
        items = sorted(cart + [[pid, 1]])
        checks = [{"sql": "SELECT ship_name, ship_address, shipping FROM orders WHERE id > ? ORDER BY id",
                   "params": [last], "expected": [[who, f"{street}, {city}", ship]]},
                  {"sql": "SELECT product_id, quantity FROM order_items WHERE order_id > ? ORDER BY product_id",
                   "params": [last], "expected": items}]
        out.append(_task("checkout", "Buy one {{product}} together with everything already in my cart. Ship the order "
                         "to {{name}}, {{street}}, {{city}}, with {{shipping}} shipping.",
                         {"product": name, "name": who, "street": street, "city": city, "shipping": SHIP_TEXT[ship]},
                         _state(checks), reset=True))
    return out


def account_settings(db, rng):
    full, newsletter, current = db.one("SELECT full_name, newsletter, default_shipping FROM users WHERE id = ?",
                                       (DEFAULT_USER,))
    out = []
    for k in range(12):
        first = rng.choice(FIRST).lower()
        email = f"{first}.{rng.choice(['shop', 'mail', 'home', 'work'])}{k}@example.test"
        phone = f"555-{rng.randrange(1000, 9999)}"
        ship = rng.choice([s for s, _, _ in SHIPPING if s != current])
        out.append(_task("account_settings", "In my account settings, change my email to {{email}}, my phone number to "
                         "{{phone}} and my default shipping to {{shipping}}.",
                         {"email": email, "phone": phone, "shipping": SHIP_TEXT[ship]},
                         _state([{"sql": "SELECT full_name, email, phone, default_shipping, newsletter FROM users "
                                         "WHERE id = ?", "params": [DEFAULT_USER],
                                  "expected": [[full, email, phone, ship, newsletter]]}]), reset=True))
    return out


def forum_new_thread(db, rng):
    last = db.one("SELECT MAX(id) FROM threads")[0]
    out = []
    for title, message in THREAD_IDEAS:
        board = rng.choice(BOARDS)[1]
        check = {"sql": "SELECT b.name, t.title, p.body FROM threads t JOIN boards b ON b.id = t.board_id "
                        "JOIN posts p ON p.thread_id = t.id WHERE t.id > ? ORDER BY p.id",
                 "params": [last], "expected": [[board, title, message]]}
        out.append(_task("forum_new_thread", "Start a new thread in the forum's {{board}} board titled \"{{title}}\" "
                         "with the message \"{{message}}\".", {"board": board, "title": title, "message": message},
                         _state([check]), reset=True))
    return out


def forum_reply(db, rng):
    out = []
    for tid, title, board in db.query("SELECT t.id, t.title, b.name FROM threads t JOIN boards b ON b.id = t.board_id "
                                      "ORDER BY t.id"):
        message = rng.choice(SENTENCES)
        html = {"url": f"__SHOP__/forum/thread/{tid}", "locator": "article.post p.body",
                "required_contents": {"must_include": [message]}}
        out.append(_task("forum_reply", "Reply to the thread \"{{title}}\" in the forum's {{board}} board with the "
                         "message \"{{message}}\".", {"title": title, "board": board, "message": message},
                         _state(html_checks=[html]), reset=True))
    return out


def write_review(db, rng):
    last = db.one("SELECT MAX(id) FROM reviews")[0]
    out = []
    for pid, name, *_ in _products(db):
        rating = rng.randrange(1, 6)
        title, body = rng.choice(REVIEW_IDEAS)
        check = {"sql": "SELECT product_id, rating, title, body FROM reviews WHERE id > ? ORDER BY id",
                 "params": [last], "expected": [[pid, rating, title, body]]}
        out.append(_task("write_review", "Write a {{rating}}-star review of the {{product}} titled \"{{title}}\" that "
                         "says \"{{body}}\".", {"rating": rating, "product": name, "title": title, "body": body},
                         _state([check]), reset=True))
    return out


def cancel_order(db, rng):
    cancelled = [r[0] for r in db.query("SELECT id FROM orders WHERE status = 'cancelled' ORDER BY id")]
    count = db.one("SELECT COUNT(*) FROM orders")[0]
    out = []
    for oid, name in db.query("SELECT o.id, p.name FROM orders o JOIN order_items i ON i.order_id = o.id "
                              "JOIN products p ON p.id = i.product_id WHERE o.status = 'pending' ORDER BY o.id, p.name"):
        checks = [{"sql": "SELECT id FROM orders WHERE status = 'cancelled' ORDER BY id", "params": [],
                   "expected": [[i] for i in sorted(cancelled + [oid])]},
                  {"sql": "SELECT COUNT(*) FROM orders", "params": [], "expected": [[count]]}]
        html = {"url": f"__SHOP__/orders/{oid}", "locator": "ul.facts",
                "required_contents": {"must_include": ["Status: Cancelled"]}}
        out.append(_task("cancel_order", "Cancel my pending order that contains the {{product}}.", {"product": name},
                         _state(checks, [html]), reset=True))
    return out


def filtered_listing(db, rng):
    out = []
    for _, slug, name in _categories(db):
        sort = rng.choice(["price_asc", "price_desc", "rating"])
        in_stock = rng.random() < 0.6
        price = rng.choice([None, 25, 50, 100, 200])
        if not in_stock and price is None:  # at least one filter, so the task takes five steps or more
            in_stock = True
        parts = (["are in stock"] if in_stock else []) + ([f"cost at most ${price}"] if price is not None else [])
        phrase = " showing only products that " + " and ".join(parts) if parts else ""
        query = [f"sort={sort}"] + ([f"max_price={price}"] if price is not None else []) + \
                (["in_stock=1"] if in_stock else [])
        sort_text = {"price_asc": "price from low to high", "price_desc": "price from high to low",
                     "rating": "best rating first"}[sort]
        out.append(_task("filtered_listing", "Open the {{category}} product list{{filters}}, sorted by {{sort}}.",
                         {"category": name, "filters": phrase, "sort": sort_text},
                         _state(url=f"__SHOP__/category/{slug}?{'&'.join(query)}")))
    return out


KINDS = [cheapest_in_category, count_under_price, lowest_review_author, order_info, forum_thread_pick, add_to_cart,
         checkout, account_settings, forum_new_thread, forum_reply, write_review, cancel_order, filtered_listing]


def build_tasks() -> list[dict]:
    db = ShopDatabase(SEED)
    try:
        tasks = []
        for template_id, kind in enumerate(KINDS):
            rng = random.Random(f"tasks:{kind.__name__}")
            candidates = kind(db, rng)
            if len(candidates) < PER_KIND:
                raise RuntimeError(f"{kind.__name__}: only {len(candidates)} candidates in the world of seed {SEED}")
            for task, split in zip(rng.sample(candidates, PER_KIND), SPLIT_PATTERN):
                task.update(task_id=len(tasks), intent_template_id=template_id, split=split)
                tasks.append(dict(sorted(task.items())))
        return tasks
    finally:
        db.close()


def render(tasks: list[dict]) -> str:
    return json.dumps(tasks, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = Path(__file__).with_name("tasks.json")
    text = render(build_tasks())
    if "--check" in argv:
        same = path.exists() and path.read_text(encoding="utf-8") == text
        print(f"{path}: {'up to date' if same else 'differs from the templates; rerun without --check'}")
        return 0 if same else 1
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
