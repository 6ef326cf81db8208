"""Seeded per-tensor Gaussian noise: three sources with one interface.

The noise for one member and one tensor is a function of (member seed, tensor
name) only, so tensors of the same shape never share noise, and the result
does not depend on the thread count, on the order tensors are visited, or on
the device: every source gives the same float32 bits on the CPU and on a GPU,
so a run trained on one replays on the other. Noise comes in fixed-size chunks.

- `gaussian`: each tensor gets its own CPU torch.Generator seeded by hashing
  (seed, name); chunks are drawn in order. Exact i.i.d. N(0, 1), but drawing
  normals runs at ~100-170 M floats/s on our CPUs, far below memory speed, and
  on a GPU every chunk is drawn on the host and copied to the device.
- `table`: the OpenAI-ES shared noise table. One N(0, 1) table (2^25 floats,
  128 MiB by default) is drawn once from a fixed seed on the CPU; chunk k of a
  tensor is the contiguous slice of the table at an offset hashed from (seed,
  name, k). A chunk is a view: perturbing costs memory traffic only. The table
  is copied once to each device that asks for it (the same bits).
- `counter`: a counter-based stream, made where the weights are. Element i of a
  tensor is SplitMix64(key + (i + 1) * golden) of the 63-bit (seed, name) key,
  whose top 24 bits pick one of 2^24 Gaussian quantiles, Phi^-1((j + 0.5) / 2^24)
  (a 64 MiB table computed once in float64 on the CPU). Integer arithmetic and a
  gather are exact on every device, so the CPU and a GPU draw the same bits with
  no host round trip; the values are N(0, 1) quantised to 2^24 levels and cut
  at +-5.42 (a mass of 6e-8 beyond). On a GPU it costs a few memory passes per
  chunk; on the CPU the random gather makes it ~3x slower than `gaussian`.
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

    def draws_on(self, device) -> torch.device:
        """Where this source's chunks are made for weights on `device`: the CPU."""
        return torch.device("cpu")

    def stream(self, seed: int, name: str, numel: int, device=None) -> NoiseStream:
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
        self._copies: dict[torch.device, torch.Tensor] = {torch.device("cpu"): self.table}

    def draws_on(self, device) -> torch.device:
        return _device(device)

    def table_on(self, device) -> torch.Tensor:
        """The table on `device`: copied there once, the same bits as the CPU's."""
        device = _device(device)
        if device not in self._copies:
            self._copies[device] = self.table.to(device)
        return self._copies[device]

    def stream(self, seed: int, name: str, numel: int, device=None) -> TableStream:
        return TableStream(self.table_on(device), seed, name, numel)

    def describe(self) -> dict:
        return {"kind": self.kind, "chunk": CHUNK, "table_size": self.table.numel(),
                "table_mib": self.table.numel() * 4 / 2**20}


def _device(device) -> torch.device:
    device = torch.device("cpu" if device is None else device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def _signed64(value: int) -> int:
    """An unsigned 64-bit constant as the int64 torch stores (two's complement)."""
    value %= 1 << 64
    return value - (1 << 64) if value >= 1 << 63 else value


_GOLDEN = 0x9E3779B97F4A7C15  # SplitMix64's increment and mixing constants
_MIX1, _MIX2 = _signed64(0xBF58476D1CE4E5B9), _signed64(0x94D049BB133111EB)
QUANTILE_BITS = 24


class _CounterState:
    """Per device: the 2^24 quantiles, (i * golden) for i < CHUNK, and two int64 work buffers."""

    def __init__(self, quantiles: torch.Tensor, device: torch.device):
        self.quantiles = quantiles.to(device)
        self.steps = torch.arange(CHUNK, dtype=torch.int64, device=device).mul_(_signed64(_GOLDEN))
        self.z = torch.empty(CHUNK, dtype=torch.int64, device=device)
        self.t = torch.empty(CHUNK, dtype=torch.int64, device=device)


def _shift_right(x: torch.Tensor, bits: int, out: torch.Tensor) -> torch.Tensor:
    """Logical right shift of int64 (torch's is arithmetic): shift, then clear the copied sign bits."""
    return torch.bitwise_right_shift(x, bits, out=out).bitwise_and_((1 << (64 - bits)) - 1)


class CounterStream:
    def __init__(self, state: _CounterState, seed: int, name: str, numel: int):
        self.state, self.numel = state, numel
        self.key = tensor_seed(seed, name)
        self.offset = 0

    def next_chunk(self, out: torch.Tensor | None = None) -> torch.Tensor:
        """The next chunk, written into `out` (a float32 tensor of the chunk's size on the stream's device) if given."""
        n = min(CHUNK, self.numel - self.offset)
        if n <= 0:
            raise RuntimeError("noise stream exhausted")
        st = self.state
        z, t = st.z[:n], st.t[:n]
        # the counter of element offset + j: key + (offset + j + 1) * golden (mod 2^64), then SplitMix64's mix
        torch.add(st.steps[:n], _signed64(self.key + (self.offset + 1) * _GOLDEN), out=z)
        z.bitwise_xor_(_shift_right(z, 30, t)).mul_(_MIX1)
        z.bitwise_xor_(_shift_right(z, 27, t)).mul_(_MIX2)
        z.bitwise_xor_(_shift_right(z, 31, t))
        index = _shift_right(z, 64 - QUANTILE_BITS, t)
        self.offset += n
        if out is None:
            return st.quantiles[index]
        if out.numel() != n:
            raise ValueError(f"noise buffer holds {out.numel()} floats, chunk has {n}")
        return torch.index_select(st.quantiles, 0, index, out=out)


class CounterNoise:
    kind = "counter"

    def __init__(self):
        levels = 1 << QUANTILE_BITS
        # float64 quantiles at the cells' midpoints, rounded once to float32: made on the CPU, copied as bits
        p = (torch.arange(levels, dtype=torch.float64) + 0.5) / levels
        self.quantiles = torch.special.ndtri(p).to(torch.float32)
        self._states: dict[torch.device, _CounterState] = {}

    def draws_on(self, device) -> torch.device:
        return _device(device)

    def stream(self, seed: int, name: str, numel: int, device=None) -> CounterStream:
        device = _device(device)
        if device not in self._states:
            self._states[device] = _CounterState(self.quantiles, device)
        return CounterStream(self._states[device], seed, name, numel)

    def describe(self) -> dict:
        return {"kind": self.kind, "chunk": CHUNK, "quantile_bits": QUANTILE_BITS}


NOISE_KINDS = ("gaussian", "table", "counter")


def make_noise(kind: str = "gaussian", table_size: int = 1 << 25):
    if kind == "gaussian":
        return GaussianNoise()
    if kind == "table":
        return TableNoise(table_size)
    if kind == "counter":
        return CounterNoise()
    raise ValueError(f"unknown es.noise {kind!r}; allowed: {', '.join(NOISE_KINDS)}")


def chunk_slices(numel: int) -> Iterator[slice]:
    for start in range(0, numel, CHUNK):
        yield slice(start, min(start + CHUNK, numel))


def tensor_noise(seed: int, name: str, numel: int, source=None, device=None) -> torch.Tensor:
    """The whole flat noise vector of one tensor (for tests and small tensors), where `source` draws it
    for weights on `device`."""
    stream = (source or GaussianNoise()).stream(seed, name, numel, device)
    return torch.cat([stream.next_chunk() for _ in chunk_slices(numel)]) if numel else torch.zeros(0)
