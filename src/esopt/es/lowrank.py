"""Low-rank perturbations applied as side terms (EGGROLL-style).

Member i perturbs every selected linear weight W (out x in) by
sigma_i * A_i B_i^T / sqrt(r), with A_i (out x r) and B_i (in x r) drawn from
(member seed, module name). The weights are never modified: a forward hook adds
scale_row * ((x @ B) @ A^T) / sqrt(r) to each linear layer's output, where
every row of the batch may belong to a different member, so a whole
population decodes in one batched forward. An embedding tied to a perturbed
linear weight (an output head sharing the input embeddings) gets the same
perturbation in its lookup, so both uses of the tensor see the member's
weights. The ES update sums the members' weighted A B^T into one full-rank
change of W.

Selected with `es.noise: lowrank` (`es.rank`). The other tensors in `es.scope`
(norms, untied embeddings, biases) follow `es.lowrank_others`: `frozen` (neither
perturbed nor updated; the whole population decodes in one batch) or `full`
(full-rank noise of their own, applied in place per member and restored
exactly, updated like full-rank ES; members then decode one after another,
each with its side terms and its perturbed other tensors).
"""
from __future__ import annotations

import math
from contextlib import contextmanager

import torch
from torch import nn

from .noise import CHUNK, stream_key
from .optim import SGD
from .perturb import Perturber, merge_seeds, select_parameters
from .rounding import LOW_PRECISION, add_update, rounding_key, uniforms
from .scales import describe_scales, tensor_scales


class LowRankPerturber:
    def __init__(self, model: nn.Module, rank: int = 1, scope: str | list[str] = "all_linear", others: str = "frozen",
                 others_noise=None, rounding: str = "compensated", sigma_scale: str = "none", rule=None):
        if rank < 1:
            raise ValueError(f"es.rank must be >= 1, got {rank}")
        if others not in ("frozen", "full"):
            raise ValueError(f"es.lowrank_others must be 'frozen' or 'full', got {others!r}")
        self.model, self.rank = model, rank
        self.rule = rule or SGD()  # es.optimizer (es/optim.py): one rule, its state per tensor, the others' too
        selected = select_parameters(model, scope)
        chosen = {id(p) for _, p in selected}
        self.linears = [(name, mod) for name, mod in model.named_modules()
                        if isinstance(mod, nn.Linear) and id(mod.weight) in chosen]
        if not self.linears:
            raise ValueError(f"low-rank noise needs nn.Linear layers in scope {scope!r}; found none")
        self.numel = sum(mod.weight.numel() for _, mod in self.linears)
        # a linear weight tied to an embedding (an output head sharing the input embeddings):
        # the embedding lookup gets the same member's perturbation, row by token
        side = {id(mod.weight): k for k, (_, mod) in enumerate(self.linears)}
        self.tied = [(mod, side[id(mod.weight)]) for _, mod in model.named_modules()
                     if isinstance(mod, nn.Embedding) and id(mod.weight) in side]
        # the in-scope tensors the side terms do not cover: full-rank noise of their own, or frozen
        rest = [name for name, p in selected if id(p) not in side]
        self.others = (Perturber(model, rest, others_noise, fused=False, rounding=rounding, rule=self.rule)
                       if others == "full" and rest else None)
        # es.sigma_scale (es/scales.py) over every tensor this perturber moves: the linear weights and the others
        moved = [(name, mod.weight) for name, mod in self.linears] + (self.others.params if self.others else [])
        self.sigma_scale = sigma_scale
        scales = tensor_scales(moved, sigma_scale, len(list(model.parameters())))
        self.scales = [scales[name] for name, _ in self.linears]  # per linear, in self.linears' order
        if self.others is not None:
            self.others.scales = {name: scales[name] for name, _ in self.others.params}
        self.rounding = rounding
        self.compensation: dict[str, torch.Tensor] = {}  # es.update_rounding=compensated: bf16, CPU
        if self.others is not None:
            self.numel += self.others.numel
        self._cache_key, self._cache = None, []

    def prepare(self) -> float:
        """The fused kernels of the other tensors (es.lowrank_others=full), loaded now; their seconds."""
        return self.others.prepare() if self.others is not None else 0.0

    @property
    def play_mode(self) -> str:
        """How members are played: "rows", many members as rows of one batch (side terms only), or
        "rows+others" (es.lowrank_others=full): one member at a time, its other tensors perturbed in
        place (others_perturbed) and its linear weights as side terms."""
        return "rows" if self.others is None else "rows+others"

    def stream_keys(self, seed: int) -> list[int]:
        """32-bit generator keys of this member's factor streams (and of the other tensors' noise)."""
        keys = [stream_key(seed, f"{name}/lowrank{self.rank}") for name, _ in self.linears]
        return keys + (self.others.stream_keys(seed) if self.others is not None else [])

    def describe(self) -> dict:
        out = {"kind": "lowrank", "rank": self.rank, "modules": len(self.linears)}
        if any(mod.weight.dtype in LOW_PRECISION for _, mod in self.linears):
            out["update_rounding"] = self.rounding
        if self.others is not None:
            out["others"] = {"tensors": len(self.others.params), "numel": self.others.numel, **self.others.describe()}
        if self.sigma_scale != "none":
            out["sigma_scale"] = {"rule": self.sigma_scale, **describe_scales(dict(enumerate(self.scales)))}
        return out

    @contextmanager
    def others_perturbed(self, seed: int, sigma: float, sign: int = 1):
        """The other tensors at theta + sign*sigma*eps(seed) inside (es.lowrank_others=full); a no-op when frozen."""
        if self.others is None:
            yield
        else:
            with self.others.perturbed(seed, sigma, sign):
                yield

    def factors(self, seed: int, name: str, out_f: int, in_f: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(A: out x r, B: in x r), float32, CPU, reproducible from (seed, module name)."""
        g = torch.Generator(device="cpu").manual_seed(stream_key(seed, f"{name}/lowrank{self.rank}"))
        a = torch.randn(out_f, self.rank, generator=g)
        b = torch.randn(in_f, self.rank, generator=g)
        return a, b

    def delta(self, seed: int, name: str, mod: nn.Linear, device=None) -> torch.Tensor:
        """The member's full perturbation direction of one weight: A B^T / sqrt(r) (unit-variance entries)."""
        a, b = self.factors(seed, name, mod.out_features, mod.in_features)
        return _outer(a.to(device or "cpu"), b.to(device or "cpu"), self.rank)

    @contextmanager
    def side_terms(self, seeds: list[int], scales: list[float], row_member: torch.Tensor):
        """Inside, batch row j runs with member row_member[j]: W + scales[m] * A_m B_m^T / sqrt(r).

        seeds/scales list the distinct members of the batch (scale = sign * sigma);
        row_member (batch,) indexes them. Weights are never touched.
        """
        row_member = row_member.long()
        handles = []
        try:
            stacked = self._stacked(seeds)
            for (name, mod), (a, b), unit in zip(self.linears, stacked, self.scales):
                dev, dt = mod.weight.device, mod.weight.dtype
                scale = torch.tensor([s * unit for s in scales], dtype=dt, device=dev) / math.sqrt(self.rank)
                handles.append(mod.register_forward_hook(_make_hook(a, b, scale, row_member.to(dev))))
            for emb, k in self.tied:
                a, b = stacked[k]
                scale = torch.tensor([s * self.scales[k] for s in scales], dtype=a.dtype, device=a.device) / math.sqrt(self.rank)
                handles.append(emb.register_forward_hook(_make_embedding_hook(a, b, scale, row_member.to(a.device))))
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
        """W += alpha / population * sum_i c_i * A_i B_i^T / sqrt(r), accumulated in fp32
        (and the full-rank update of the other tensors with es.lowrank_others=full)."""
        seeds, coefficients = list(seeds), list(coefficients)
        if self.others is not None:
            self.others.apply_update(seeds, coefficients, alpha, population)
        merged = merge_seeds(seeds, coefficients)
        if not merged or alpha == 0.0:
            return
        unit = self.rule.unit(alpha, population)
        for (name, mod), tensor_scale in zip(self.linears, self.scales):
            step = unit * tensor_scale
            w = mod.weight.data
            self.rule.begin(name, w.numel(), w.device)
            # made on the weights' device, a block of rows at a time (no full-size float32 transient of a
            # large matrix such as the output head): elementwise, so the blocks give the same bits as one piece
            block = max(1, CHUNK // mod.in_features)
            comp = None
            if w.dtype in LOW_PRECISION and self.rounding == "compensated":
                if name not in self.compensation:
                    self.compensation[name] = torch.zeros(w.numel(), dtype=torch.bfloat16)
                comp = self.compensation[name]
            # stochastic rounding: the tensor's uniforms from one Philox stream, as when it was one piece
            u = (uniforms(rounding_key(seeds, name, 0), w.numel())
                 if w.dtype in LOW_PRECISION and self.rounding == "stochastic" else None)
            factors = [(*(f.to(w.device) for f in self.factors(s, name, mod.out_features, mod.in_features)), c)
                       for s, c in merged.items()]
            for lo in range(0, mod.out_features, block):
                rows = slice(lo, min(lo + block, mod.out_features))
                acc = torch.zeros((rows.stop - rows.start, mod.in_features), dtype=torch.float32, device=w.device)
                for a, b, c in factors:
                    acc.add_(_outer(a[rows], b, self.rank), alpha=c)
                acc = self.rule.direction(name, rows.start * mod.in_features, acc, population)  # sgd: acc itself
                part = w[rows].view(-1)
                if w.dtype in LOW_PRECISION and self.rounding != "nearest":
                    flat = slice(rows.start * mod.in_features, rows.stop * mod.in_features)
                    add_update(part, acc.mul_(step).view(-1), self.rounding,
                               compensation=None if comp is None else comp[flat], u=None if u is None else u[flat])
                else:
                    part.add_((acc * step).view(-1).to(w.dtype))


def _outer(a: torch.Tensor, b: torch.Tensor, rank: int) -> torch.Tensor:
    """A B^T / sqrt(r) for A (rows x r), B (in x r): element (i, j) is a_i0 b_j0, then + a_ik b_jk for
    k = 1..r-1 one fused multiply-add at a time, then / sqrt(r). Elementwise operations in a fixed order,
    so every device makes the same bits (a matmul's summation order is its library's choice; on the CPU
    it is this order for the ranks tried), and a block of rows equals those rows of the whole."""
    out = a[:, :1] * b[:, 0]
    for k in range(1, rank):
        out.addcmul_(a[:, k : k + 1], b[:, k])
    return out.div_(math.sqrt(rank))

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


def _make_embedding_hook(a, b, scale, row_member):
    """Embedding rows of a weight tied to a perturbed linear layer (out = vocab): token t of
    row j gets scale_m * A_m[t] B_m^T, m = row_member[j]; only the looked-up rows of A are gathered."""
    b_rows_t = b[row_member].transpose(1, 2)  # rows x r x dim
    row_scale = scale[row_member].view(-1, 1, 1)

    def hook(module, inputs, output):
        ids = inputs[0]
        if ids.shape[0] != row_member.shape[0]:
            raise RuntimeError(f"low-rank side terms were set up for {row_member.shape[0]} rows, got a batch of {ids.shape[0]}")
        a_tok = a[row_member.view(-1, 1), ids] * row_scale  # rows x tokens x r
        return torch.baddbmm(output, a_tok, b_rows_t)

    return hook
