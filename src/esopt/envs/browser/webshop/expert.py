"""A scripted expert for every task kind: it proves each task solvable and its reference right.

The expert acts only through BrowserGym's high-level action strings, each one
checked by esopt's own action parser (:func:`esopt.envs.browser.actions.parse_action`)
as an LLM agent's would be. It picks element ids by role and accessible name
from the observation (:mod:`observe`) and reads answers off the page (table
cells, lines of text), never from the task's reference answers.

    python -m esopt.envs.browser.webshop.expert                       # every task; one line per task, RESULT lines
    python -m esopt.envs.browser.webshop.expert 3 17 42               # some tasks
    python -m esopt.envs.browser.webshop.expert --json expert.json    # also every run (steps, seconds, actions)

A plan is a generator: it yields an action, receives the next observation,
and so on; it may stop early when the environment ends the episode.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass

from esopt.envs.browser.actions import ParseError, parse_action
from esopt.envs.browser.webshop.observe import find_bid, options, page_text, table_rows

Plan = Generator[str, dict, None]
PLANS: dict[str, Callable[[dict, dict], Plan]] = {}


def _act(text: str) -> str:
    parsed = parse_action(text)
    if isinstance(parsed, ParseError):
        raise ValueError(f"the expert wrote an action esopt refuses: {text!r}: {parsed}")
    return parsed.to_browsergym()


def click(obs: dict, role: str, name: str) -> str:
    return _act(f"click({find_bid(obs, role, name)!r})")


def fill(obs: dict, role: str, name: str, value: str) -> str:
    return _act(f"fill({find_bid(obs, role, name)!r}, {value!r})")


def choose(obs: dict, combobox: str, starts: str) -> str:
    """select_option on the combobox, picking the option whose text starts with ``starts``."""
    label = next((o for o in options(obs, combobox) if o.startswith(starts)), None)
    if label is None:
        raise LookupError(f"combobox {combobox!r} has no option starting with {starts!r}: {options(obs, combobox)}")
    return _act(f"select_option({find_bid(obs, 'combobox', combobox)!r}, {label!r})")


def say(text: str) -> str:
    return _act(f"send_msg_to_user({text!r})")


def read(obs: dict, pattern: str) -> re.Match:
    """The first match of ``pattern`` in the page's text (LookupError when there is none)."""
    match = re.search(pattern, page_text(obs))
    if match is None:
        raise LookupError(f"{pattern!r} not found on {obs.get('url')}")
    return match


def plan(kind: str):
    def deco(fn):
        PLANS[kind] = fn
        return fn

    return deco


def _open_product(obs: dict, product: str) -> Plan:
    """Search for the product by name and open its page (3 steps); returns the last observation."""
    obs = yield fill(obs, "searchbox", "Search products", product)
    obs = yield click(obs, "button", "Search")
    obs = yield click(obs, "link", product)
    return obs


@plan("cheapest_in_category")
def _cheapest(inst: dict, obs: dict) -> Plan:
    obs = yield click(obs, "link", "Categories")
    obs = yield click(obs, "link", inst["category"])
    obs = yield choose(obs, "Sort by", "Price: low to high")
    obs = yield click(obs, "button", "Apply")
    yield say(table_rows(obs, f"{inst['category']} products")[0][0])


@plan("count_under_price")
def _count(inst: dict, obs: dict) -> Plan:
    obs = yield click(obs, "link", "Categories")
    obs = yield click(obs, "link", inst["category"])
    obs = yield fill(obs, "spinbutton", "Max price ($)", str(inst["price"]))
    obs = yield click(obs, "button", "Apply")
    yield say(read(obs, r"(\d+) products? found").group(1))


@plan("lowest_review_author")
def _lowest_review(inst: dict, obs: dict) -> Plan:
    obs = yield from _open_product(obs, inst["product"])
    obs = yield choose(obs, "Sort reviews", "Lowest rating first")
    obs = yield click(obs, "button", "Sort reviews")
    yield say(read(obs, r"Rated \d out of 5 by (.+?) on \d{4}-").group(1))


@plan("order_info")
def _order_info(inst: dict, obs: dict) -> Plan:
    obs = yield click(obs, "link", "Order history")
    obs = yield choose(obs, "Status", inst["status"].capitalize())
    obs = yield click(obs, "button", "Filter")
    rows = table_rows(obs, "Orders")  # newest first
    row = rows[0] if inst["which"] == "most recent" else rows[-1]
    obs = yield click(obs, "link", row[0])
    shipping = read(obs, r"Shipping: (.+?) - \$").group(1)
    total = read(obs, r"Total: (\$[\d.]+)").group(1)
    yield say(f"{shipping} shipping, total {total}")


@plan("forum_thread_pick")
def _thread_pick(inst: dict, obs: dict) -> Plan:
    obs = yield click(obs, "link", "Forum")
    obs = yield click(obs, "link", inst["board"])
    sort = "Most replies" if "replies" in inst["question"] else "Newest first"
    obs = yield choose(obs, "Sort threads", sort)
    obs = yield click(obs, "button", "Sort")
    yield say(table_rows(obs, "Threads")[0][0])


@plan("add_to_cart")
def _add_to_cart(inst: dict, obs: dict) -> Plan:
    obs = yield from _open_product(obs, inst["product"])
    obs = yield fill(obs, "spinbutton", "Quantity", str(inst["quantity"]))
    yield click(obs, "button", "Add to cart")


@plan("checkout")
def _checkout(inst: dict, obs: dict) -> Plan:
    obs = yield from _open_product(obs, inst["product"])
    obs = yield click(obs, "button", "Add to cart")
    obs = yield click(obs, "link", "Proceed to checkout")
    obs = yield fill(obs, "textbox", "Full name", inst["name"])
    obs = yield fill(obs, "textbox", "Street address", inst["street"])
    obs = yield fill(obs, "textbox", "City", inst["city"])
    obs = yield choose(obs, "Shipping method", inst["shipping"])
    yield click(obs, "button", "Place order")


@plan("account_settings")
def _account(inst: dict, obs: dict) -> Plan:
    obs = yield click(obs, "link", "My account")
    obs = yield fill(obs, "textbox", "Email", inst["email"])
    obs = yield fill(obs, "textbox", "Phone", inst["phone"])
    obs = yield choose(obs, "Default shipping", inst["shipping"])
    yield click(obs, "button", "Save settings")


@plan("forum_new_thread")
def _new_thread(inst: dict, obs: dict) -> Plan:
    obs = yield click(obs, "link", "Forum")
    obs = yield click(obs, "link", inst["board"])
    obs = yield click(obs, "link", "New thread")
    obs = yield fill(obs, "textbox", "Title", inst["title"])
    obs = yield fill(obs, "textbox", "Message", inst["message"])
    yield click(obs, "button", "Create thread")


@plan("forum_reply")
def _reply(inst: dict, obs: dict) -> Plan:
    obs = yield click(obs, "link", "Forum")
    obs = yield click(obs, "link", inst["board"])
    obs = yield click(obs, "link", inst["title"])
    obs = yield fill(obs, "textbox", "Your reply", inst["message"])
    yield click(obs, "button", "Post reply")


@plan("write_review")
def _review(inst: dict, obs: dict) -> Plan:
    obs = yield from _open_product(obs, inst["product"])
    obs = yield choose(obs, "Rating", f"{inst['rating']} star")
    obs = yield fill(obs, "textbox", "Review title", inst["title"])
    obs = yield fill(obs, "textbox", "Review", inst["body"])
    yield click(obs, "button", "Submit review")


@plan("cancel_order")
def _cancel(inst: dict, obs: dict) -> Plan:
    obs = yield click(obs, "link", "Order history")
    obs = yield choose(obs, "Status", "Pending")
    obs = yield click(obs, "button", "Filter")
    for order in [row[0] for row in table_rows(obs, "Orders")]:
        obs = yield click(obs, "link", order)
        if any(row[0] == inst["product"] for row in table_rows(obs, "Items")):
            obs = yield click(obs, "link", "Cancel order")
            yield click(obs, "button", "Yes, cancel order")
            return
        obs = yield _act("go_back()")
    raise LookupError(f"no pending order holds {inst['product']!r}")


@plan("filtered_listing")
def _listing(inst: dict, obs: dict) -> Plan:
    obs = yield click(obs, "link", "Categories")
    obs = yield click(obs, "link", inst["category"])
    sort = {"price from low to high": "Price: low to high", "price from high to low": "Price: high to low",
            "best rating first": "Best rated"}[inst["sort"]]
    obs = yield choose(obs, "Sort by", sort)
    if "in stock" in inst["filters"]:
        obs = yield click(obs, "checkbox", "In stock only")
    price = re.search(r"at most \$(\d+)", inst["filters"])
    if price:
        obs = yield fill(obs, "spinbutton", "Max price ($)", price.group(1))
    yield click(obs, "button", "Apply")


MAX_RETRIES = 3  # per episode: BrowserGym gives each click/fill 500 ms, which a loaded machine can miss


@dataclass
class ExpertRun:
    """One expert episode: reward, whether the env ended it, steps taken (retries included), seconds, errors."""

    task_id: int
    reward: float
    done: bool
    steps: int
    seconds: float
    actions: list[str]
    retries: int = 0
    error: str = ""


def run_expert(env, task: dict, seed: int = 0) -> ExpertRun:
    """Play ``task`` in the gym ``env`` (made for that task) with the scripted plan of its kind.

    An action that times out (BrowserGym's 500 ms per element action) without
    the page having moved is sent again, up to :data:`MAX_RETRIES` times per
    episode; a retry counts as a step. A timeout after which the URL changed
    took effect (the click started a navigation) and the plan goes on.
    """
    start = time.perf_counter()
    actions: list[str] = []
    reward, done, error, retries = 0.0, False, "", 0
    try:
        obs, _ = env.reset(seed=seed)
        steps = PLANS[task["kind"]](task["instantiation_dict"], obs)
        action = next(steps)
        while True:
            before = obs["url"]
            actions.append(action)
            obs, reward, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
            failed = obs["last_action_error"]
            if done:
                break
            if failed and failed.startswith("TimeoutError") and obs["url"] == before and retries < MAX_RETRIES:
                retries += 1
                continue
            if failed and not (failed.startswith("TimeoutError") and obs["url"] != before):
                raise RuntimeError(f"step {len(actions)} {action}: {failed}")
            try:
                action = steps.send(obs)
            except StopIteration:
                break
    except Exception as exc:  # noqa: BLE001 - reported per task, the sweep goes on
        error = f"{type(exc).__name__}: {exc}"
    return ExpertRun(task["task_id"], float(reward), bool(done), len(actions), time.perf_counter() - start, actions,
                     retries, error)


def main(argv: list[str] | None = None) -> int:
    """Run the expert on all tasks (or the ids given); ``--json PATH`` also writes every run to PATH."""
    import json
    import platform
    import statistics

    from esopt.envs.browser.webshop.task import make_env
    from esopt.envs.browser.webshop.taskset import get_task, load_tasks

    argv = list(sys.argv[1:] if argv is None else argv)
    out = None
    if "--json" in argv:
        at = argv.index("--json")
        out = argv[at + 1]
        del argv[at:at + 2]
    tasks = [get_task(int(a)) for a in argv] if argv else load_tasks()
    runs = []
    for task in tasks:
        env = make_env(task["task_id"])
        try:
            run = run_expert(env, task)
        finally:
            env.close()
        runs.append(run)
        print(f"task {run.task_id:3d} {task['kind']:22s} reward={run.reward:.0f} done={run.done} steps={run.steps:2d} "
              f"retries={run.retries} {run.seconds:5.1f}s {run.error}", flush=True)
    solved = sum(r.reward == 1.0 and r.done for r in runs)
    steps = [r.steps for r in runs]
    secs = [r.seconds for r in runs]
    if out:
        record = {"machine": platform.node(), "cpus": __import__("os").cpu_count(),
                  "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "solved": solved, "tasks": len(runs),
                  "runs": [{**r.__dict__, "kind": t["kind"]} for r, t in zip(runs, tasks)]}
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(record, fh, indent=1)
    print(f"RESULT expert_solved={solved}/{len(runs)}")
    print(f"RESULT expert_steps_min_median_max={min(steps)}/{statistics.median(steps):g}/{max(steps)}")
    print(f"RESULT expert_seconds_per_task_median={statistics.median(secs):.1f}")
    print(f"RESULT expert_retries={sum(r.retries for r in runs)}")
    print(f"RESULT expert_seconds_total={sum(secs):.0f}")
    return 0 if solved == len(runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
