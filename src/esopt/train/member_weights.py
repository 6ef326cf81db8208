"""Which weights a batch of members decodes with, for each of the perturber's three play modes; one
answer, used by training (train/members.py) and by esopt serve (serve/scheduler.py).

- in_place (full-rank noise, Gaussian or table): one member at a time, its perturbation applied in
  place while its rows decode (restored exactly after);
- rows (low-rank noise, others frozen): nothing in place; many members decode in one batch, row j
  under the side terms of its member;
- rows+others (low-rank noise with es.lowrank_others=full): one member at a time, its other tensors
  perturbed in place and its linear weights as side terms of its rows.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from ..models.decode import RowWeights


@dataclass
class BatchWeights:
    """in_place: a context manager putting the batch's one member's in-place perturbation on (and taking it
    off; a no-op when there is none); rows: its rows' side terms (RowWeights), or None."""

    in_place: contextlib.AbstractContextManager
    rows: RowWeights | None


def batched(perturber) -> bool:
    """Whether members share one batch: the perturber plays them as rows of one batch (low-rank side
    terms, nothing perturbed in place)."""
    return perturber.play_mode == "rows"


def member_weights(perturber, members: list, sigma: float, row_member: list[int]) -> BatchWeights:
    """The weights of a batch whose row j plays members[row_member[j]] (members: es.strategy Members, each
    with seed and sign). In the in-place modes a batch holds one member (or none: the center, unperturbed)."""
    mode = perturber.play_mode
    if mode == "rows":
        seeds, scales = [m.seed for m in members], [m.sign * sigma for m in members]
        rows = torch.tensor(list(row_member), dtype=torch.long)
        return BatchWeights(contextlib.nullcontext(),
                            RowWeights(lambda idx: perturber.side_terms(seeds, scales, rows[idx]), list(row_member)))
    if len(members) > 1:
        raise ValueError(f"play mode {mode} decodes one member at a time, got {len(members)} in one batch")
    if not members:
        return BatchWeights(contextlib.nullcontext(), None)
    m = members[0]
    if mode == "in_place":
        return BatchWeights(perturber.perturbed(m.seed, sigma, m.sign), None)
    if mode != "rows+others":
        raise ValueError(f"unknown play mode {mode!r}")
    zeros = torch.zeros(len(row_member), dtype=torch.long)
    return BatchWeights(perturber.others_perturbed(m.seed, sigma, m.sign),
                        RowWeights(lambda idx: perturber.side_terms([m.seed], [m.sign * sigma], zeros[idx]),
                                   [0] * len(row_member)))
