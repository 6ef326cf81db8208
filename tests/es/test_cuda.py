"""The ES core and both trainers on a CUDA device.

Skipped where there is no GPU (CI has none); run on one with `pytest -m gpu tests/es/test_cuda.py`.
What they pin down: restore is bit-exact on the device in every dtype; perturbations and updates
made on the device are the CPU's bits (table and counter noise are made on the device, Gaussian
noise on the CPU; low-rank updates are summed on the device), so a run trained on a GPU resumes,
replays and exports on a CPU to the same weights hash; table and counter noise never cross from
the host during perturb, restore and update; the ES and GRPO trainers run end to end with weights
on the device.
"""
import os

import pytest
import torch

from esopt.es.lowrank import LowRankPerturber
from esopt.es.noise import CounterNoise, GaussianNoise, TableNoise, tensor_noise
from esopt.es.perturb import Perturber, weights_hash

from test_fidelity import SIGMAS, Awkward, Weights, assert_bits_equal, bits

# ESOPT_TEST_DEVICE=cpu runs the same checks on the CPU (a dry run of the tests' own logic)
DEVICE = os.environ.get("ESOPT_TEST_DEVICE", "cuda")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(),
                                                  reason="needs a CUDA device")]
DTYPES = ["float32", "bfloat16", "float16"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_restore_every_bit_pattern_on_the_device(dtype):
    model = Awkward(getattr(torch, dtype)).to(DEVICE)
    pert = Perturber(model)
    snap = bits(model)
    for i in range(1000):
        scale = SIGMAS[i % len(SIGMAS)] * (1 if i % 2 else -1)
        corr = pert.perturb(seed=i, scale=scale)
        pert.restore(seed=i, scale=scale, corrections=corr)
        assert_bits_equal(model, snap, f"cycle {i}, scale {scale}")


NOISES = {"gaussian": GaussianNoise, "table": lambda: TableNoise(1 << 22), "counter": CounterNoise}


@pytest.mark.parametrize("noise", ["table", "counter"])
def test_noise_is_made_on_the_device(noise):
    """The chunks perturb, restore and update read lie on the weights' device, and the same bits as the CPU's."""
    source = NOISES[noise]()
    for n in (5, (1 << 20) + 17):
        assert torch.equal(tensor_noise(3, "w", n, source, DEVICE).cpu(), tensor_noise(3, "w", n, source, "cpu"))
    model = Weights(torch.float32).to(DEVICE)
    pert = Perturber(model, noise=source)
    for name, start, chunk, eps in pert._chunks(7):
        assert eps.device == chunk.device and chunk.device.type == torch.device(DEVICE).type, (name, start)


@pytest.mark.skipif(DEVICE != "cuda", reason="counts host-to-device copies on a CUDA device")
@pytest.mark.parametrize("noise", ["table", "counter"])
def test_no_host_copies_in_perturb_restore_update(noise):
    from torch.profiler import ProfilerActivity, profile

    model = Weights(torch.float32).to(DEVICE)
    pert = Perturber(model, noise=NOISES[noise]())
    with pert.perturbed(1, 1e-2, 1):  # the first use copies the table / quantiles to the device once
        pass
    pert.apply_update([1, 2], [1.0, -1.0], 1e-3, 2)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for seed in range(3):
            with pert.perturbed(10 + seed, 1e-2, -1):
                pass
        pert.apply_update([10, 11, 12], [1.0, -0.5, 0.25], 1e-3, 3)
        torch.cuda.synchronize()
    copies = [e.name for e in prof.events() if "HtoD" in e.name]
    # corrections' counts come back to the host (DtoH); nothing of the noise goes out to the device
    assert not copies, copies[:5]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_corrections_are_kept_in_host_memory(dtype):
    """What restore needs (lost elements' positions and values) lives on the host, not on the device;
    device memory is the scarce one (in bf16, 5-17% of the elements are lost)."""
    model = Weights(getattr(torch, dtype)).to(DEVICE)
    pert = Perturber(model, noise=CounterNoise(), fused=False)
    snap = bits(model)
    corrections = pert.perturb(5, 4e-3)
    assert corrections and all(c.index.device.type == c.values.device.type == "cpu" for c in corrections)
    pert.restore(5, 4e-3, corrections)
    assert_bits_equal(model, snap, "restore from host-side corrections")


@pytest.mark.parametrize("noise", ["gaussian", "table", "counter"])
@pytest.mark.parametrize("rounding", ["compensated", "stochastic", "nearest"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_device_perturbations_and_updates_are_the_cpus_bits(dtype, rounding, noise):
    make = NOISES[noise]
    cpu, dev = Weights(getattr(torch, dtype)), Weights(getattr(torch, dtype)).to(DEVICE)
    pc, pd = Perturber(cpu, noise=make(), rounding=rounding), Perturber(dev, noise=make(), rounding=rounding)
    for t in range(4):
        with pc.perturbed(100 + t, 4e-3, -1), pd.perturbed(100 + t, 4e-3, -1):
            assert weights_hash(cpu) == weights_hash(dev), f"perturbation {t}"
        seeds, coefs = [10 + t, 20 + t], [1.0, -0.5]
        pc.apply_update(seeds, coefs, 5e-4, 4)
        pd.apply_update(seeds, coefs, 5e-4, 4)
        assert weights_hash(cpu) == weights_hash(dev), f"update {t}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_lowrank_on_the_device(dtype, tiny_model):
    """Low-rank factors are drawn on the CPU; the update's products run where the weights are."""
    model = tiny_model.to(getattr(torch, dtype)).to(DEVICE)
    lr = LowRankPerturber(model, rank=2, scope="full", others="full", others_noise=GaussianNoise())
    snap = bits(model)
    ids = torch.randint(0, 200, (3, 5), device=DEVICE)
    with torch.no_grad(), lr.side_terms([11, 12], [0.05, -0.05], torch.tensor([0, 1, 0], device=DEVICE)):
        out = model(ids).logits
    assert torch.isfinite(out.float()).all()
    for i in range(50):
        with lr.others_perturbed(i, 4e-3, 1 if i % 2 else -1):
            pass
    assert_bits_equal(model, snap, "low-rank side terms and others")
    before = weights_hash(model)
    lr.apply_update([11, 12], [1.0, -0.5], 1e-2, 4)
    assert weights_hash(model) != before


@pytest.mark.parametrize("rank", [1, 2])
@pytest.mark.parametrize("rounding", ["compensated", "stochastic", "nearest"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_lowrank_updates_on_the_device_are_the_cpus_bits(dtype, rounding, rank):
    from conftest import tiny_llama

    cpu = tiny_llama(hidden=96).to(getattr(torch, dtype))
    dev = tiny_llama(hidden=96).to(getattr(torch, dtype)).to(DEVICE)
    pc, pd = (LowRankPerturber(m, rank=rank, scope="full", rounding=rounding) for m in (cpu, dev))
    for t in range(3):
        pc.apply_update([10 + t, 20 + t], [1.0, -0.5], 5e-2, 4)
        pd.apply_update([10 + t, 20 + t], [1.0, -0.5], 5e-2, 4)
        assert weights_hash(cpu) == weights_hash(dev), f"update {t}"


def _replay_on_cpu(run_path):
    """Load the base model on the CPU and replay the run's history (each generation's weights hash
    is verified against the one the GPU run recorded); returns the final hash."""
    from esopt.es.build import make_perturber
    from esopt.models import load_model
    from esopt.train.rundir import RunDir

    run = RunDir(run_path)
    cfg = run.load_config()
    model, _ = load_model(cfg.model, cfg.runtime.dtype, "cpu")
    run.history().replay(make_perturber(model, cfg.es))
    return weights_hash(model)


@pytest.mark.parametrize("dtype,noise", [("float32", "gaussian"), ("bfloat16", "gaussian"), ("float32", "counter"),
                                         ("bfloat16", "table"), ("bfloat16", "lowrank")])
def test_es_trains_on_the_device_and_replays_on_the_cpu(tiny_cfg, dtype, noise):
    import json

    from esopt.train.rundir import RunDir
    from esopt.algos.es.trainer import Trainer

    cfg = tiny_cfg(f"runtime.device={DEVICE}", f"runtime.dtype={dtype}", f"run.name=cuda-{dtype}-{noise}",
                   f"es.noise={noise}", "es.table_size=4194304", "es.sigma.start=0.05",
                   "es.sigma.end=0.05", "es.alpha.start=0.05", "es.alpha.end=0.05")
    tr = Trainer(cfg, RunDir.create(cfg), log=lambda *a: None)
    assert next(tr.model.parameters()).device.type == torch.device(DEVICE).type
    summary = tr.train()
    hist = json.loads((tr.run.path / "history.json").read_text())["generations"]
    assert len(hist) == 3 and summary["weights_hash"] == weights_hash(tr.model)
    assert _replay_on_cpu(tr.run.path) == summary["weights_hash"]


@pytest.mark.parametrize("optimizer,dtype,noise", [("adam", "float32", "counter"), ("adam", "float32", "gaussian"),
                                                   ("momentum", "bfloat16", "table"), ("adam", "bfloat16", "lowrank")])
def test_an_optimizer_trains_on_the_device_and_replays_on_the_cpu(tiny_cfg, optimizer, dtype, noise):
    """es.optimizer's state on the device (table, counter, low-rank) or the host (gaussian): the
    steps made there are the CPU's bits, so a replay on the CPU rebuilds state and weights alike."""
    from esopt.train.rundir import RunDir
    from esopt.algos.es.trainer import Trainer

    cfg = tiny_cfg(f"runtime.device={DEVICE}", f"runtime.dtype={dtype}", f"run.name=opt-{optimizer}-{dtype}-{noise}",
                   f"es.noise={noise}", f"es.optimizer={optimizer}", "es.table_size=4194304",
                   "es.sigma.start=0.05", "es.sigma.end=0.05", "es.alpha.start=0.005", "es.alpha.end=0.005")
    from test_optimizer import weight_reward

    tr = Trainer(cfg, RunDir.create(cfg), log=lambda *a: None)
    tr.rollout_fn = weight_reward  # members differ: real updates
    summary = tr.train()
    assert tr.perturber.rule.state_bytes() > 0  # the state was made (real updates happened)
    assert _replay_on_cpu(tr.run.path) == summary["weights_hash"]


def test_grpo_trains_on_the_device(esopt_cache, tmp_path):
    import json

    from esopt.cli import main

    from conftest import TINY_OVERRIDES

    args = ["train", "configs/demo.yaml", *TINY_OVERRIDES, "grpo.steps=2", "grpo.puzzles_per_step=2",
            "grpo.group_size=2", "grpo.lr=1e-4", f"runtime.device={DEVICE}", f"run.out_dir={tmp_path}", "run.name=g",
            "--algo", "grpo"]
    assert main(args) == 0
    summary = json.loads((tmp_path / "g" / "summary.json").read_text())
    assert summary["algo"] == "grpo" and summary["generations"] == 2


def test_compiled_decoding_reads_in_place_perturbations(esopt_cache, dtype="float32"):
    """agent.decode=compiled (static caches; on CUDA a compiled forward replayed as CUDA graphs): greedy
    replies equal the dynamic path's, before and after an in-place perturbation (the captured graph
    reads the perturbed weights), and again after restore. float32 only: in bfloat16 attention over a
    static cache sums in another order, and a tiny random model's near-tied logits then flip."""
    from esopt.models import HFPolicy, load_model
    from esopt.models.decode import DecodeOptions

    model, tok = load_model("tiny-llama", dtype, DEVICE)
    eager, compiled = HFPolicy(model, tok, decode="dynamic"), HFPolicy(model, tok, decode="compiled")
    convs = [[{"role": "user", "content": f"cell {i} " * (1 + i % 3)}] for i in range(5)]
    pert = Perturber(model)
    base = eager.generate(convs, DecodeOptions(12))
    for _ in range(2):  # the second call replays what the first one compiled and captured
        assert compiled.generate(convs, DecodeOptions(12)) == base
    corr = pert.perturb(seed=3, scale=0.5)
    moved = eager.generate(convs, DecodeOptions(12))
    assert moved != base  # the perturbation changes the replies (the comparison can fail)
    assert compiled.generate(convs, DecodeOptions(12)) == moved
    pert.restore(seed=3, scale=0.5, corrections=corr)
    assert compiled.generate(convs, DecodeOptions(12)) == base
