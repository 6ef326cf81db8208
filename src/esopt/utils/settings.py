"""The ground floor of settings: the error a user can fix by changing a setting, and the strict
pydantic base of every config section (esopt.config's and each env's options)."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ConfigError(ValueError):
    """A setting that is wrong: the message names it and says what would be right."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)
