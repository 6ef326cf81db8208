"""How ES updates enter low-precision weights, and what a dtype does to sigma and alpha.

In bfloat16 (8 significant bits) an element moves only if its change is at
least half a unit in the last place (ulp): with round-to-nearest most of a
small ES update is rounded away (`esopt bench precision`, SmolLM2 layers at the
paper's alpha 5e-4, G=32: after 20 generations the weights had moved by 31% of
the intended update along it, norm weights, near 1.0, by 20%; the best bf16 can
hold is 83%). `es.update_rounding` offers:

- `compensated` (default): each low-precision tensor keeps a bfloat16
  compensation buffer in host memory (off the accelerator; 2 bytes per
  element), holding what rounding left out; the next update adds it back
  (weights + compensation ~ 16 significant bits, like fp32 master weights at
  half their size). Deterministic, so replay reproduces the bits; the weights
  stay within about half an ulp of the exactly summed updates however many
  generations run.
- `stochastic`: round to one of the two neighbouring values with the
  probability that makes the expected result exact. Unbiased and free of
  memory, but each update adds rounding noise of about sqrt(|u| * ulp) per
  element, which for updates far below an ulp is larger than the update.
  The random numbers come from a counter-based generator (NumPy's Philox)
  keyed by a hash of (the generation's member seeds, the tensor, the chunk):
  the member seeds derive from (run seed, generation), so replay draws the same
  numbers.
- `nearest`: cast the update to the weights' dtype and add (the behaviour
  before this option; kept for comparison).

float32 weights add the float32 update as always, whatever the setting.
"""
from __future__ import annotations

import hashlib

import numpy as np
import torch

ROUNDINGS = ("compensated", "stochastic", "nearest")
LOW_PRECISION = (torch.bfloat16, torch.float16)


def rounding_key(seeds, name: str, start: int) -> int:
    """A 128-bit Philox key for one chunk of one tensor's update in one generation."""
    text = ",".join(str(int(s)) for s in sorted(set(int(s) for s in seeds)))
    digest = hashlib.blake2b(f"update-rounding/{text}/{name}/{start}".encode(), digest_size=16).digest()
    return int.from_bytes(digest, "little")


def uniforms(key: int, n: int) -> torch.Tensor:
    """n float32 uniforms in [0, 1) from the Philox stream `key` (CPU)."""
    gen = np.random.Generator(np.random.Philox(key=key))
    return torch.from_numpy(gen.random(n, dtype=np.float32))


def stochastic_round(target: torch.Tensor, dtype: torch.dtype, u: torch.Tensor) -> torch.Tensor:
    """Round float32 `target` to `dtype`: to the neighbour above with probability equal to its
    distance from the neighbour below over the gap (so E[result] = target), using uniforms u."""
    nearest = target.to(dtype)
    near32 = nearest.float()
    toward = torch.where(target > near32, float("inf"), float("-inf")).to(dtype)
    other = torch.nextafter(nearest, toward)
    gap = (other.float() - near32).abs()
    p = torch.where(gap > 0, (target - near32).abs() / gap, torch.zeros_like(target))
    return torch.where(u.to(target.device) < p, other, nearest)


def add_update(chunk: torch.Tensor, delta: torch.Tensor, rounding: str, key: int = 0,
               compensation: torch.Tensor | None = None, u: torch.Tensor | None = None) -> None:
    """chunk += delta (float32) in place, rounded as `rounding` says for low-precision chunks.

    `compensated` needs `compensation`: a bfloat16 CPU tensor of the chunk's size, updated in
    place; `stochastic` draws its numbers from the Philox stream `key` (or takes them as `u`).
    """
    if chunk.dtype not in LOW_PRECISION or rounding == "nearest":
        chunk.add_(delta.to(chunk.device, chunk.dtype))
    elif rounding == "compensated":
        target = chunk.float().add_(delta.to(chunk.device)).add_(compensation.to(chunk.device, torch.float32))
        chunk.copy_(target)  # round to nearest
        compensation.copy_(target.sub_(chunk.float()).to("cpu", torch.bfloat16))
    elif rounding == "stochastic":
        target = chunk.float().add_(delta.to(chunk.device))
        chunk.copy_(stochastic_round(target, chunk.dtype, uniforms(key, chunk.numel()) if u is None else u))
    else:
        raise ValueError(f"unknown es.update_rounding {rounding!r}; allowed: {', '.join(ROUNDINGS)}")


def changed_share(weights: torch.Tensor, delta: torch.Tensor) -> float:
    """Share of elements whose bits change when float32 `delta` is added with round-to-nearest
    in the weights' dtype (weights + delta computed in float32, then rounded once)."""
    new = (weights.float() + delta.float()).to(weights.dtype)
    return float((new != weights).float().mean())


@torch.no_grad()
def precision_check(params, sigma: float, alpha: float, population: int, rounding: str,
                    sample: int = 1 << 14, seed: int = 0, scales: dict[str, float] | None = None) -> dict:
    """Estimate, on a sample of each low-precision tensor's elements, the share a perturbation
    of scale sigma changes and the share an update of typical size changes with round-to-nearest.

    A typical update element is (alpha / G) * sum_i c_i eps_i with z-scored coefficients,
    i.e. about alpha / sqrt(G) * N(0, 1). scales: each tensor's share of sigma and alpha
    (es.sigma_scale; None: 1 everywhere). Returns {} when no tensor is low precision.
    """
    gen = torch.Generator().manual_seed(seed)
    changed_p = changed_u = total = 0.0
    for name, p in params:
        if p.dtype not in LOW_PRECISION:
            continue
        scale = 1.0 if scales is None else scales.get(name, 1.0)
        flat = p.detach().reshape(-1)
        idx = torch.randint(0, flat.numel(), (min(sample, flat.numel()),), generator=gen)
        w = flat[idx.to(flat.device)].cpu()
        eps = torch.randn(w.numel(), generator=gen)
        n = w.numel()
        changed_p += changed_share(w, scale * sigma * eps) * n
        changed_u += changed_share(w, scale * alpha / population ** 0.5 * eps) * n
        total += n
    if not total:
        return {}
    return {"perturbed_share": changed_p / total, "update_changed_share_nearest": changed_u / total,
            "rounding": rounding}


def precision_warnings(check: dict, dtype_name: str, sigma: float, alpha: float) -> list[str]:
    """One line per problem found by precision_check (empty when the configuration is fine)."""
    out = []
    if not check:
        return out
    if check["perturbed_share"] < 0.5:
        out.append(f"[esopt] warning: in {dtype_name}, a perturbation of sigma {sigma:.2g} changes only "
                   f"{check['perturbed_share']:.0%} of the weights' elements (the rest round back to the same "
                   "value): members differ less than sigma says; use runtime.dtype=float32 or a larger sigma")
    if check["rounding"] == "nearest" and check["update_changed_share_nearest"] < 0.5:
        out.append(f"[esopt] warning: in {dtype_name} with es.update_rounding=nearest, an update of alpha "
                   f"{alpha:.2g} changes only {check['update_changed_share_nearest']:.0%} of the elements "
                   "(the rest is rounded away): use es.update_rounding=compensated (the default)")
    return out
