"""Per-tensor noise scales (es.sigma_scale): how much of sigma and alpha each tensor gets.

none: every tensor 1 (sigma and alpha are absolute, today's ES).
rms: tensor t gets  rms(W_t) * sqrt(tensors in the model / tensors in scope).
    - rms(W_t), the root mean square of the tensor's base weights, makes sigma relative: each
      perturbed tensor moves by the same fraction of its own size, whatever its kind (a norm's
      gains near 1 and a projection's entries near 0.02 alike). A tensor whose RMS is below
      1% of the scope's median (zeros: fresh biases) gets that 1%, so it still moves.
    - the square root of the share of tensors perturbed keeps the expected change of the model's
      output (independent perturbations of n tensors add up as sqrt(n)) the same for every
      es.scope: a preset that perturbs a quarter of the tensors gets twice the relative noise.
    So one sigma, chosen once, means the same for full, attention, norms or last:N.
The scales are a function of the base weights and the scope alone, computed once when the
perturber is made (a replay or a Ray replica computes them again from the same base weights),
rounded to 3 significant digits so that summation order (threads, devices) cannot change them.
The update uses the same scale, so each tensor also moves along its own perturbations in
proportion to its size.
"""
from __future__ import annotations

import math
from statistics import median

import torch

SIGMA_SCALES = ("none", "rms")


def _round3(x: float) -> float:
    return float(f"{x:.3g}")


@torch.no_grad()
def tensor_scales(named: list[tuple[str, torch.Tensor]], rule: str, model_tensors: int) -> dict[str, float]:
    """{name: scale} of the perturbed tensors `named` under `rule`; model_tensors: how many
    parameter tensors the whole model has (tied ones once)."""
    if rule not in SIGMA_SCALES:
        raise ValueError(f"unknown es.sigma_scale {rule!r}; allowed: {', '.join(SIGMA_SCALES)}")
    if rule == "none":
        return {name: 1.0 for name, _ in named}
    rms = {name: float(p.detach().to("cpu", torch.float64).pow(2).mean().sqrt()) if p.numel() else 0.0
           for name, p in named}
    floor = 0.01 * median(rms.values())
    share = math.sqrt(max(model_tensors, len(named)) / len(named))
    return {name: _round3((max(r, floor) or 1.0) * share) for name, r in rms.items()}  # all zeros: 1


def describe_scales(scales: dict[str, float]) -> dict:
    """A few numbers of the scales for the history's noise record (min, median, max)."""
    vals = sorted(scales.values())
    return {"min": vals[0], "median": median(vals), "max": vals[-1]} if vals else {}
