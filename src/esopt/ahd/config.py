"""The config of `esopt adapt --env ahd-<problem>` (configs/ahd.yaml): model, ES settings,
search settings and the grid of methods x budgets x seeds."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from ..config import (ConfigError, ESConfig, RuntimeConfig, SamplingConfig, Strict, parse_override,
                      read_config_tree, set_dotted)
from ..es.build import play_mode

METHODS = ("eoh", "eoh+es", "sample", "sample+es")
DEFAULT_CONFIG = "configs/ahd.yaml"


class LimitsConfig(Strict):
    """Per-evaluation sandbox limits (esopt.sandbox.parent.Limits)."""
    cpu_s: float = Field(10.0, gt=0)
    wall_s: float = Field(20.0, gt=0)
    memory_mb: int = Field(1024, ge=64)
    file_mb: int = Field(1, ge=0)
    output_kb: int = Field(256, ge=1)
    result_mb: int = Field(8, ge=1)
    disk_mb: int = Field(16, ge=1)
    allow_weaker: bool = False  # run even where a promised protection is unavailable (docs/sandbox.md)


class SearchConfig(Strict):
    population: int = Field(4, ge=1)  # EoH population size
    validation: int = Field(8, ge=1)  # validation instances: every child is scored on them
    heldout: int = Field(16, ge=1)  # held-out instances: the final best heuristic only
    max_new_tokens: int = Field(384, ge=1)
    sampling: SamplingConfig = SamplingConfig(temperature=0.7, top_p=0.95)
    reward: Literal["absolute", "relative", "bounded"] = "absolute"
    invalid_reward: float = -1.0
    limits: LimitsConfig = LimitsConfig()


class GridConfig(Strict):
    budgets: list[int] = Field([20, 40], min_length=1)  # LLM calls per run
    seeds: list[int] = Field([0, 1, 2], min_length=1)
    methods: list[Literal["eoh", "eoh+es", "sample", "sample+es"]] = list(METHODS)
    out_dir: str = "runs"
    name: str | None = None  # default ahd-<problem>

    @field_validator("budgets", "seeds")
    @classmethod
    def _unique(cls, v):
        return sorted(set(v))

    @field_validator("methods")
    @classmethod
    def _order(cls, v):
        if not v:
            raise ValueError(f"give at least one of {', '.join(METHODS)}")
        return [m for m in METHODS if m in v]


class AHDConfig(Strict):
    model: str = "smollm2-135m-instruct"
    runtime: RuntimeConfig = RuntimeConfig()
    # es.population: proposals per operator batch (ES directions with +ES; the same batch size
    # without); es.generations and es.episodes_per_member are not used (the budget decides)
    es: ESConfig = ESConfig(population=4, sigma={"start": 1e-3, "end": 0.0, "schedule": "cosine"},
                            alpha={"start": 5e-4, "end": 5e-4, "schedule": "constant"})
    search: SearchConfig = SearchConfig()
    grid: GridConfig = GridConfig()

    @model_validator(mode="after")
    def _consistent(self):
        if play_mode(self.es) != "in_place":
            raise ValueError("es.noise=lowrank is not supported by the heuristic search (weights are perturbed in "
                             "place per member): use gaussian or table")
        if self.es.antithetic and self.es.population % 2:
            raise ValueError(f"es.population must be even with es.antithetic=true, got {self.es.population}")
        bad = [b for b in self.grid.budgets if b < self.es.population or b % self.es.population]
        if bad:
            raise ValueError(f"grid.budgets {bad} are not whole numbers of batches of es.population="
                             f"{self.es.population} LLM calls")
        return self


def problem_of(env: str) -> str:
    """'ahd-tsp' -> 'tsp'; anything else is refused in one line."""
    m = re.fullmatch(r"ahd-([A-Za-z0-9_]+)", env or "")
    if not m:
        raise ConfigError(f"--env {env!r} is not a heuristic-design problem: give ahd-<problem> "
                          "(ahd-tsp, ahd-knapsack, ahd-binpack)")
    return m.group(1)


def load_ahd_config(path: str | Path | None, overrides: list[str]) -> AHDConfig:
    tree = read_config_tree(path) if path is not None else {}
    for item in overrides:
        key, value = parse_override(item)
        set_dotted(tree, key, value)
    try:
        return AHDConfig.model_validate(tree)
    except ValidationError as err:
        e = err.errors()[0]
        key = ".".join(str(x) for x in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        where = f" in {path}" if path is not None else ""
        if e["type"] == "extra_forbidden":
            raise ConfigError(f"unknown key '{key}'{where}; the heuristic-design config has model, runtime, es, "
                              "search, grid") from None
        raise ConfigError(f"bad value for '{key}'{where}: {msg}" if key else f"{msg}{where}") from None
