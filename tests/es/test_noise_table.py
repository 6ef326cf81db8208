import math

import numpy as np
import pytest
import torch

from esopt.es.noise import CHUNK, TableNoise, make_noise, tensor_noise
from esopt.es.perturb import Perturber

from test_noise_perturb import Toy, assert_bytes_equal, snapshot


@pytest.fixture(scope="module")
def table():
    return TableNoise(1 << 22)  # the smallest allowed table keeps tests fast


def test_table_moments(table):
    x = torch.cat([tensor_noise(s, "w", 1_000_000, table) for s in range(4)]).double()
    assert abs(x.mean().item()) < 5 / math.sqrt(x.numel())
    assert abs(x.var().item() - 1) < 0.01
    kurt = ((x - x.mean()) ** 4).mean().item() / x.var().item() ** 2
    assert abs(kurt - 3) < 0.05


def test_table_independent_across_tensors_seeds_and_chunks(table):
    n = 3 * CHUNK // 2  # spans two chunks
    a = tensor_noise(5, "layers.0.w", n, table)
    b = tensor_noise(5, "layers.1.w", n, table)
    c = tensor_noise(6, "layers.0.w", n, table)
    bound = 5 / math.sqrt(n)
    for u, v in ((a, b), (a, c), (a[:CHUNK // 2], a[CHUNK:])):
        r = np.corrcoef(u.numpy(), v.numpy())[0, 1]
        assert abs(r) < 5 / math.sqrt(u.numel()), r
    assert torch.equal(a, tensor_noise(5, "layers.0.w", n, table))
    assert torch.equal(TableNoise(1 << 22).table, table.table)  # the table itself is reproducible


def test_table_restore_bit_exact_and_update_reference(table):
    model = Toy()
    pert = Perturber(model, noise=table)
    snap = snapshot(model)
    for i in range(50):
        with pert.perturbed(seed=i, sigma=[1e-3, 5e-2][i % 2], sign=1 if i % 3 else -1):
            pass
        assert_bytes_equal(model, snap)
    base = model.big.detach().clone().double()
    pert.apply_update([3, 3, 4], [0.5, -0.25, 1.0], 0.02, 3)
    ref = base.view(-1).clone()
    for s, c in zip([3, 3, 4], [0.5, -0.25, 1.0]):
        ref += 0.02 / 3 * c * tensor_noise(s, "big", base.numel(), table).double()
    assert torch.allclose(model.big.detach().view(-1).double(), ref, atol=1e-6)
    assert table.table.equal(TableNoise(1 << 22).table)  # perturbing never wrote into the table


def test_make_noise_errors():
    with pytest.raises(ValueError, match="allowed: gaussian, table, counter"):
        make_noise("uniform")
    with pytest.raises(ValueError, match="table_size"):
        make_noise("table", 1000)


def test_kernel_choice_follows_config(tiny_cfg, tiny_model):
    from esopt.es.build import make_perturber

    def fused(*over):
        return make_perturber(tiny_model, tiny_cfg(*over, "es.table_size=4194304").es).fused

    assert fused("es.noise=table") and not fused("es.noise=gaussian")
    assert fused("es.noise=gaussian", "es.kernels=numba") and not fused("es.noise=table", "es.kernels=torch")
