"""The step rule (es.optimizer): what the ES update does with its gradient estimate.

Per tensor and per chunk the perturbers sum the generation's noise, acc = sum_i c_i eps_i in
float32 (c_i the shaped coefficients, antithetic pairs merged); the rule turns acc into a
direction D, and the weights move by D * unit * s (s: the tensor's es.sigma_scale share):

- sgd (the default): D = acc, unit = alpha / population. Today's ES step, the same bits: the
  perturbers take their old path and the rule holds nothing.
- momentum: v <- beta * v + acc; D = v, unit = alpha / population (heavy ball, undampened: in a
  steady direction the step grows to 1 / (1 - beta) times sgd's, 10x at beta 0.9, so lower alpha
  by 1 - beta to keep sgd's step size). One float32 buffer per tuned element (4 bytes).
- adam: g = acc / population; m <- b1 m + (1 - b1) g; v <- b2 v + (1 - b2) g^2;
  D = (m / (1 - b1^k)) / (sqrt(v / (1 - b2^k)) + eps), unit = alpha, k the tensor's step count.
  The step per element is then about alpha whatever the size of g (ES's g is O(1/sqrt(population)),
  so alpha means more than with sgd: start about 10x lower). Two float32 buffers per tuned element
  (8 bytes) and a step count per tensor.

Where the state lives: in the rule, held by the run's perturber (es/build.py make_perturber), one
flat float32 tensor per tuned tensor, made on first use where the update is summed (the noise's
device: host memory for `gaussian` noise, the weights' device for `table`/`counter`; the weights'
device for low-rank linear weights). Nothing of it is written to disk.

Resume and replay: the state is a function of the updates applied so far, in order, and every
update goes through apply_update, live or replayed (History.replay; a Ray replica replays the
history and then applies each generation's update like the driver). Replaying the history onto
the base weights therefore rebuilds the state as well as the weights, bit for bit, and a replica
keeps the driver's state without any being sent. A generation that moves nothing (alpha 0, or
every shaped coefficient 0: the members scored alike) leaves the state as it was (no decay of the
momentum, no Adam step counted), in the live run and in replay alike.

Bit for bit on every device: each operation is one elementwise tensor op (a multiply by a
float32 scalar, an add, a multiply, a tensor division, a square root: each rounded once,
correctly, on the CPU and a GPU); no fused multiply-adds, no division by a scalar (CUDA makes it a
multiply by the reciprocal), and the bias corrections are Python floats.
"""
from __future__ import annotations

import torch

OPTIMIZERS = ("sgd", "momentum", "adam")
STATE_BUFFERS = {"sgd": 0, "momentum": 1, "adam": 2}  # float32 copies of the tuned parameters


class SGD:
    """The plain ES step: no state."""

    kind = "sgd"
    buffers = 0

    def unit(self, alpha: float, population: int) -> float:
        return float(alpha) / float(population)  # the perturbers' old expression: the same float

    def begin(self, name: str, numel: int, device) -> None:
        pass

    def direction(self, name: str, start: int, acc: torch.Tensor, population: int) -> torch.Tensor:
        return acc

    def describe(self) -> dict:
        return {"kind": self.kind}

    def state_bytes(self) -> int:
        return 0


class _Stateful(SGD):
    def __init__(self):
        self.state: dict[str, dict] = {}  # tensor name -> {"steps": k, "bufs": [flat float32 tensors]}
        self._tmp: dict[str, torch.Tensor] = {}

    def begin(self, name: str, numel: int, device) -> None:
        """One update of tensor `name` starts (its chunks follow in order)."""
        st = self.state.get(name)
        if st is None:
            st = self.state[name] = {"steps": 0, "bufs": [torch.zeros(numel, dtype=torch.float32, device=device)
                                                          for _ in range(self.buffers)]}
        st["steps"] += 1

    def _slices(self, name: str, start: int, acc: torch.Tensor) -> list[torch.Tensor]:
        st = self.state[name]
        return [b[start:start + acc.numel()] for b in st["bufs"]]

    def _work(self, key: str, like: torch.Tensor) -> torch.Tensor:
        buf = self._tmp.get(key)
        if buf is None or buf.numel() < like.numel() or buf.device != like.device:
            buf = self._tmp[key] = torch.empty(like.numel(), dtype=torch.float32, device=like.device)
        return buf[:like.numel()].view(like.shape)

    def state_bytes(self) -> int:
        return sum(b.numel() * b.element_size() for st in self.state.values() for b in st["bufs"])


class Momentum(_Stateful):
    kind = "momentum"
    buffers = 1

    def __init__(self, beta: float = 0.9):
        super().__init__()
        self.beta = float(beta)

    def direction(self, name, start, acc, population):
        (v,) = self._slices(name, start, acc.view(-1))
        v.mul_(self.beta).add_(acc.view(-1))
        return acc.copy_(v.view(acc.shape))

    def describe(self) -> dict:
        return {"kind": self.kind, "momentum": self.beta, "state_bytes_per_element": 4}


class Adam(_Stateful):
    kind = "adam"
    buffers = 2

    def __init__(self, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8):
        super().__init__()
        self.beta1, self.beta2, self.eps = float(beta1), float(beta2), float(eps)

    def unit(self, alpha: float, population: int) -> float:
        return float(alpha)

    def direction(self, name, start, acc, population):
        flat = acc.view(-1)
        m, v = self._slices(name, start, flat)
        k = self.state[name]["steps"]
        g = flat.mul_(1.0 / float(population))
        tmp = torch.mul(g, 1.0 - self.beta1, out=self._work("a", flat))
        m.mul_(self.beta1).add_(tmp)
        sq = torch.mul(g, g, out=self._work("b", flat)).mul_(1.0 - self.beta2)
        v.mul_(self.beta2).add_(sq)
        den = torch.mul(v, 1.0 / (1.0 - self.beta2 ** k), out=self._work("b", flat)).sqrt_().add_(self.eps)
        torch.mul(m, 1.0 / (1.0 - self.beta1 ** k), out=flat)
        return flat.div_(den).view(acc.shape)

    def describe(self) -> dict:
        return {"kind": self.kind, "beta1": self.beta1, "beta2": self.beta2, "eps": self.eps,
                "state_bytes_per_element": 8}


def make_rule(es_cfg=None):
    """The step rule an `es` config asks for (None: sgd)."""
    kind = getattr(es_cfg, "optimizer", "sgd") if es_cfg is not None else "sgd"
    if kind == "sgd":
        return SGD()
    if kind == "momentum":
        return Momentum(es_cfg.momentum)
    if kind == "adam":
        return Adam(es_cfg.adam.beta1, es_cfg.adam.beta2, es_cfg.adam.eps)
    raise ValueError(f"unknown es.optimizer {kind!r}; allowed: {', '.join(OPTIMIZERS)}")
