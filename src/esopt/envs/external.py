"""env.id=external: a task only the harness has. Its episodes, evaluations included, are played by a
harness through ``esopt serve`` with ``serve.evaluations=harness`` (docs/serve.md); esopt builds no env
for it, and nothing esopt plays itself (``esopt train``, ``esopt eval``) accepts it
(train/preflight.py check_run_config)."""
from __future__ import annotations

from .spec import EnvSpec

PLAYED_BY_A_HARNESS = ("env.id=external is a task only a harness plays: serve it (esopt serve CONFIG env.id=external "
                       "serve.evaluations=harness) and let the harness play its episodes and evaluations")


def _no_env(**_options):
    raise ValueError(PLAYED_BY_A_HARNESS)


SPEC = EnvSpec(id="external", factory=_no_env, options=None, smoke=False,
               description="a task only the harness has (esopt serve with serve.evaluations=harness)")
