"""esopt bench precision: what float32, bfloat16 and float16 weights do to ES.

For the demo's settings (configs/demo.yaml) and the paper's (configs/paper-sudoku9.yaml):
20 generations of real ES updates (the strategy's seeds, z-scored coefficients of
random rewards, the setting's alpha and population) are applied to a copy of the
model's first and last decoder layers and final norm in each dtype, with each
`es.update_rounding`, and compared with the same updates summed in float64:

- rel_error: ||realised - intended|| / ||intended|| over all elements;
- bias: <realised, intended> / ||intended||^2 - 1 (how much of the intended update the
  weights moved along it: 0 = all of it, -1 = none);
- floor: rel_error of the float64 result rounded once to the dtype (no method that
  stores the weights in that dtype can do better);
- changed: share of elements whose bits changed over the 20 generations;
- perturbed_share at the setting's sigma (start and end): share of elements whose bits
  a member's perturbation changes (round-to-nearest; the perturbation must restore
  exactly, so it is not rounded stochastically).

RESULT lines (the paper's settings, the default rounding): bf16_update_rel_error_20gen,
bf16_update_bias, bf16_perturbed_share, and the same for `nearest` (the old behaviour).
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

SETTINGS = {"demo": "demo.yaml", "paper": "paper-sudoku9.yaml"}  # in the configs folder
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
GENERATIONS = 20


class Subset(nn.Module):
    """Named copies of some parameters (names kept, so the noise streams are the model's)."""

    def __init__(self, named: list[tuple[str, torch.Tensor]], dtype: torch.dtype):
        super().__init__()
        self.names = [n for n, _ in named]
        for k, (_, t) in enumerate(named):
            self.register_parameter(f"p{k}", nn.Parameter(t.detach().to(dtype).clone(), requires_grad=False))

    def named_parameters(self, *args, **kwargs):  # the model's names, for the noise streams
        for n, (_, p) in zip(self.names, super().named_parameters()):
            yield n, p


def pick(model: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """The first and last decoder layers and the final norm (all tensors of each)."""
    named = list(model.named_parameters())
    layers = sorted({int(m.group(1)) for n, _ in named if (m := re.search(r"\.layers\.(\d+)\.", n))})
    keep = {f".layers.{layers[0]}.", f".layers.{layers[-1]}."} if layers else set()
    out = [(n, p) for n, p in named if any(k in n for k in keep) or n.endswith("norm.weight") and ".layers." not in n]
    return out or named


def updates(cfg, seed: int = 0) -> list[tuple[list[int], np.ndarray, float, int]]:
    """GENERATIONS updates as the trainer makes them: (seeds, coefficients, alpha, population)."""
    from ...es.step import ESStep
    from ...es.strategy import Strategy

    strat = Strategy(cfg.es.population, seed, cfg.es.antithetic, cfg.es.shaping)
    schedules = ESStep(strat, None, cfg.es.sigma, cfg.es.alpha, cfg.es.generations)
    rng = np.random.default_rng(seed)
    out = []
    for t in range(GENERATIONS):
        members = strat.ask(t)
        coefs = strat.tell(members, rng.standard_normal(len(members)).tolist()).coefficients
        _, alpha = schedules.values(min(t, cfg.es.generations - 1))
        out.append(([m.seed for m in members], coefs, alpha, len(members)))
    return out


def intended_update(named, ups) -> dict[str, torch.Tensor]:
    """The updates summed in float64 (noise drawn as the perturber draws it)."""
    from ...es.noise import tensor_noise
    from ...es.perturb import merge_seeds

    total = {n: torch.zeros(p.numel(), dtype=torch.float64) for n, p in named}
    for seeds, coefs, alpha, pop in ups:
        for s, c in merge_seeds(seeds, coefs).items():
            for n, v in total.items():
                v.add_(tensor_noise(s, n, v.numel()).double(), alpha=alpha / pop * c)
    return total


def measure(named, dtype, rounding: str, ups, want: dict) -> dict:
    from ...es.perturb import Perturber

    sub = Subset(named, dtype)
    start = {n: p.detach().double().reshape(-1).clone() for n, p in sub.named_parameters()}
    before = {n: p.detach().reshape(-1).clone() for n, p in sub.named_parameters()}
    pert = Perturber(sub, "full", rounding=rounding, fused=False)
    t0 = time.time()
    for seeds, coefs, alpha, pop in ups:
        pert.apply_update(seeds, coefs, alpha, pop)
    seconds = time.time() - t0
    real = torch.cat([p.detach().double().reshape(-1) - start[n] for n, p in sub.named_parameters()])
    w = torch.cat([want[n] for n in start])
    best = torch.cat([(start[n] + want[n]).to(dtype).double() - start[n] for n in start])
    changed = sum(int((p.detach().reshape(-1) != before[n]).sum()) for n, p in sub.named_parameters())
    norms = [n for n in start if n.endswith("norm.weight")]
    out = {"rel_error": float((real - w).norm() / w.norm()), "bias": float(real @ w / (w @ w)) - 1.0,
           "floor": float((best - w).norm() / w.norm()), "changed": changed / real.numel(),
           "seconds": seconds}
    if norms:
        rn = torch.cat([p.detach().double().reshape(-1) - start[n] for n, p in sub.named_parameters() if n in norms])
        wn = torch.cat([want[n] for n in norms])
        out["norms_bias"] = float(rn @ wn / (wn @ wn)) - 1.0
    if rounding == "compensated" and dtype != torch.float32:
        out["compensation_mb"] = sum(c.numel() * 2 for c in pert.compensation.values()) / 2**20
    return out


def perturbed_share(named, dtype, sigma: float, seed: int) -> float:
    from ...es.perturb import Perturber

    sub = Subset(named, dtype)
    before = [p.detach().reshape(-1).clone() for _, p in sub.named_parameters()]
    pert = Perturber(sub, "full", fused=False)
    with pert.perturbed(seed, sigma):
        diff = sum(int((p.detach().reshape(-1) != b).sum()) for (_, p), b in zip(sub.named_parameters(), before))
    return diff / sum(b.numel() for b in before)


def main(config: str, overrides: list[str], out: str) -> dict:
    from ...config import load_config
    from ...es.rounding import ROUNDINGS
    from ...models import load_model
    from ..common import write_results

    base = load_config(config, overrides)
    if base.runtime.threads:
        torch.set_num_threads(base.runtime.threads)
    model, _ = load_model(base.model)  # float32; each dtype starts from its own cast of these weights
    named = [(n, p.detach()) for n, p in pick(model)]
    numel = sum(p.numel() for _, p in named)
    print(f"[bench] precision: {len(named)} tensors ({numel / 1e6:.1f}M elements) of {base.model}, "
          f"{GENERATIONS} generations per setting", flush=True)
    table: dict = {}
    folder = Path(config).parent
    if not all((folder / f).exists() for f in SETTINGS.values()):
        folder = Path(__file__).resolve().parents[3] / "configs"  # the repository's configs
    for setting, name in SETTINGS.items():
        cfg = load_config(folder / name, [f"model={base.model}"])
        ups = updates(cfg)
        t0 = time.time()
        want = intended_update(named, ups)
        print(f"[bench] {setting}: G={cfg.es.population}, alpha {cfg.es.alpha.start:g}, sigma "
              f"{cfg.es.sigma.start:g} -> {cfg.es.sigma.end:g}; float64 reference in {time.time() - t0:.0f}s", flush=True)
        rows = {}
        for dname, dt in DTYPES.items():
            share = {f"perturbed_share_sigma_{k}": perturbed_share(named, dt, getattr(cfg.es.sigma, k), ups[0][0][0])
                     for k in ("start", "end")}
            for rounding in (ROUNDINGS if dt != torch.float32 else ("nearest",)):
                key = dname if dt == torch.float32 else f"{dname}-{rounding}"
                rows[key] = {**measure(named, dt, rounding, ups, want), **share}
                r = rows[key]
                print(f"  {key:22s} rel_error {r['rel_error']:.4f} (floor {r['floor']:.4f})  bias {r['bias']:+.4f}  "
                      f"changed {r['changed']:.3f}  perturbed {r['perturbed_share_sigma_start']:.3f}/"
                      f"{r['perturbed_share_sigma_end']:.3f}", flush=True)
        table[setting] = {"population": cfg.es.population, "alpha": cfg.es.alpha.start,
                          "sigma": [cfg.es.sigma.start, cfg.es.sigma.end], "rows": rows}
    paper = table["paper"]["rows"]
    res = {"bf16_update_rel_error_20gen": paper["bfloat16-compensated"]["rel_error"],
           "bf16_update_bias": paper["bfloat16-compensated"]["bias"],
           "bf16_update_floor_20gen": paper["bfloat16-compensated"]["floor"],
           "bf16_nearest_update_rel_error_20gen": paper["bfloat16-nearest"]["rel_error"],
           "bf16_nearest_update_bias": paper["bfloat16-nearest"]["bias"],
           "bf16_stochastic_update_rel_error_20gen": paper["bfloat16-stochastic"]["rel_error"],
           "bf16_stochastic_update_bias": paper["bfloat16-stochastic"]["bias"],
           "bf16_perturbed_share": paper["bfloat16-compensated"]["perturbed_share_sigma_start"]}
    write_results(out, "precision", res, {"config": config, "overrides": overrides, "generations": GENERATIONS,
                                          "tensors": [n for n, _ in named], "numel": numel, "table": table})
    return res
