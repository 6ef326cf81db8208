from pathlib import Path

from pydantic import BaseModel

from esopt.config import Config

ROOT = Path(__file__).resolve().parents[1]


def leaf_keys(cls, prefix=""):
    for name, field in cls.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel) and name not in ("sigma", "alpha"):
            yield from leaf_keys(ann, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}"


def test_config_reference_lists_every_key():
    text = (ROOT / "docs" / "config.md").read_text()
    missing = [k for k in leaf_keys(Config) if f"`{k}" not in text]
    assert not missing, f"docs/config.md lacks {missing}"


def test_shipped_configs_are_valid():
    from esopt.config import load_config

    from esopt.studies.adapt.grid import load_adapt, plan

    for path in (ROOT / "configs").glob("*.yaml"):
        if path.name.startswith("adapt-"):  # a run config plus an adapt: section: every sub-run's config
            plan(*load_adapt(path, []))
        elif path.name.startswith("ahd"):  # heuristic design (esopt adapt --env ahd-<problem>)
            from esopt.ahd.config import load_ahd_config

            load_ahd_config(path, [])
        else:
            load_config(path)


def test_envs_doc_shows_the_example_env_the_tests_train():
    """docs/envs.md's example is tests/envs/guess_env.py, character for character."""
    text = (ROOT / "docs" / "envs.md").read_text()
    block = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert block == (ROOT / "tests" / "envs" / "guess_env.py").read_text()
    from esopt.envs.spec import SEED_SPLITS

    assert f"{SEED_SPLITS['validation'][0]} + k" in text and f"{SEED_SPLITS['heldout'][0]} + k" in text
