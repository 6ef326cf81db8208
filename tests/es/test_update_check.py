"""es.diagnostics=full: apply_update measures the update it made against the one it meant, reading only."""
import torch
from torch import nn

from esopt.es.perturb import Perturber, weights_hash


def model(dtype):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 48), nn.Linear(48, 16)).to(dtype)


SEEDS, COEFS = [5, 5, 9, 9], [1.0, -0.5, 0.3, 0.8]


def test_check_reads_only_same_bits_with_and_without():
    a, b = model(torch.bfloat16), model(torch.bfloat16)
    pa, pb = Perturber(a), Perturber(b)
    pb.check_update = True
    for _ in range(3):
        pa.apply_update(SEEDS, COEFS, 1e-2, 4)
        pb.apply_update(SEEDS, COEFS, 1e-2, 4)
    assert weights_hash(a) == weights_hash(b)
    assert pa.last_update_check is None and set(pb.last_update_check) == {"moved_share", "cosine", "norm_ratio"}


def test_float32_update_is_realised_whole():
    p = Perturber(model(torch.float32))
    p.check_update = True
    p.apply_update(SEEDS, COEFS, 1e-2, 4)
    c = p.last_update_check
    assert c["moved_share"] > 0.99 and abs(c["cosine"] - 1) < 1e-6 and abs(c["norm_ratio"] - 1) < 1e-5


def test_bf16_nearest_rounds_a_small_update_away():
    p = Perturber(model(torch.bfloat16), rounding="nearest")
    p.check_update = True
    p.apply_update(SEEDS, COEFS, 1e-5, 4)  # far below half an ulp of weights ~0.1
    assert p.last_update_check["moved_share"] < 0.05
    p.apply_update(SEEDS, COEFS, 1e-1, 4)  # large: nearly every element moves, close to the intended direction
    assert p.last_update_check["moved_share"] > 0.9 and p.last_update_check["cosine"] > 0.95


def test_no_update_measures_nothing():
    p = Perturber(model(torch.float32))
    p.check_update = True
    p.apply_update(SEEDS, [0.0] * 4, 1e-2, 4)
    assert p.last_update_check is None
