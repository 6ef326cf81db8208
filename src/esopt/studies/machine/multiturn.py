"""esopt bench multiturn: what a turn costs late in a long episode, with and without
KV reuse across turns (agent.kv_reuse; models/turncache.py).

Sudoku 9x9 with 16 blanks and 15 turns, agent.history=full (every turn's prompt
holds the whole conversation so far; no one can fill 16 cells in 15
turns, so every episode lasts 15 turns; no few-shot example), on the config's model and settings
(default configs/demo.yaml). Overrides after these defaults replace them; the
episodes played together are es.episodes_per_member (one member's rollout):

    esopt bench multiturn configs/demo.yaml es.episodes_per_member=4 runtime.threads=2 --repeats 3

Per repeat, side by side in one process on the same puzzles:
- KV reuse: one rollout with agent.kv_reuse=auto, every turn's generate() timed;
- KV reuse with transformers' own DynamicCache layers (HFPolicy(grow_cache=False)),
  which copy the whole cache to append each decoded token: the same rollout again,
  what esopt's growing cache (models/kvgrow.py) saves (its replies must be equal);
- plain: the conversations that rollout decoded at turn 1 and at the last turn
  are decoded again with kv_reuse off (the prompts a plain rollout has at those
  turns when its replies are the same, which is checked: `outputs_equal`).
Seconds are generate() wall time (prefill and decoding), medians over repeats;
prefill tokens are the prompt tokens the model encoded (the shared prompt prefix
once per batch; cached tokens not at all).

RESULT lines: turn1_seconds / turnN_seconds and prefill tokens for each path,
plain_turnN_over_turn1_cost, the DynamicCache rollout's turn seconds and
kv_turnN_over_dynamic, cache memory held at the last turn, and last
turnN_over_turn1_cost (KV reuse, seconds; N = env.max_turns, 15 by default).
"""
from __future__ import annotations

import tempfile
import time
from statistics import median

# 16 blanks: more than 15 turns can fill, so no episode ends early; no few-shot example (the demo's is a 4x4
# board). Turn 15's prompt is then ~8.3k tokens, just past SmolLM2's 8192 positions (the bench says so)
DEFAULTS = ["env.id=sudoku", "env.options.size=9", "env.options.blanks=16", "env.max_turns=15", "agent.history=full",
            "agent.examples=[]"]


class TimedPolicy:
    """Wraps a policy: times each generate() call (one per turn of a rollout) and keeps its
    conversations, replies and the turn cache's size."""

    def __init__(self, policy):
        self.policy, self.turns, self.cache = policy, [], None

    def new_turn_cache(self):
        self.cache = self.policy.new_turn_cache()
        return self.cache

    def generate(self, convs, options, **kw):
        p0 = self.policy.tokens_prefilled
        t0 = time.perf_counter()
        out = self.policy.generate(convs, options, **kw)
        seconds = time.perf_counter() - t0
        cache = self.cache
        self.turns.append({"seconds": seconds, "prefill_tokens": self.policy.tokens_prefilled - p0, "rows": len(convs),
                           "seed": options.seed, "cache_bytes": cache.nbytes() if cache else 0,
                           "cache_tokens": cache.tokens() if cache else 0, "convs": convs, "replies": out})
        return out


def timed_plain(policy, turn: dict, options) -> dict:
    """One turn's conversations decoded again without any turn cache."""
    p0 = policy.tokens_prefilled
    t0 = time.perf_counter()
    out = policy.generate(turn["convs"], options.but(seed=turn["seed"]))
    return {"seconds": time.perf_counter() - t0, "prefill_tokens": policy.tokens_prefilled - p0,
            "equal": out == turn["replies"]}


def main(config: str, overrides: list[str], out: str, repeats: int = 3) -> dict:
    import torch

    from ...agent.rollout import AgentContext, RolloutSettings, rollout
    from ...config import load_config
    from ...models import HFPolicy, load_model
    from ...models.decode import DecodeOptions
    from ...envs.sudoku import SudokuEnv, generate_puzzle
    from ...envs.sudoku.spec import SudokuOptions
    from ..common import rounds, write_results

    cfg = load_config(config, DEFAULTS + overrides + [f"run.out_dir={tempfile.mkdtemp()}"])
    if cfg.agent.history != "full":
        raise SystemExit("esopt bench multiturn: agent.history must be full (the cost it measures is full history's)")
    if cfg.runtime.threads:
        torch.set_num_threads(cfg.runtime.threads)
    model, tok = load_model(cfg.model, cfg.runtime.dtype, cfg.runtime.device)
    policy = HFPolicy(model, tok, cfg.agent.batch_size)
    dynamic = HFPolicy(model, tok, cfg.agent.batch_size, grow_cache=False)
    options, context, n = DecodeOptions.of_agent(cfg.agent), AgentContext.from_config(cfg.agent), cfg.es.episodes_per_member
    o = cfg.env.options
    if not isinstance(o, SudokuOptions):  # it plays fixed Sudoku puzzles
        raise SystemExit(f"esopt bench multiturn: env.id must be sudoku, got {cfg.env.id!r}")
    last = cfg.env.max_turns or 3 * o.blanks
    puzzles = [generate_puzzle(o.size, o.blanks, cfg.run.seed + k) for k in range(n)]
    print(f"[bench multiturn] {cfg.model} ({cfg.runtime.dtype}, {torch.get_num_threads()} threads), {n} episodes of "
          f"Sudoku {o.size}x{o.size}, {o.blanks} blanks, {last} turns, full history; {repeats} repeats", flush=True)
    policy.generate([[{"role": "user", "content": "Warm up."}]], options.but(max_new_tokens=2))  # first-call costs out of turn 1

    def play(pol):
        envs = [SudokuEnv(size=o.size, blanks=o.blanks, max_turns=last, reward=o.reward, puzzle=p)
                for p in puzzles]  # the same puzzles every time
        timed = TimedPolicy(pol)
        rollout(timed, envs, [str(k) for k in range(n)], [e.reset()[0] for e in envs], context,
                RolloutSettings(options.but(seed=cfg.run.seed), kv_reuse="auto"))
        return timed

    runs = []
    for rep in rounds("bench multiturn", repeats):
        timed = play(policy)
        kv = timed.turns
        dyn = play(dynamic).turns
        if len(kv) < last or kv[last - 1]["rows"] != n:
            raise SystemExit(f"esopt bench multiturn: episodes ended before turn {last} ({len(kv)} turns played, "
                             f"{kv[-1]['rows']} episodes in the last); use more env.options.blanks")
        plain = {t: timed_plain(policy, kv[t - 1], options) for t in (1, last)}
        longest = max(len(tok(t, add_special_tokens=False)["input_ids"]) for t in policy.prompt_texts(kv[last - 1]["convs"]))
        limit = getattr(model.config, "max_position_embeddings", None)
        if rep == 0 and limit and longest + cfg.agent.max_new_tokens > limit:
            print(f"[bench multiturn] warning: turn {last}'s longest prompt has {longest} tokens, beyond the model's "
                  f"{limit} positions (replies there are off the model's trained range; the costs stand)", flush=True)
        stats = dict(timed.cache.stats) if timed.cache else {}
        dynamic_equal = [t["replies"] for t in dyn] == [t["replies"] for t in kv]
        runs.append({"kv": [{k: v for k, v in t.items() if k not in ("convs", "replies")} for t in kv],
                     "dynamic": [{"seconds": t["seconds"], "prefill_tokens": t["prefill_tokens"]} for t in dyn],
                     "dynamic_equal": dynamic_equal, "plain": plain, "cache_stats": stats,
                     "last_prompt_tokens": longest})
        print(f"[bench multiturn] repeat {rep}: turn 1 / {last}: KV reuse {kv[0]['seconds']:.2f}s / "
              f"{kv[last - 1]['seconds']:.2f}s ({kv[0]['prefill_tokens']} / {kv[last - 1]['prefill_tokens']} prefill "
              f"tokens), plain {plain[1]['seconds']:.2f}s / {plain[last]['seconds']:.2f}s "
              f"({plain[1]['prefill_tokens']} / {plain[last]['prefill_tokens']}), KV reuse with DynamicCache "
              f"{dyn[0]['seconds']:.2f}s / {dyn[last - 1]['seconds']:.2f}s; replies equal: "
              f"{plain[1]['equal'] and plain[last]['equal'] and dynamic_equal}", flush=True)
    print("[bench multiturn] KV reuse per turn (first repeat): " + ", ".join(
        f"{k + 1}: {t['seconds']:.2f}s/{t['prefill_tokens']}" for k, t in enumerate(runs[0]["kv"])), flush=True)

    def med(path, turn, key):
        rows = [r["plain"][turn] if path == "plain" else r[path][turn - 1] for r in runs]
        return median(x[key] for x in rows)

    held = runs[0]["kv"][last - 1]
    results = {
        "outputs_equal": all(r["plain"][t]["equal"] and r["dynamic_equal"] for r in runs for t in (1, last)),
        "plain_turn1_seconds": med("plain", 1, "seconds"),
        f"plain_turn{last}_seconds": med("plain", last, "seconds"),
        "plain_turn1_prefill_tokens": med("plain", 1, "prefill_tokens"),
        f"plain_turn{last}_prefill_tokens": med("plain", last, "prefill_tokens"),
        f"plain_turn{last}_over_turn1_cost": med("plain", last, "seconds") / med("plain", 1, "seconds"),
        "kv_turn1_seconds": med("kv", 1, "seconds"),
        f"kv_turn{last}_seconds": med("kv", last, "seconds"),
        "kv_turn1_prefill_tokens": med("kv", 1, "prefill_tokens"),
        f"kv_turn{last}_prefill_tokens": med("kv", last, "prefill_tokens"),
        f"kv_turn{last}_over_plain": med("kv", last, "seconds") / med("plain", last, "seconds"),
        "dynamic_turn1_seconds": med("dynamic", 1, "seconds"),
        f"dynamic_turn{last}_seconds": med("dynamic", last, "seconds"),
        f"kv_turn{last}_over_dynamic": med("kv", last, "seconds") / med("dynamic", last, "seconds"),
        f"dynamic_turn{last}_over_turn1_cost": med("dynamic", last, "seconds") / med("dynamic", 1, "seconds"),
        f"kv_cache_mb_at_turn{last}": held["cache_bytes"] / 2**20,
        "kv_cache_peak_mb": runs[0]["cache_stats"].get("peak_bytes", 0) / 2**20,
        "kv_cache_kb_per_token": held["cache_bytes"] / max(held["cache_tokens"], 1) / 2**10,
        f"turn{last}_over_turn1_cost": med("kv", last, "seconds") / med("kv", 1, "seconds"),
    }
    write_results(out, "multiturn", results, {"config": config, "overrides": DEFAULTS + overrides, "model": cfg.model,
                                              "episodes": n, "turns": last, "repeats": runs})
    return results
