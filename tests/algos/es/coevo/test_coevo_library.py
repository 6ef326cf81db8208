import json

import pytest

from esopt.config import ConfigError, build_config, load_config
from esopt.algos.es.coevo.library import load_library, parse_skill_md


def coevo_cfg(**coevo):
    return build_config({"coevo": {"mode": "context", **coevo}}).coevo


def test_mode_context_needs_a_library():
    with pytest.raises(ConfigError, match="coevo.mode=context needs a skill library"):
        load_config(None, ["coevo.mode=context"])
    with pytest.raises(ConfigError, match="needs algo=es"):
        load_config(None, ["coevo.mode=both", "algo=grpo", "coevo.skills=[{name: a, text: b}]",
                           "grpo.temperature=1.0"])
    assert load_config(None, []).coevo.mode == "weights"


def test_inline_library_keeps_order_and_kinds():
    lib = load_library(coevo_cfg(skills=[{"name": "B", "text": " b "}, {"name": "A", "text": "a"}],
                                 slots={"system_prompt": ["p1", "p2"], "strategy": ["", "x"],
                                        "examples": [[], [{"role": "user", "content": "u"}]]}))
    assert [s.name for s in lib.skills] == ["B", "A"] and lib.skills[0].text == "b"
    assert [(s.name, s.kind) for s in lib.slots] == [("system_prompt", "system_prompt"), ("strategy", "section"),
                                                      ("examples", "examples")]
    assert lib.slots[2].alternatives[1] == ({"role": "user", "content": "u"},)
    other = load_library(coevo_cfg(skills=[{"name": "B", "text": "b"}, {"name": "A", "text": "a!"}],
                                   slots={"system_prompt": ["p1", "p2"], "strategy": ["", "x"],
                                          "examples": [[], [{"role": "user", "content": "u"}]]}))
    assert other.digest != lib.digest  # one character of one skill changes the hash


@pytest.mark.parametrize("coevo, message", [
    ({"skills": [{"name": "a", "text": "x"}, {"name": "a", "text": "y"}]}, "'a' is used twice"),
    ({"skills": [{"name": "a", "text": "x"}], "slots": {"a": ["p", "q"]}}, "'a' is used twice"),
    ({"skills": [{"name": "a", "text": "  "}]}, "skill 'a' has empty text"),
    ({"slots": {"strategy": []}}, "slot 'strategy' needs a non-empty list"),
    ({"slots": {"strategy": ["x", "x "]}}, "slot 'strategy' lists the same alternative twice"),
    ({"slots": {"strategy": [[{"role": "user", "content": "u"}]]}}, "alternatives must be strings"),
    ({"slots": {"examples": [[{"role": "robot", "content": "u"}]]}}, "slot 'examples' has a message"),
    ({"slots": {"examples": ["just text"]}}, "must be a list of"),
])
def test_library_errors_name_the_problem(coevo, message):
    with pytest.raises(ConfigError, match=message):
        load_library(coevo_cfg(**coevo))


def test_skill_md_sections_become_skills(tmp_path):
    md = tmp_path / "SKILL.md"
    md.write_text("---\nname: sudoku\ndescription: d\n---\n# Sudoku\nintro, not a skill\n\n## Rules\nrow, col, box\n"
                  "### detail\nkept in Rules\n\n## Example\n```\n## not a heading\n```\nafter\n")
    lib = load_library(coevo_cfg(skills=[{"name": "inline", "text": "i"}], library=str(md)))
    assert [s.name for s in lib.skills] == ["inline", "Rules", "Example"]
    assert lib.skills[1].text == "row, col, box\n### detail\nkept in Rules"
    assert lib.skills[2].text == "```\n## not a heading\n```\nafter"
    with pytest.raises(ConfigError, match="no '## ' sections"):
        parse_skill_md("# only a title\ntext", "x.md")
    dup = tmp_path / "dup.md"
    dup.write_text("## inline\nclash\n")
    with pytest.raises(ConfigError, match="'inline' is used twice"):
        load_library(coevo_cfg(skills=[{"name": "inline", "text": "i"}], library=str(dup)))


def test_yaml_library_file(tmp_path):
    f = tmp_path / "lib.yaml"
    f.write_text(json.dumps({"skills": [{"name": "s", "text": "t"}], "slots": {"tone": ["a", "b"]}}))
    lib = load_library(coevo_cfg(library=str(f)))
    assert [s.name for s in lib.skills] == ["s"] and lib.slots[0].alternatives == ("a", "b")
    f.write_text("skills: []\nslot: {}\n")
    with pytest.raises(ConfigError, match="unknown key.*slot"):
        load_library(coevo_cfg(library=str(f)))
    with pytest.raises(ConfigError, match="does not exist"):
        load_library(coevo_cfg(library=str(tmp_path / "missing.yaml")))


def test_shipped_coevo_demo_library_loads():
    from pathlib import Path

    cfg = load_config(Path(__file__).resolve().parents[4] / "configs" / "coevo-demo.yaml")
    lib = load_library(cfg.coevo)
    assert cfg.coevo.mode == "both" and len(lib.skills) >= 3
    slots = {s.name: s for s in lib.slots}
    assert slots["system_prompt"].alternatives[0] == cfg.agent.system_prompt
    assert list(slots["examples"].alternatives[0]) == cfg.agent.examples and slots["examples"].alternatives[1] == ()


BAD_COEVO = {
    "no-library": (["coevo.mode=both"], "coevo.mode=both needs a skill library"),
    "missing-file": (["coevo.mode=context", "coevo.library=nowhere/SKILL.md"], "coevo.library: nowhere/SKILL.md does not exist"),
    "duplicate": (["coevo.mode=both", "coevo.skills=[{name: a, text: x}, {name: a, text: y}]"], "'a' is used twice"),
    "unknown-init": (["coevo.mode=both", "coevo.skills=[{name: a, text: x}]", "coevo.init_logits={b: 1.0}"],
                     "coevo.init_logits names 'b'"),
    "bad-mode": (["coevo.mode=prompts"], "coevo.mode"),
}


@pytest.mark.parametrize("case", list(BAD_COEVO))
def test_bad_coevo_config_is_one_line_before_any_folder(esopt_cache, tmp_path, capsys, case):
    from conftest import TINY_OVERRIDES

    from esopt.cli import main

    extra, message = BAD_COEVO[case]
    out = tmp_path / "runs"
    assert main(["train", "configs/demo.yaml", *TINY_OVERRIDES, f"run.out_dir={out}", "run.name=x", *extra]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "esopt: error:" in line]
    assert "Traceback" not in err and len(lines) == 1 and message in lines[0], err[-2000:]
    assert not (out / "x").exists()
