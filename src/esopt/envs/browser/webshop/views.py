"""Page fragments used by several pages: product tables, pagers, ratings, notices."""

from __future__ import annotations

from urllib.parse import urlencode

from esopt.envs.browser.webshop.html import Markup, el, money, table

PAGE_SIZE = 10

# SELECT list giving (id, name, category, price_cents, stock, avg rating or None, review count)
PRODUCT_ROW_SQL = """
SELECT p.id, p.name, c.name, p.price_cents, p.stock, AVG(r.rating), COUNT(r.id)
FROM products p JOIN categories c ON c.id = p.category_id LEFT JOIN reviews r ON r.product_id = p.id
"""

SORTS = {  # value -> (shown text, ORDER BY clause over PRODUCT_ROW_SQL's columns)
    "name": ("Name (A to Z)", "p.name"),
    "price_asc": ("Price: low to high", "p.price_cents, p.name"),
    "price_desc": ("Price: high to low", "p.price_cents DESC, p.name"),
    "rating": ("Best rated", "AVG(r.rating) IS NULL, AVG(r.rating) DESC, p.name"),
}

# ?msg= codes after a POST; fixed texts, so no request text is ever echoed as a notice
NOTICES = {
    "added": "The product was added to your cart.",
    "updated": "Your cart was updated.",
    "removed": "The product was removed from your cart.",
    "placed": "Thank you! Your order has been placed.",
    "cancelled": "The order has been cancelled.",
    "saved": "Your settings have been saved.",
    "reviewed": "Thank you for your review.",
    "posted": "Your post has been published.",
}


def notice(request) -> str | None:
    return NOTICES.get(request.query.get("msg", ""))


def rating_text(avg: float | None, count: int) -> str:
    if not count:
        return "No reviews"
    return f"{avg:.1f} out of 5 ({count} review{'s' if count != 1 else ''})"


def stock_text(stock: int) -> str:
    return f"In stock ({stock} left)" if stock > 0 else "Out of stock"


def product_table(caption: str, rows: list[tuple]) -> Markup:
    """Rows from :data:`PRODUCT_ROW_SQL` as a table with product links."""
    body = [[el("a", name, href=f"/product/{pid}"), category, money(price), rating_text(avg, n), stock_text(stock)]
            for pid, name, category, price, stock, avg, n in rows]
    return table(caption, ["Product", "Category", "Price", "Rating", "Availability"], body, class_="products")


def count_line(total: int, noun: str = "product") -> Markup:
    return el("p", f"{total} {noun}{'s' if total != 1 else ''} found", class_="count")


def pager(path: str, query: dict[str, str], page_no: int, total: int, size: int = PAGE_SIZE) -> Markup:
    """"Page 2 of 4" with previous/next links that keep the other query parameters."""
    pages = max(1, -(-total // size))
    if pages == 1:
        return Markup("")

    def link(text: str, target: int) -> Markup:
        return el("a", text, href=f"{path}?{urlencode({**query, 'page': target})}")

    return el("nav", link("Previous page", page_no - 1) if page_no > 1 else None, " ",
              f"Page {page_no} of {pages}", " ",
              link("Next page", page_no + 1) if page_no < pages else None, aria_label="Pages")
