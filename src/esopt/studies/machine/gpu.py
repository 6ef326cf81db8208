"""esopt bench gpu: every GPU figure of issue 26 side by side in one run.

Sections (each on its own model; phases in one process, each phase's peak CUDA memory taken
after resetting the peak, its time after a device synchronisation):

- `demo-float32`, `demo-bfloat16`: the config's model (the demo's SmolLM2-135M-Instruct) on the
  config's task. Phases, on the same G x E episodes of generation 0 (population G, episodes per
  member E): `inference` (the unperturbed model plays them all, in batches of agent.batch_size:
  the floor), `es-table` and `es-counter` (one ES generation with full-rank noise: members one
  after another, perturbed in place, then the update and the weights hash), `es-lowrank` (one
  generation with low-rank noise: every member's episodes in one batched rollout) and `grpo`
  (one GRPO step: group_size G x puzzles E, the same episodes, then its update).
- `4b`: a random-weight model of Qwen3-4B's shape (4.02B parameters) in bfloat16, built from a
  config on the device (no download), on Sudoku-shaped prompts (9x9 boards; rewards are
  meaningless, speed and memory are not): the same phases without `es-counter`.
- `27b`: memory only, a random Qwen3-architecture model of 26.97B parameters in bfloat16:
  `inference`, `es-table`, `grpo`; an out-of-memory is recorded as such. The weights hash (host
  side, no device memory) is skipped there: hashing 54 GB would take most of the time budget.
- `compiled`: the demo in float32, `inference` and `es-table` with dynamic caches and again with
  agent.decode=compiled (models/static.py: static caches, on CUDA CUDA graphs of a compiled
  forward), each compiled phase timed on its second run; last, as compilation's time varies most.

GRPO's update always runs (flat groups get advantages of +-1, as in `bench memory`), so a
random model's equal rewards cannot skip the backward pass. `--tiny` runs every section at tiny
shapes on the CPU (the default test suite does, so the command cannot rot); memory is then not
measured. The JSON is written after every phase, and `--sections` measures some of them,
keeping the others from an earlier OUT with the same settings.
"""
from __future__ import annotations

import gc
import itertools
import json
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

SECTIONS = ("demo-float32", "demo-bfloat16", "4b", "27b", "compiled")
DEMO_PHASES = ("inference", "es-table", "es-counter", "es-lowrank", "grpo")
# "compiled": the demo in float32 decoded with dynamic caches and with agent.decode=compiled (static caches;
# on CUDA a compiled forward replayed as CUDA graphs), side by side; "+compiled" phases are timed on their
# second run (the first pays compilation and graph capture, reported as warmup_seconds). Last of the
# sections: compilation's time is the least predictable, and a timeout then loses only this one.
PHASES = {"demo-float32": DEMO_PHASES, "demo-bfloat16": DEMO_PHASES,
          "4b": ("inference", "es-table", "es-lowrank", "grpo"), "27b": ("inference", "es-table", "grpo"),
          "compiled": ("inference", "inference+compiled", "es-table", "es-table+compiled")}
DEMO_KINDS = ("demo", "compiled")  # sections on the config's (demo) model

# Qwen3 shapes (transformers Qwen3Config fields); 4b is Qwen3-4B's, 27b a Qwen3 model at the paper's 27B
SHAPES = {
    "4b": dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
               num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=True),
    "27b": dict(hidden_size=5120, intermediate_size=21760, num_hidden_layers=64, num_attention_heads=40,
                num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=False),
}
TINY_SHAPES = {
    "4b": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, head_dim=16, vocab_size=512, tie_word_embeddings=True),
    "27b": dict(hidden_size=96, intermediate_size=192, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, head_dim=24, vocab_size=512, tie_word_embeddings=False),
}
# the task of each section, on top of the config (population x episodes per member = the episodes compared)
SECTION_OVERRIDES = {
    "demo": [],
    "compiled": [],
    "4b": ["env.options.size=9", "env.options.blanks=5", "env.max_turns=3", "agent.max_new_tokens=32", "agent.examples=[]",
           "es.population=8", "es.episodes_per_member=8"],
    "27b": ["env.options.size=9", "env.options.blanks=5", "env.max_turns=1", "agent.max_new_tokens=16", "agent.examples=[]",
            "es.population=2", "es.episodes_per_member=2"],
}
# --tiny: the same sections and phases in seconds on the CPU (es.kernels=torch: the path a GPU takes)
TINY_OVERRIDES = ["model=tiny-llama", "es.population=2", "es.episodes_per_member=2", "agent.max_new_tokens=3",
                  "env.options.size=4", "env.options.blanks=2", "env.max_turns=2", "agent.examples=[]", "runtime.threads=1",
                  "tasks.validation=0", "tasks.heldout=2", "es.table_size=4194304", "es.kernels=torch"]


_RUNS = itertools.count()  # run folders of one bench process get distinct names

# ------------------------------------------------------------------ measuring
def _cuda(device) -> bool:
    return str(device).startswith("cuda")


def _reset(device) -> None:
    import torch

    if _cuda(device):  # freed tensors leave the device (gc takes ~0.3 s with transformers loaded: not on the CPU)
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _sync(device) -> None:
    import torch

    if _cuda(device):
        torch.cuda.synchronize()


def _peak_mb(device):
    import torch

    return torch.cuda.max_memory_allocated() / 2**20 if _cuda(device) else None


def _is_oom(text: str | None) -> bool:
    return bool(text) and ("OutOfMemoryError" in text or "CUDA out of memory" in text)


@contextmanager
def _nonflat_groups():
    """GRPO's update always runs (studies/machine/memory.py's patch), undone afterwards."""
    from ...algos.grpo import trainer as rl_trainer
    from .memory import _always_update

    real = rl_trainer.group_advantages
    _always_update()
    try:
        yield
    finally:
        rl_trainer.group_advantages = real


@contextmanager
def _no_weights_hash():
    """The trainers' weights hash (sha256 of every byte, on the host) replaced by a constant."""
    from ...algos.grpo import trainer as rl_trainer
    from ...algos.es import trainer as es_trainer

    real = es_trainer.weights_hash, rl_trainer.weights_hash
    es_trainer.weights_hash = rl_trainer.weights_hash = lambda model: "skipped"
    try:
        yield
    finally:
        es_trainer.weights_hash, rl_trainer.weights_hash = real


def _episodes_of_generation(cfg, tasks):
    """Generation 0's episodes as the ES members play them: population x the same episodes_per_member puzzles."""
    envs, ids, obs = [], [], []
    for _ in range(cfg.es.population):
        e, i, o = tasks.train(cfg.es.episodes_per_member, 0)
        envs += e
        ids += i
        obs += o
    return envs, ids, obs


def run_phase(phase: str, make_cfg, model, tok, root: str) -> dict:
    """One phase on `model`: seconds, episodes, episodes/s, tokens, peak CUDA MiB (None on the CPU), time split.
    make_cfg(*overrides): the section's config with these overrides on top. `<phase>+compiled`: the phase
    with agent.decode=compiled, timed on its second run (the first pays compilation and graph capture)."""
    if phase.endswith("+compiled"):
        base = phase[: -len("+compiled")]
        compiled = lambda *extra: make_cfg("agent.decode=compiled", *extra)  # noqa: E731
        t0 = time.perf_counter()
        run_phase(base, compiled, model, tok, root)
        warm = time.perf_counter() - t0
        return {**run_phase(base, compiled, model, tok, root), "warmup_seconds": warm}
    from ...train.rundir import RunDir

    cfg = make_cfg()
    device = cfg.runtime.device
    quiet = lambda *a, **k: None  # noqa: E731
    _reset(device)
    row: dict = {}
    if phase == "inference":
        from ...models import HFPolicy
        from ...train.evaluate import run_episodes
        from ...train.tasks import TaskSource

        policy = HFPolicy.for_agent(model, tok, cfg.agent)
        envs, ids, obs = _episodes_of_generation(cfg, TaskSource(cfg.env, cfg.tasks, cfg.run.seed))
        t0 = time.perf_counter()
        episodes = run_episodes(policy, envs, ids, obs, cfg, seed=0)
        _sync(device)
        seconds = time.perf_counter() - t0
        row.update(episodes=len(episodes), tokens=policy.tokens_generated,
                   reward_mean=sum(ep.reward for ep in episodes) / len(episodes))
    elif phase.startswith("es-"):
        from ...algos.es.trainer import Trainer

        noise = phase[3:]
        run_cfg = make_cfg(f"es.noise={noise}", f"run.out_dir={root}",
                           f"run.name={cfg.run.name}-{phase}-{next(_RUNS)}")
        trainer = Trainer(run_cfg, RunDir.create(run_cfg), model=model, tokenizer=tok, log=quiet)
        t0 = time.perf_counter()
        stats = trainer.generation(0)
        _sync(device)
        seconds = time.perf_counter() - t0
        row.update(episodes=stats["episodes"], tokens=stats["tokens"], reward_mean=stats["reward_mean"],
                   **{k: v for k, v in stats.items() if k.startswith("time_")})
        if trainer.perturber.play_mode == "in_place":  # restores through corrections
            row["correction_mb"] = trainer.perturber.last_correction_bytes / 2**20
        errors = list(trainer.history.records[-1].get("member_errors", {}).values())
        if errors:  # a member that failed (out of memory, say) was recorded and the generation went on
            row["error"] = "oom" if any(_is_oom(e) for e in errors) else errors[0].strip().splitlines()[-1]
        del trainer
    elif phase == "grpo":
        from ...algos.grpo.trainer import GRPOTrainer

        run_cfg = make_cfg("algo=grpo", "grpo.steps=1", f"grpo.group_size={cfg.es.population}",
                           f"grpo.puzzles_per_step={cfg.es.episodes_per_member}", f"run.out_dir={root}",
                           f"run.name={cfg.run.name}-grpo-{next(_RUNS)}")
        with _nonflat_groups():
            trainer = GRPOTrainer(run_cfg, RunDir.create(run_cfg), model=model, tokenizer=tok, log=quiet)
            t0 = time.perf_counter()
            stats = trainer.generation(0)
            _sync(device)
            seconds = time.perf_counter() - t0
        error = stats.get("update_error") or stats.get("rollout_error")
        row.update(episodes=stats["episodes"], tokens=stats["tokens"], reward_mean=stats["reward_mean"],
                   time_rollout=stats["time_rollout"], time_update=stats["time_update"],
                   trained_tokens=stats["trained_tokens"])
        if error:
            row["error"] = "oom" if _is_oom(error) else error.strip().splitlines()[-1]
        trainer.optimizer.state.clear()
        del trainer
        model.requires_grad_(False)
        for p in model.parameters():
            p.grad = None
    else:
        raise ValueError(f"unknown phase {phase!r}")
    row.update(seconds=seconds, episodes_per_s=row["episodes"] / seconds if seconds > 0 else None,
               peak_mb=_peak_mb(device))
    _reset(device)
    return row


# ------------------------------------------------------------------ models
def random_model(shape: dict, tok, dtype: str, device: str):
    """A Qwen3 causal LM of `shape` with random weights, built on `device` in `dtype` (no download)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(**shape, max_position_embeddings=8192, pad_token_id=tok.pad_token_id,
                      eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id)
    old = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        with torch.device(device), torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = Qwen3ForCausalLM(cfg)
    finally:
        torch.set_default_dtype(old)
    return model.eval().requires_grad_(False)


def _warm_up(model, tok, device) -> None:
    """One short generation: CUDA context, kernels and library handles are paid before any phase is timed."""
    import torch

    ids = torch.tensor([tok("warm up", add_special_tokens=False)["input_ids"] or [0]], device=device)
    with torch.inference_mode():
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, do_sample=False,
                       pad_token_id=tok.pad_token_id)
    _sync(device)


def section_config(config: str, overrides: list[str], section: str, tiny: bool, root: str):
    """make_cfg(*extra) -> the section's config (with `extra` on top)."""
    from ...config import load_config

    kind = section.split("-")[0]
    args = overrides + SECTION_OVERRIDES[kind] + (TINY_OVERRIDES if tiny else [])
    dtype = section.split("-")[1] if kind == "demo" else "float32" if kind == "compiled" else "bfloat16"
    args += [f"runtime.dtype={dtype}", f"run.out_dir={root}",
             f"run.name={section}"]
    cfg = load_config(config, args)
    # every phase decodes the generation's episodes in as few batches as the setting allows: all of them
    args.append(f"agent.batch_size={cfg.es.population * cfg.es.episodes_per_member}")
    return lambda *extra: load_config(config, args + list(extra))


def load_tokenizer(name: str):
    """The tokenizer of a model name (alias, folder or hub id), or of a folder holding only a tokenizer."""
    from transformers import AutoTokenizer

    from ...models.loading import resolve_model

    tok = AutoTokenizer.from_pretrained(name if Path(name).is_dir() else resolve_model(name))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


def measure_section(config: str, overrides: list[str], section: str, tiny: bool, root: str, log=print,
                    tokenizer: str | None = None, progress=None) -> dict:
    """tokenizer: for the random-weight sections, a tokenizer folder or model name (default the config's model).
    progress(out): called with the section's figures so far after each phase (main saves them)."""
    import torch

    from ...models import load_model

    make_cfg = section_config(config, overrides, section, tiny, root)
    cfg = make_cfg()
    device = cfg.runtime.device
    if cfg.runtime.threads:
        torch.set_num_threads(cfg.runtime.threads)
    t0 = time.perf_counter()
    kind = section.split("-")[0]
    if kind in DEMO_KINDS:
        model, tok = load_model(cfg.model, cfg.runtime.dtype, device)
    else:
        tok = load_tokenizer(tokenizer or cfg.model)
        model = random_model((TINY_SHAPES if tiny else SHAPES)[kind], tok, cfg.runtime.dtype, device)
    params = sum(p.numel() for p in model.parameters())
    _reset(device)
    out = {"model": cfg.model if kind in DEMO_KINDS else f"random Qwen3 {kind} shape", "params": params,
           "dtype": cfg.runtime.dtype, "device": device, "population": cfg.es.population,
           "episodes_per_member": cfg.es.episodes_per_member, "max_new_tokens": cfg.agent.max_new_tokens,
           "max_turns": cfg.env.max_turns, "board": f"{cfg.env.options.size}x{cfg.env.options.size}, {cfg.env.options.blanks} blanks",
           "weights_mb": sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20,
           "load_seconds": time.perf_counter() - t0, "phases": {}}
    _warm_up(model, tok, device)
    hashing = _no_weights_hash() if kind == "27b" else _nothing()
    with hashing:
        for phase in PHASES[section]:
            try:
                row = run_phase(phase, make_cfg, model, tok, root)
            except torch.cuda.OutOfMemoryError:
                row = {"error": "oom", "peak_mb": _peak_mb(device)}
                _reset(device)
            except Exception as e:  # noqa: BLE001 - a compiled decode that cannot build here is a result too
                if not phase.endswith("+compiled"):
                    raise
                row = {"error": f"{type(e).__name__}: {e}"[:400]}
                _reset(device)
            out["phases"][phase] = row
            if progress is not None:
                progress(out)
            log(f"[bench gpu] {section:13s} {phase:10s} " + (
                f"{row['episodes']} episodes in {row['seconds']:.2f}s ({row['episodes_per_s']:.2f}/s)"
                if "seconds" in row else "") + (f", peak {row['peak_mb']:.0f} MiB" if row.get("peak_mb") else "")
                + (f", ERROR {row['error']}" if row.get("error") else ""))
    if kind == "27b":
        out["note"] = "memory only; weights hash skipped (host side)"
    del model
    _reset(device)
    return out


@contextmanager
def _nothing():
    yield


# ------------------------------------------------------------------ figures
def _ratio(a, b):
    return a / b if a is not None and b else None


def figures(sections: dict) -> dict:
    """The RESULT figures from the measured sections (None where a section or phase is missing)."""
    def ph(section, phase):
        return sections.get(section, {}).get("phases", {}).get(phase, {})

    out = {}
    for section, tag in (("demo-bfloat16", "bf16_"), ("4b", "4b_"), ("demo-float32", "")):
        inf, es, low, grpo = ph(section, "inference"), ph(section, "es-table"), ph(section, "es-lowrank"), ph(section, "grpo")
        out[f"gpu_{tag}es_over_inference_time"] = _ratio(es.get("seconds"), inf.get("seconds"))
        out[f"gpu_{tag}lowrank_es_over_inference_time"] = _ratio(low.get("seconds"), inf.get("seconds"))
        out[f"gpu_{tag}es_episodes_per_s_over_grpo"] = _ratio(es.get("episodes_per_s"), grpo.get("episodes_per_s"))
        out[f"gpu_{tag}lowrank_over_fullrank_episodes_per_s"] = _ratio(low.get("episodes_per_s"),
                                                                       es.get("episodes_per_s"))
    # the compiled decode step (fp32 demo): its speed-up over dynamic caches, and ES over inference with it
    inf, inf_c, es_c = ph("compiled", "inference"), ph("compiled", "inference+compiled"), ph("compiled", "es-table+compiled")
    out["gpu_compiled_over_dynamic_inference_time"] = _ratio(inf_c.get("seconds"), inf.get("seconds"))
    out["gpu_compiled_es_over_inference_time"] = _ratio(es_c.get("seconds"), inf_c.get("seconds"))
    inf4, es4 = ph("4b", "inference"), ph("4b", "es-table")
    out["gpu_4b_es_over_inference_peak"] = _ratio(es4.get("peak_mb"), inf4.get("peak_mb"))
    for phase, name in (("es-table", "gpu_27b_es_peak_gb"), ("grpo", "gpu_27b_grpo_peak_gb")):
        row = ph("27b", phase)
        out[name] = "oom" if row.get("error") == "oom" else (row["peak_mb"] / 1024 if row.get("peak_mb") else None)
    return out


def _default_device(overrides: list[str], tiny: bool) -> list[str]:
    """runtime.device=cuda where a GPU is and the overrides name no device (cpu with --tiny)."""
    import torch

    if any(o.startswith("runtime.device=") for o in overrides):
        return overrides
    return overrides + [f"runtime.device={'cuda' if torch.cuda.is_available() and not tiny else 'cpu'}"]


def main(config: str, overrides: list[str], out: str, sections: list[str] | None = None, tiny: bool = False,
         tokenizer: str | None = None) -> dict:
    from ...config import ConfigError
    from ..common import write_results

    sections = sections or list(SECTIONS)
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        raise ConfigError(f"bench gpu: unknown section(s) {unknown}; allowed: {', '.join(SECTIONS)}")
    overrides = _default_device(list(overrides), tiny)
    for s in sections:  # every section's config is checked before anything runs
        section_config(config, overrides, s, tiny, tempfile.gettempdir())()
    settings = {"config": config, "overrides": overrides, "tiny": tiny}
    from ..common import kept_from_earlier

    measured = kept_from_earlier(out, settings, "sections", SECTIONS, sections, "bench gpu")
    root = tempfile.mkdtemp(prefix="esopt-bench-gpu-")
    device_name = None
    import torch

    if any(o == "runtime.device=cuda" or o.startswith("runtime.device=cuda:") for o in overrides) and \
            torch.cuda.is_available():
        device_name = torch.cuda.get_device_name()
    for s in sections:
        t0 = time.perf_counter()
        def progress(part, s=s):
            measured[s] = {**part, "partial": True}
            _save(out, settings, measured, device_name, partial=True)

        measured[s] = measure_section(config, overrides, s, tiny, root, tokenizer=tokenizer, progress=progress)
        measured[s]["section_seconds"] = time.perf_counter() - t0
        _save(out, settings, measured, device_name, partial=True)
    ordered = {s: measured[s] for s in SECTIONS if s in measured}
    results = figures(ordered)
    write_results(out, "gpu", {k: v for k, v in results.items() if v is not None},
                  {**settings, "device_name": device_name, "sections": ordered,
                   "not_measured": sorted(k for k, v in results.items() if v is None)})
    return results


def _save(out: str, settings: dict, sections: dict, device_name, partial: bool) -> None:
    from ..common import machine

    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"benchmark": "gpu", "machine": machine(), **settings, "device_name": device_name,
                                "partial": partial, "sections": sections}, indent=1))
