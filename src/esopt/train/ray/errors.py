"""Errors that stop a Ray run, each one line naming the replica (and generation)."""
from __future__ import annotations


class ReplicaError(RuntimeError):
    """A replica that cannot go on: it failed to start (model, replay) or its weights differ."""


class ReplicaMismatchError(ReplicaError):
    """A replica's weights hash differs from the driver's after an update."""
