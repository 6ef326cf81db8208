"""In-place full-rank perturbation with bit-exact restore, and the ES update.

Restoring by subtracting the noise again is not exact in floating point:
(w + d) - d differs from w on a few percent of elements. While perturbing we
therefore compute, chunk by chunk, what the restore will produce, and keep
the original values of only the elements where it would differ (int32 index +
original value; in host memory when the weights are on an accelerator). Restore
subtracts the regenerated noise and writes those values back, so every byte of
the weights is recovered without ever holding a second copy of the weights
(measured extra memory: see docs/method.md).
"""
from __future__ import annotations

import fnmatch
import hashlib
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from . import kernels
from .noise import CHUNK, GaussianNoise, chunk_slices
from .optim import SGD
from .rounding import LOW_PRECISION, ROUNDINGS, add_update, rounding_key
from .scales import describe_scales, tensor_scales

# integer dtypes of the same width, to compare floats bit for bit (-0.0 vs +0.0)
_BITS = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16,
         torch.float64: torch.int64}


class ScopeError(ValueError):
    """es.scope selects no parameter of the model: a setting the user fixes (one line, like a config error)."""


def bits_differ(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Elementwise: do a and b (same float dtype) differ in any bit? (-0.0 vs +0.0 does; NaN vs
    the same NaN does not). A float != would miss the sign of zero."""
    ints = _BITS[a.dtype]
    return torch.ne(a.view(ints), b.view(ints), out=out)

# es.scope presets (docs/config.md): parameter-efficient ES moves a named part of the model
SCOPES = ("full", "all_linear", "norms", "attention", "mlp", "last:N")


def select_parameters(model: nn.Module, scope: str | list[str] = "full") -> list[tuple[str, torch.Tensor]]:
    """Parameters ES perturbs and updates, in a fixed order (the model's own).

    full: every parameter; all_linear: weights and biases of nn.Linear layers except the output
    head; norms: the weights of normalisation layers and every bias; attention: the parameters of
    the attention blocks; mlp: those of the feed-forward blocks; last:N: every parameter of the last
    N transformer blocks (and the final norm); a list of glob patterns: parameters whose name
    matches any of them. Tied parameters are visited once.
    """
    named = list(model.named_parameters())  # deduplicates tied weights
    if isinstance(scope, str):
        chosen = _preset(model, named, scope)
    else:
        patterns = list(scope)
        chosen = [(n, p) for n, p in named if any(fnmatch.fnmatchcase(n, pat) for pat in patterns)]
    if not chosen:
        raise ScopeError(f"es.scope {scope!r} selects no parameters of this model")
    return chosen


def _owned_by(model: nn.Module, keep) -> set[int]:
    """ids of the parameters directly owned by modules for which keep(name, module) holds."""
    return {id(p) for mod_name, mod in model.named_modules() if keep(mod_name, mod)
            for p in mod.parameters(recurse=False)}


def _blocks(model: nn.Module) -> tuple[str, int]:
    """The transformer blocks: the name of the model's longest nn.ModuleList and its length."""
    lists = [(len(m), name) for name, m in model.named_modules() if isinstance(m, nn.ModuleList)]
    if not lists:
        raise ScopeError("es.scope last:N needs a model whose blocks sit in an nn.ModuleList")
    n, name = max(lists)
    return name, n


def _preset(model: nn.Module, named, scope: str):
    if scope == "full":
        return named
    if scope == "all_linear":
        ids = _owned_by(model, lambda n, m: isinstance(m, nn.Linear) and not n.endswith("lm_head"))
    elif scope == "norms":
        ids = _owned_by(model, lambda n, m: "norm" in type(m).__name__.lower())
        ids |= {id(p) for n, p in named if n.rpartition(".")[2] == "bias"}
    elif scope in ("attention", "mlp"):
        key = ("attn", "attention") if scope == "attention" else ("mlp", "feed_forward", "ffn")
        # a module path part naming the block (self_attn, attention, mlp, ...); not post_attention_layernorm
        ids = _owned_by(model, lambda n, m: any(k in part and "norm" not in part for part in n.split(".") for k in key))
    elif scope.startswith("last:") and scope[5:].isdigit() and int(scope[5:]) >= 1:
        blocks, total = _blocks(model)
        keep = {f"{blocks}.{i}" for i in range(max(0, total - int(scope[5:])), total)}
        ids = _owned_by(model, lambda n, m: any(n == b or n.startswith(b + ".") for b in keep)
                        or (n.count(".") <= 1 and "norm" in type(m).__name__.lower()))
    else:
        raise ValueError(f"unknown parameter scope {scope!r}; allowed: {', '.join(SCOPES)} or a list of name patterns")
    return [(n, p) for n, p in named if id(p) in ids]


def merge_seeds(seeds: Iterable[int], coefficients: Iterable[float]) -> dict[int, float]:
    """Sum the coefficients of members sharing a seed (antithetic pairs); drop zeros."""
    merged: dict[int, float] = defaultdict(float)
    for s, c in zip(seeds, coefficients):
        merged[int(s)] += float(c)
    return {s: c for s, c in merged.items() if c != 0.0}


@dataclass
class Correction:
    name: str
    start: int
    index: torch.Tensor  # int32 positions within the chunk
    values: torch.Tensor  # original values at those positions

    def nbytes(self) -> int:
        return self.index.numel() * self.index.element_size() + self.values.numel() * self.values.element_size()


class _Buffers:
    """Chunk-sized work buffers, allocated once and reused.

    Perturb, restore and update allocate no large temporaries: freeing
    multi-MB blocks between small long-lived ones (the corrections) fragments
    the heap, which measured +400 MB peak RSS on SmolLM2-135M before.
    """

    def __init__(self):
        self._store: dict[tuple, torch.Tensor] = {}

    def get(self, name: str, n: int, dtype=torch.float32, device="cpu") -> torch.Tensor:
        key = (name, dtype, str(device))
        buf = self._store.get(key)
        if buf is None:
            buf = self._store[key] = torch.empty(CHUNK, dtype=dtype, device=device)
        return buf[:n]


class Perturber:
    """perturb / restore / apply_update over a fixed set of parameters."""

    def __init__(self, model: nn.Module, scope: str | list[str] = "full", noise=None, fused: bool = True,
                 rounding: str = "compensated", sigma_scale: str = "none", rule=None):
        if rounding not in ROUNDINGS:
            raise ValueError(f"unknown es.update_rounding {rounding!r}; allowed: {', '.join(ROUNDINGS)}")
        self.model = model
        self.fused = fused  # float32 CPU chunks use the one-pass kernels (same bits as the torch path)
        self.noise = noise or GaussianNoise()
        self.rounding = rounding  # how updates enter bf16/fp16 weights (float32 weights: plain adds)
        self.rule = rule or SGD()  # es.optimizer: what the update does with its noise sum (es/optim.py)
        self.compensation: dict[str, torch.Tensor] = {}  # es.update_rounding=compensated: bf16, CPU, per tensor
        self.params = select_parameters(model, scope)
        for _, p in self.params:
            if not p.is_contiguous():
                raise ValueError("ES needs contiguous parameters")
        # es.sigma_scale: each tensor's share of sigma and alpha (es/scales.py; 1.0 everywhere by default)
        self.sigma_scale = sigma_scale
        self.scales = tensor_scales(self.params, sigma_scale, len(list(model.parameters())))
        self.last_correction_bytes = 0
        # es.diagnostics=full: apply_update also measures the update it made against the one it meant
        # (last_update_check: share of elements moved, cosine and norm ratio; None when not measured)
        self.check_update = False
        self.last_update_check: dict | None = None
        self._buf = _Buffers()
        self._no_correction = (torch.zeros(0, dtype=torch.int32), torch.zeros(0))

    # how members are played (the perturber interface every runner asks): "in_place", one member at a
    # time with the weights perturbed and restored; the low-rank perturber's "rows" and "rows+others"
    play_mode = "in_place"

    @property
    def numel(self) -> int:
        return sum(p.numel() for _, p in self.params)

    def describe(self) -> dict:
        out = self.noise.describe()
        if any(p.dtype in LOW_PRECISION for _, p in self.params):
            out["update_rounding"] = self.rounding
        if self.sigma_scale != "none":
            out["sigma_scale"] = {"rule": self.sigma_scale, **describe_scales(self.scales)}
        return out

    def stream_keys(self, seed: int) -> list[int]:
        """The 32-bit generator keys of this member's noise streams (one per tensor), for checking
        that no two streams of a generation coincide; [] for noise without such keys (table)."""
        keys = getattr(self.noise, "stream_keys", None)
        return keys(seed, [name for name, _ in self.params]) if keys else []

    def _chunks(self, seed: int) -> Iterator[tuple[str, int, torch.Tensor, torch.Tensor]]:
        """(name, start, flat chunk view of the weights, fp32 noise) in stream order (the noise not yet
        multiplied by the tensor's scale: perturb and restore scale it, self.scales[name]).

        The noise chunk may be a view of shared storage (the noise table): read it, never write it.
        """
        for name, p in self.params:
            flat = p.data.view(-1)
            stream = self.noise.stream(seed, name, flat.numel(), p.device)
            where = self.noise_device(p)
            for sl in chunk_slices(flat.numel()):
                yield name, sl.start, flat[sl], stream.next_chunk(out=self._buf.get("eps", sl.stop - sl.start,
                                                                                    device=where))

    def noise_device(self, p: torch.Tensor) -> torch.device:
        """Where the noise of parameter p is made: its own device, except for sources that draw on the
        host (`gaussian`: each chunk is then copied to the weights' device)."""
        return getattr(self.noise, "draws_on", lambda _: torch.device("cpu"))(p.device)

    def _delta(self, eps: torch.Tensor, scale: float, like: torch.Tensor) -> torch.Tensor:
        """scale * eps in the chunk's dtype and device, in a reused buffer."""
        scaled = torch.mul(eps, scale, out=self._buf.get("scaled", eps.numel(), device=eps.device))
        if like.dtype == torch.float32 and like.device == scaled.device:
            return scaled
        return self._buf.get("delta", eps.numel(), like.dtype, like.device).copy_(scaled)

    @torch.no_grad()
    def perturb(self, seed: int, scale: float) -> list[Correction]:
        """w += scale * eps(seed); returns what restore needs to be bit-exact."""
        corrections = []
        total = 0
        unit = scale
        for name, start, chunk, eps in self._chunks(seed):
            scale = unit * self.scales[name]  # the same product in restore: the same bits
            n, dt, dev = chunk.numel(), chunk.dtype, chunk.device
            if self.fused and kernels.available(chunk):
                idx, val = self._buf.get("lost_idx", n, torch.int32), self._buf.get("lost_val", n)
                k = kernels.perturb(chunk, eps, scale, idx, val, self._buf.get("lost", n, torch.bool))
                if k:
                    corr = Correction(name, start, idx[:k].clone(), val[:k].clone())
                    total += corr.nbytes()
                    corrections.append(corr)
                continue
            delta = self._delta(eps, scale, chunk)
            original = self._buf.get("original", n, dt, dev).copy_(chunk)
            chunk.add_(delta)
            back = torch.sub(chunk, delta, out=self._buf.get("back", n, dt, dev))
            lost = bits_differ(back, original, out=self._buf.get("lost", n, torch.bool, dev))
            if lost.any():
                idx = lost.nonzero().view(-1)
                # kept in host memory for weights on an accelerator, whose memory is the scarce one: in bf16
                # 5-17% of the elements are lost at sigma 5e-4..4e-3 (6 bytes each), ~1 byte per parameter
                corr = Correction(name, start, idx.to(torch.int32).cpu(), original[idx].cpu())
                total += corr.nbytes()
                corrections.append(corr)
        self.last_correction_bytes = total
        return corrections

    def prepare(self) -> float:
        """Load (or compile) the fused kernels now, on a scratch chunk, so that their one-off cost is
        not the first member's perturbation time; returns its seconds (0 without fused kernels)."""
        scratch = torch.zeros(16)
        if not (self.fused and kernels.available(scratch) and any(kernels.available(p) for _, p in self.params)):
            return 0.0
        t0 = time.perf_counter()
        idx, val, lost = torch.zeros(16, dtype=torch.int32), torch.zeros(16), torch.zeros(16, dtype=torch.bool)
        kernels.perturb(scratch, scratch.clone(), 1.0, idx, val, lost)
        kernels.restore(scratch, torch.zeros(16), 1.0, *self._no_correction)
        return time.perf_counter() - t0

    @torch.no_grad()
    def restore(self, seed: int, scale: float, corrections: list[Correction]) -> None:
        by_chunk = {(c.name, c.start): c for c in corrections}
        unit = scale
        for name, start, chunk, eps in self._chunks(seed):
            scale = unit * self.scales[name]
            corr = by_chunk.get((name, start))
            if self.fused and kernels.available(chunk):
                kernels.restore(chunk, eps, scale, *((corr.index, corr.values) if corr else self._no_correction))
                continue
            chunk.sub_(self._delta(eps, scale, chunk))
            if corr is not None:
                chunk[corr.index.to(chunk.device).long()] = corr.values.to(chunk.device)

    @contextmanager
    def perturbed(self, seed: int, sigma: float, sign: int = 1):
        """Weights are theta + sign*sigma*eps(seed) inside; restored exactly on exit, also on error."""
        scale = float(sign) * float(sigma)
        corrections = self.perturb(seed, scale)
        try:
            yield
        finally:
            self.restore(seed, scale, corrections)

    @torch.no_grad()
    def apply_update(self, seeds: Iterable[int], coefficients: Iterable[float], alpha: float, population: int) -> None:
        """theta += alpha / population * sum_i c_i * eps(seed_i), accumulated in fp32 (es.optimizer=sgd;
        momentum and adam turn the sum into their direction first: es/optim.py).

        Members sharing a seed (antithetic pairs) are merged first, so each
        distinct noise vector is drawn once; all seeds are drawn chunk by chunk
        and summed in fp32, then added to the weights once per chunk. bf16/fp16
        chunks take it as es.update_rounding says (compensated by default; es/rounding.py).
        A generation that moves nothing (alpha 0, every coefficient 0) leaves the optimizer's state too.
        """
        seeds = [int(s) for s in seeds]
        merged = merge_seeds(seeds, coefficients)
        self.last_update_check = None
        if not merged or alpha == 0.0:
            return
        unit = self.rule.unit(alpha, population)
        check = _UpdateCheck(self._buf) if self.check_update else None
        for name, p in self.params:
            step = unit * self.scales[name]
            flat = p.data.view(-1)
            where = self.noise_device(p)  # the sum is made where the noise is (on the device for table/counter)
            streams = [(self.noise.stream(s, name, flat.numel(), p.device), c) for s, c in merged.items()]
            self.rule.begin(name, flat.numel(), where)  # the optimizer's state lives where the sum is made
            for sl in chunk_slices(flat.numel()):
                n = sl.stop - sl.start
                acc = self._buf.get("acc", n, device=where).zero_()
                eps = self._buf.get("eps", n, device=where)
                for stream, c in streams:
                    acc.add_(torch.mul(stream.next_chunk(out=eps), c, out=eps))
                acc = self.rule.direction(name, sl.start, acc, population)  # sgd: acc itself
                chunk = flat[sl]
                if check:
                    check.before(chunk)
                if chunk.dtype in LOW_PRECISION and self.rounding != "nearest":
                    comp = None
                    if self.rounding == "compensated":
                        if name not in self.compensation:
                            self.compensation[name] = torch.zeros(flat.numel(), dtype=torch.bfloat16)
                        comp = self.compensation[name][sl]
                    add_update(chunk, acc.mul_(step), self.rounding, rounding_key(seeds, name, sl.start), comp)
                    intended = acc
                else:
                    chunk.add_(self._delta(acc, step, chunk))
                    intended = self._buf.get("scaled", n, device=acc.device)  # _delta's float32 product
                if check:
                    check.after(chunk, intended)
        if check:
            self.last_update_check = check.result()


class _UpdateCheck:
    """The update as made vs as meant, chunk by chunk (es.diagnostics=full): how many elements changed
    at all (bf16/fp16 rounding can swallow a small step), and the cosine and norm ratio between the
    realised change (new - old, in float32) and the intended float32 step. Read only: the weights and
    the update are the same bits with or without it. Sums stay on the chunk's device until result()."""

    def __init__(self, buf: _Buffers):
        self._buf, self.sums, self.numel = buf, [], 0

    def before(self, chunk: torch.Tensor) -> None:
        self._old = self._buf.get("check_old", chunk.numel(), chunk.dtype, chunk.device).copy_(chunk)

    def after(self, chunk: torch.Tensor, intended: torch.Tensor) -> None:
        n, dev = chunk.numel(), chunk.device
        moved = bits_differ(chunk, self._old, out=self._buf.get("check_moved", n, torch.bool, dev)).sum()
        diff = self._buf.get("check_diff", n, device=dev).copy_(chunk)
        diff.sub_(self._old)  # float32: exact for bf16/fp16 neighbours
        want = intended if intended.device == dev else intended.to(dev)
        self.sums.append(torch.stack([moved.double(), torch.dot(diff, want).double(), torch.dot(diff, diff).double(),
                                      torch.dot(want, want).double()]))
        self.numel += n

    def result(self) -> dict | None:
        if not self.sums:
            return None
        moved, dot, realised, meant = (float(x) for x in sum(s.cpu() for s in self.sums).tolist())
        out = {"moved_share": moved / self.numel}
        if meant > 0:
            out["norm_ratio"] = math.sqrt(realised / meant)
            if realised > 0:
                out["cosine"] = min(1.0, dot / math.sqrt(realised * meant))  # float32 dots can overshoot by ~1e-8
        return out


def weights_hash(model: nn.Module) -> str:
    """sha256 over every parameter's name, dtype, shape and bytes, in order."""
    h = hashlib.sha256()
    for name, p in model.named_parameters():
        t = p.detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}".encode())
        if t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy())
    return h.hexdigest()
