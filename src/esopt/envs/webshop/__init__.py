"""A local, offline web shop (catalogue, cart, checkout, orders, account, forum) with WebArena-format tasks."""

from esopt.envs.webshop.server import ShopSite

__all__ = ["ShopSite"]
