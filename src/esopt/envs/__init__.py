"""Text environments: the TextEnv interface (base.py), env specs and how an env.id is found
(spec.py), the name API (registry.py), and esopt's own envs, each in its folder: sudoku/,
browser/ (BrowserGym; the local shop and WebArena as its namespaces), gem/ (GEM's games),
reasoning_gym/ (reasoning-gym's tasks), codetool/ (arithmetic with a
sandboxed python tool), dataset/ (prompts from a file and a reward function),
toy.py (vowels, the one-minute smoke check) and external.py (a task only a harness has)."""

from esopt.envs.base import TextEnv
from esopt.envs.registry import list_envs, make, register, register_renderer, renderer_for
from esopt.envs.spec import EnvSpec, SeedTasks, register_spec, resolve

# esopt's own envs, by the path of their spec: imported when an env.id first names one
register_spec("esopt.envs.sudoku.spec:SPEC", "sudoku")
register_spec("esopt.envs.browser.spec:SPEC", "browsergym")
register_spec("esopt.envs.gem.spec:SPEC", "gem")
register_spec("esopt.envs.reasoning_gym.spec:SPEC", "reasoning-gym")
register_spec("esopt.envs.dataset.spec:SPEC", "dataset")
register_spec("esopt.envs.codetool.spec:SPEC", "code-tool")  # arithmetic with a sandboxed python tool
register_spec("esopt.envs.toy:VowelsEnv", "vowels")  # the smoke test's toy task (configs/smoke.yaml)
register_spec("esopt.envs.external:SPEC", "external")  # a harness's own task (esopt serve, serve.evaluations=harness)


def __getattr__(name: str):  # older imports: esopt.envs.SudokuEnv and friends
    if name in ("SudokuEnv", "SudokuTasks", "generate_puzzle", "parse_action"):
        from esopt.envs import sudoku

        return getattr(sudoku, name)
    raise AttributeError(f"module 'esopt.envs' has no attribute {name!r}")


__all__ = ["TextEnv", "EnvSpec", "SeedTasks", "make", "register", "register_spec", "resolve", "list_envs",
           "register_renderer", "renderer_for"]
