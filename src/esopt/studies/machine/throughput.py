"""esopt bench throughput: one ES generation with full-rank members played one by
one (Gaussian noise, then noise-table noise) vs all low-rank members in one
batched rollout, side by side in one process on the same model and tasks; and
the share of each generation spent outside text generation (noise, perturb,
restore, update, hashing, bookkeeping).

With --context (a config with a skill library, e.g. configs/coevo-demo.yaml): one
generation each of coevo.mode weights, both and context, at equal episodes, with the
config's noise: what searching the context costs on top of weights-only ES (members
with different contexts share less of their prompts' encoding)."""
from __future__ import annotations

import tempfile
import time


def _timed_generation(cfg, model, tok, t: int = 0) -> dict:
    from ...train.rundir import RunDir
    from ...algos.es.trainer import Trainer

    trainer = Trainer(cfg, RunDir.create(cfg), model=model, tokenizer=tok, log=lambda *_: None)
    t0 = time.perf_counter()
    stats = trainer.generation(t)
    stats["wall"] = time.perf_counter() - t0
    stats["tokens_prefilled"] = trainer.policy.tokens_prefilled
    return stats


def check_library(cfg, config: str) -> None:
    from ...config import ConfigError

    if not (cfg.coevo.skills or cfg.coevo.slots or cfg.coevo.library):
        raise ConfigError(f"bench throughput --context needs a config with a skill library (coevo.skills, "
                          f"coevo.slots or coevo.library), e.g. configs/coevo-demo.yaml; {config} has none")


def context_overhead(config: str, overrides: list[str], model, tok, root: str) -> tuple[dict, dict]:
    """One generation per coevo.mode at equal episodes: (results, rows)."""
    from ...config import load_config

    check_library(load_config(config, overrides + [f"run.out_dir={root}"]), config)
    # untimed: the first generation in a process also pays one-off costs (allocator, kernels, caches)
    _timed_generation(load_config(config, overrides + [f"run.out_dir={root}", "run.name=ctx-warmup"]), model, tok)
    rows = {}
    for mode in ("weights", "both", "context"):
        cfg = load_config(config, overrides + [f"run.out_dir={root}", f"run.name=ctx-{mode}", f"coevo.mode={mode}"])
        s = _timed_generation(cfg, model, tok)
        rows[mode] = {k: s[k] for k in ("wall", "time_rollout", "tokens", "tokens_prefilled", "episodes") if k in s}
        print(f"coevo.mode={mode:8s}: generation {s['wall']:.1f}s (rollout {s['time_rollout']:.1f}s), "
              f"{s['tokens_prefilled']} prompt tokens encoded, {s['tokens']} generated", flush=True)
    w = rows["weights"]
    results = {f"{mode}_over_weights_prefill_tokens": rows[mode]["tokens_prefilled"] / w["tokens_prefilled"]
               for mode in ("both", "context")}
    results["context_only_over_weights_generation_time"] = rows["context"]["wall"] / w["wall"]
    results["context_search_over_weights_generation_time"] = rows["both"]["wall"] / w["wall"]  # last: the headline
    return results, rows


def batch_scaling(model, batches=(16, 128), prompt_len: int = 128, new_tokens: int = 8) -> dict:
    """Plain prefill and decode tokens/s of the model at a few batch sizes (the profile
    behind the low-rank ratio: batching pays only where a batch leaves compute idle)."""
    import torch

    rows = {}
    for b in batches:
        ids = torch.randint(3, model.config.vocab_size, (b, prompt_len))
        kw = dict(attention_mask=torch.ones_like(ids), do_sample=False, pad_token_id=0)
        with torch.inference_mode():
            t0 = time.perf_counter()
            model.generate(input_ids=ids, max_new_tokens=1, min_new_tokens=1, **kw)
            t1 = time.perf_counter()
            model.generate(input_ids=ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, **kw)
            t2 = time.perf_counter()
        prefill = t1 - t0
        decode = max((t2 - t1) - prefill, 1e-9)
        rows[b] = {"prefill_tokens_per_s": b * prompt_len / prefill, "decode_tokens_per_s": b * (new_tokens - 1) / decode}
        print(f"batch {b:4d}: prefill {rows[b]['prefill_tokens_per_s']:.0f} tokens/s, "
              f"decode {rows[b]['decode_tokens_per_s']:.1f} tokens/s (plain model, {prompt_len}-token prompts)", flush=True)
    return rows


def main(config: str, overrides: list[str], out: str, context: bool = False) -> dict:
    from ...config import load_config
    from ...models import load_model
    from ..common import write_results

    root = tempfile.mkdtemp()
    base = load_config(config, overrides + [f"run.out_dir={root}"])
    if context:
        check_library(base, config)  # before the model loads
    model, tok = load_model(base.model, base.runtime.dtype, base.runtime.device)
    if base.runtime.threads:
        import torch

        torch.set_num_threads(base.runtime.threads)
    if context:
        results, rows = context_overhead(config, overrides, model, tok, root)
        write_results(out, "throughput-context", results, {"config": config, "overrides": overrides,
                                                           "noise": base.es.noise, "generations": rows})
        return results
    rows = {}
    for mode in ("gaussian", "table", "lowrank"):
        cfg = load_config(config, overrides + [f"run.out_dir={root}", f"run.name={mode}", f"es.noise={mode}"])
        s = _timed_generation(cfg, model, tok)
        s["play"] = s["time_perturb"] + s["time_rollout"] + s["time_restore"]
        s["tokens_per_s"] = s["tokens"] / s["play"]
        s["overhead_fraction"] = (s["wall"] - s["time_rollout"]) / s["wall"]
        rows[mode] = s
        print(f"{mode:8s}: {s['tokens']} tokens in {s['play']:.1f}s of population play "
              f"({s['tokens_per_s']:.1f} tokens/s), generation wall {s['wall']:.1f}s, "
              f"rollout {s['time_rollout']:.1f}s, perturb+restore {s['time_perturb'] + s['time_restore']:.1f}s, "
              f"update {s['time_update']:.1f}s, hash {s['time_hash']:.1f}s; "
              f"outside text generation {100 * s['overhead_fraction']:.1f}%", flush=True)
    results = {
        "lowrank_batched_over_sequential": rows["lowrank"]["tokens_per_s"] / rows["gaussian"]["tokens_per_s"],
        "lowrank_batched_over_sequential_table": rows["lowrank"]["tokens_per_s"] / rows["table"]["tokens_per_s"],
        **{f"es_overhead_fraction_{mode}": r["overhead_fraction"] for mode, r in rows.items()},
        # last: the share with the config's own noise setting (the default settings)
        "es_overhead_fraction": rows[base.es.noise]["overhead_fraction"],
    }
    small, large = base.es.episodes_per_member, base.es.episodes_per_member * base.es.population
    scaling = batch_scaling(model, (small, min(large, base.agent.batch_size)))
    write_results(out, "throughput", results, {"config": config, "overrides": overrides, "noise": base.es.noise,
                                               "generations": rows, "batch_scaling": scaling})
    return results
