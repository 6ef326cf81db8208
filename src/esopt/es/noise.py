"""Seeded per-tensor Gaussian noise streams.

The noise for one member and one tensor is a function of (member seed, tensor
name) only: each tensor gets its own generator seeded by hashing both, so
tensors of the same shape never share a stream, and the result does not depend
on the thread count, on the order tensors are visited, or on the device (noise
is always drawn on the CPU in float32, in fixed-size chunks, then moved).
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator

import torch

# Part of the noise definition: perturb, restore, update and replay must all
# draw the same chunks, so this is a constant, not a setting.
CHUNK = 1 << 20


def tensor_seed(seed: int, name: str) -> int:
    """A 63-bit seed for the stream of tensor `name` under member seed `seed`."""
    digest = hashlib.blake2b(f"{int(seed)}/{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


class NoiseStream:
    """Draws the noise of one tensor chunk by chunk, in order."""

    def __init__(self, seed: int, name: str, numel: int):
        self.generator = torch.Generator(device="cpu").manual_seed(tensor_seed(seed, name))
        self.numel = numel
        self.offset = 0

    def next_chunk(self, out: torch.Tensor | None = None) -> torch.Tensor:
        """The next chunk, written into `out` (a float32 CPU tensor of the chunk's size) if given."""
        n = min(CHUNK, self.numel - self.offset)
        if n <= 0:
            raise RuntimeError("noise stream exhausted")
        self.offset += n
        if out is None:
            return torch.randn(n, generator=self.generator, dtype=torch.float32)
        if out.numel() != n:
            raise ValueError(f"noise buffer holds {out.numel()} floats, chunk has {n}")
        return torch.randn(n, generator=self.generator, dtype=torch.float32, out=out)


def chunk_slices(numel: int) -> Iterator[slice]:
    for start in range(0, numel, CHUNK):
        yield slice(start, min(start + CHUNK, numel))


def tensor_noise(seed: int, name: str, numel: int) -> torch.Tensor:
    """The whole flat noise vector of one tensor (for tests and small tensors)."""
    stream = NoiseStream(seed, name, numel)
    return torch.cat([stream.next_chunk() for _ in chunk_slices(numel)]) if numel else torch.zeros(0)
