"""`esopt bench NAME`: the benchmarks, one table row each (what it measures, how it is called).
Each prints RESULT lines and writes JSON (default bench-results/<name>.json)."""
from __future__ import annotations

import importlib

from ...utils.args import default_config, floats, ints, names, split_args


def _out(a, name: str) -> str:
    return a.out or f"bench-results/{name}.json"


def _perturb(main, a, config, overrides):
    from ...config import load_config

    cfg = load_config(config, overrides)
    main(cfg.model, _out(a, "perturb"), max(a.repeats or 3, 1), cfg.es.sigma.start, cfg.es.table_size,
         cfg.runtime.threads)


def _dtype(module, a, config, overrides):
    if a.seeds:
        module.parity(config, overrides, a.out or "bench-results/dtype-parity.json", ints(a.seeds, "--seeds"),
                      jobs=a.jobs)
    else:
        module.main(config, overrides, _out(a, "dtype"), max(a.repeats or 3, 1))


# name: (module, what it measures, call(main, a, config, overrides))
BENCHES = {
    "es-memory": ("es_memory", "peak memory of one ES generation vs evaluating the same episodes",
                  lambda m, a, c, o: m(c, o, _out(a, "es-memory"), a.repeats or 3)),
    "memory": ("memory", "peak memory of evaluation, an ES generation and a GRPO step, 9x9 Sudoku and 4x4",
               lambda m, a, c, o: m(c, o, _out(a, "memory"), a.repeats or 1, tasks=names(a.tasks),
                                    grpo_sequences=a.grpo_sequences)),
    "perturb": ("perturb", "perturb + restore of every parameter per noise source vs the memory-bound floor", _perturb),
    "throughput": ("throughput", "one generation: full-rank members one by one vs low-rank in one batch (--context: context search)",
                   lambda m, a, c, o: m(c, o, a.out or ("bench-results/throughput-context.json" if a.context
                                                        else "bench-results/throughput.json"), context=a.context)),
    "compare": ("compare", "ES vs GRPO at equal episodes (or seconds), each tuned on validation",
                lambda m, a, c, o: m(c, o, _out(a, "compare"), ints(a.seeds, "--seeds", "0,1,2"),
                                     grpo_lrs=floats(a.grpo_lrs, "--grpo-lrs"),
                                     es_sigmas=floats(a.es_sigmas, "--es-sigmas"),
                                     tune_seeds=ints(a.tune_seeds, "--tune-seeds"), jobs=a.jobs,
                                     budget_seconds=a.budget_seconds, arms=a.arms)),
    "settings": ("settings", "one algorithm's named settings (--arms) side by side on the validation split",
                 lambda m, a, c, o: m(c, o, _out(a, "settings"), a.arms, ints(a.seeds, "--seeds", "0"), jobs=a.jobs)),
    "population": ("population", "vanilla ES, small vs large population, on a weaker and a stronger backbone",
                   lambda m, a, c, o: m(c, o, _out(a, "population"), names(a.models) or [],
                                        ints(a.populations, "--populations", "8,16"), seed=a.seed)),
    "precision": ("precision", "what float32, bfloat16 and float16 weights do to ES",
                  lambda m, a, c, o: m(c, o, _out(a, "precision"))),
    "horizon": ("horizon", "ES vs GRPO as the episode gets longer",
                lambda m, a, c, o: m(c, o, _out(a, "horizon"), ints(a.seeds, "--seeds", "0,1"), tasks=names(a.tasks),
                                     grpo_lr=a.grpo_lr, jobs=a.jobs, es_sigma=a.es_sigma)),
    "multiturn": ("multiturn", "a late turn of a long episode with and without KV reuse across turns",
                  lambda m, a, c, o: m(c, o, _out(a, "multiturn"), max(a.repeats or 3, 1))),
    "decode": ("decode", "long replies: esopt's growing KV cache vs transformers' DynamicCache", lambda m, a, c, o: m(c, o, _out(a, "decode"),
                                                                                  max(a.repeats or 3, 1))),
    "web": ("web", "a browser episode: esopt's env vs BrowserGym's default", lambda m, a, c, o: m(_out(a, "web"),
                                                                                    episodes=a.repeats or 12,
                                                                                    sections=names(a.sections))),
    "serve": ("serve", "a generation played by 1, 8 and 32 HTTP clients through esopt serve vs the in-process rollout, "
              "then with hostile clients beside them",
              lambda m, a, c, o: m(c, o, _out(a, "serve"), clients=ints(a.clients, "--clients", "1,8,32"),
                                   hostile=2 if a.hostile is None else a.hostile)),
    "ray": ("distributed", "one process vs Ray workers on the same cores",
            lambda m, a, c, o: m(c, o, _out(a, "ray"), cores=a.workers or 2, repeats=max(a.repeats or 2, 1))),
    "gpu": ("gpu", "ES at inference speed on a GPU (decode, perturb, population, large models)",
            lambda m, a, c, o: m(c, o, a.out or ("bench-results/gpu-tiny.json" if a.tiny else "bench-results/gpu.json"),
                                 sections=names(a.sections), tiny=a.tiny, tokenizer=a.tokenizer)),
    "dtype": ("dtype", "float32 vs bfloat16 speed (--seeds: learning parity)", _dtype),
    "llamacpp": ("llamacpp", "a run exported as GGUF: llama.cpp's greedy replies vs esopt's on held-out first turns",
                 lambda m, a, c, o: m(c, o, _out(a, "llamacpp"), run=a.run, types=names(a.types),
                                      tool=a.llamacpp or "tools/llamacpp")),
    "room": ("room", "which tasks a small model can learn (validation success), ES on those with room", None),
}


FLAGS = (  # (flag, add_argument keywords): each says which benches use it
    ("--out", dict(help="JSON output path")),
    ("--context", dict(action="store_true",
         help="throughput: one generation each of coevo.mode weights / both / context at equal episodes "
         "(a config with a skill library, e.g. configs/coevo-demo.yaml): the cost of context search")),
    ("--repeats", dict(type=int, default=None,
         help="es-memory (default 3) / memory (default 1): fresh-process runs of each phase; "
         "perturb (default 3): timed rounds; multiturn (default 3): rollouts; decode (default 3): "
         "batches; dtype (default 3): rounds per batch size; medians are compared; "
         "web (default 12): episodes per env; ray (default 2): timed generations per setup")),
    ("--tasks", dict(help="memory: comma-separated subset of 4x4-demo,9x9-h5,9x9-h10,9x9-h15 (default: all); "
         "horizon: horizons as 4x4-bN / 9x9-hN, N blanks and 3N turns "
         "(default 4x4-b2,4x4-b4,4x4-b6; the paper's: 9x9-h5,9x9-h10,9x9-h15); "
         "room: task names (studies/bench/room.py TASKS) or name=config:override,... "
         "(default: all)")),
    ("--seeds", dict(help="compare: run seeds of the final runs of each method's chosen setting "
         "(default 0,1,2); settings: run seeds of every setting (default 0); horizon: run seeds "
         "(default 0,1); room: ES run seeds (default 0,1,2); dtype: a learning-parity check of float32 vs bfloat16 over these seeds "
         "instead of the speed figures")),
    ("--train", dict(type=int, default=0,
         help="room: train ES on this many tasks with the most room (validation success in [0.1, 0.7], "
         "lowest first; left out: tasks where the base model plays 90%% of episodes with the same replies), --seeds each "
         "(default 0: the base table only)")),
    ("--runs", dict(help="room: folder of the ES runs (default runs/room; finished runs are read back)")),
    ("--grpo-lrs", dict(help="compare: GRPO learning rates swept (default 1e-6,1e-5,1e-4)")),
    ("--es-sigmas", dict(help="compare: ES sigma.start values swept, sigma.end scaled alike "
         "(default: the config's sigma x 0.5,1,2); as many as --grpo-lrs")),
    ("--tune-seeds", dict(help="compare: run seeds of the sweep, chosen on validation (default: the first of "
         "--seeds)")),
    ("--budget-seconds", dict(type=float, default=None,
         help="compare: every run trains for this many seconds (evaluations excluded; run.budget_seconds) "
         "instead of equal episodes; es.generations is then the most updates a run may make")),
    ("--arms", dict(help="compare: a YAML file of the settings swept, {es: {label: [override, ...]}, grpo: {...}} "
         "(as many of each), instead of --es-sigmas / --grpo-lrs; e.g. configs/studies/equal-time-arms.yaml; "
         "settings: {label: [override, ...]}, e.g. configs/studies/scope-sigma-arms.yaml")),
    ("--grpo-lr", dict(type=float, default=None,
         help="horizon: GRPO learning rate (default: grpo_best_lr of compare.json beside --out, else 1e-5)")),
    ("--es-sigma", dict(type=float, default=None,
         help="horizon: ES sigma.start, sigma.end scaled alike (default: es_best_sigma of compare.json "
         "beside --out, else the config's)")),
    ("--jobs", dict(type=int, default=1,
         help="compare, settings, horizon, dtype --seeds: training runs side by side (default 1; seconds are then "
         "shared-machine figures; give each run its share of the cores with runtime.threads)")),
    ("--models", dict(help="population: comma-separated backbones, weaker first (aliases, folders, exports)")),
    ("--populations", dict(help="population: comma-separated population sizes (default 8,16)")),
    ("--seed", dict(type=int, default=0, help="population: run seed")),
    ("--workers", dict(type=int, default=None,
         help="ray: total cores N compared (default 2): one process with N threads, 1 Ray worker x N "
         "threads, N Ray workers x 1 thread")),
    ("--sections", dict(help="gpu: comma-separated subset of demo-float32,demo-bfloat16,4b,27b,compiled "
         "(default: all; the others are kept from an earlier --out with the same settings); "
         "web: episodes,observation (default both; the other is kept from an earlier --out)")),
    ("--clients", dict(help="serve: concurrent clients per timed generation, comma-separated (default 1,8,32)")),
    ("--hostile", dict(type=int, default=None,
         help="serve: threads attacking the server in its hostile section (default 2; 0: no hostile section)")),
    ("--tokenizer", dict(help="gpu: tokenizer of the random-weight 4b/27b models, a folder or model name "
         "(default: the config's model's)")),
    ("--tiny", dict(action="store_true",
         help="gpu: every section at tiny shapes on the CPU (a check of the bench itself, seconds)")),
    ("--run", dict(help="llamacpp: the run whose final weights are checked (default: train a short run of CONFIG "
         "with its overrides)")),
    ("--types", dict(help="llamacpp: GGUF types checked, comma-separated (default f32,q8_0)")),
    ("--llamacpp", dict(help="llamacpp: the folder of greedy.mjs and its node_modules (default tools/llamacpp; "
         "make install-llamacpp)")),
    ("--grpo-sequences", dict(type=int, default=None,
         help="memory: GRPO updates on the longest N turn sequences (default: two micro-batches; 0: all)")),
)


def add_arguments(b) -> None:
    b.add_argument("name", choices=list(BENCHES), metavar="NAME",
                   help="; ".join(f"{name}: {row[1]}" for name, row in BENCHES.items()))
    b.add_argument("args", nargs="*", metavar="CONFIG_OR_OVERRIDE")
    for flag, kwargs in FLAGS:
        b.add_argument(flag, **kwargs)


def run(a) -> int:
    config, overrides = split_args(a.args)
    module_name, _, call = BENCHES[a.name]
    module = importlib.import_module(f"{__package__}.{module_name}")
    if a.name == "room":  # each task has its own config; the arguments are overrides for all of them
        if config:
            raise SystemExit(f"esopt: error: bench room takes overrides only (each task names its config); got {config}")
        module.main(names(a.tasks) or [], overrides, _out(a, "room"), train=a.train,
                    seeds=ints(a.seeds, "--seeds", "0,1,2"), runs=a.runs or "runs/room")
        return 0
    call(module if a.name == "dtype" else module.main, a, config or default_config(), overrides)
    return 0
