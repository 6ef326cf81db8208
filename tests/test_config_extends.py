"""`extends: FILE` in a config file: start from another config and set what the file gives over it
(sections merge key by key; a value or a list replaces), with one clear line for a missing base or a loop."""
from __future__ import annotations

import pytest
import yaml

from esopt.cli import main
from esopt.config import ConfigError, dump_config, load_config


def test_the_norms_preset_is_the_demo_with_the_norms_study_s_chosen_arm():
    """configs/demo-norms.yaml is exactly what the norms study ran as its norms arm (over configs/demo.yaml)."""
    arms = yaml.safe_load(open("configs/studies/norms-final-arms.yaml", encoding="utf-8"))
    assert dump_config(load_config("configs/demo-norms.yaml")) == dump_config(
        load_config("configs/demo.yaml", arms["norms-s0.011"]))


def test_sections_merge_key_by_key_and_lists_replace(tmp_path):
    (tmp_path / "base.yaml").write_text("model: tiny-llama\nes: {population: 4, generations: 3}\n"
                                        "agent: {examples: [{role: user, content: hi}], max_new_tokens: 9}\n")
    (tmp_path / "sub").mkdir()
    top = tmp_path / "sub" / "top.yaml"
    top.write_text("extends: ../base.yaml\nes: {population: 6}\nagent: {examples: []}\n")
    cfg = load_config(top, ["es.generations=5"])
    assert (cfg.model, cfg.es.population, cfg.es.generations) == ("tiny-llama", 6, 5)
    assert cfg.agent.examples == [] and cfg.agent.max_new_tokens == 9


def test_a_chain_of_bases_and_another_env_than_the_base_s(tmp_path):
    """Two levels deep; a file that names another env keeps none of the base's env options or prompt."""
    (tmp_path / "a.yaml").write_text("model: tiny-llama\nenv: {id: sudoku, max_turns: 3, size: 4}\n"
                                     "agent: {system_prompt: solve sudoku}\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\nes: {population: 4}\n")
    (tmp_path / "c.yaml").write_text("extends: b.yaml\nenv: {id: vowels}\n")
    cfg = load_config(tmp_path / "c.yaml")
    assert cfg.es.population == 4 and cfg.env.id == "vowels" and cfg.env.max_turns == 3
    assert "size" not in cfg.env.model_dump() and cfg.agent.system_prompt != "solve sudoku"


@pytest.mark.parametrize("text, said", [
    ("extends: nowhere.yaml\n", "extends nowhere.yaml, which is not a file"),
    ("extends: .\n", "extends ., which is not a file"),
    ("extends: c.yaml\n", "extends c.yaml, which is already in its chain (c.yaml): a config cannot extend itself"),
    ("extends: [a.yaml]\n", "extends must name one config file"),
])
def test_a_bad_base_is_one_line_before_anything_is_written(tmp_path, capsys, text, said):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="extends"):
        load_config(path)
    assert main(["train", str(path), f"run.out_dir={tmp_path / 'runs'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err
    assert not (tmp_path / "runs").exists()


def test_two_files_that_extend_each_other_are_refused(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(ConfigError, match=r"b.yaml extends a.yaml, which is already in its chain \(a.yaml -> b.yaml\)"):
        load_config(tmp_path / "a.yaml")
