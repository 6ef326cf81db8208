"""The cart (add, change quantity, remove) and checkout (ship-to form, shipping choice, order)."""

from __future__ import annotations

from esopt.envs.browser.webshop.catalog import DEFAULT_USER, SHIPPING
from esopt.envs.browser.webshop.database import TODAY
from esopt.envs.browser.webshop.html import button, el, form, money, page, select, table, text_input
from esopt.envs.browser.webshop.routing import BadRequest, NotFound, Request, html, redirect, route
from esopt.envs.browser.webshop.views import notice

MAX_QUANTITY = 99


def _lines(db) -> list[tuple]:
    """(product id, name, unit cents, quantity, stock) of the shopper's cart, by name."""
    return db.query("SELECT p.id, p.name, p.price_cents, ci.quantity, p.stock FROM cart_items ci "
                    "JOIN products p ON p.id = ci.product_id WHERE ci.user_id = ? ORDER BY p.name", (DEFAULT_USER,))


def _product_id(db, request: Request) -> int:
    pid = request.integer("product_id", "Product", 1, 10**9)
    if db.one("SELECT id FROM products WHERE id = ?", (pid,)) is None:
        raise NotFound("There is no such product.")
    return pid


@route("GET", r"/cart")
def cart(db, request: Request):
    lines = _lines(db)
    if not lines:
        return html(page("Shopping cart", el("p", "Your cart is empty."), notice=notice(request)))
    rows = []
    for pid, name, unit, qty, _ in lines:
        field_id = f"qty-{pid}"
        change = form("/cart/update", el("input", type="hidden", name="product_id", value=pid),
                      el("label", f"Quantity of {name}", for_=field_id), " ",
                      el("input", type="number", id=field_id, name="quantity", value=qty, min=0, max=MAX_QUANTITY),
                      " ", button("Update", aria_label=f"Update {name}"))
        remove = form("/cart/remove", el("input", type="hidden", name="product_id", value=pid),
                      button("Remove", aria_label=f"Remove {name}"))
        rows.append([el("a", name, href=f"/product/{pid}"), money(unit), change, money(unit * qty), remove])
    total = sum(unit * qty for _, _, unit, qty, _ in lines)
    return html(page("Shopping cart", table("Cart items", ["Product", "Unit price", "Quantity", "Subtotal", ""], rows),
                     el("p", f"Cart total: {money(total)}", class_="total"),
                     el("p", el("a", "Proceed to checkout", href="/checkout")), notice=notice(request)))


@route("POST", r"/cart/add")
def cart_add(db, request: Request):
    pid = _product_id(db, request)
    qty = request.integer("quantity", "Quantity", 1, 20, default=1)
    db.write([("INSERT INTO cart_items (user_id, product_id, quantity) VALUES (?,?,?) ON CONFLICT (user_id, product_id) "
               "DO UPDATE SET quantity = MIN(quantity + excluded.quantity, ?)", (DEFAULT_USER, pid, qty, MAX_QUANTITY))])
    return redirect("/cart", msg="added")


@route("POST", r"/cart/update")
def cart_update(db, request: Request):
    pid = _product_id(db, request)
    qty = request.integer("quantity", "Quantity", 0, MAX_QUANTITY)
    if qty == 0:
        db.write([("DELETE FROM cart_items WHERE user_id = ? AND product_id = ?", (DEFAULT_USER, pid))])
    else:
        db.write([("UPDATE cart_items SET quantity = ? WHERE user_id = ? AND product_id = ?", (qty, DEFAULT_USER, pid))])
    return redirect("/cart", msg="updated")


@route("POST", r"/cart/remove")
def cart_remove(db, request: Request):
    pid = _product_id(db, request)
    db.write([("DELETE FROM cart_items WHERE user_id = ? AND product_id = ?", (DEFAULT_USER, pid))])
    return redirect("/cart", msg="removed")


def _checkout_form(db, request: Request, error: str | None = None, values: dict | None = None):
    lines = _lines(db)
    if not lines:
        return html(page("Checkout", el("p", "Your cart is empty, so there is nothing to check out."),
                         el("p", el("a", "Continue shopping", href="/"))))
    name, default_ship = db.one("SELECT full_name, default_shipping FROM users WHERE id = ?", (DEFAULT_USER,))
    values = values or {"name": name, "street": "", "city": "", "shipping": default_ship}
    summary = table("Order summary", ["Product", "Quantity", "Subtotal"],
                    [[n, q, money(u * q)] for _, n, u, q, _ in lines])
    subtotal = sum(u * q for _, _, u, q, _ in lines)
    fields = form("/checkout",
                  text_input("Full name", "name", values["name"], required=True),
                  text_input("Street address", "street", values["street"], required=True),
                  text_input("City", "city", values["city"], required=True),
                  select("Shipping method", "shipping", [(k, f"{t} - {money(c)}") for k, t, c in SHIPPING],
                         values["shipping"]),
                  button("Place order"), label="Shipping details")
    status = 400 if error else 200
    return html(page("Checkout", summary, el("p", f"Items subtotal: {money(subtotal)}"), el("h2", "Shipping details"),
                     fields, error=error), status)


@route("GET", r"/checkout")
def checkout(db, request: Request):
    return _checkout_form(db, request)


@route("POST", r"/checkout")
def place_order(db, request: Request):
    lines = _lines(db)
    if not lines:
        raise BadRequest("Your cart is empty, so there is nothing to check out")
    values = {k: " ".join(request.arg(k).split())[:200] for k in ("name", "street", "city")}
    values["shipping"] = request.arg("shipping")
    try:
        name = request.text("name", "Full name")
        street = request.text("street", "Street address")
        city = request.text("city", "City")
        ship = request.choice("shipping", "Shipping method", [k for k, _, _ in SHIPPING], "standard")
    except BadRequest as exc:
        return _checkout_form(db, request, str(exc), values)
    short = [n for _, n, _, q, stock in lines if q > stock]
    if short:
        return _checkout_form(db, request, f"Not enough stock for: {', '.join(short)}", values)
    ship_cents = {k: c for k, _, c in SHIPPING}[ship]
    total = sum(u * q for _, _, u, q, _ in lines) + ship_cents
    next_id = db.one("SELECT COALESCE(MAX(id), 0) + 1 FROM orders")[0]
    statements = [("INSERT INTO orders VALUES (?,?,?,?,?,?,?,?,?)",
                   (next_id, DEFAULT_USER, TODAY, "pending", name, f"{street}, {city}", ship, ship_cents, total))]
    for pid, _, unit, qty, _ in lines:
        statements.append(("INSERT INTO order_items VALUES (?,?,?,?)", (next_id, pid, qty, unit)))
        statements.append(("UPDATE products SET stock = stock - ? WHERE id = ?", (qty, pid)))
    statements.append(("DELETE FROM cart_items WHERE user_id = ?", (DEFAULT_USER,)))
    db.write(statements)
    return redirect(f"/orders/{next_id}", msg="placed")
