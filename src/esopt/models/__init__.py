"""Policy backends and model resolution."""
from .loading import load_model, resolve_model
from .policy import HFPolicy

__all__ = ["load_model", "resolve_model", "HFPolicy"]
