"""env.id=code-tool: arithmetic the agent answers with the help of a ``python`` tool whose code runs in
the heuristic sandbox (esopt.ahd.sandbox; docs/envs.md "code-tool"). Light on purpose: the sandbox
child imports this package's runner.py."""
