"""es.noise=counter: a counter-based Gaussian stream made where the weights are (es/noise.py)."""
import math

import numpy as np
import pytest
import torch

from esopt.es.noise import CHUNK, CounterNoise, make_noise, tensor_noise
from esopt.es.perturb import Perturber

from test_noise_perturb import Toy, assert_bytes_equal, snapshot


@pytest.fixture(scope="module")
def counter():
    return CounterNoise()


def _splitmix_reference(key: int, i: int) -> int:
    """SplitMix64 of counter i of stream key, in Python integers (the definition the torch code implements)."""
    mask = (1 << 64) - 1
    z = (key + (i + 1) * 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def test_counter_elements_are_the_definition(counter):
    """Element i is the quantile picked by the top 24 bits of SplitMix64(key + (i + 1) * golden),
    including elements past the first chunk (the counter continues across chunks)."""
    from esopt.es.noise import tensor_seed

    n = CHUNK + 1000
    x = tensor_noise(9, "layers.0.w", n, counter)
    key = tensor_seed(9, "layers.0.w")
    for i in (0, 1, 2, 777, CHUNK - 1, CHUNK, CHUNK + 999):
        j = _splitmix_reference(key, i) >> 40
        assert x[i].item() == counter.quantiles[j].item(), i


def test_counter_moments_and_independence(counter):
    x = torch.cat([tensor_noise(s, "w", 1_000_000, counter) for s in range(4)]).double()
    assert abs(x.mean().item()) < 5 / math.sqrt(x.numel())
    assert abs(x.var().item() - 1) < 0.01
    kurt = ((x - x.mean()) ** 4).mean().item() / x.var().item() ** 2
    assert abs(kurt - 3) < 0.05
    n = 3 * CHUNK // 2
    a, b, c = (tensor_noise(s, name, n, counter) for s, name in ((5, "l.0.w"), (5, "l.1.w"), (6, "l.0.w")))
    for u, v in ((a, b), (a, c), (a[: CHUNK // 2], a[CHUNK:]), (a[:-1], a[1:])):
        r = np.corrcoef(u.numpy(), v.numpy())[0, 1]
        assert abs(r) < 5 / math.sqrt(u.numel()), r
    assert torch.equal(a, tensor_noise(5, "l.0.w", n, CounterNoise()))  # reproducible by a fresh source


def test_counter_quantiles_are_gaussian(counter):
    q = counter.quantiles.double()
    assert q.numel() == 1 << 24 and torch.all(q[1:] >= q[:-1])
    assert abs(q[len(q) // 2].item()) < 1e-6 and 5.4 < q[-1].item() < 5.45 and torch.equal(q, -q.flip(0))


def test_counter_restore_bit_exact_and_update_reference(counter):
    model = Toy()
    pert = Perturber(model, noise=counter)
    snap = snapshot(model)
    for i in range(30):
        with pert.perturbed(seed=i, sigma=[1e-3, 5e-2][i % 2], sign=1 if i % 3 else -1):
            pass
        assert_bytes_equal(model, snap)
    base = model.big.detach().clone().double()
    pert.apply_update([3, 3, 4], [0.5, -0.25, 1.0], 0.02, 3)
    ref = base.view(-1).clone()
    for s, c in zip([3, 3, 4], [0.5, -0.25, 1.0]):
        ref += 0.02 / 3 * c * tensor_noise(s, "big", base.numel(), counter).double()
    assert torch.allclose(model.big.detach().view(-1).double(), ref, atol=1e-6)


def test_counter_from_the_config(counter):
    from esopt.config import load_config
    from esopt.es.build import make_perturber

    cfg = load_config(None, ["es.noise=counter"])
    pert = make_perturber(Toy(), cfg.es)
    assert isinstance(pert.noise, CounterNoise) and pert.describe()["kind"] == "counter"
    with pytest.raises(ValueError, match="allowed: gaussian, table, counter"):
        make_noise("uniform")
