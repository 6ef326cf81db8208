"""The shopper's own pages: order history, an order (with cancelling), account settings."""

from __future__ import annotations

import re

from esopt.envs.browser.webshop.catalog import DEFAULT_USER, ORDER_STATUSES, SHIPPING
from esopt.envs.browser.webshop.html import button, checkbox, el, form, money, page, select, table, text_input
from esopt.envs.browser.webshop.routing import BadRequest, NotFound, Request, html, redirect, route
from esopt.envs.browser.webshop.views import notice

_EMAIL = re.compile(r"[^@\s]{1,64}@[^@\s]{1,190}\.[A-Za-z]{2,}")
_PHONE = re.compile(r"[0-9+() -]{3,30}")


@route("GET", r"/orders")
def orders(db, request: Request):
    status = request.choice("status", "Status", ["all", *ORDER_STATUSES], "all")
    where, params = "WHERE o.user_id = ?", [DEFAULT_USER]
    if status != "all":
        where += " AND o.status = ?"
        params.append(status)
    rows = db.query("SELECT o.id, o.created, o.status, SUM(i.quantity), o.total_cents FROM orders o "
                    f"JOIN order_items i ON i.order_id = o.id {where} GROUP BY o.id ORDER BY o.created DESC, o.id DESC",
                    params)
    chooser = form("/orders", select("Status", "status", [("all", "All orders")] +
                                     [(s, s.capitalize()) for s in ORDER_STATUSES], status),
                   button("Filter"), method="get", label="Filter orders")
    body = [[el("a", f"Order #{oid}", href=f"/orders/{oid}"), day, st.capitalize(), items, money(total)]
            for oid, day, st, items, total in rows]
    listing = table("Orders", ["Order", "Date", "Status", "Items", "Total"], body) if rows else el("p", "No orders.")
    return html(page("Order history", chooser, listing))


def _order(db, oid: str) -> tuple:
    row = db.one("SELECT id, created, status, ship_name, ship_address, shipping, shipping_cents, total_cents "
                 "FROM orders WHERE id = ? AND user_id = ?", (int(oid), DEFAULT_USER))
    if row is None:
        raise NotFound("There is no such order.")
    return row


@route("GET", r"/orders/(\d{1,9})")
def order(db, request: Request, oid: str):
    oid, day, status, ship_name, address, ship, ship_cents, total = _order(db, oid)
    items = db.query("SELECT p.id, p.name, i.quantity, i.unit_cents FROM order_items i "
                     "JOIN products p ON p.id = i.product_id WHERE i.order_id = ? ORDER BY p.name", (oid,))
    shown = {k: t for k, t, _ in SHIPPING}
    facts = el("ul", el("li", f"Placed on: {day}"), el("li", f"Status: {status.capitalize()}"),
               el("li", f"Ship to: {ship_name}, {address}"),
               el("li", f"Shipping: {shown.get(ship, ship)} - {money(ship_cents)}"), class_="facts")
    lines = table("Items", ["Product", "Quantity", "Unit price", "Subtotal"],
                  [[el("a", n, href=f"/product/{pid}"), q, money(u), money(q * u)] for pid, n, q, u in items])
    cancel = el("p", el("a", "Cancel order", href=f"/orders/{oid}/cancel")) if status == "pending" else None
    return html(page(f"Order #{oid}", facts, lines, el("p", f"Total: {money(total)}", class_="total"), cancel,
                     el("p", el("a", "Back to order history", href="/orders")), notice=notice(request)))


@route("GET", r"/orders/(\d{1,9})/cancel")
def cancel_confirm(db, request: Request, oid: str):
    oid, _, status, *_ = _order(db, oid)
    if status != "pending":
        return html(page(f"Order #{oid}", el("p", "Only pending orders can be cancelled."),
                         el("p", el("a", "Back to the order", href=f"/orders/{oid}"))))
    return html(page(f"Cancel order #{oid}?", el("p", "The order will not be shipped."),
                     form(f"/orders/{oid}/cancel", button("Yes, cancel order")),
                     el("p", el("a", "No, keep the order", href=f"/orders/{oid}"))))


@route("POST", r"/orders/(\d{1,9})/cancel")
def cancel(db, request: Request, oid: str):
    oid, _, status, *_ = _order(db, oid)
    if status != "pending":
        raise BadRequest("Only pending orders can be cancelled")
    db.write([("UPDATE orders SET status = 'cancelled' WHERE id = ?", (oid,))])
    return redirect(f"/orders/{oid}", msg="cancelled")


def _settings(values: dict, error: str | None, note: str | None, username: str):
    fields = form("/account",
                  text_input("Full name", "full_name", values["full_name"], required=True),
                  text_input("Email", "email", values["email"], kind="email", required=True),
                  text_input("Phone", "phone", values["phone"], kind="tel", required=True),
                  select("Default shipping", "default_shipping", [(k, t) for k, t, _ in SHIPPING],
                         values["default_shipping"]),
                  checkbox("Send me the newsletter", "newsletter", bool(values["newsletter"])),
                  button("Save settings"), label="Account settings")
    return html(page("My account", el("p", f"Signed in as {username}"), el("h2", "Account settings"), fields,
                     el("p", el("a", "View your order history", href="/orders")), notice=note, error=error),
                400 if error else 200)


_FIELDS = ("full_name", "email", "phone", "default_shipping", "newsletter")


@route("GET", r"/account")
def account(db, request: Request):
    row = db.one(f"SELECT username, {', '.join(_FIELDS)} FROM users WHERE id = ?", (DEFAULT_USER,))
    return _settings(dict(zip(_FIELDS, row[1:])), None, notice(request), row[0])


@route("POST", r"/account")
def save_account(db, request: Request):
    username = db.one("SELECT username FROM users WHERE id = ?", (DEFAULT_USER,))[0]
    values = {k: " ".join(request.arg(k).split())[:200] for k in _FIELDS}
    values["newsletter"] = 1 if request.arg("newsletter") == "1" else 0
    try:
        full_name = request.text("full_name", "Full name", limit=100)
        email = request.text("email", "Email", limit=254)
        phone = request.text("phone", "Phone", limit=30)
        ship = request.choice("default_shipping", "Default shipping", [k for k, _, _ in SHIPPING], "standard")
        if not _EMAIL.fullmatch(email):
            raise BadRequest("Email must look like name@example.com")
        if not _PHONE.fullmatch(phone):
            raise BadRequest("Phone may hold only digits, spaces and + ( ) -")
    except BadRequest as exc:
        return _settings(values, str(exc), None, username)
    db.write([("UPDATE users SET full_name = ?, email = ?, phone = ?, default_shipping = ?, newsletter = ? WHERE id = ?",
               (full_name, email, phone, ship, values["newsletter"], DEFAULT_USER))])
    return redirect("/account", msg="saved")
