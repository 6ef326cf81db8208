"""Catalogue pages: home, search, categories, a category's listing, product pages with reviews."""

from __future__ import annotations

from esopt.envs.browser.webshop.catalog import DEFAULT_USER
from esopt.envs.browser.webshop.database import TODAY
from esopt.envs.browser.webshop.html import button, el, form, money, page, select, text_input, textarea, checkbox
from esopt.envs.browser.webshop.routing import NotFound, Request, html, redirect, route
from esopt.envs.browser.webshop.views import (PAGE_SIZE, PRODUCT_ROW_SQL, SORTS, count_line, notice, pager, product_table,
                                      rating_text, stock_text)

REVIEW_SORTS = {"newest": ("Newest first", "r.created DESC, r.id DESC"),
                "highest": ("Highest rating first", "r.rating DESC, r.created DESC, r.id DESC"),
                "lowest": ("Lowest rating first", "r.rating, r.created DESC, r.id DESC")}


def _like(text: str) -> str:
    """``text`` as a LIKE pattern matching it anywhere, with LIKE's wildcards taken literally."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


@route("GET", r"/")
def home(db, request: Request):
    top = db.query(PRODUCT_ROW_SQL + " GROUP BY p.id HAVING COUNT(r.id) >= 3 "
                   "ORDER BY AVG(r.rating) DESC, p.name LIMIT 5")
    cats = db.query("SELECT slug, name FROM categories ORDER BY name")
    return html(page("Welcome to Harbor Goods",
                     el("h2", "Shop by category"),
                     el("ul", [el("li", el("a", name, href=f"/category/{slug}")) for slug, name in cats]),
                     el("h2", "Top rated products"), product_table("Top rated products", top),
                     el("h2", "Community"), el("p", "Questions or tips? Visit the ", el("a", "forum", href="/forum"), "."),
                     notice=notice(request)))


@route("GET", r"/search")
def search(db, request: Request):
    q = request.text("q", "Search text", required=False)
    page_no = request.integer("page", "Page", 1, 10_000, default=1)
    if not q:
        return html(page("Search", el("p", "Type a word from a product's name or description."), query=q))
    where = " WHERE p.name LIKE ? ESCAPE '\\' OR p.description LIKE ? ESCAPE '\\' OR c.name LIKE ? ESCAPE '\\'"
    params = (_like(q),) * 3
    total = db.one("SELECT COUNT(*) FROM products p JOIN categories c ON c.id = p.category_id" + where, params)[0]
    rows = db.query(PRODUCT_ROW_SQL + where + " GROUP BY p.id ORDER BY p.name LIMIT ? OFFSET ?",
                    params + (PAGE_SIZE, (page_no - 1) * PAGE_SIZE))
    return html(page(f"Search results for \u201c{q}\u201d", count_line(total), product_table("Search results", rows),
                     pager("/search", {"q": q}, page_no, total), query=q))


@route("GET", r"/categories")
def categories(db, request: Request):
    rows = db.query("SELECT c.slug, c.name, COUNT(p.id) FROM categories c LEFT JOIN products p ON p.category_id = c.id "
                    "GROUP BY c.id ORDER BY c.name")
    items = [el("li", el("a", name, href=f"/category/{slug}"), f" - {n} products") for slug, name, n in rows]
    return html(page("Categories", el("ul", items)))


@route("GET", r"/category/([a-z0-9-]{1,40})")
def category(db, request: Request, slug: str):
    cat = db.one("SELECT id, name FROM categories WHERE slug = ?", (slug,))
    if cat is None:
        raise NotFound("There is no such category.")
    sort = request.choice("sort", "Sort by", list(SORTS), "name")
    max_price = request.integer("max_price", "Max price", 0, 100_000, default=-1)
    in_stock = request.query.get("in_stock") == "1"
    page_no = request.integer("page", "Page", 1, 10_000, default=1)
    where, params = " WHERE p.category_id = ?", [cat[0]]
    if max_price >= 0:
        where += " AND p.price_cents <= ?"
        params.append(max_price * 100)
    if in_stock:
        where += " AND p.stock > 0"
    total = db.one("SELECT COUNT(*) FROM products p" + where, params)[0]
    rows = db.query(PRODUCT_ROW_SQL + where + f" GROUP BY p.id ORDER BY {SORTS[sort][1]} LIMIT ? OFFSET ?",
                    params + [PAGE_SIZE, (page_no - 1) * PAGE_SIZE])
    filters = form(
        f"/category/{slug}",
        select("Sort by", "sort", [(k, v[0]) for k, v in SORTS.items()], sort),
        text_input("Max price ($)", "max_price", "" if max_price < 0 else str(max_price), kind="number", min=0),
        checkbox("In stock only", "in_stock", in_stock),
        button("Apply"), method="get", label="Filter products")
    kept = {k: v for k, v in (("sort", sort), ("max_price", "" if max_price < 0 else str(max_price)),
                              ("in_stock", "1" if in_stock else "")) if v}
    return html(page(cat[1], filters, count_line(total), product_table(f"{cat[1]} products", rows),
                     pager(f"/category/{slug}", kept, page_no, total)))


@route("GET", r"/product/(\d{1,9})")
def product(db, request: Request, pid: str):
    row = db.one("SELECT p.id, p.sku, p.name, p.price_cents, p.stock, p.description, c.slug, c.name "
                 "FROM products p JOIN categories c ON c.id = p.category_id WHERE p.id = ?", (int(pid),))
    if row is None:
        raise NotFound("There is no such product.")
    pid, sku, name, price, stock, desc, cslug, cname = row
    avg, count = db.one("SELECT AVG(rating), COUNT(*) FROM reviews WHERE product_id = ?", (pid,))
    order = request.choice("review_sort", "Sort reviews", list(REVIEW_SORTS), "newest")
    reviews = db.query("SELECT r.title, r.rating, u.full_name, r.created, r.body FROM reviews r "
                       f"JOIN users u ON u.id = r.user_id WHERE r.product_id = ? ORDER BY {REVIEW_SORTS[order][1]}",
                       (pid,))
    facts = el("ul", el("li", f"Price: {money(price)}"), el("li", f"SKU: {sku}"),
               el("li", "Category: ", el("a", cname, href=f"/category/{cslug}")),
               el("li", f"Availability: {stock_text(stock)}"), el("li", f"Average rating: {rating_text(avg, count)}"),
               class_="facts")
    buy = form("/cart/add", el("input", type="hidden", name="product_id", value=pid),
               text_input("Quantity", "quantity", "1", kind="number", min=1, max=20),
               button("Add to cart"), label="Add to cart") if stock > 0 else el("p", "This product is out of stock.")
    review_list = [el("article", el("h3", title), el("p", f"Rated {rating} out of 5 by {who} on {day}", class_="byline"),
                      el("p", body), class_="review") for title, rating, who, day, body in reviews]
    sorter = form(f"/product/{pid}", select("Sort reviews", "review_sort", [(k, v[0]) for k, v in REVIEW_SORTS.items()],
                                            order), button("Sort reviews"), method="get", label="Sort reviews")
    write = form(f"/product/{pid}/review",
                 select("Rating", "rating", [(str(n), f"{n} star{'s' if n > 1 else ''}") for n in range(5, 0, -1)], "5"),
                 text_input("Review title", "title", required=True), textarea("Review", "body", required=True),
                 button("Submit review"), label="Write a review")
    return html(page(name, facts, el("p", desc), buy,
                     el("h2", "Reviews"), sorter if reviews else None, review_list or el("p", "No reviews yet."),
                     el("h2", "Write a review"), write, notice=notice(request)))


@route("POST", r"/product/(\d{1,9})/review")
def post_review(db, request: Request, pid: str):
    if db.one("SELECT id FROM products WHERE id = ?", (int(pid),)) is None:
        raise NotFound("There is no such product.")
    rating = request.integer("rating", "Rating", 1, 5)
    title = request.text("title", "Review title")
    body = request.text("body", "Review", limit=4000, multiline=True)
    db.write([("INSERT INTO reviews (product_id, user_id, rating, title, body, created) VALUES (?,?,?,?,?,?)",
               (int(pid), DEFAULT_USER, rating, title, body, TODAY))])
    return redirect(f"/product/{pid}", msg="reviewed")
