"""esopt bench dtype: prefill and decode tokens/s of the config's model in float32 vs bfloat16 on
this machine's CPU, side by side in one process (issue 26 item 6: is bf16 worth offering on the CPU?).

Both copies of the model are loaded; for each batch size, `repeats` rounds alternate which dtype
goes first. A round times a prefill of `prompt_len` random tokens per row (one forward of the
whole prompt, no cache kept) and a greedy generation of `new_tokens` tokens, all forced (no end
of turn); decode tokens/s = batch x (new_tokens - 1) / (generation time - prefill time). The
medians are compared; the CPU's capability (torch's view: AVX2, AVX512, AVX512_BF16, AMX) and
bf16-related flags are recorded with them.

    esopt bench dtype configs/demo.yaml runtime.threads=2 --repeats 3

With `--seeds` it checks learning parity instead (`parity`): the config trained once per seed in
float32 and once in bfloat16 (runtime.dtype; bfloat16 updates through es.update_rounding), each
run's validation reward before and after training compared per seed (the same validation
puzzles for both dtypes of a seed); held-out figures are recorded, never read for the verdict.

    esopt bench dtype configs/demo.yaml es.generations=4 --seeds 0,1,2 --jobs 2
"""
from __future__ import annotations

import tempfile
import time
from statistics import median

BATCHES = (1, 16)  # one episode; the demo's episodes per member
DTYPES = ("float32", "bfloat16")


def _cpu_flags() -> list[str]:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return sorted(f for f in line.split(":", 1)[1].split() if "bf16" in f or "amx" in f or f == "avx512f")
    except OSError:
        pass
    return []


def time_round(model, batch: int, prompt_len: int, new_tokens: int, seed: int) -> tuple[float, float]:
    """(prefill seconds, generation seconds) of one batch of random prompts."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, model.config.vocab_size, (batch, prompt_len), generator=gen)
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        t0 = time.perf_counter()
        model(input_ids=ids, attention_mask=mask, use_cache=False, logits_to_keep=1)
        t1 = time.perf_counter()
        model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                       do_sample=False, pad_token_id=0)
        t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def main(config: str, overrides: list[str], out: str, repeats: int = 3, prompt_len: int = 256,
         new_tokens: int = 16, batches=BATCHES) -> dict:
    import torch

    from ...config import load_config
    from ...models import load_model
    from ..common import write_results

    cfg = load_config(config, overrides + [f"run.out_dir={tempfile.mkdtemp()}"])
    if cfg.runtime.threads:
        torch.set_num_threads(cfg.runtime.threads)
    models = {dt: load_model(cfg.model, dt, "cpu")[0] for dt in DTYPES}
    rows: dict = {dt: {b: {"prefill": [], "decode": []} for b in batches} for dt in models}
    for b in batches:
        time_round(models["float32"], b, 16, 2, seed=0)  # untimed: one-off allocations of this batch size
        time_round(models["bfloat16"], b, 16, 2, seed=0)
        for r in range(repeats):
            order = list(models) if r % 2 == 0 else list(models)[::-1]
            for dt in order:
                prefill, generation = time_round(models[dt], b, prompt_len, new_tokens, seed=r)
                decode = max(generation - prefill, 1e-9)
                rows[dt][b]["prefill"].append(b * prompt_len / prefill)
                rows[dt][b]["decode"].append(b * (new_tokens - 1) / decode)
            print(f"[bench dtype] batch {b:3d} round {r + 1}/{repeats}: " + ", ".join(
                f"{dt} prefill {rows[dt][b]['prefill'][-1]:.0f} decode {rows[dt][b]['decode'][-1]:.1f} tokens/s"
                for dt in models), flush=True)
    med = {dt: {b: {k: median(v) for k, v in rows[dt][b].items()} for b in batches} for dt in models}
    results = {}
    for b in batches:
        for k in ("prefill", "decode"):
            results[f"bf16_over_fp32_{k}_batch{b}"] = med["bfloat16"][b][k] / med["float32"][b][k]
    mid = 16 if 16 in batches else batches[len(batches) // 2]  # the demo's episodes per member
    results["bf16_over_fp32_prefill"] = results[f"bf16_over_fp32_prefill_batch{mid}"]
    results["bf16_over_fp32_decode"] = results[f"bf16_over_fp32_decode_batch{mid}"]
    write_results(out, "dtype", results, {
        "config": config, "overrides": overrides, "model": cfg.model, "repeats": repeats, "prompt_len": prompt_len,
        "new_tokens": new_tokens, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_flags": _cpu_flags(), "median_tokens_per_s": med, "rounds": rows})
    return results


def parity(config: str, overrides: list[str], out: str, seeds: list[int], jobs: int = 1,
           work_dir: str | None = None) -> dict:
    """Train the config in float32 and in bfloat16 for each seed (studies/runs.py: one process each, finished
    runs read back); compare final validation rewards per seed."""
    from math import sqrt
    from pathlib import Path
    from statistics import mean, stdev

    from ...config import ConfigError, load_config
    from ..common import write_results
    from ..runs import run_all, train_run

    if not seeds:
        raise ConfigError("bench dtype --seeds needs at least one seed (e.g. 0,1,2)")
    base = list(overrides) + ([] if load_config(config, overrides).tasks.validation else ["tasks.validation=64"])
    base += ["eval.at_start=true"]
    work = work_dir or str(Path(out).with_suffix("")) + "-runs"
    plan = [(dt, seed) for seed in seeds for dt in DTYPES]
    runs = run_all([lambda dt=dt, seed=seed: train_run(config, base + [f"runtime.dtype={dt}", f"run.seed={seed}"], work,
                                                         f"{dt}-seed{seed}") for dt, seed in plan], jobs)
    rows: dict = {dt: [] for dt in DTYPES}
    for (dt, seed), r in zip(plan, runs):
        val, c = r["summary"]["validation"], r["curve"][-1]
        rows[dt].append({"seed": seed, "validation_base": val["base"]["reward"], "validation_final": val["final"]["reward"],
                         "heldout_final_not_used": r["summary"]["final"]["reward"], "episodes": c["episodes"],
                         "train_seconds": c["train_seconds"], "run_dir": r["run_dir"]})
        print(f"[bench dtype] {dt:8s} seed {seed}: validation {val['base']['reward']:.4f} -> "
              f"{val['final']['reward']:.4f} after {c['episodes']} episodes, {c['train_seconds']:.0f}s of training",
              flush=True)
    diffs = [b["validation_final"] - f["validation_final"] for f, b in zip(rows["float32"], rows["bfloat16"])]
    gains = {dt: [x["validation_final"] - x["validation_base"] for x in rows[dt]] for dt in DTYPES}
    results = {"bf16_minus_fp32_validation": mean(diffs),
               "fp32_validation_gain": mean(gains["float32"]), "bf16_validation_gain": mean(gains["bfloat16"]),
               "bf16_over_fp32_train_seconds": mean(x["train_seconds"] for x in rows["bfloat16"])
               / mean(x["train_seconds"] for x in rows["float32"])}
    if len(diffs) > 1:
        results["bf16_minus_fp32_validation_se"] = stdev(diffs) / sqrt(len(diffs))
    print(f"\nvalidation reward after training, per seed {seeds} (bf16 - fp32: "
          + ", ".join(f"{d:+.4f}" for d in diffs) + ")" + (f"; {jobs} runs side by side: train seconds are "
                                                            f"not a quiet machine's" if jobs > 1 else ""))
    write_results(out, "dtype-parity", results, {
        "config": config, "overrides": overrides, "seeds": seeds, "jobs": jobs, "per_seed_bf16_minus_fp32": diffs,
        "validation_gains": gains, "runs": rows})
    return results
