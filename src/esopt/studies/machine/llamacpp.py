"""esopt bench llamacpp: a trained agent, exported as GGUF, gives in llama.cpp the greedy replies it gives
in esopt (issue 42).

    make install-llamacpp                                   # node-llama-cpp's prebuilt CPU llama.cpp (npm)
    esopt bench llamacpp --run RUN                          # a run's final weights
    esopt bench llamacpp configs/demo.yaml es.generations=2 # or: train a short run first (its folder is kept)

The run's final weights are written as GGUF in each of --types (default f32,q8_0) with esopt's export
(models/gguf.py). The held-out tasks' first-turn prompts are built as the rollout builds them (system
prompt, examples, observation, chat template) and decoded greedily twice: by esopt as it plays
(HFPolicy, batched, agent.max_new_tokens; the exact prompt and reply token ids kept) and by llama.cpp
(tools/llamacpp/greedy.mjs, fed the same prompt ids, one prompt at a time), under llama.cpp's defaults
(an f16 KV cache, flash attention where it chooses it) and, for f32, computing in float32 throughout
(f32 KV cache, no flash attention: on the CPU it rounds queries to f16). Per row: replies equal token for
token, prompt texts llama.cpp tokenizes to esopt's ids, llama.cpp's seconds per prompt; the replies that
differ are listed with both texts.
"""
from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path

TOOL = "tools/llamacpp"  # package.json + greedy.mjs; node_modules from make install-llamacpp


def check_tool(tool: str | Path) -> Path:
    from ...config import ConfigError

    tool = Path(tool)
    if not (tool / "greedy.mjs").exists():
        raise ConfigError(f"{tool}/greedy.mjs not found: run esopt bench llamacpp from esopt's source folder, or "
                          f"give --llamacpp DIR")
    if not (tool / "node_modules" / "node-llama-cpp").exists():
        raise ConfigError(f"llama.cpp is not installed in {tool}: run make install-llamacpp (node >= 20, npm)")
    return tool


EXACT = {"kv": "F32", "flash_attention": False}  # llama.cpp computing as esopt does (float32 throughout)
DEFAULTS = {"kv": "F16", "flash_attention": "auto"}  # what llama.cpp does unless told: an f16 KV cache


def llamacpp_replies(tool: Path, gguf: Path, prompts: list[dict], threads: int = 1, settings: dict | None = None) -> dict:
    """llama.cpp's greedy replies ({seconds, replies: [{text_tokens, reply_tokens, reply}]}) to prompts
    [{text, tokens, max_tokens}] under `settings` (EXACT, or DEFAULTS when None): its KV cache's type and
    whether it uses flash attention (on the CPU it rounds queries to f16)."""
    context = max(len(p["tokens"]) + p["max_tokens"] for p in prompts) + 16
    request = {"model": str(Path(gguf).resolve()), "threads": threads, "context": context, **(settings or DEFAULTS),
               "prompts": prompts}
    proc = subprocess.run(["node", str((tool / "greedy.mjs").resolve())], input=json.dumps(request),
                          capture_output=True, text=True, cwd=tool)
    if proc.returncode:
        raise RuntimeError(f"llama.cpp ({tool}/greedy.mjs) failed with exit {proc.returncode}:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def first_turns(model, tok, cfg) -> list[dict]:
    """The held-out tasks' first-turn prompts as the rollout builds them, with esopt's greedy replies:
    [{task, text, tokens, reply_tokens, reply, max_tokens}] (reply ids without the end-of-turn token)."""
    from ...agent.rollout import AgentContext, close_quietly
    from ...models.decode import DecodeOptions
    from ...models.policy import HFPolicy
    from ...train.tasks import TaskSource

    envs, tasks, observations = TaskSource(cfg.env, cfg.tasks, cfg.run.seed).heldout()
    try:
        observations = [o if o is not None else env.reset()[0] for env, o in zip(envs, observations)]
    finally:
        for env in envs:
            close_quietly(env)
    context = AgentContext.from_config(cfg.agent)
    convs = [context.conversation([], o) for o in observations]
    policy = HFPolicy.for_agent(model, tok, cfg.agent)
    ids: list = []
    replies = policy.generate(convs, DecodeOptions(cfg.agent.max_new_tokens), token_ids=ids)
    out = []
    for task, text, (prompt, reply), said in zip(tasks, policy.prompt_texts(convs), ids, replies):
        reply = list(reply)
        if reply and reply[-1] == tok.eos_token_id:
            reply = reply[:-1]
        out.append({"task": task, "text": text, "tokens": list(prompt), "reply_tokens": reply, "reply": said,
                    "max_tokens": cfg.agent.max_new_tokens})
    return out


def compare(esopt: list[dict], llama: dict) -> dict:
    same = [e["reply_tokens"] == r["reply_tokens"] for e, r in zip(esopt, llama["replies"])]
    tokenized = [e["tokens"] == r["text_tokens"] for e, r in zip(esopt, llama["replies"])]
    return {"prompts": len(esopt), "same_replies": sum(same), "same_prompt_tokens": sum(tokenized),
            "llamacpp_seconds_per_prompt": llama["seconds"] / max(len(esopt), 1),
            "differ": [{"task": e["task"], "esopt": e["reply"], "llamacpp": r["reply"]}
                       for e, r, s in zip(esopt, llama["replies"], same) if not s]}


def main(config: str | None, overrides: list[str], out: str, run: str | None = None, types: list[str] | None = None,
         tool: str = TOOL, threads: int = 1) -> dict:
    import torch

    from ...config import ConfigError
    from ...models import gguf
    from ...train.weights import load_run_weights
    from ..common import write_results
    from ..runs import train_run

    tool_dir = check_tool(tool)
    types = types or ["f32", "q8_0"]
    bad = [t for t in types if t not in gguf.TYPES]
    if bad:
        raise ConfigError(f"bench llamacpp --types: {', '.join(bad)} not one of {', '.join(gguf.TYPES)}")
    if run is None:  # a short run of the config (its overrides set how short), kept beside --out
        if not config:
            raise ConfigError("bench llamacpp needs --run RUN or a CONFIG to train a short run from")
        work = str(Path(out).with_suffix("")) + "-runs"
        run = train_run(config, list(overrides), work, "short")["run_dir"]
    torch.set_num_threads(threads)
    model, tok, cfg, n = load_run_weights(run)
    t0 = time.time()
    prompts = first_turns(model, tok, cfg)
    esopt_seconds = time.time() - t0
    print(f"[bench] {len(prompts)} held-out first turns decoded by esopt in {esopt_seconds:.1f}s", flush=True)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="esopt-gguf-") as tmp:
        for t in types:
            path = Path(tmp) / f"model-{t}.gguf"
            written = gguf.write(model, tok, path, t, name=f"{cfg.model} after {n} updates")
            asked = [{k: p[k] for k in ("text", "tokens", "max_tokens")} for p in prompts]
            # every type under llama.cpp's defaults; f32 also computed in float32 throughout (exact)
            for label, settings in [("defaults", DEFAULTS)] + ([("exact", EXACT)] if t == "f32" else []):
                llama = llamacpp_replies(tool_dir, path, asked, threads, settings)
                r = rows[f"{t}-{label}"] = {**compare(prompts, llama), "type": t, "llamacpp_settings": settings,
                                            "gguf_bytes": written["bytes"]}
                print(f"[bench] {t}, llama.cpp {label} ({settings}): {r['same_replies']}/{r['prompts']} replies the "
                      f"same token for token, {r['same_prompt_tokens']}/{r['prompts']} prompts tokenized alike, "
                      f"{r['llamacpp_seconds_per_prompt']:.2f}s per prompt", flush=True)
                for d in r["differ"][:5]:
                    print(f"    task {d['task']}: esopt {d['esopt']!r} / llama.cpp {d['llamacpp']!r}", flush=True)
    results = {}
    for key, r in rows.items():
        results[f"{key}_same_replies"] = f"{r['same_replies']}/{r['prompts']}"
        results[f"{key}_same_prompt_tokens"] = f"{r['same_prompt_tokens']}/{r['prompts']}"
    write_results(out, "llamacpp", results, {"run": str(run), "generations": n, "model": cfg.model, "types": types,
                                             "threads": threads, "esopt_seconds": esopt_seconds, "rows": rows,
                                             "llamacpp": json.loads((tool_dir / "package.json").read_text())
                                             ["dependencies"]})
    return rows
