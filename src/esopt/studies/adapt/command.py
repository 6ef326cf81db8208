"""`esopt adapt`: the test-time adaptation grid (and --merge of its tables), or with --env
ahd-<problem> the heuristic-design grid."""
from __future__ import annotations

import sys
from pathlib import Path

from ...utils.args import ints, names, split_args

AHD_FLAGS = (("--budgets", "budgets"), ("--seeds", "seeds"), ("--methods", "methods"), ("--out", "out"))


def add_arguments(d) -> None:
    d.add_argument("args", nargs="*", metavar="CONFIG_OR_OVERRIDE")
    d.add_argument("--from", dest="from_run", metavar="RUN_DIR",
                   help="start every sub-run from this run's final weights (and a context run's final context)")
    d.add_argument("--env", metavar="ahd-PROBLEM",
                   help="heuristic design instead (ahd-tsp, ahd-knapsack, ahd-binpack): methods eoh, eoh+es, sample, "
                        "sample+es at the budgets and seeds of CONFIG (default configs/ahd.yaml; docs/ahd.md)")
    d.add_argument("--budgets", metavar="B,B", help="with --env: LLM calls per run (default: the config's grid.budgets)")
    d.add_argument("--seeds", metavar="S,S", help="with --env: run seeds (default: the config's grid.seeds)")
    d.add_argument("--methods", metavar="M,M", help="with --env: any of eoh,eoh+es,sample,sample+es")
    d.add_argument("--out", metavar="DIR", help="with --env: the folder of the runs and the table "
                                                "(default <grid.out_dir>/<grid.name or ahd>)")
    d.add_argument("--merge", metavar="OUT.json", help="merge the adapt.json files given as arguments (other tasks, "
                                                       "same settings, budgets and starting weights) into one table: "
                                                       "OUT.json and OUT.md")


def _given(a, flags) -> list[str]:
    """The flags of (flag, attribute) pairs that the command line set."""
    return [flag for flag, attr in flags if getattr(a, attr)]


def run(a) -> int:
    if a.merge:
        return _merge(a)
    if a.env:
        return _ahd(a)
    ahd_only = _given(a, AHD_FLAGS)
    if ahd_only:
        raise SystemExit(f"esopt: error: {', '.join(ahd_only)} go with --env ahd-<problem> (heuristic design); "
                         "the adapt config's own settings are adapt.* overrides")
    from .grid import run_adapt

    config, overrides = split_args(a.args)
    if config is None:
        raise SystemExit("esopt: error: adapt needs a config file with an adapt: section "
                         "(e.g. configs/adapt-demo.yaml)")
    result = run_adapt(config, overrides, a.from_run)
    _print_totals(result["totals"])
    return 1 if result["failed"] else 0


def _print_totals(totals: dict) -> None:
    for key, v in totals.items():
        name = key.replace(" vs ", "_vs_").replace(" @ ", "_b")
        print(f"RESULT adapt_{name}=W{v['win']}/T{v['tie']}/L{v['loss']}")


def _merge(a) -> int:
    """esopt adapt --merge OUT.json A.json B.json ...: one table from adapt tables of other tasks."""
    other = _given(a, (("--from", "from_run"), ("--env", "env"), *AHD_FLAGS))
    if other:
        raise SystemExit(f"esopt: error: --merge takes adapt.json files only, not {', '.join(other)}")
    from .merge import merge
    from .table import markdown

    result = merge(a.merge, a.args)
    print(markdown(result["rows"], result["settings"]), end="")
    print(f"[esopt] adapt --merge: {a.merge} and {Path(a.merge).with_suffix('.md')} ({len(result['tasks'])} tasks "
          f"from {len(a.args)} tables)")
    _print_totals(result["totals"])
    return 1 if result["failed"] else 0


def _ahd(a) -> int:
    """esopt adapt --env ahd-<problem>: the heuristic search's methods x budgets x seeds (docs/ahd.md)."""
    from ...ahd.config import DEFAULT_CONFIG as AHD_CONFIG
    from ...sandbox.parent import SandboxUnavailable
    from ..ahd.run import run_ahd

    if a.from_run:
        raise SystemExit("esopt: error: --from is not supported with --env ahd-<problem> (the search starts from "
                         "the config's model)")
    config, overrides = split_args(a.args)
    if config is None and Path(AHD_CONFIG).exists():
        config = AHD_CONFIG
    try:
        result = run_ahd(a.env, config, overrides, budgets=ints(a.budgets, "--budgets"),
                         seeds=ints(a.seeds, "--seeds"), methods=names(a.methods), out=a.out)
    except SandboxUnavailable as err:  # nothing was run; docs/sandbox.md says what each protection needs
        print(f"esopt: error: {err}", file=sys.stderr)
        return 2
    for key, v in result["totals"].items():
        name = key.replace("+", "_").replace(" vs ", "_vs_").replace(" @ ", "_b")
        print(f"RESULT ahd_{result['problem']}_{name}=W{v['win']}/T{v['tie']}/L{v['loss']}")
    return 1 if result["failed"] else 0
