"""esopt command line: a table of commands over the library (train, eval, export, report,
baseline) and the studies (bench, adapt). Each command is (help, arguments, handler); handlers
parse nothing themselves and call one library or study function."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .models.gguf import TYPES as GGUF_TYPES
from .utils.args import default_config, split_args


def cmd_train(a) -> int:
    config, overrides = split_args(a.args)
    if a.resume and config:
        raise SystemExit("esopt: error: --resume takes the run's own config; pass no config file")
    if not a.resume and not config:
        a.parser.print_usage(sys.stderr)
        print("esopt: error: train needs a config file (e.g. esopt train configs/demo.yaml) or --resume RUN_DIR; "
              "see esopt train --help", file=sys.stderr)
        return 2
    if not a.resume:  # validated before torch is imported: a bad setting is one line within a second or two
        from .config import load_config

        config = load_config(config, overrides + ([f"algo={a.algo}"] if a.algo else []))
    from .train.session import train

    summary = train(config, overrides, resume_dir=a.resume, algo_name=a.algo, workers=a.workers,
                    address=a.ray_address, strict=True)
    print_summary(summary)
    return 0


def cmd_serve(a) -> int:
    from .serve.command import run

    if not a.resume and not split_args(a.args)[0]:
        a.parser.print_usage(sys.stderr)
        print("esopt: error: serve needs a config file (e.g. esopt serve configs/demo.yaml) or --resume RUN_DIR; "
              "see esopt serve --help", file=sys.stderr)
        return 2
    print_summary(run(a))
    return 0


def print_summary(summary: dict) -> None:
    algo = summary.get("algo", "es")
    print(f"[esopt] run folder: {summary['run_dir']}")
    if "final" not in summary:  # eval.heldout=never: a tuning run, judged on validation alone
        val = (summary.get("validation") or {}).get("final")
        print("[esopt] held-out not played (eval.heldout=never)"
              + (f"; validation reward after training {val['reward']:.4f} (n={val['n']})" if val else ""))
        if val:
            print(f"RESULT validation_reward_{algo}={val['reward']:.4f}")
        return
    if "base" in summary:
        b, f, imp = summary["base"], summary["final"], summary["improvement"]
        print(f"[esopt] held-out reward: base {b['reward']:.4f} -> {algo.upper()} {f['reward']:.4f} "
              f"(paired difference {imp['mean']:+.4f} ± {imp['se']:.4f} SE, n={f['n']})")
        print(f"RESULT heldout_reward_base={b['reward']:.4f}")
    failed = {k: summary[k] for k in ("base", "final") if (summary.get(k) or {}).get("errors")}
    if failed:  # the first reasons are on the evaluation lines above; every one is in the trajectories
        print("[esopt] failed held-out episodes: " + ", ".join(f"{k} {v['errors']} of {v['n']}" for k, v in failed.items())
              + f" (trajectories in {summary['run_dir']}/trajectories)")
    from .utils.stats import pass_at_ks

    for k in pass_at_ks(summary["final"]):  # eval.pass_at: base and final pass@k, each with its SE
        for when, label in (("base", "base"), ("final", algo)):
            if when in summary and f"pass_at_{k}" in summary[when]:
                print(f"RESULT heldout_pass_at_{k}_{label}={summary[when][f'pass_at_{k}']:.4f}")
                print(f"RESULT heldout_pass_at_{k}_{label}_se={summary[when][f'pass_at_{k}_se']:.4f}")
    print(f"RESULT heldout_reward_{algo}={summary['final']['reward']:.4f}")  # the headline, last


def cmd_eval(a) -> int:
    from .config import ConfigError
    from .train.evaluate import by_task_family, evaluate_weights, pass_at_ks, pass_at_note

    config, overrides = split_args(a.args)
    if config and Path(config).is_dir():  # a run folder given as the config: say how it is evaluated
        raise ConfigError(f"{config} is a folder, not a config file: evaluate a run with esopt eval --run {config}")
    if a.out and not Path(a.out).parent.is_dir():
        raise ConfigError(f"--out {a.out}: folder {Path(a.out).parent} does not exist")
    stats, episodes, label = evaluate_weights(a.run_dir, None if a.run_dir else (config or default_config()),
                                              overrides, a.model, a.split)
    if a.out:
        import json

        Path(a.out).write_text("".join(json.dumps(ep) + "\n" for ep in episodes), encoding="utf-8")
        print(f"[esopt] {len(episodes)} episodes (turn by turn) written to {a.out}")
    name = "held-out" if a.split == "heldout" else "validation"
    print(f"[esopt] {label}: {name} reward {stats['reward']:.4f} ± {stats['reward_se']:.4f}, solved {stats['solved']:.4f}, "
          f"n={stats['n']}")
    families = by_task_family(episodes)
    if len(families) > 1:
        print("[esopt] per task: " + ", ".join(f"{name} {total:g}/{n}" for name, (total, n) in families.items()))
    if "pass_at_n" in stats:  # eval.pass_at: sampled attempts besides the greedy figures above
        print(f"[esopt] {label}: {name} {pass_at_note(stats)} ({stats['pass_at_n']} sampled attempts per episode)")
    print(f"RESULT {a.split}_reward={stats['reward']:.4f}")
    print(f"RESULT {a.split}_solved={stats['solved']:.4f}")
    for k in pass_at_ks(stats):
        print(f"RESULT {a.split}_pass_at_{k}={stats[f'pass_at_{k}']:.4f}")
        print(f"RESULT {a.split}_pass_at_{k}_se={stats[f'pass_at_{k}_se']:.4f}")
    if "tool_use" in stats:  # episodes that called tools: the share with a call that ran, and calls per episode
        print(f"RESULT {a.split}_tool_use={stats['tool_use']:.4f}")
        print(f"RESULT {a.split}_tool_calls={stats['tool_calls']:.4f}")
    return 0


def cmd_export(a) -> int:
    from .export import export_model, export_run

    source = Path(a.run_dir)
    if source.is_file() or source.suffix in (".yaml", ".yml"):  # a config: the model it names, untrained
        info = export_model(source, a.out_dir, force=a.force, fmt=a.format, gguf_type=a.type)
        what = f"{info['base_model']} (the model {source} names)"
    else:
        info = export_run(a.run_dir, a.out_dir, force=a.force, fmt=a.format, gguf_type=a.type)
        what = f"{info['generations']} generations of {a.run_dir}"
    where = a.out_dir if a.format == "hf" else str(Path(a.out_dir) / info["gguf"]["file"])
    size = f", {info['gguf']['bytes'] / 2**20:.1f} MiB {a.type}" if a.format == "gguf" else ""
    print(f"[esopt] exported {what} to {where} (weights {info['weights_hash'][:12]}{size})")
    return 0


def cmd_report(a) -> int:
    from .report import write_report

    report = write_report(a.run_dir, a.compare or [], a.out)
    for line in report.warnings:
        print(f"[esopt] warning: {line}")
    print(f"[esopt] report: {report.path.resolve()} (open it in a browser; plots also as PNG files beside it)")
    if report.missing:
        print(f"[esopt] the report lists {len(report.missing)} thing(s) missing or incomplete at its top")
    return 0


def cmd_baseline(a) -> int:
    """A prompt-only baseline from the field on the config's tasks (GEPA: algos/gepa/)."""
    from .algos.gepa.command import run

    return run(a, print_summary)


def cmd_bench(a) -> int:
    from .studies.bench import run

    return run(a)


def cmd_probe(a) -> int:
    from .studies.probe import run

    return run(a)


def cmd_adapt(a) -> int:
    from .studies.adapt.command import run

    return run(a)


def args_train(t) -> None:
    t.add_argument("args", nargs="*", metavar="CONFIG_OR_OVERRIDE")
    t.add_argument("--resume", metavar="RUN_DIR", help="continue a stopped run from its history")
    t.add_argument("--algo", choices=["es", "grpo", "gepa"],
                   help="es (default), the grpo baseline or gepa (prompt only): sets the config key algo")
    t.add_argument("--workers", type=int, metavar="N",
                   help="play members on N Ray workers, one model replica each (a local Ray instance started "
                        "here, or the cluster of --ray-address); runtime.threads is per worker (docs/ray.md)")
    t.add_argument("--ray-address", metavar="ADDR",
                   help="play members on an existing Ray cluster: auto (the one `ray start` made here) or "
                        "host:port of its head; workers: --workers, or one per GPU / as many as the cores fit")


def args_eval(e) -> None:
    e.add_argument("args", nargs="*", metavar="CONFIG_OR_OVERRIDE")
    g = e.add_mutually_exclusive_group()
    g.add_argument("--run", dest="run_dir", metavar="RUN_DIR")
    g.add_argument("--model", metavar="NAME")
    e.add_argument("--split", choices=["heldout", "validation"], default="heldout",
                   help="held-out tasks (final figures, default) or the validation split (tasks.validation puzzles, "
                        "for choosing settings)")
    e.add_argument("--out", metavar="FILE.jsonl", help="also write every episode, turn by turn, one JSON line each")


def args_export(x) -> None:
    x.add_argument("run_dir", metavar="RUN_DIR|CONFIG", help="a run folder (its final weights), or a config file (the "
                   "model it names, untrained)")
    x.add_argument("out_dir")
    x.add_argument("--format", choices=["hf", "gguf"], default="hf",
                   help="hf: a Hugging Face folder (default); gguf: OUT_DIR/model.gguf for llama.cpp, Ollama and LM "
                        "Studio (Llama/SmolLM2, Qwen2, Qwen3 with a byte-level BPE tokenizer)")
    x.add_argument("--type", choices=GGUF_TYPES, default="f32",
                   help=f"a GGUF's matrices as one of {', '.join(GGUF_TYPES)} (default f32: as trained; norms and "
                        "biases stay f32)")
    x.add_argument("--force", action="store_true",
                   help="replace an earlier export in OUT_DIR (only once the new export is complete; any other "
                        "non-empty folder is refused)")


def args_report(r) -> None:
    r.add_argument("run_dir", metavar="RUN_DIR")
    r.add_argument("--compare", nargs="+", action="extend", metavar="RUN_DIR", help="runs to overlay on the plots")
    r.add_argument("--out", metavar="FILE", help="HTML file to write (the PNGs go beside it)")


def args_of(module: str):
    """A study's or algorithm's own arguments (its command module's add_arguments), imported when the parser is built."""
    def add(p):
        import importlib

        importlib.import_module(module).add_arguments(p)
    return add


EXAMPLES = {
    "train": "examples:\n  esopt train configs/demo.yaml\n  esopt train configs/demo.yaml es.population=16 run.seed=1\n"
             "  esopt train configs/demo.yaml --algo grpo grpo.lr=1e-5\n  esopt train --resume runs/RUN es.generations=20"
             "\n  esopt train configs/demo.yaml --workers 4",
    "eval": "examples:\n  esopt eval --run runs/RUN\n  esopt eval --run runs/RUN --split validation --out episodes.jsonl"
            "\n  esopt eval configs/demo.yaml --model smollm2-135m-instruct",
    "export": "examples:\n  esopt export runs/RUN exported/ && python -c \"import transformers; "
              "transformers.AutoModelForCausalLM.from_pretrained('exported')\"\n"
              "  esopt export runs/RUN agent/ --format gguf --type q8_0 && llama-cli -m agent/model.gguf\n"
              "  esopt export configs/demo.yaml base/ --format gguf",
    "bench": "examples:\n  esopt bench throughput configs/demo.yaml\n  esopt bench compare configs/demo.yaml --seeds 0,1,2"
             "\n  esopt bench gpu configs/demo.yaml --tiny",
    "report": "examples:\n  esopt report runs/RUN\n  esopt report runs/RUN --compare runs/OTHER",
    "adapt": "examples:\n  esopt adapt configs/adapt-demo.yaml\n  esopt adapt configs/adapt-demo.yaml --from runs/RUN"
             "\n  esopt adapt --env ahd-tsp configs/ahd.yaml --budgets 16 --seeds 0,1",
    "probe": "examples:\n  esopt probe configs/demo.yaml tasks.validation=16\n"
             "  esopt probe configs/demo.yaml --sigmas 1e-3,3e-3,1e-2 --members 8 --tasks 16 --out probe.json",
    "baseline": "example:\n  esopt baseline gepa configs/demo.yaml --budget 256",
    "serve": "examples:\n  esopt serve configs/demo.yaml eval.at_start=false\n  esopt serve --resume runs/RUN"
             "\n  esopt serve configs/demo.yaml --host 0.0.0.0 --port 8000 --token SECRET",
}

# name: (help, description, add arguments, handler)
COMMANDS = {
    "train": ("ES fine-tuning run (or the GRPO / GEPA baselines)",
              "Train with ES (or GRPO / GEPA with --algo). Args: [CONFIG.yaml] [key.path=value ...]",
              args_train, cmd_train),
    "eval": ("held-out evaluation of a run or a model",
             "Evaluate a run's final weights (--run) or a model (--model) on the held-out tasks.", args_eval, cmd_eval),
    "export": ("write a run's final weights as a Hugging Face folder or a GGUF file",
               "Write a run's final weights and tokenizer (or a config's model) as a Hugging Face folder, or with "
               "--format gguf as OUT_DIR/model.gguf. The folder is written beside OUT_DIR and renamed into place "
               "once complete; a non-empty OUT_DIR is refused unless --force.",
               args_export, cmd_export),
    "bench": ("benchmarks (print RESULT lines, write JSON)",
              "Benchmarks: each prints RESULT lines and writes JSON (default bench-results/NAME.json). Machine "
              "studies (how fast and heavy esopt runs here) come first, then method studies (does it learn); "
              "each takes its own flags: esopt bench NAME --help.",
              args_of("esopt.studies.bench"), cmd_bench),
    "report": ("write a run's HTML report (plots, config, trajectory viewer)",
               "Write one self-contained HTML page about a run (finished, running or stopped) and its plots as PNG "
               "files beside it (default RUN_DIR/report/report.html).", args_report, cmd_report),
    "probe": ("before training: how often a perturbation changes the reply, format and reward, per sigma; "
              "a sigma recommended",
              "Play M validation tasks (training tasks when tasks.validation=0; never held-out) with the unperturbed "
              "weights and with N perturbed members at each sigma; print per sigma the share of episodes whose "
              "reply, answer format and reward change, the share of tasks on which every member ties, and a "
              "recommended sigma with population / episodes-per-member hints (a heuristic: docs/method.md). "
              "Plays tasks x (1 + sigmas x members) episodes. Args: CONFIG.yaml [key.path=value ...]",
              args_of("esopt.studies.probe"), cmd_probe),
    "adapt": ("test-time adaptation table: none / context / weights / both (/ gepa) x tasks x budgets; with --env "
              "ahd-<problem>, heuristic design (EoH / Sample, with and without ES)",
              "Adapt a starting agent (the base model, or --from a run's final weights) to the task variants of "
              "CONFIG's adapt: section under episode budgets; writes one run folder per sub-run and adapt.json / "
              "adapt.md with paired wins, ties and losses. Re-running skips finished sub-runs. Args: CONFIG.yaml "
              "[key.path=value ...] (adapt.budgets=[32] etc. set the adapt section); --merge OUT.json A.json B.json "
              "joins the tables of adapt commands over other tasks", args_of("esopt.studies.adapt.command"), cmd_adapt),
    "serve": ("an ES run whose members any agent harness plays through an OpenAI-compatible endpoint",
              "Serve each generation's members as OpenAI chat-completions models (member-K; center: the unperturbed "
              "weights) and take one reward per episode back over /es routes; the update, history, metrics and "
              "report are a local run's (docs/serve.md). Args: CONFIG.yaml [key.path=value ...] or --resume RUN_DIR",
              args_of("esopt.serve.command"), cmd_serve),
    "baseline": ("prompt-only baseline from the field (GEPA) on the config's tasks",
                 "Optimise the agent's context (agent.system_prompt and agent.examples' texts) with GEPA on the "
                 "config's training tasks, the task model (weights frozen) as task and reflection LM, under a budget "
                 "of episodes; then evaluate the best candidate on the held-out tasks as an ES run does. Needs the "
                 "prompt-opt extra. Args: gepa CONFIG.yaml [key.path=value ...] (docs/adapt.md)",
                 args_of("esopt.algos.gepa.command"), cmd_baseline),
}


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    p = argparse.ArgumentParser(prog="esopt", description="Evolution strategies for fine-tuning LLM agents.",
                                epilog="Start with: esopt train configs/demo.yaml (or make demo). Each command has "
                                       "examples in its --help.")
    p.add_argument("--version", action="version", version=f"esopt {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, (help_, description, add_arguments, handler) in COMMANDS.items():
        s = sub.add_parser(name, help=help_, description=description, epilog=EXAMPLES.get(name),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        add_arguments(s)
        s.set_defaults(func=handler, parser=s)
    return p


def parse(argv=None):
    """Parse the command line; config overrides (key=value) may come anywhere, also after options
    (`esopt train CONFIG --algo grpo grpo.lr=1e-5`)."""
    parser = build_parser()
    a, extra = parser.parse_known_args(argv)
    stray = [x for x in extra if x.startswith("-") or not hasattr(a, "args")]
    if stray and hasattr(a, "refuse"):  # a sub-command with its own one-line refusal (esopt bench NAME)
        print(a.refuse(a, stray), file=sys.stderr)
        raise SystemExit(2)
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        a.args = list(a.args) + extra
    return a


def main(argv=None) -> int:
    from .errors import one_line

    from .train.stop import interrupt_on_signals

    a = parse(argv)
    with interrupt_on_signals():  # Ctrl-C and SIGTERM: one line in every phase (train/stop.py)
        return one_line(a.func, a)


def entry() -> None:
    """The `esopt` program (console script and python -m esopt): main's exit code. A command stopped on request
    (130) has written and closed what it keeps; it then ends at once, without the interpreter's teardown, which
    takes seconds after torch and transformers are imported (5.3 s measured after esopt serve's stop line on a
    loaded 2-core machine), so a stop ends within the seconds it promises."""
    import gc

    from .errors import end_now

    code = main()
    if code == 130:
        end_now(code)
    # Any other end: the interpreter's last garbage collection walks every object torch and transformers made (most
    # of the seconds above). Frozen, they are left to the process's end; the teardown still closes files, runs
    # atexit handlers and frees what is not in a cycle.
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    entry()
