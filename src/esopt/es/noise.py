"""Seeded per-tensor Gaussian noise: two sources with one interface.

The noise for one member and one tensor is a function of (member seed, tensor
name) only, so tensors of the same shape never share noise, and the result
does not depend on the thread count, on the order tensors are visited, or on
the device (noise is always made on the CPU in float32, in fixed-size chunks,
then moved).

- `gaussian`: each tensor gets its own torch.Generator seeded by hashing
  (seed, name); chunks are drawn in order. Exact i.i.d. N(0, 1), but drawing
  normals runs at ~100-170 M floats/s on our CPUs, far below memory speed.
- `table`: the OpenAI-ES shared noise table. One N(0, 1) table (2^25 floats,
  128 MiB by default) is drawn once from a fixed seed; chunk k of a tensor is
  the contiguous slice of the table at an offset hashed from (seed, name, k).
  A chunk is a view: perturbing costs memory traffic only.
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


def stream_key(seed: int, name: str) -> int:
    """The seed a torch CPU generator really uses for this stream: its Mersenne Twister keeps only
    the low 32 bits of manual_seed's argument, so the hash is folded to them here, openly.

    With 2^32 keys, two streams of one generation could coincide (about 0.4 chance over a
    100-generation run of a paper-size model); the strategy therefore redraws a member seed
    whose keys collide with another stream of the same generation (Strategy.ask)."""
    return tensor_seed(seed, name) & 0xFFFFFFFF


class NoiseStream:
    """Draws the noise of one tensor chunk by chunk, in order."""

    def __init__(self, seed: int, name: str, numel: int):
        self.generator = torch.Generator(device="cpu").manual_seed(stream_key(seed, name))
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


class GaussianNoise:
    kind = "gaussian"

    def stream(self, seed: int, name: str, numel: int) -> NoiseStream:
        return NoiseStream(seed, name, numel)

    def stream_keys(self, seed: int, names: list[str]) -> list[int]:
        return [stream_key(seed, n) for n in names]

    def describe(self) -> dict:
        return {"kind": self.kind, "chunk": CHUNK}


class TableStream:
    def __init__(self, table: torch.Tensor, seed: int, name: str, numel: int):
        self.table, self.seed, self.name, self.numel = table, seed, name, numel
        self.offset = 0
        self.index = 0

    def next_chunk(self, out: torch.Tensor | None = None) -> torch.Tensor:
        """The next chunk: a read-only view of the table (`out` is not used)."""
        n = min(CHUNK, self.numel - self.offset)
        if n <= 0:
            raise RuntimeError("noise stream exhausted")
        start = tensor_seed(self.seed, f"{self.name}#{self.index}") % (self.table.numel() - n + 1)
        self.offset += n
        self.index += 1
        return self.table[start : start + n]


class TableNoise:
    kind = "table"
    TABLE_SEED = 20_170_310  # fixed: the table is part of the noise definition

    def __init__(self, size: int = 1 << 25):
        if size < 4 * CHUNK:
            raise ValueError(f"es.table_size must be at least {4 * CHUNK} floats, got {size}")
        gen = torch.Generator(device="cpu").manual_seed(tensor_seed(self.TABLE_SEED, f"noise-table/{size}"))
        self.table = torch.randn(size, generator=gen, dtype=torch.float32)

    def stream(self, seed: int, name: str, numel: int) -> TableStream:
        return TableStream(self.table, seed, name, numel)

    def describe(self) -> dict:
        return {"kind": self.kind, "chunk": CHUNK, "table_size": self.table.numel(),
                "table_mib": self.table.numel() * 4 / 2**20}


NOISE_KINDS = ("gaussian", "table")


def make_noise(kind: str = "gaussian", table_size: int = 1 << 25):
    if kind == "gaussian":
        return GaussianNoise()
    if kind == "table":
        return TableNoise(table_size)
    raise ValueError(f"unknown es.noise {kind!r}; allowed: {', '.join(NOISE_KINDS)}")


def chunk_slices(numel: int) -> Iterator[slice]:
    for start in range(0, numel, CHUNK):
        yield slice(start, min(start + CHUNK, numel))


def tensor_noise(seed: int, name: str, numel: int, source=None) -> torch.Tensor:
    """The whole flat noise vector of one tensor (for tests and small tensors)."""
    stream = (source or GaussianNoise()).stream(seed, name, numel)
    return torch.cat([stream.next_chunk() for _ in chunk_slices(numel)]) if numel else torch.zeros(0)
