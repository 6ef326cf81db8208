"""The shop's world, generated from a seed: categories, products, users, reviews, orders, forum.

:func:`populate` fills an empty database (schema from :mod:`database`) and is a
pure function of the seed: each table draws from its own ``random.Random``
seeded with ``f"{seed}:{table}"`` (string seeds hash the same in every
process). Seed 0 is the world the shipped tasks were written against.
"""

from __future__ import annotations

import datetime
import random
import sqlite3

CATEGORIES = [
    ("electronics", "Electronics", ["Headphones", "Speaker", "Charger", "Keyboard", "Mouse", "Webcam", "Monitor",
                                     "Router", "Power Bank", "Earbuds"]),
    ("kitchen", "Kitchen", ["Kettle", "Frying Pan", "Knife Set", "Blender", "Toaster", "Cutting Board", "Teapot",
                            "Coffee Grinder", "Saucepan", "Mixing Bowl"]),
    ("books", "Books", ["Atlas", "Cookbook", "Novel", "Field Guide", "Poetry Collection", "Travel Guide",
                        "Biography", "Puzzle Book", "Sketchbook", "Almanac"]),
    ("garden", "Garden", ["Watering Can", "Hose", "Pruner", "Planter", "Rake", "Seed Kit", "Bird Feeder",
                          "Garden Gloves", "Trowel", "Lantern"]),
    ("toys", "Toys", ["Puzzle", "Kite", "Building Set", "Plush Bear", "Yo-Yo", "Board Game", "Train Set",
                      "Marble Run", "Jump Rope", "Spinning Top"]),
    ("sports", "Sports", ["Yoga Mat", "Water Bottle", "Dumbbell", "Tennis Racket", "Backpack", "Bike Light",
                          "Running Belt", "Jump Box", "Swim Goggles", "Foam Roller"]),
    ("office", "Office", ["Notebook", "Desk Lamp", "Stapler", "Pen Set", "Desk Organizer", "Whiteboard",
                          "Paper Tray", "Label Maker", "File Box", "Monitor Stand"]),
    ("beauty", "Beauty", ["Hand Cream", "Shampoo", "Face Mask", "Lip Balm", "Hair Brush", "Body Lotion",
                          "Soap Bar", "Nail Kit", "Sunscreen", "Bath Salts"]),
]
BRANDS = ["Aurora", "Nimbus", "Vertex", "Pulse", "Cedar", "Lumen", "Orbit", "Maple", "Quartz", "Harbor",
          "Summit", "Willow", "Ember", "Coral", "Falcon", "Juniper"]
VARIANTS = ["", "Mini", "Pro", "Lite", "Max", "Plus", "XL", "Classic"]
COLOURS = ["black", "white", "blue", "green", "red", "grey", "oak", "sand"]

FIRST = ["Alex", "Sam", "Jordan", "Taylor", "Robin", "Casey", "Morgan", "Jamie", "Riley", "Quinn", "Avery",
         "Drew", "Hayden", "Kai", "Noor", "Priya", "Mateo", "Lena", "Omar", "Ines", "Tomas", "Yuki", "Elif", "Nia"]
LAST = ["Lee", "Patel", "Garcia", "Novak", "Okafor", "Silva", "Berg", "Kim", "Rossi", "Haddad", "Walsh",
        "Moreau", "Tanaka", "Costa", "Fischer", "Ivanova"]

REVIEW_TITLES = {
    1: ["Broke in a week", "Not as described", "Would not buy again"],
    2: ["Disappointing", "Below average", "Meh at best"],
    3: ["Does the job", "Okay for the price", "Mixed feelings"],
    4: ["Very good", "Solid choice", "Happy with it"],
    5: ["Excellent", "Love it", "Best purchase this year"],
}
REVIEW_BODIES = [
    "I have used the {name} for {n} weeks now.",
    "Bought the {name} as a gift.",
    "The {colour} finish of the {name} looks nice.",
    "Delivery was quick and the {name} arrived well packed.",
    "Compared with my old one, the {name} is {verdict}.",
]
VERDICTS = {1: "much worse", 2: "a bit worse", 3: "about the same", 4: "better", 5: "far better"}

SHIPPING = [("standard", "Standard (3-5 days)", 500), ("express", "Express (1 day)", 1500),
            ("pickup", "Store pickup", 0)]
ORDER_STATUSES = ["pending", "shipped", "delivered", "cancelled"]

BOARDS = [
    ("help", "Product help", "Questions about products you own"),
    ("deals", "Deals and offers", "Share bargains and coupons"),
    ("feedback", "Site feedback", "Tell us what to improve"),
    ("lounge", "Lounge", "Anything else"),
]
THREAD_TITLES = {
    "help": ["Is the {p} worth it?", "{p} stopped working", "How do I clean the {p}?", "{p} vs {q}?",
             "Spare parts for the {p}", "Best settings for the {p}", "Warranty on the {p}"],
    "deals": ["{p} on sale this week", "Bundle deal: {p} and {q}", "Coupon for the {p}", "Price drop on the {p}",
              "Clearance: {p}", "Is {q} cheaper elsewhere?"],
    "feedback": ["Search misses the {p}", "Checkout page idea", "Dark mode please", "Order history filter",
                 "Faster delivery options", "Wishlist feature", "Review sorting is great"],
    "lounge": ["What are you reading?", "Favourite garden tools", "Weekend plans", "Show your desk setup",
               "Recipe swap", "Cycling routes nearby", "Board game night"],
}
REPLIES = ["Thanks, that helped.", "Same here, no issues so far.", "I would recommend the {q} instead.",
           "Mine arrived yesterday.", "Try contacting support.", "Agreed with the above.",
           "Has anyone tried the {q}?", "Following this thread.", "Great tip!", "Not for me, sadly."]

DEFAULT_USER = 1  # the logged-in shopper


def _rng(seed: int, part: str) -> random.Random:
    return random.Random(f"{seed}:{part}")


def _day(offset: int) -> str:
    """The ISO date ``offset`` days after 2025-01-05."""
    return (datetime.date(2025, 1, 5) + datetime.timedelta(days=offset)).isoformat()


def populate(conn: sqlite3.Connection, seed: int) -> None:
    """Fill an empty shop database with the world of ``seed``."""
    users = _users(conn, seed)
    products = _products(conn, seed)
    _reviews(conn, seed, products, users)
    _orders(conn, seed, products)
    _cart(conn, seed, products)
    _forum(conn, seed, products, users)


def _users(conn, seed) -> list[int]:
    rng = _rng(seed, "users")
    names = [f"{f} {l}" for f in FIRST for l in LAST]
    rng.shuffle(names)
    rows = []
    for uid, full in enumerate(names[:30], start=1):
        first, last = full.split()
        username = f"{first.lower()}{last[0].lower()}{rng.randrange(10, 99)}"
        rows.append((uid, username, full, f"{first.lower()}.{last.lower()}@example.test",
                     f"555-{rng.randrange(1000, 9999)}", rng.choice(SHIPPING)[0], rng.randrange(2)))
    conn.executemany("INSERT INTO users VALUES (?,?,?,?,?,?,?)", rows)
    return [r[0] for r in rows]


def _products(conn, seed) -> list[tuple[int, str, int]]:
    rng = _rng(seed, "products")
    conn.executemany("INSERT INTO categories VALUES (?,?,?)",
                     [(i, slug, name) for i, (slug, name, _) in enumerate(CATEGORIES, start=1)])
    out, seen, pid = [], set(), 0
    for cid, (_, _, nouns) in enumerate(CATEGORIES, start=1):
        for _ in range(16):
            while True:
                name = " ".join(w for w in (rng.choice(BRANDS), rng.choice(nouns), rng.choice(VARIANTS)) if w)
                if name not in seen:
                    break
            seen.add(name)
            pid += 1
            price = rng.randrange(300, 25000, 5) if rng.random() < 0.8 else rng.randrange(25000, 60000, 100)
            stock = 0 if rng.random() < 0.15 else rng.randrange(1, 80)
            colour = rng.choice(COLOURS)
            desc = f"The {name} comes in {colour}. Model year {rng.randrange(2019, 2026)}."
            sku = f"HG-{cid:02d}{pid:04d}"
            conn.execute("INSERT INTO products VALUES (?,?,?,?,?,?,?)", (pid, sku, name, cid, price, stock, desc))
            out.append((pid, name, price))
    return out


def _reviews(conn, seed, products, users) -> None:
    rng = _rng(seed, "reviews")
    rid = 0
    for pid, name, _ in products:
        authors = rng.sample(users[1:], rng.randrange(0, 7))
        for uid in authors:
            rid += 1
            rating = rng.choice([1, 2, 3, 3, 4, 4, 4, 5, 5, 5])
            body = rng.choice(REVIEW_BODIES).format(name=name, n=rng.randrange(2, 30), colour=rng.choice(COLOURS),
                                                    verdict=VERDICTS[rating])
            conn.execute("INSERT INTO reviews VALUES (?,?,?,?,?,?,?)",
                         (rid, pid, uid, rating, rng.choice(REVIEW_TITLES[rating]), body, _day(rng.randrange(400))))


def _orders(conn, seed, products) -> None:
    rng = _rng(seed, "orders")
    user = conn.execute("SELECT full_name FROM users WHERE id=?", (DEFAULT_USER,)).fetchone()[0]
    streets = ["12 Elm Street", "4 Harbour Road", "77 Mill Lane", "9 Station Square"]
    recent = ["shipped"] * 3 + ["cancelled"] * 2 + ["pending"] * 3 + ["delivered"] * 2
    rng.shuffle(recent)
    statuses = ["delivered"] * 10 + recent  # older orders have all arrived
    day = 0
    for oid, status in enumerate(statuses, start=1):
        day += rng.randrange(6, 25)
        ship = rng.choice(SHIPPING)
        items = rng.sample(products, rng.randrange(1, 4))
        lines = [(oid, pid, rng.randrange(1, 4), price) for pid, _, price in items]
        total = sum(q * c for _, _, q, c in lines) + ship[2]
        conn.execute("INSERT INTO orders VALUES (?,?,?,?,?,?,?,?,?)",
                     (oid, DEFAULT_USER, _day(day), status, user, rng.choice(streets) + ", Portville", ship[0],
                      ship[2], total))
        conn.executemany("INSERT INTO order_items VALUES (?,?,?,?)", lines)


def _cart(conn, seed, products) -> None:
    rng = _rng(seed, "cart")
    for pid, _, _ in rng.sample(products, 2):
        conn.execute("INSERT INTO cart_items VALUES (?,?,?)", (DEFAULT_USER, pid, rng.randrange(1, 3)))


def _forum(conn, seed, products, users) -> None:
    rng = _rng(seed, "forum")
    names = [name for _, name, _ in products]
    tid = post = 0
    seen = set()
    for bid, (slug, bname, about) in enumerate(BOARDS, start=1):
        conn.execute("INSERT INTO boards VALUES (?,?,?,?)", (bid, slug, bname, about))
        for template in THREAD_TITLES[slug]:
            title = template.format(p=rng.choice(names), q=rng.choice(names))
            if title in seen:
                continue
            seen.add(title)
            tid += 1
            day = rng.randrange(300, 420)
            conn.execute("INSERT INTO threads VALUES (?,?,?,?,?)", (tid, bid, rng.choice(users[1:]), title, _day(day)))
            for k in range(rng.randrange(1, 9)):  # the opening post, then replies
                post += 1
                if k == 0:
                    body = f"{title} Any thoughts?"
                else:
                    body = rng.choice(REPLIES).format(q=rng.choice(names))
                    day += rng.randrange(0, 4)
                conn.execute("INSERT INTO posts VALUES (?,?,?,?,?)",
                             (post, tid, rng.choice(users[1:]), body, _day(day)))
