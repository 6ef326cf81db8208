"""Low-rank perturbations applied as side terms (EGGROLL-style).

Member i perturbs every selected linear weight W (out x in) by
sigma_i * A_i B_i^T / sqrt(r), with A_i (out x r) and B_i (in x r) drawn from
(member seed, module name). The weights are never modified: a forward hook adds
scale_row * ((x @ B) @ A^T) / sqrt(r) to each linear layer's output, where
every row of the batch may belong to a different member, so a whole
population decodes in one batched forward. The ES update sums the members'
weighted A B^T into one full-rank change of W.

Selected with `es.noise: lowrank` (`es.rank`); only nn.Linear weights in
`es.scope` are perturbed and updated, other tensors stay frozen.
"""
from __future__ import annotations

import math
from contextlib import contextmanager

import torch
from torch import nn

from .noise import tensor_seed
from .perturb import merge_seeds, select_parameters


class LowRankPerturber:
    def __init__(self, model: nn.Module, rank: int = 1, scope: str | list[str] = "all_linear"):
        if rank < 1:
            raise ValueError(f"es.rank must be >= 1, got {rank}")
        self.model, self.rank = model, rank
        chosen = {id(p) for _, p in select_parameters(model, scope)}
        self.linears = [(name, mod) for name, mod in model.named_modules()
                        if isinstance(mod, nn.Linear) and id(mod.weight) in chosen]
        if not self.linears:
            raise ValueError(f"low-rank noise needs nn.Linear layers in scope {scope!r}; found none")
        self.numel = sum(mod.weight.numel() for _, mod in self.linears)
        self._cache_key, self._cache = None, []

    def describe(self) -> dict:
        return {"kind": "lowrank", "rank": self.rank, "modules": len(self.linears)}

    def factors(self, seed: int, name: str, out_f: int, in_f: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(A: out x r, B: in x r), float32, CPU, reproducible from (seed, module name)."""
        g = torch.Generator(device="cpu").manual_seed(tensor_seed(seed, f"{name}/lowrank{self.rank}"))
        a = torch.randn(out_f, self.rank, generator=g)
        b = torch.randn(in_f, self.rank, generator=g)
        return a, b

    def delta(self, seed: int, name: str, mod: nn.Linear) -> torch.Tensor:
        """The member's full perturbation direction of one weight: A B^T / sqrt(r) (unit-variance entries)."""
        a, b = self.factors(seed, name, mod.out_features, mod.in_features)
        return (a @ b.T) / math.sqrt(self.rank)

    @contextmanager
    def side_terms(self, seeds: list[int], scales: list[float], row_member: torch.Tensor):
        """Inside, batch row j runs with member row_member[j]: W + scales[m] * A_m B_m^T / sqrt(r).

        seeds/scales list the distinct members of the batch (scale = sign * sigma);
        row_member (batch,) indexes them. Weights are never touched.
        """
        row_member = row_member.long()
        handles = []
        try:
            for (name, mod), (a, b) in zip(self.linears, self._stacked(seeds)):
                dev, dt = mod.weight.device, mod.weight.dtype
                scale = torch.tensor(scales, dtype=dt, device=dev) / math.sqrt(self.rank)
                handles.append(mod.register_forward_hook(_make_hook(a, b, scale, row_member.to(dev))))
            yield
        finally:
            for h in handles:
                h.remove()

    def _stacked(self, seeds: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per module: (M x out x r, M x in x r) factors of these members, on the weights' device and dtype.

        Kept for the last list of seeds: a generation enters side_terms for every turn
        and batch with the same members, and drawing the factors each time costs more
        than keeping them (M x sum(out + in) x r floats).
        """
        key = tuple(int(s) for s in seeds)
        if self._cache_key != key:
            self._cache = []
            for name, mod in self.linears:
                fac = [self.factors(s, name, mod.out_features, mod.in_features) for s in key]
                dev, dt = mod.weight.device, mod.weight.dtype
                self._cache.append((torch.stack([f[0] for f in fac]).to(dev, dt), torch.stack([f[1] for f in fac]).to(dev, dt)))
            self._cache_key = key
        return self._cache

    @torch.no_grad()
    def apply_update(self, seeds, coefficients, alpha: float, population: int) -> None:
        """W += alpha / population * sum_i c_i * A_i B_i^T / sqrt(r), accumulated in fp32."""
        merged = merge_seeds(seeds, coefficients)
        if not merged or alpha == 0.0:
            return
        step = float(alpha) / float(population)
        for name, mod in self.linears:
            acc = torch.zeros(mod.out_features, mod.in_features, dtype=torch.float32)
            for s, c in merged.items():
                acc.add_(self.delta(s, name, mod), alpha=c)
            mod.weight.data.add_((acc * step).to(mod.weight.device, mod.weight.dtype))


def _make_hook(a, b, scale, row_member):
    # gathered once per context, not per forward: each row's own factors, A already scaled
    b_rows = b[row_member]  # rows x in x r
    a_rows_t = (a[row_member] * scale[row_member].view(-1, 1, 1)).transpose(1, 2)  # rows x r x out

    def hook(module, inputs, output):
        x = inputs[0]
        if x.shape[0] != row_member.shape[0]:
            raise RuntimeError(f"low-rank side terms were set up for {row_member.shape[0]} rows, got a batch of {x.shape[0]}")
        flat = x.reshape(x.shape[0], -1, x.shape[-1])  # rows x tokens x in
        z = torch.bmm(flat, b_rows)  # rows x tokens x r
        # output + z @ (scale * A)^T, the add fused into the batched matmul
        return torch.baddbmm(output.reshape(z.shape[0], z.shape[1], -1), z, a_rows_t).reshape(output.shape)

    return hook
