"""esopt serve CONFIG [key=value ...] | --resume RUN: an ES run whose members a client plays over HTTP."""
from __future__ import annotations

import os

from ..utils.args import split_args


def add_arguments(p) -> None:
    p.add_argument("args", nargs="*", help="CONFIG.yaml and key.path=value overrides (none with --resume)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a served run from its history")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; any other needs "
                                                       "--token)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: one the system picks, written "
                                                          "to RUN/serve.json)")
    p.add_argument("--token", default=None, help="API key clients must send (default: $ESOPT_SERVE_TOKEN; required "
                                                 "off 127.0.0.1)")
    p.add_argument("--missing", choices=("fail", "wait", "failure_reward"), default="fail",
                   help="a generation finished with episodes lacking a reward: refuse (fail, default), wait for "
                        "them, or count each as run.failure_reward; a finish request may say otherwise")


def run(a) -> dict:
    from ..config import load_config
    from ..train.session import train
    from .app import Server
    from .protocol import ServeError
    from .runner import ServeRunner

    config, overrides = split_args(a.args)
    if a.resume and config:
        raise SystemExit("esopt: error: --resume takes the run's own config; pass no config file")
    if not a.resume and not config:
        raise SystemExit("esopt: error: serve needs a config file (e.g. esopt serve configs/serve-demo.yaml) or "
                         "--resume RUN_DIR")
    server = Server(a.host, a.port, a.token or os.environ.get("ESOPT_SERVE_TOKEN"))  # checked before any folder
    if not a.resume:
        config = load_config(config, overrides)
        if config.algo != "es":
            raise ServeError(400, f"esopt serve trains with ES; algo={config.algo} is not served")
    runner = ServeRunner(server, missing=a.missing)
    return train(config, overrides, resume_dir=a.resume, runner=runner, strict=True)
