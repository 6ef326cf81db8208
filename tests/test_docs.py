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


def _heading_slug(text):
    """GitHub's anchor for a heading: link text kept, lower case, punctuation but - and _ dropped,
    spaces to hyphens."""
    import re

    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text.strip())
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def _markdown_outside_code(text):
    """The lines of a markdown file outside fenced code blocks."""
    fence = None
    for line in text.split("\n"):
        stripped = line.lstrip()
        if fence is None and stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            continue
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            continue
        yield line


def _anchors(path):
    import re

    seen, anchors = {}, set()
    for line in _markdown_outside_code(path.read_text()):
        m = re.match(r" {0,3}#{1,6} +(.*?)\s*#*\s*$", line)
        if m:
            base = _heading_slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            anchors.add(base if n == 0 else f"{base}-{n}")
    return anchors


def test_relative_links_in_the_docs_resolve():
    """Every relative link in README.md and docs/**/*.md names a file that exists, and its #anchor a
    heading of that file (GitHub's slug rule)."""
    import re

    link = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for path in files:
        text = re.sub(r"`[^`\n]*`", "", "\n".join(_markdown_outside_code(path.read_text())))
        for target in link.findall(text):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(ROOT)}: {target}"
            if not dest.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{where} (no heading with that anchor)")
    assert not broken, "\n".join(broken)


def test_results_page_is_an_index():
    """docs/results.md stays one screen: the figures live in docs/results/*.md."""
    lines = (ROOT / "docs" / "results.md").read_text().splitlines()
    assert len(lines) <= 150, f"docs/results.md has {len(lines)} lines"
