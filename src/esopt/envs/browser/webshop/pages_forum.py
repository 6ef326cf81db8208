"""The community forum: boards, a board's threads (sortable), a thread, new threads and replies."""

from __future__ import annotations

from esopt.envs.browser.webshop.catalog import DEFAULT_USER
from esopt.envs.browser.webshop.database import TODAY
from esopt.envs.browser.webshop.html import button, el, form, page, select, table, text_input, textarea
from esopt.envs.browser.webshop.routing import NotFound, Request, html, redirect, route
from esopt.envs.browser.webshop.views import notice

THREAD_SORTS = {  # value -> (shown text, ORDER BY over the listing's columns)
    "activity": ("Latest activity", "last_post DESC, t.id DESC"),
    "replies": ("Most replies", "replies DESC, t.id DESC"),
    "newest": ("Newest first", "t.created DESC, t.id DESC"),
    "title": ("Title (A to Z)", "t.title"),
}


def _board(db, slug: str) -> tuple:
    row = db.one("SELECT id, slug, name, description FROM boards WHERE slug = ?", (slug,))
    if row is None:
        raise NotFound("There is no such board.")
    return row


@route("GET", r"/forum")
def forum(db, request: Request):
    rows = db.query("SELECT b.slug, b.name, b.description, COUNT(t.id) FROM boards b "
                    "LEFT JOIN threads t ON t.board_id = b.id GROUP BY b.id ORDER BY b.id")
    body = [[el("a", name, href=f"/forum/{slug}"), about, n] for slug, name, about, n in rows]
    return html(page("Forum", table("Boards", ["Board", "About", "Threads"], body)))


@route("GET", r"/forum/([a-z0-9-]{1,40})")
def board(db, request: Request, slug: str):
    bid, slug, name, about = _board(db, slug)
    sort = request.choice("sort", "Sort threads", list(THREAD_SORTS), "activity")
    rows = db.query("SELECT t.id, t.title, u.username, COUNT(p.id) - 1 AS replies, MAX(p.created) AS last_post "
                    "FROM threads t JOIN users u ON u.id = t.user_id JOIN posts p ON p.thread_id = t.id "
                    f"WHERE t.board_id = ? GROUP BY t.id ORDER BY {THREAD_SORTS[sort][1]}", (bid,))
    sorter = form(f"/forum/{slug}", select("Sort threads", "sort", [(k, v[0]) for k, v in THREAD_SORTS.items()], sort),
                  button("Sort"), method="get", label="Sort threads")
    body = [[el("a", title, href=f"/forum/thread/{tid}"), who, replies, last] for tid, title, who, replies, last in rows]
    return html(page(name, el("p", about), el("p", el("a", "New thread", href=f"/forum/{slug}/new")), sorter,
                     table("Threads", ["Thread", "Started by", "Replies", "Last post"], body),
                     el("p", el("a", "All boards", href="/forum"))))


def _thread_form(slug: str, name: str, error: str | None = None, title: str = "", message: str = ""):
    fields = form(f"/forum/{slug}/new", text_input("Title", "title", title, required=True),
                  textarea("Message", "body", message, required=True), button("Create thread"), label="New thread")
    return html(page(f"New thread in {name}", fields, error=error), 400 if error else 200)


@route("GET", r"/forum/([a-z0-9-]{1,40})/new")
def new_thread(db, request: Request, slug: str):
    _, slug, name, _ = _board(db, slug)
    return _thread_form(slug, name)


@route("POST", r"/forum/([a-z0-9-]{1,40})/new")
def create_thread(db, request: Request, slug: str):
    bid, slug, name, _ = _board(db, slug)
    title = " ".join(request.arg("title").split())
    body = request.arg("body").strip()
    if not title or not body or len(title) > 200 or len(body) > 4000:
        return _thread_form(slug, name, "A thread needs a title (at most 200 characters) and a message "
                                        "(at most 4000 characters).", title[:200], body[:4000])
    post = db.write([("INSERT INTO threads (board_id, user_id, title, created) VALUES (?,?,?,?)",
                      (bid, DEFAULT_USER, title, TODAY)),
                     ("INSERT INTO posts (thread_id, user_id, body, created) VALUES (last_insert_rowid(),?,?,?)",
                      (DEFAULT_USER, body, TODAY))])
    tid = db.one("SELECT thread_id FROM posts WHERE id = ?", (post,))[0]
    return redirect(f"/forum/thread/{tid}", msg="posted")


@route("GET", r"/forum/thread/(\d{1,9})")
def thread(db, request: Request, tid: str):
    row = db.one("SELECT t.id, t.title, b.slug, b.name FROM threads t JOIN boards b ON b.id = t.board_id "
                 "WHERE t.id = ?", (int(tid),))
    if row is None:
        raise NotFound("There is no such thread.")
    tid, title, slug, bname = row
    posts = db.query("SELECT u.username, p.created, p.body FROM posts p JOIN users u ON u.id = p.user_id "
                     "WHERE p.thread_id = ? ORDER BY p.id", (tid,))
    shown = [el("article", el("p", f"{who} wrote on {day}:", class_="byline"), el("p", body, class_="body"),
                class_="post") for who, day, body in posts]
    reply = form(f"/forum/thread/{tid}/reply", textarea("Your reply", "body", required=True), button("Post reply"),
                 label="Reply")
    return html(page(title, el("p", "Board: ", el("a", bname, href=f"/forum/{slug}")),
                     el("p", f"{len(posts) - 1} replies"), *shown, el("h2", "Reply to this thread"), reply,
                     notice=notice(request)))


@route("POST", r"/forum/thread/(\d{1,9})/reply")
def post_reply(db, request: Request, tid: str):
    if db.one("SELECT id FROM threads WHERE id = ?", (int(tid),)) is None:
        raise NotFound("There is no such thread.")
    body = request.text("body", "Your reply", limit=4000, multiline=True)
    db.write([("INSERT INTO posts (thread_id, user_id, body, created) VALUES (?,?,?,?)",
               (int(tid), DEFAULT_USER, body, TODAY))])
    return redirect(f"/forum/thread/{tid}", msg="posted")
