import json
import math

import numpy as np
import pytest

from esopt.es.history import History
from esopt.es.schedules import scheduled
from esopt.es.shaping import centered_rank, shape
from esopt.es.strategy import Strategy


def _expected(kind, s0, sT, t, T, warmup=0):
    """The documented convention written out independently: generation 0 of T uses the start
    value, generation T-1 the end value; warm-up scales generation t < W by (t+1)/(W+1)."""
    u = t / (T - 1)
    base = {"cosine": sT + (s0 - sT) * 0.5 * (1 + math.cos(math.pi * u)),
            "linear": s0 * (1 - u) + sT * u, "constant": s0}[kind]
    return base * ((t + 1) / (warmup + 1) if t < warmup else 1.0)


@pytest.mark.parametrize("kind", ["cosine", "linear", "constant"])
@pytest.mark.parametrize("warmup", [0, 3])
def test_schedules_match_documented_convention(kind, warmup):
    s0, sT, T = 7e-4, 5e-4, 100
    vals = [scheduled(kind, s0, sT, t, T, warmup) for t in range(T)]
    for t in range(T):
        assert vals[t] == pytest.approx(_expected(kind, s0, sT, t, T, warmup), rel=1e-12)
    # the run's first generation uses the start value (after warm-up), its last uses the end value
    assert vals[0] == pytest.approx(s0 / (warmup + 1), rel=1e-12)
    assert vals[-1] == pytest.approx(sT if kind != "constant" else s0, rel=1e-12)
    if kind != "constant":
        assert all(a >= b for a, b in zip(vals[warmup:], vals[warmup + 1:]))


def test_schedule_reaches_end_on_the_last_generation():
    # the old t/T convention never reached end: its last generation (t = T-1 = 7) used 0.00207
    assert scheduled("cosine", 4e-3, 2e-3, 7, 8) == pytest.approx(2e-3, rel=1e-12)
    assert scheduled("cosine", 4e-3, 2e-3, 0, 8) == pytest.approx(4e-3, rel=1e-12)
    assert scheduled("linear", 1.0, 0.0, 1, 5) == pytest.approx(0.75)
    assert scheduled("cosine", 4e-3, 2e-3, 0, 1) == 4e-3  # one generation: the start value


def test_warmup_ramps_from_a_nonzero_fraction():
    vals = [scheduled("constant", 2.0, 0.0, t, 100, warmup=3) for t in range(5)]
    assert vals == pytest.approx([0.5, 1.0, 1.5, 2.0, 2.0])
    assert min(vals) > 0
    with pytest.raises(ValueError, match="allowed: cosine"):
        scheduled("exp", 1, 0, 0, 10)


def test_zscore():
    z = shape([1.0, 2.0, 3.0, 6.0], "zscore")
    assert z.mean() == pytest.approx(0) and z.std() == pytest.approx(1)
    assert np.argmax(z) == 3


@pytest.mark.parametrize("method", ["zscore", "centered_rank", "none"])
def test_all_equal_rewards_give_zero(method):
    assert np.all(shape([0.5] * 6, method) == 0)


def test_centered_rank_and_ties():
    r = centered_rank(np.array([10.0, -3.0, 5.0, 5.0]))
    assert r.tolist() == pytest.approx([0.5, -0.5, 0.0, 0.0])


@pytest.mark.parametrize("method", ["zscore", "centered_rank", "none"])
def test_non_finite_rewards_treated_as_worst(method):
    w = shape([1.0, float("nan"), 0.0, float("inf")], method)
    assert np.all(np.isfinite(w))
    assert w[1] == w[2] == w.min() and w[3] == w.min()
    assert np.all(shape([float("nan")] * 4, method) == 0)


def test_unknown_shaping():
    with pytest.raises(ValueError, match="allowed: zscore"):
        shape([1, 2], "softmax")


def test_strategy_antithetic_pairs():
    st = Strategy(6, seed=1, antithetic=True)
    ms = st.ask(0)
    assert [m.sign for m in ms] == [1, -1] * 3
    assert ms[0].seed == ms[1].seed and ms[0].seed != ms[2].seed
    assert [m.seed for m in st.ask(0)] == [m.seed for m in ms]
    assert ms[0].seed != st.ask(1)[0].seed
    told = st.tell(ms, [1.0, 0.0, 0.5, 0.5, 0.2, 0.2])
    assert told.nonfinite == 0 and told.coefficients[1] > 0  # mirrored member: a low reward pushes along +eps
    assert told.shaped[1] < 0 and told.coefficients.tolist() == [w * m.sign for w, m in zip(told.shaped, ms)]


def test_strategy_validation():
    with pytest.raises(ValueError, match="even"):
        Strategy(5, 0, antithetic=True)
    with pytest.raises(ValueError, match="population"):
        Strategy(1, 0, antithetic=False)


def test_history_atomic_and_ordered(tmp_path):
    h = History(tmp_path / "history.json", meta={"x": 1})
    h.append({"generation": 0, "seeds": [1], "coefficients": [0.0], "alpha": 0.1, "population": 1, "weights_hash": "0" * 64})
    with pytest.raises(ValueError, match="expects generation 1"):
        h.append({"generation": 3})
    data = json.loads((tmp_path / "history.json").read_text())
    assert data["meta"] == {"x": 1} and len(data["generations"]) == 1
    assert not list(tmp_path.glob("*.tmp"))
    assert len(History.load(tmp_path / "history.json")) == 1


def test_atomic_write_interleaved_writers_and_failure(tmp_path, monkeypatch):
    from esopt.es import history as hist

    target = tmp_path / "config.yaml"
    hist.atomic_write_text(target, "old")
    # a writer whose rename fails leaves the old file and no temporary behind
    real_replace = hist.os.replace

    def failing_replace(src, dst):
        # meanwhile another writer finishes a full write of the same file
        monkeypatch.setattr(hist.os, "replace", real_replace)
        hist.atomic_write_text(target, "other")
        from pathlib import Path

        assert Path(src).read_text() == "new"  # its own temporary survived the other writer
        raise OSError("disk full")

    monkeypatch.setattr(hist.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        hist.atomic_write_text(target, "new")
    assert target.read_text() == "other"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)


def test_huge_finite_rewards_shape_without_overflow():
    import warnings

    import numpy as np

    from esopt.es.shaping import shape

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow in numpy would raise here
        assert shape([1e308, 0.0, 1e308, 0.0]).tolist() == [1.0, -1.0, 1.0, -1.0]
        assert np.isfinite(shape([1e308, 1e308, 1e308, 0.0], "none")).all()
        assert shape([1e308, 1e308]).tolist() == [0.0, 0.0]
    r = [0.25, 1.0, 3.0, 0.0]
    assert shape(r).tolist() == ((np.array(r) - np.mean(r)) / np.std(r)).tolist()  # ordinary rewards: as before
