"""env.id=code-tool: arithmetic the agent answers with the help of a ``python`` tool whose code runs in
esopt's sandbox (esopt.sandbox, docs/sandbox.md; docs/envs.md "code-tool"). Light on purpose: the sandbox
child imports this package's runner.py."""
