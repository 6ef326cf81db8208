"""`esopt bench NAME` for the machine studies: one row per bench, with the flags it takes.

A row is (module, what it measures, flags, call): `flags` are (flag, argparse keywords) pairs, the
only options `esopt bench NAME` accepts besides --out (every bench has it; a row that names --out
itself gives its own help); `call(module, a, config, overrides)` runs the bench from the parsed
flags `a`. Imported whenever the command line is built: nothing here imports torch or a bench."""
from __future__ import annotations

from ...utils.args import ints, names
from ..common import out_path


def _repeats(what: str, default: int) -> tuple:
    return ("--repeats", dict(type=int, default=None, help=f"{what} (default {default})"))


def _perturb(m, a, config, overrides):
    from ...config import load_config

    cfg = load_config(config, overrides)
    m.main(cfg.model, out_path(a, "perturb"), max(a.repeats or 3, 1), cfg.es.sigma.start, cfg.es.table_size,
           cfg.runtime.threads)


def _dtype(m, a, config, overrides):
    if a.seeds:
        a.out = out_path(a, "dtype-parity")  # its own default file, which a stop's line names too (studies/bench.py)
        m.parity(config, overrides, a.out, ints(a.seeds, "--seeds"), jobs=a.jobs)
    else:
        m.main(config, overrides, out_path(a, "dtype"), max(a.repeats or 3, 1))


BENCHES = {
    "es-memory": ("es_memory", "peak memory of one ES generation vs evaluating the same episodes",
                  (_repeats("fresh-process runs of each phase, alternating", 3),
                   ("--optimizers", dict(help="comma-separated es.optimizer values (sgd,momentum,adam) whose ES "
                                              "generation is measured each (default: the config's)"))),
                  lambda m, a, c, o: m.main(c, o, out_path(a, "es-memory"), a.repeats or 3,
                                            optimizers=names(a.optimizers))),
    "memory": ("memory", "peak memory of evaluation, an ES generation and a GRPO step, 9x9 Sudoku and 4x4",
               (_repeats("fresh-process runs of each phase", 1),
                ("--tasks", dict(help="comma-separated subset of 4x4-demo,9x9-h5,9x9-h10,9x9-h15 (default: all)")),
                ("--grpo-sequences", dict(type=int, default=None,
                     help="GRPO updates on the longest N turn sequences (default: two micro-batches; 0: all)"))),
               lambda m, a, c, o: m.main(c, o, out_path(a, "memory"), a.repeats or 1, tasks=names(a.tasks),
                                         grpo_sequences=a.grpo_sequences)),
    "perturb": ("perturb", "perturb + restore of every parameter per noise source vs the memory-bound floor",
                (_repeats("timed rounds; medians are compared", 3),), _perturb),
    "throughput": ("throughput", "one generation: full-rank members one by one vs low-rank in one batch "
                   "(--context: context search)",
                   (("--out", dict(help="JSON output path (default bench-results/throughput.json; with --context "
                                        "bench-results/throughput-context.json)")),
                    ("--context", dict(action="store_true",
                         help="one generation each of coevo.mode weights / both / context at equal episodes "
                         "(a config with a skill library, e.g. configs/coevo-demo.yaml): the cost of context search"))),
                   lambda m, a, c, o: m.main(c, o, a.out or ("bench-results/throughput-context.json" if a.context
                                                             else "bench-results/throughput.json"), context=a.context)),
    "precision": ("precision", "what float32, bfloat16 and float16 weights do to ES", (),
                  lambda m, a, c, o: m.main(c, o, out_path(a, "precision"))),
    "multiturn": ("multiturn", "a late turn of a long episode with and without KV reuse across turns",
                  (_repeats("rollouts; medians are compared", 3),),
                  lambda m, a, c, o: m.main(c, o, out_path(a, "multiturn"), max(a.repeats or 3, 1))),
    "decode": ("decode", "long replies: esopt's growing KV cache vs transformers' DynamicCache",
               (_repeats("batches; medians are compared", 3),),
               lambda m, a, c, o: m.main(c, o, out_path(a, "decode"), max(a.repeats or 3, 1))),
    "web": ("web", "a browser episode: esopt's env vs BrowserGym's default",
            (_repeats("episodes per env", 12),
             ("--sections", dict(help="episodes,observation (default both; the other is kept from an earlier "
                                      "--out)"))),
            lambda m, a, c, o: m.main(out_path(a, "web"), episodes=a.repeats or 12, sections=names(a.sections))),
    "serve": ("serve", "a generation played by 1, 8 and 32 HTTP clients through esopt serve vs the in-process "
              "rollout, then with hostile clients beside them",
              (("--clients", dict(help="concurrent clients per timed generation, comma-separated (default 1,8,32)")),
               ("--hostile", dict(type=int, default=None,
                    help="threads attacking the server in its hostile section (default 2; 0: no hostile section)"))),
              lambda m, a, c, o: m.main(c, o, out_path(a, "serve"), clients=ints(a.clients, "--clients", "1,8,32"),
                                        hostile=2 if a.hostile is None else a.hostile)),
    "ray": ("distributed", "one process vs Ray workers on the same cores",
            (_repeats("timed generations per setup; medians are compared", 2),
             ("--workers", dict(type=int, default=None,
                  help="total cores N compared (default 2): one process with N threads, 1 Ray worker x N "
                  "threads, N Ray workers x 1 thread"))),
            lambda m, a, c, o: m.main(c, o, out_path(a, "ray"), cores=a.workers or 2, repeats=max(a.repeats or 2, 1))),
    "gpu": ("gpu", "ES at inference speed on a GPU (decode, perturb, population, large models)",
            (("--out", dict(help="JSON output path (default bench-results/gpu.json; with --tiny "
                                 "bench-results/gpu-tiny.json)")),
             ("--sections", dict(help="comma-separated subset of demo-float32,demo-bfloat16,4b,27b,compiled "
                  "(default: all; the others are kept from an earlier --out with the same settings)")),
             ("--tiny", dict(action="store_true",
                  help="every section at tiny shapes on the CPU (a check of the bench itself, seconds)")),
             ("--tokenizer", dict(help="tokenizer of the random-weight 4b/27b models, a folder or model name "
                  "(default: the config's model's)"))),
            lambda m, a, c, o: m.main(c, o, a.out or f"bench-results/gpu{'-tiny' if a.tiny else ''}.json",
                                      sections=names(a.sections), tiny=a.tiny, tokenizer=a.tokenizer)),
    "dtype": ("dtype", "float32 vs bfloat16 speed (--seeds: learning parity)",
              (("--out", dict(help="JSON output path (default bench-results/dtype.json; with --seeds "
                                   "bench-results/dtype-parity.json)")),
               _repeats("rounds per batch size; medians are compared", 3),
               ("--seeds", dict(help="a learning-parity check of float32 vs bfloat16 over these run seeds instead "
                    "of the speed figures")),
               ("--jobs", dict(type=int, default=1,
                    help="with --seeds: training runs side by side (default 1; seconds are then shared-machine "
                    "figures; give each run its share of the cores with runtime.threads)"))),
              _dtype),
    "llamacpp": ("llamacpp", "a run exported as GGUF: llama.cpp's greedy replies vs esopt's on held-out first turns",
                 (("--run", dict(help="the run whose final weights are checked (default: train a short run of "
                       "CONFIG with its overrides)")),
                  ("--types", dict(help="GGUF types checked, comma-separated (default f32,q8_0)")),
                  ("--llamacpp", dict(help="the folder of greedy.mjs and its node_modules (default tools/llamacpp; "
                       "make install-llamacpp)"))),
                 lambda m, a, c, o: m.main(c, o, out_path(a, "llamacpp"), run=a.run, types=names(a.types),
                                           tool=a.llamacpp or "tools/llamacpp")),
}
