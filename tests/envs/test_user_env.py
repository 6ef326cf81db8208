"""An env of one's own (tests/envs/guess_env.py, the example of docs/envs.md), with no edit to esopt:
trained, evaluated, resumed, exported and reported through the CLI; its options checked; the turn
limit and a raising env handled by the rollout."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import TINY_OVERRIDES

from esopt.agent.rollout import RolloutSettings, rollout
from esopt.cli import main
from esopt.config import ConfigError, load_config
from esopt.envs import TextEnv
from esopt.models.decode import DecodeOptions
from esopt.envs.spec import SEED_SPLITS, SeedTasks, resolve

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
GUESS = "guess_env:GuessEnv"


def test_the_example_env_trains_evaluates_resumes_exports_and_reports(esopt_cache, tmp_path, capsys):
    args = ["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=2", f"run.out_dir={tmp_path}", "run.name=guess",
            f"env.id={GUESS}", "env.options.high=4", "env.max_turns=3"]
    assert main(args) == 0
    run = tmp_path / "guess"
    history = json.loads((run / "history.json").read_text())
    assert [g["generation"] for g in history["generations"]] == [0, 1]
    saved = yaml.safe_load((run / "config.yaml").read_text())["env"]
    assert saved == {"id": GUESS, "max_turns": 3, "options": {"high": 4}}  # the Sudoku file's options dropped
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "es.generations=3"]) == 0  # resumed: one more generation
    assert len(json.loads((run / "history.json").read_text())["generations"]) == 3
    assert main(["eval", "--run", str(run), "--out", str(tmp_path / "eval.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "RESULT heldout_reward=" in out
    played = [json.loads(line) for line in (tmp_path / "eval.jsonl").read_text().splitlines()]
    lo, hi = SEED_SPLITS["heldout"]
    assert len(played) == 3 and all(lo <= int(ep["task"]) < hi for ep in played)
    assert all(1 <= len(ep["turns"]) <= 3 for ep in played)  # env.max_turns=3
    assert all(ep["truncated"] == (not ep["solved"]) for ep in played)
    assert main(["export", str(run), str(tmp_path / "hf")]) == 0
    assert (tmp_path / "hf" / "model.safetensors").exists()
    assert main(["report", str(run)]) == 0
    html = next(run.glob("report*.html"), None) or next(run.rglob("*.html"))
    assert "guess_env:GuessEnv" in html.read_text() and "high=4" in html.read_text()


def test_the_example_is_found_from_its_folder_by_the_console_command(tmp_path):
    """`esopt` (the console script) imports package.module:attr from the current folder, as python -m does."""
    exe = Path(sys.executable).with_name("esopt")
    out = subprocess.run([str(exe), "eval", str(ROOT / "configs/demo.yaml"), f"env.id={GUESS}", "env.options.high=3",
                          "env.bogus=1"], cwd=HERE, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.strip() == "esopt: error: unknown config key 'env.options.bogus'; " \
        "allowed here: high", out.stderr  # imported (its Options answered), refused before any model loads


def test_options_are_checked_by_the_envs_own_model():
    cfg = load_config(None, [f"env.id={GUESS}", "env.options.high=5"])
    assert cfg.env.options.high == 5 and type(cfg.env.options).__name__ == "Options"
    with pytest.raises(ConfigError, match=r"bad value for 'env.options.high': 1"):
        load_config(None, [f"env.id={GUESS}", "env.options.high=1"])
    with pytest.raises(ConfigError, match=r"env.id=guess_env:Nope: module guess_env has no Nope"):
        load_config(None, ["env.id=guess_env:Nope"])
    with pytest.raises(ConfigError, match=r"cannot import no_such_pkg"):
        load_config(None, ["env.id=no_such_pkg.mod:Env"])


def test_a_factory_without_options_model_is_checked_by_its_signature():
    cfg = load_config(None, ["env.id=test_user_env:counting_env", "env.options.turns_to_end=2"])
    assert cfg.env.options == {"turns_to_end": 2}
    with pytest.raises(ConfigError, match=r"unknown config key 'env.options.speed'.*allowed here: turns_to_end"):
        load_config(None, ["env.id=test_user_env:counting_env", "env.options.speed=2"])


def test_seed_tasks_are_disjoint_and_fixed():
    cfg = load_config(None, [f"env.id={GUESS}", "tasks.validation=20", "tasks.heldout=20"])
    a, b = SeedTasks(cfg.env, cfg.tasks, 0), SeedTasks(cfg.env, cfg.tasks, 1)
    held, val = a.heldout()[1], a.validation()[1]
    train = {t for g in range(4) for t in a.train(16, g)[1]}
    assert held == b.heldout()[1] and val == b.validation()[1]  # the same for every run seed
    assert not (set(held) & set(val)) and not (train & (set(held) | set(val)))
    assert a.train(16, 2)[1] == SeedTasks(cfg.env, cfg.tasks, 0).train(16, 2)[1] != a.train(16, 3)[1]
    assert a.train(16, 0)[2] == [None] * 16  # reset when the episode starts


# -- the rollout: the turn limit, and envs that raise or answer nonsense --------------------------------
class Endless(TextEnv):
    """Never ends an episode by itself (the rollout must)."""

    def __init__(self, turns_to_end: int = 0, fail_at: int = 0, bad_at: int = 0):
        self.t, self.turns_to_end, self.fail_at, self.bad_at, self.closed = 0, turns_to_end, fail_at, bad_at, False

    def reset(self, seed=None):
        self.t = 0
        return "go", {}

    def step(self, action):
        self.t += 1
        if self.t == self.fail_at:
            raise RuntimeError("the env broke")
        if self.t == self.bad_at:
            return "only an observation"
        return f"t{self.t}", 0.5, self.t == self.turns_to_end, False, {}

    def render_text(self):
        return ""

    def close(self):
        self.closed = True


def counting_env(turns_to_end: int = 0):
    return Endless(turns_to_end)


class Echo:
    tokens_generated = 0

    def generate(self, convs, options, **kw):
        return ["x"] * len(convs)


def test_an_env_that_never_ends_is_truncated_at_max_turns():
    envs = [Endless(), Endless(turns_to_end=2), Endless(), Endless()]
    envs[3].max_turns = 2  # its own limit, used when env.max_turns is not set
    from esopt.agent.rollout import AgentContext

    eps = rollout(Echo(), envs[:3], ["a", "b", "c"], ["go"] * 3, AgentContext(), RolloutSettings(DecodeOptions(4), max_turns=(4, 10)))
    assert [len(e.turns) for e in eps] == [4, 2, 4]
    assert [e.truncated for e in eps] == [True, False, True] and all(e.done for e in eps)
    assert eps[0].reward == pytest.approx(2.0) and envs[0].closed and not envs[1].closed
    eps = rollout(Echo(), [envs[3], Endless()], ["d", "e"], ["go"] * 2, AgentContext(), RolloutSettings(DecodeOptions(4), max_turns=(None, 3)))
    assert [len(e.turns) for e in eps] == [2, 3] and all(e.truncated for e in eps)


def test_an_env_that_raises_or_answers_nonsense_fails_its_episode_only():
    from esopt.agent.rollout import AgentContext

    envs = [Endless(fail_at=2), Endless(bad_at=1), Endless(turns_to_end=3)]
    eps = rollout(Echo(), envs, ["a", "b", "c"], ["go"] * 3, AgentContext(),
                  RolloutSettings(DecodeOptions(4), failure_reward=-1.0, max_turns=(5, 10)))
    assert "the env broke" in eps[0].error and eps[0].reward == -1.0
    assert "a TextEnv's step returns (observation: str, reward: float" in eps[1].error and eps[1].reward == -1.0
    assert eps[2].error is None and len(eps[2].turns) == 3 and eps[2].reward == pytest.approx(1.5)


def test_resolve_finds_entry_points(monkeypatch):
    import importlib.metadata as md

    class EP:
        name, value = "guess", GUESS

        def load(self):
            from guess_env import GuessEnv

            return GuessEnv

    real = md.entry_points
    monkeypatch.setattr(md, "entry_points", lambda **kw: [EP()] if kw.get("group") == "esopt.envs" else real(**kw))
    import esopt.envs.spec as spec

    monkeypatch.setattr(spec, "_SPECS", dict(spec._SPECS))
    assert resolve("guess").factory.__name__ == "GuessEnv" and "guess" in spec.available()
    cfg = load_config(None, ["env.id=guess", "env.options.high=3"])
    assert cfg.env.options.high == 3


def test_a_user_env_plays_in_a_worker_process_as_here():
    """Worker processes (spawned) import package.module:attr ids too, and play them as this process does."""
    from esopt.envs import make
    from esopt.envs.browser.workers import RemoteEnv, close_worker_pools, worker_pool

    try:
        remote, local = RemoteEnv(worker_pool(1), GUESS, high=6), make(GUESS, high=6)
        assert remote.reset(seed=5) == local.reset(seed=5)
        for guess in ("x", "1", "2", "3", "4", "5", "6"):
            step = remote.step(guess)
            assert step == local.step(guess)
            if step[2]:  # solved: the worker frees the env
                break
        assert step[2]
    finally:
        close_worker_pools()


def test_keys_written_directly_under_env_are_its_options():
    """Configs from before env.options: env.blanks=3 is env.options.blanks, and on the command line it wins
    over the file's env.options; another env.id on the command line drops the file's options."""
    cfg = load_config("configs/demo.yaml", ["env.blanks=3", "env.size=4"])
    assert (cfg.env.options.blanks, cfg.env.options.size) == (3, 4)
    assert load_config(None, ["env.blanks=5"]).env.options.blanks == 5
    with pytest.raises(ConfigError, match=r"bad value for 'env.options.size': 5"):
        load_config("configs/demo.yaml", ["env.size=5"])
    assert load_config("configs/demo.yaml", [f"env.id={GUESS}"]).env.options.high == 8


def test_a_nested_key_given_directly_under_env_keeps_the_files_other_nested_keys():
    """env.web.workers=4 sets one key of the file's env.options.web; it used to replace the whole mapping,
    dropping configs/miniwob.yaml's obs_max_chars and max_live for their defaults without a word."""
    web = load_config("configs/miniwob.yaml", ["env.web.workers=4"]).env.options.web
    assert (web.workers, web.obs_max_chars, web.max_live) == (4, 2000, 16)
    assert load_config("configs/miniwob.yaml", ["env.options.web.workers=3"]).env.options.web.obs_max_chars == 2000


def test_a_module_that_does_not_parse_or_raises_on_import_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "broken_env_mod.py").write_text("class Env:\n    def reset(self\n")
    (tmp_path / "raising_env_mod.py").write_text("import sys\nsys.exit('no data file')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"broken_env_mod has a syntax error: '\(' was never closed \(.*line 2\)"):
        load_config(None, ["env.id=broken_env_mod:Env"])
    with pytest.raises(ConfigError, match=r"importing raising_env_mod raised SystemExit: no data file"):
        load_config(None, ["env.id=raising_env_mod:Env"])


def test_heldout_skip_with_seed_tasks_and_a_task_source_without_it():
    from esopt.envs.spec import EnvSpec

    cfg = load_config(None, [f"env.id={GUESS}", "tasks.validation=4", "tasks.heldout=3", "tasks.heldout_skip=5"])
    a = SeedTasks(cfg.env, cfg.tasks, 0)
    whole = SeedTasks(cfg.env, load_config(None, [f"env.id={GUESS}", "tasks.heldout=8"]).tasks, 0)
    assert a.heldout()[1] == whole.heldout()[1][5:]

    class OwnTasks:  # a user's task source that knows nothing of the option
        def __init__(self, env_cfg, tasks_cfg, run_seed):
            pass

    spec = EnvSpec(id="own", factory=lambda: None, tasks=OwnTasks)
    with pytest.raises(ConfigError, match=r"tasks.heldout_skip=5: the task source of env.id=.* does not offer it"):
        spec.task_source(cfg.env, cfg.tasks, 0)
    assert isinstance(spec.task_source(cfg.env, whole.tasks_cfg, 0), OwnTasks)
