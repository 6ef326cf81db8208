"""The Python API (docs/api.md): esopt.fit and esopt.evaluate are the CLI's train and eval, with its checks."""
from __future__ import annotations

import pytest
from conftest import TINY_OVERRIDES

import esopt
from esopt.config import ConfigError


def test_fit_resume_and_evaluate(esopt_cache, tmp_path):
    over = [*TINY_OVERRIDES, "es.generations=1", f"run.out_dir={tmp_path}", "run.name=api"]
    summary = esopt.fit("configs/demo.yaml", over)
    assert summary["run_dir"] == str(tmp_path / "api") and summary["generations"] == 1
    again = esopt.fit(resume=tmp_path / "api", overrides=["es.generations=2"])
    assert again["generations"] == 2
    figures, episodes = esopt.evaluate(run=tmp_path / "api")
    assert figures["reward"] == again["final"]["reward"] and len(episodes) == figures["n"] == 3
    with pytest.raises(ConfigError, match="did you mean es.population"):
        esopt.fit("configs/demo.yaml", ["es.populaton=4", f"run.out_dir={tmp_path}"])
