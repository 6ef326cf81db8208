"""The layers of the package, read from the source with `ast` (every import, also those inside
functions): no circle between top-level packages or between modules; the library never imports
the studies or the command line; train/ (the harness) imports no algorithm's package (it names
plug-ins by import path, esopt.train.algorithm); es/ imports nothing of esopt outside itself."""
from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[1] / "src"
ABOVE_THE_LIBRARY = ("esopt.studies", "esopt.cli", "esopt.demo", "esopt.__main__")


def modules() -> dict[str, Path]:
    out = {}
    for path in SRC.joinpath("esopt").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the esopt modules it imports (a name imported from a package that is one of its
    modules counts as that module)."""
    graph = {}
    for name, path in mods.items():
        found = set()
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for t in targets:
                while t not in mods and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in mods and t != name and t.startswith("esopt"):
                    found.add(t)
        graph[name] = found
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of the graph, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def arrows(graph, where, to) -> list[str]:
    return sorted(f"{a} -> {b}" for a, bs in graph.items() if where(a) for b in bs if to(b))


GRAPH = imports(modules())


def test_no_circle_between_modules_or_packages():
    assert cycle(GRAPH) is None, cycle(GRAPH)
    packages: dict[str, set[str]] = {}
    for a, bs in GRAPH.items():
        packages.setdefault(package(a), set()).update(package(b) for b in bs if package(b) != package(a)
                                                      and b != "esopt")
    assert cycle(packages) is None, cycle(packages)


def test_the_library_never_imports_what_is_above_it():
    above = lambda m: m.startswith(ABOVE_THE_LIBRARY)  # noqa: E731
    assert arrows(GRAPH, lambda m: not above(m), above) == []


def test_the_harness_imports_no_algorithm():
    assert arrows(GRAPH, lambda m: m.startswith("esopt.train"), lambda m: m.startswith("esopt.algos")) == []


def test_es_imports_nothing_of_esopt_outside_itself():
    assert arrows(GRAPH, lambda m: m.startswith("esopt.es."), lambda m: not m.startswith("esopt.es.")) == []


def test_only_es_decides_by_the_noise_kind():
    """How members are played is the perturber's answer (play_mode), not a test of es.noise elsewhere."""
    import re

    compares = re.compile(r"noise\s*(==|!=|in\b)|noise\.startswith")
    found = [f"{name}:{i}" for name, path in modules().items() if not name.startswith("esopt.es.")
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if compares.search(line)]
    assert found == []


def test_the_walk_sees_lazy_imports_and_can_fail():
    """The checks above are not vacuous: a known lazy import is found, and a made-up circle is one."""
    assert "esopt.train.ray.runner" in GRAPH["esopt.train.session"]  # imported inside make_runner
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


SMALL_ROOMS = ("agent", "models", "serve", "train")  # the decode path and the harness
MAX_PARAMETERS = 10  # settings travel as one object (models/decode.py, agent/rollout.py RolloutSettings)
MAX_CLASS_LINES = 300


def sizes(source: str) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]]:
    """(functions as (name, line, parameters), classes as (name, line, lines)) of one module's source; a method's
    self/cls and *args/**kwargs count as parameters."""
    functions, classes = [], []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
            functions.append((node.name, node.lineno, n))
        elif isinstance(node, ast.ClassDef):
            classes.append((node.name, node.lineno, node.end_lineno - node.lineno + 1))
    return functions, classes


def test_the_decode_path_has_short_signatures_and_small_classes():
    """No function under agent/, models/, serve/ and train/ takes more than MAX_PARAMETERS parameters, and no class
    there is longer than MAX_CLASS_LINES lines: options go down the decode path as one object, and a class that
    grows past a screen or two is split by job."""
    long_calls, big_classes = [], []
    for name, path in modules().items():
        if name.split(".")[1:2] and name.split(".")[1] in SMALL_ROOMS:
            functions, classes = sizes(path.read_text(encoding="utf-8"))
            long_calls += [f"{name}:{line} {fn} ({n} parameters)" for fn, line, n in functions if n > MAX_PARAMETERS]
            big_classes += [f"{name}:{line} {cls} ({n} lines)" for cls, line, n in classes if n > MAX_CLASS_LINES]
    assert long_calls == [] and big_classes == []


def test_the_size_check_can_fail():
    functions, classes = sizes("class A:\n" + "    x = 1\n" * 300 + "    def f(self, a, b, c, d, e, f, g, h, i, *j):\n"
                               "        pass\n")
    assert ("f", 302, 11) in functions and classes == [("A", 1, 303)]


def test_the_benchmarks_shared_modules_import_neither_study_package_and_machine_imports_no_method():
    """studies/common.py, runs.py and the bench tables' modules stay below machine/ and method/; a
    machine study never reaches into a method study (a method study may reuse a machine study's
    tasks: horizon uses bench memory's 9x9 tasks)."""
    shared = ("esopt.studies.common", "esopt.studies.runs", "esopt.studies.machine.benches",
              "esopt.studies.method.benches")
    study = lambda m: m.startswith(("esopt.studies.machine.", "esopt.studies.method.")) and m not in shared  # noqa: E731
    assert arrows(GRAPH, lambda m: m in shared, study) == []
    assert arrows(GRAPH, lambda m: m.startswith("esopt.studies.machine."),
                  lambda m: m.startswith("esopt.studies.method.")) == []
