"""A local, offline web shop (catalogue, cart, checkout, orders, account, forum) with WebArena-format tasks.

``ShopSite`` serves the site; ``load_tasks`` reads the shipped tasks; ``evaluate``
scores them. The BrowserGym side (``WebShopTask``, ``register_webshop_tasks``,
``make_env``) needs browsergym and playwright and is imported on first use.
See docs/webshop.md.
"""

from esopt.envs.browser.webshop.evaluate import evaluate
from esopt.envs.browser.webshop.server import ShopSite
from esopt.envs.browser.webshop.taskset import SPLITS, get_task, load_tasks

_LAZY = {"WebShopTask", "register_webshop_tasks", "make_env"}

__all__ = ["ShopSite", "SPLITS", "evaluate", "get_task", "load_tasks", "task_split", *sorted(_LAZY)]


def task_split(task_id: str) -> str:
    """The split of BrowserGym task ``esopt-webshop.<n>`` (env.id=browsergym keeps each task in its split)."""
    return get_task(int(task_id.split(".", 1)[1]))["split"]


def __getattr__(name: str):
    if name in _LAZY:
        from esopt.envs.browser.webshop import task

        return getattr(task, name)
    raise AttributeError(f"module 'esopt.envs.browser.webshop' has no attribute {name!r}")
