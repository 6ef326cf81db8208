"""Policy backends and model resolution. Names load on first use: resolving a model name
(models/loading.py) imports neither torch nor transformers."""


def __getattr__(name):
    if name in ("load_model", "resolve_model"):
        from . import loading

        return getattr(loading, name)
    if name == "HFPolicy":
        from .policy import HFPolicy

        return HFPolicy
    raise AttributeError(f"module 'esopt.models' has no attribute {name!r}")


__all__ = ["load_model", "resolve_model", "HFPolicy"]
