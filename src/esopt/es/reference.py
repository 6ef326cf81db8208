"""One generation of full-rank ES, written out plainly: the oracle the real code is tested against.

What esopt's ES step does in one generation (es/step.py, algos/es/trainer.py, train/members.py,
es/perturb.py), for float32 weights, in five steps read top to bottom:

  1. seeds    the members' noise seeds; with antithetic pairs, members 2k and 2k+1 share one
              seed with signs +1 and -1 (es/strategy.py);
  2. perturb  w <- w + sign * sigma * eps(seed), eps a N(0, 1) tensor per parameter (es/noise.py);
  3. play     the reward of the perturbed model; then the weights are put back;
  4. shape    rewards -> one coefficient per member, its sign folded in (es/shaping.py);
  5. update   w <- w + alpha / population * sum_i coefficient_i * eps(seed_i).

It reuses es/'s definitions of what the seeds, the noise and the shaping are, and writes the
arithmetic on the weights itself, without es/perturb.py's machinery (fused kernels, chunk
buffers, restore by subtraction plus corrections). tests/es/test_reference.py checks that the
trainer and this function reach the same weights bit for bit. It keeps a whole copy of the
weights and draws whole noise tensors: for small models and tests only.
"""
from __future__ import annotations

import hashlib

import numpy as np
import torch

from .noise import make_noise, tensor_noise
from .shaping import shape
from .strategy import Strategy


def derive_seed(*parts: object) -> int:
    """A copy of esopt.utils.seeding.derive_seed (importing it would load esopt outside es/)."""
    digest = hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def parameters(model: torch.nn.Module, scope: str = "full") -> list[tuple[str, torch.nn.Parameter]]:
    """The parameters ES moves, in es.perturb.select_parameters' order: "full", every parameter
    (tied weights once); "all_linear", the weights and biases of nn.Linear layers but the head."""
    named = list(model.named_parameters())
    if scope == "full":
        return named
    if scope == "all_linear":
        linear = {id(p) for mod_name, mod in model.named_modules()
                  if isinstance(mod, torch.nn.Linear) and not mod_name.endswith("lm_head")
                  for p in mod.parameters(recurse=False)}
        return [(n, p) for n, p in named if id(p) in linear]
    raise ValueError(f"the reference knows scopes 'full' and 'all_linear', not {scope!r}")


@torch.no_grad()
def reference_generation(model: torch.nn.Module, play, *, run_seed: int, generation: int, population: int,
                         sigma: float, alpha: float, antithetic: bool = True, shaping: str = "zscore",
                         scope: str = "full", noise: str = "gaussian") -> dict:
    """Run generation `generation` of a run seeded `run_seed` on `model`, updating it in place.

    play(model) -> float: the member's reward, played on the model as it is (perturbed), i.e.
    the mean reward of its episodes. Returns the fields of the generation's history record
    (seeds, signs, rewards, shaped, coefficients, ...); the new weights are left in `model`.
    """
    params = parameters(model, scope)
    if any(p.dtype != torch.float32 for _, p in params):
        raise ValueError("the reference is float32 only (bf16/fp16 updates go through es/rounding.py)")
    names = [name for name, _ in params]
    source = make_noise(noise)

    def eps(seed: int, name: str, p: torch.Tensor) -> torch.Tensor:
        # The float32 noise of one tensor, drawn in CHUNK-sized pieces as the real code draws it:
        # splitting a torch draw can change its numbers (a last piece under 16 floats takes
        # torch's scalar path), so tensor_noise splits it the same way.
        return tensor_noise(seed, name, p.numel(), source, p.device).to(p.device).view_as(p)

    # 1. seeds. The strategy's seed comes from the run seed as in algos/es/trainer.py's es_step. Given each
    # seed's generator keys (one per tensor), ask redraws a seed whose keys collide with another
    # stream of the generation; the trainer passes them (Perturber.stream_keys), so we do too.
    strategy = Strategy(population, derive_seed("strategy", run_seed), antithetic, shaping)
    keys = getattr(source, "stream_keys", None)
    members = strategy.ask(generation, (lambda s: keys(s, names)) if keys else None)

    # 2.-3. perturb, play, restore, one member after another, always from the same weights.
    base = [p.detach().clone() for _, p in params]
    rewards = []
    for m in members:
        scale = float(m.sign) * float(sigma)  # one float64 scale, as Perturber.perturbed makes it
        for name, p in params:
            p.add_(eps(m.seed, name, p) * scale)  # float32: fp32(scale) * eps, then an add (no FMA)
        try:
            rewards.append(float(play(model)))
        finally:
            for (_, p), w in zip(params, base):
                p.copy_(w)  # copied back (the real restore subtracts, then patches lost bits)

    # 4. shape: rewards -> weights (zero-mean; non-finite rewards count as the worst), times the sign.
    signs = [m.sign for m in members]
    shaped = shape(rewards, shaping)
    coefficients = shaped * np.array(signs, dtype=np.float64)

    # 5. update, in Perturber.apply_update's order, so that the float32 sums round the same way:
    # members sharing a seed (an antithetic pair) are merged first, their coefficients summed in
    # float64, seeds kept in order of first appearance, and zero sums dropped.
    merged: dict[int, float] = {}
    for m, c in zip(members, coefficients.tolist()):
        merged[m.seed] = merged.get(m.seed, 0.0) + c
    merged = {s: c for s, c in merged.items() if c != 0.0}
    # With nothing to add the weights are not touched at all (adding +0.0 would turn -0.0 into +0.0).
    if merged and alpha != 0.0:
        step = float(alpha) / float(population)  # one float64 factor, divided before it meets the noise
        for name, p in params:
            acc = torch.zeros(p.shape, dtype=torch.float32, device=p.device)
            for s, c in merged.items():
                acc += eps(s, name, p) * c  # fp32(c) * eps, accumulated in float32, seed by seed
            p += acc * step  # then fp32(step) * acc, added to the weights once

    return {"generation": generation, "sigma": float(sigma), "alpha": float(alpha), "population": len(members),
            "seeds": [m.seed for m in members], "signs": signs, "rewards": rewards,
            "shaped": shaped.tolist(), "coefficients": coefficients.tolist()}
