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
    config, overrides = split_args(a.args)
    if a.resume and config:
        raise SystemExit("esopt: error: --resume takes the run's own config; pass no config file")
    return serve(config, overrides, a.resume, a.host, a.port, a.token or os.environ.get("ESOPT_SERVE_TOKEN"),
                 a.missing)


def serve(config, overrides=(), resume_dir=None, host: str = "127.0.0.1", port: int = 8000, token: str | None = None,
          missing: str = "fail") -> dict:
    """Train an ES run whose members a client plays over HTTP (start from config + overrides, or resume
    resume_dir); returns its summary once the last generation is finished."""
    from ..config import load_config
    from ..train.session import train
    from .app import Server
    from .protocol import ServeError
    from .runner import ServeRunner

    server = Server(host, port, token)  # checked before any folder is made
    if resume_dir is None:
        config = load_config(config, list(overrides))
        if config.algo != "es":
            raise ServeError(400, f"esopt serve trains with ES; algo={config.algo} is not served")
        if config.coevo.mode != "weights":
            raise ServeError(400, f"esopt serve plays weights-only ES; coevo.mode={config.coevo.mode} is not served "
                                  "(the harness owns the prompt)")
    return train(config, overrides, resume_dir=resume_dir, runner=ServeRunner(server, missing=missing), strict=True)
