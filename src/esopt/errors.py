"""The errors a user can fix (bad settings, a damaged or busy run folder, a full disk): the command
line and the studies print them as one line (`esopt: error: ...`) and exit 2, without a traceback."""
from __future__ import annotations


def user_errors() -> tuple[type[BaseException], ...]:
    from .train.ray.errors import ReplicaError
    from .es.history import RunFolderError
    from .es.perturb import ScopeError
    from .models.loading import ModelError
    from .utils.settings import ConfigError

    return ConfigError, ScopeError, ModelError, RunFolderError, ReplicaError, OSError


def one_line(call, *args, **kwargs) -> int:
    """call(*args, **kwargs): its exit code (its return value if an int, else 0); a user error is
    printed as one line and gives 2."""
    import sys

    try:
        result = call(*args, **kwargs)
        return result if isinstance(result, int) else 0
    except user_errors() as err:
        print(f"esopt: error: {err}", file=sys.stderr)
        return 2
