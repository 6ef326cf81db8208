"""Members played on Ray: one model replica per worker, identical by construction and by check.

- cluster.py: connect to Ray (a local instance, or an existing cluster) and size the workers to
  the cores and GPUs there are (never more threads than cores)
- replica.py: what a worker holds (the model, perturber, tasks) and does (play units, apply
  updates, evaluate slices); a new replica replays the history, hash-verified
- runner.py: RayRunner, the trainer's MemberRunner on Ray: units to whichever worker is free,
  lost units re-run, replicas' weights hashes compared with the driver's every generation
- errors.py: the errors that stop a run

Ray itself is imported only when a RayRunner starts (pip install 'esopt[ray]').
"""
