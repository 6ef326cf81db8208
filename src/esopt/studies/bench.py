"""`esopt bench NAME`: the benchmarks, from the rows of machine/benches.py (how fast and heavy esopt
runs here) and method/benches.py (does the method learn). Each bench is a sub-command with its own
flags (`esopt bench NAME --help` lists them); a flag another bench takes is refused in one line.
Each prints RESULT lines and writes JSON (default bench-results/<name>.json)."""
from __future__ import annotations

import argparse
import importlib
import time
from pathlib import Path

from ..utils.args import default_config, split_args
from .machine import benches as machine
from .method import benches as method

# name: (module, what it measures, flags, call(module, a, config, overrides)), machine's rows first
BENCHES = {name: (f"{table.__package__}.{module}", *rest)
           for table in (machine, method) for name, (module, *rest) in table.BENCHES.items()}
TAKES_NO_CONFIG = method.TAKES_NO_CONFIG


def add_arguments(b) -> None:
    sub = b.add_subparsers(dest="name", metavar="NAME", required=True,
                           title="benchmarks (esopt bench NAME --help: its flags)")
    for name, (module, what, flags, _) in BENCHES.items():
        p = sub.add_parser(name, help=what, description=f"esopt bench {name}: {what}.", allow_abbrev=False)
        p.add_argument("args", nargs="*", metavar="OVERRIDE" if name in TAKES_NO_CONFIG else "CONFIG_OR_OVERRIDE")
        if "--out" not in (flag for flag, _ in flags):
            p.add_argument("--out", help=f"JSON output path (default bench-results/{name}.json)")
        for flag, kwargs in flags:
            p.add_argument(flag, **kwargs)
        p.set_defaults(parser=p, refuse=refusal)


def refusal(a, stray: list[str]) -> str:
    """The one line for options `esopt bench NAME` does not take, naming the benches that do."""
    def takes(flag):
        return [n for n, row in BENCHES.items() if flag in ("--out", *(f for f, _ in row[2]))]

    mine = dict.fromkeys(["--out", *(f for f, _ in BENCHES[a.name][2])])
    stray = list(dict.fromkeys(x.split("=")[0] for x in stray))
    owners = [f"{x} is a flag of {', '.join(takes(x))}" for x in stray if takes(x)]
    return (f"esopt: error: bench {a.name} does not take {' '.join(stray)}"
            + (f" ({'; '.join(owners)})" if owners else "")
            + f"; its flags: {', '.join(mine)} (esopt bench {a.name} --help)")


def run(a: argparse.Namespace) -> int:
    """The bench; a Ctrl-C or SIGTERM stops its training runs at their safe points (studies/runs.py) and ends it
    with one line: what of its JSON and runs is on disk."""
    from .common import out_path
    from .runs import stop_children_on_signals

    config, overrides = split_args(a.args)
    module, _, _, call = BENCHES[a.name]
    if a.name not in TAKES_NO_CONFIG:
        config = config or default_config()
    t0 = time.time()
    try:
        with stop_children_on_signals():
            call(importlib.import_module(module), a, config, overrides)
    except KeyboardInterrupt as err:
        out = Path(out_path(a, a.name))
        written = out.exists() and out.stat().st_mtime >= t0
        within = f" ({err.phase})" if getattr(err, "phase", None) else ""
        err.phase = f"esopt bench {a.name}{within}"
        err.kept = (f"{out} holds what it wrote before the stop" if written else f"{out} was not written") + (
            f"; {err.kept}" if getattr(err, "kept", None) else "")
        raise
    return 0
