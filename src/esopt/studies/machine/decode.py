"""esopt bench decode: long replies with esopt's growing KV cache vs transformers' DynamicCache.

A batch of `rows` prompts of about `prompt_words` words each (a heuristic-design-sized task
text) gets replies of up to `max_new_tokens` tokens, sampled (temperature 0.7, top-p 0.95,
seeded), once with HFPolicy's growing cache (models/kvgrow.py) and once with grow_cache=False,
alternating which goes first, `repeats` times, in one process on the config's model:

    esopt bench decode configs/demo.yaml runtime.threads=2 --repeats 3

RESULT lines: the medians of generate() wall time on each path, growing_over_dynamic_seconds,
the tokens generated, and outputs_equal (the same replies on both paths, every repeat).

Then what esopt serve's slices cost: the same prompts, greedy and `max_new_tokens` tokens each
(ignore_eos), decoded in one call and in slices of SLICE tokens (serve/scheduler.py SLICE_TOKENS),
each slice continuing the replies from the keys/values a TurnCache kept, as the server does between
other clients' requests: sliced_over_whole_seconds, sliced_outputs_equal (the same tokens), and
sliced_prefill_per_slice (prompt tokens a continued slice encodes per row: 1 when it continues from
its cache).
"""
from __future__ import annotations

import tempfile
import time
from statistics import median

SLICE = 64  # esopt serve's SLICE_TOKENS (serve/scheduler.py); named here, a study does not import the server
TASK = ("Write a Python function select_next_item(remaining_capacity, weights, values) that returns the index "
        "of the next item to put in a 0/1 knapsack, or -1 when none fits. ")


def main(config: str, overrides: list[str], out: str, repeats: int = 3, rows: int = 4, max_new_tokens: int = 384,
         prompt_words: int = 900, slice_tokens: int = SLICE) -> dict:
    import torch

    from ...config import load_config
    from ...models import HFPolicy, load_model
    from ...models.decode import DecodeOptions, Sampling
    from ..common import write_results

    cfg = load_config(config, overrides + [f"run.out_dir={tempfile.mkdtemp()}"])
    if cfg.runtime.threads:
        torch.set_num_threads(cfg.runtime.threads)
    model, tok = load_model(cfg.model, cfg.runtime.dtype, cfg.runtime.device)
    task = " ".join((TASK * (prompt_words // len(TASK.split()) + 1)).split()[:prompt_words])
    convs = [[{"role": "system", "content": "You write heuristics in Python."},
              {"role": "user", "content": f"{task} Variant {i}."}] for i in range(rows)]
    sampling = Sampling(temperature=0.7, top_p=0.95)
    paths = {"growing": HFPolicy(model, tok, cfg.agent.batch_size),
             "dynamic": HFPolicy(model, tok, cfg.agent.batch_size, grow_cache=False)}
    prompt_tokens = len(tok(paths["growing"].prompt_texts(convs[:1])[0], add_special_tokens=False)["input_ids"])
    print(f"[bench decode] {cfg.model} ({cfg.runtime.dtype}, {torch.get_num_threads()} threads): {rows} prompts of "
          f"{prompt_tokens} tokens, up to {max_new_tokens} new tokens each, {repeats} repeats", flush=True)
    paths["growing"].generate(convs[:1], DecodeOptions(4, sampling))  # first-call costs out of the timing
    runs = []
    for rep in range(repeats):
        order = ("growing", "dynamic") if rep % 2 == 0 else ("dynamic", "growing")
        row = {}
        for name in order:
            pol, g0 = paths[name], paths[name].tokens_generated
            t0 = time.perf_counter()
            replies = pol.generate(convs, DecodeOptions(max_new_tokens, sampling, seed=rep))
            row[name] = {"seconds": time.perf_counter() - t0, "tokens": pol.tokens_generated - g0, "replies": replies}
        row["equal"] = row["growing"]["replies"] == row["dynamic"]["replies"]
        print(f"[bench decode] repeat {rep}: growing {row['growing']['seconds']:.2f}s, DynamicCache "
              f"{row['dynamic']['seconds']:.2f}s, {row['growing']['tokens']} tokens; replies equal: {row['equal']}",
              flush=True)
        runs.append(row)
    slices = [whole_vs_sliced(paths["growing"], convs, DecodeOptions(max_new_tokens, ignore_eos=True), rep, slice_tokens)
              for rep in range(repeats)]
    med = {name: median(r[name]["seconds"] for r in runs) for name in paths}
    whole, cut = median(s["whole_seconds"] for s in slices), median(s["sliced_seconds"] for s in slices)
    results = {"outputs_equal": all(r["equal"] for r in runs), "growing_seconds": med["growing"],
               "dynamic_seconds": med["dynamic"], "growing_over_dynamic_seconds": med["growing"] / med["dynamic"],
               "tokens_generated": median(r["growing"]["tokens"] for r in runs),
               "whole_seconds": whole, "sliced_seconds": cut, "sliced_over_whole_seconds": cut / whole,
               "sliced_outputs_equal": all(s["equal"] for s in slices),
               "sliced_prefill_per_slice": max(s["prefill_per_slice"] for s in slices)}
    write_results(out, "decode", results, {
        "config": config, "overrides": overrides, "model": cfg.model, "rows": rows, "prompt_tokens": prompt_tokens,
        "max_new_tokens": max_new_tokens, "sampling": {"temperature": 0.7, "top_p": 0.95}, "slice_tokens": slice_tokens,
        "slices": slices,
        "repeats": [{k: ({kk: vv for kk, vv in v.items() if kk != "replies"} if isinstance(v, dict) else v)
                     for k, v in r.items()} for r in runs]})
    return results


def whole_vs_sliced(policy, convs, options, rep: int, slice_tokens: int = SLICE) -> dict:
    """The replies of one greedy call vs the same replies decoded slice_tokens at a time (in the order given by rep:
    even, whole first), each slice continuing from the keys/values a TurnCache kept, as esopt serve does."""
    from ...models.decode import Caches
    from ...models.turncache import TurnCache

    def whole():
        ids: list = []
        policy.generate(convs, options, token_ids=ids)
        return [reply for _, reply in ids], 0, 0

    def sliced():
        cache, tails, later, continued = TurnCache(), [[] for _ in convs], 0, 0
        while len(tails[0]) < options.max_new_tokens:
            before, ids = policy.tokens_prefilled, []
            budget = min(slice_tokens, options.max_new_tokens - len(tails[0]))
            policy.generate(convs, options.but(max_new_tokens=budget), caches=Caches(cache, list(range(len(convs)))),
                            tails=tails, token_ids=ids)
            if any(tails):
                later, continued = later + policy.tokens_prefilled - before, continued + 1
            tails = [tail + reply for tail, (_, reply) in zip(tails, ids)]
        return tails, later, continued

    row = {}
    for name in (("whole", "sliced") if rep % 2 == 0 else ("sliced", "whole")):
        t0 = time.perf_counter()
        replies, later, continued = (whole if name == "whole" else sliced)()
        row[name] = (time.perf_counter() - t0, replies, later, continued)
    (whole_s, want, _, _), (sliced_s, got, later, continued) = row["whole"], row["sliced"]
    print(f"[bench decode] repeat {rep}: one call {whole_s:.2f}s, in {slice_tokens}-token slices {sliced_s:.2f}s; "
          f"replies equal: {want == got}", flush=True)
    return {"whole_seconds": whole_s, "sliced_seconds": sliced_s, "equal": want == got, "continued_slices": continued,
            "prefill_per_slice": later / max(1, continued * len(convs))}

