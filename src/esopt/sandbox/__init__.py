"""The sandbox for untrusted Python code (docs/sandbox.md): parent.py starts and watches a locked-down child
(child.py; lockdown.py, landlock.py, seccomp.py, guard.py) and judges what comes back. Used by heuristic
design (esopt.ahd) and by env.id=code-tool's python tool. Imports nothing of esopt outside itself; kept
light, since the child imports this package before it locks itself down."""
