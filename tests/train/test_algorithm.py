"""The algorithm plug-ins: the registry, an entry point's plug-in, and what the harness asks of each."""
from __future__ import annotations

import pytest

from esopt.config import ConfigError
from esopt.train import algorithm as registry
from esopt.train.algorithm import ALGORITHMS, Algorithm, algorithm, of_run


def test_every_registered_algorithm_keeps_the_contract():
    for name in ALGORITHMS:
        algo = algorithm(name)
        assert isinstance(algo, Algorithm) and algo.name == name and algo.title
        assert type(algo).trainer is not Algorithm.trainer  # each builds its own trainer
    assert algorithm("es").on_ray and not algorithm("grpo").on_ray
    assert algorithm("es").frozen[:len(Algorithm.frozen)] == Algorithm.frozen and "es.population" in algorithm("es").frozen
    assert not algorithm("gepa").resumable


def test_unknown_algo_is_one_line_and_an_entry_point_adds_one(monkeypatch):
    with pytest.raises(ConfigError, match="unknown algo 'nope'; known: es, gepa, grpo"):
        algorithm("nope")

    class Mine(Algorithm):
        name, title = "mine", "Mine"

    class EntryPoint:
        name = "mine"

        def load(self):
            return Mine

    monkeypatch.setattr(registry, "entry_points", lambda group: [EntryPoint()] if group == "esopt.algos" else [])
    assert isinstance(algorithm("mine"), Mine)


def test_a_run_folder_is_claimed_by_the_algorithm_whose_record_it_holds(tmp_path):
    assert of_run(tmp_path) is None
    (tmp_path / "history.json").write_text("{}")
    assert of_run(tmp_path).name == "es"


def test_ray_refusal_names_the_baseline(tiny_cfg):
    with pytest.raises(ConfigError, match="the GRPO baseline runs in one process"):
        algorithm("grpo").check(tiny_cfg("algo=grpo"), on_ray=True)
    with pytest.raises(ConfigError, match="coevo.mode=both runs in one process"):
        algorithm("es").check(tiny_cfg('coevo.skills=[{name: A, text: a}]', "coevo.mode=both"), on_ray=True)


def test_a_config_of_defaults_says_what_it_will_run(tmp_path):
    from esopt.config import load_config
    from esopt.train.algorithm import algorithm
    from esopt.train.session import defaults_notice

    bare = tmp_path / "bare.yaml"
    bare.write_text("run:\n  seed: 3\n")
    line = defaults_notice(load_config(bare), algorithm("es"))
    assert line.startswith("[esopt] the config sets neither the model nor the es budget: it runs the defaults, "
                           "smollm2-135m-instruct, es.generations=12 (3072 training episodes), about 52 min on 2 CPU")
    assert defaults_notice(load_config(bare, ["model=tiny-llama"]), algorithm("es")) is None
    assert defaults_notice(load_config(bare, ["es.generations=2"]), algorithm("es")) is None
    assert defaults_notice(load_config("configs/demo.yaml"), algorithm("es")) is None
    grpo = defaults_notice(load_config(bare, ["algo=grpo"]), algorithm("grpo"))
    assert "grpo budget" in grpo and "grpo.steps=12 (3072 training episodes)" in grpo
