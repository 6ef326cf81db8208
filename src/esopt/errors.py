"""The errors a user can fix (bad settings, a damaged or busy run folder, a full disk): the command
line and the studies print them as one line (`esopt: error: ...`) and exit 2, without a traceback."""
from __future__ import annotations

import sys

# (module, class): an error class whose module was never imported cannot have been raised, so
# the check imports nothing (a config error stays one line within a second, without torch)
_USER_ERRORS = (("esopt.utils.settings", "ConfigError"), ("esopt.es.perturb", "ScopeError"),
                ("esopt.models.loading", "ModelError"), ("esopt.es.history", "RunFolderError"),
                ("esopt.train.ray.errors", "ReplicaError"), ("esopt.serve.protocol", "ServeError"),
                ("esopt.train.failures", "EpisodesFailed"), ("esopt.models.gguf", "GGUFRefused"))


def user_errors() -> tuple[type[BaseException], ...]:
    found = [getattr(sys.modules[m], name) for m, name in _USER_ERRORS if m in sys.modules]
    return (*found, OSError)


def one_line(call, *args, **kwargs) -> int:
    """call(*args, **kwargs): its exit code (its return value if an int, else 0); a user error is
    printed as one line and gives 2; a stop (Ctrl-C, SIGTERM) one line and 130."""
    try:
        result = call(*args, **kwargs)
        return result if isinstance(result, int) else 0
    except KeyboardInterrupt as err:  # Ctrl-C / SIGTERM outside training's safe points: what was under way, what stays
        from .train.stop import interrupted_line

        print(interrupted_line(err), file=sys.stderr, flush=True)
        return 130
    except Exception as err:
        stopped = sys.modules.get("esopt.train.stop")
        if stopped is not None and isinstance(err, stopped.Stopped):  # Ctrl-C / SIGTERM: what was kept, how to go on
            print(err, file=sys.stderr, flush=True)
            return 130
        if not isinstance(err, user_errors()):
            raise
        print(f"esopt: error: {err}", file=sys.stderr)
        return 2


def end_now(code: int) -> None:
    """Flush stdout and stderr, then end the process with `code` without the interpreter's teardown (cli.entry)."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code)
