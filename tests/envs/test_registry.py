import pytest

import esopt.envs.registry as registry
from esopt.envs import SudokuEnv, TextEnv, list_envs, make, register


@pytest.fixture
def isolated_registry(monkeypatch):
    import esopt.envs.spec as spec

    monkeypatch.setattr(spec, "_SPECS", dict(spec._SPECS))


class EchoEnv(TextEnv):
    def __init__(self, max_turns: int = 2):
        self.max_turns = max_turns
        self.last = ""

    def reset(self, seed=None):
        self.last = "start"
        return self.last, {}

    def step(self, action):
        self.last = action
        return action, 0.0, False, False, {}

    def render_text(self):
        return self.last


def test_sudoku_is_registered():
    assert "sudoku" in list_envs()
    env = make("sudoku", size=4, blanks=3)
    assert isinstance(env, SudokuEnv) and isinstance(env, TextEnv)
    assert env.max_turns == 9
    obs, _ = env.reset(seed=0)
    assert "Empty cells:" in obs


def test_unknown_name_lists_registered():
    with pytest.raises(ValueError, match="nope") as err:
        make("nope")
    assert "sudoku" in str(err.value)


def test_bad_kwarg_is_named():
    with pytest.raises(ValueError, match="bogus"):
        make("sudoku", size=4, bogus=1)


def test_bad_kwarg_value_is_named():
    with pytest.raises(ValueError, match="size"):
        make("sudoku", size=5)


def test_register_make_and_duplicates(isolated_registry):
    register("echo", EchoEnv)
    register("echo", EchoEnv)  # same factory again: no-op
    assert "echo" in list_envs() and list_envs() == sorted(list_envs())
    env = make("echo", max_turns=5)
    assert env.max_turns == 5 and env.reset() == ("start", {})
    with pytest.raises(ValueError, match="already registered"):
        register("echo", lambda: EchoEnv())
    register("echo", lambda: EchoEnv(7), overwrite=True)
    assert make("echo").max_turns == 7
    with pytest.raises(ValueError):
        register("", EchoEnv)
    with pytest.raises(ValueError):
        register("x", 3)


def test_registry_isolation_restored():
    assert "echo" not in list_envs()


def test_text_env_is_abstract():
    with pytest.raises(TypeError):
        TextEnv()
