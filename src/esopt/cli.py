"""esopt command line: train, eval, export, bench, report, adapt, baseline."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_CONFIG = "configs/demo.yaml"


def _split(items: list[str]) -> tuple[str | None, list[str]]:
    """First non-override argument is the config file; KEY=VALUE items are overrides."""
    config, overrides = None, []
    for it in items:
        if "=" in it:
            overrides.append(it)
        elif config is None:
            config = it
        else:
            raise SystemExit(f"esopt: error: unexpected argument {it!r} (overrides look like es.population=8)")
    return config, overrides


def cmd_train(a) -> int:
    from .config import load_config
    from .train.preflight import check_run_config

    config, overrides = _split(a.args)
    run = runner = None
    if a.resume:
        if config:
            raise SystemExit("esopt: error: --resume takes the run's own config; pass no config file")
    else:
        cfg = load_config(config or _default_config(), overrides + ([f"algo={a.algo}"] if a.algo else []))
        check_run_config(cfg, device=not _on_ray(a))  # on Ray the workers' devices are checked there
    try:
        runner = _runner(a)
        if a.resume:
            run, cfg, trainer, start = _resume(a, overrides, runner)
        else:
            run, trainer, start = _start(cfg, runner)
        try:
            summary = trainer.train(start)
        except OSError as err:  # a full or read-only disk: what was written stays (history is written atomically)
            from .es.history import RunFolderError

            raise RunFolderError(f"training stopped: {err}. The run's history is intact; once the disk has room "
                                 f"(or is writable) continue with: esopt train --resume {run.path}") from None
    finally:
        if runner is not None:
            runner.close()  # stops the Ray workers (and the Ray instance esopt started)
        if run is not None:
            run.unlock()  # the process ending releases it too; this is for callers in the same process
    _print_summary(summary)
    return 0


def _on_ray(a) -> bool:
    return a.workers is not None or a.ray_address is not None


def _runner(a):
    """Where members are played: on Ray with --workers / --ray-address (dist/), else here (None)."""
    if not _on_ray(a):
        return None
    if a.algo == "grpo":
        raise SystemExit("esopt: error: --workers / --ray-address play ES members on Ray; the GRPO baseline "
                         "runs in one process")
    from .dist.runner import RayRunner

    return RayRunner(workers=a.workers, address=a.ray_address)


def _start(cfg, runner=None):
    from .train.rundir import RunDir

    if runner is not None and cfg.algo == "grpo":
        raise SystemExit("esopt: error: --workers / --ray-address play ES members on Ray; the GRPO baseline "
                         "runs in one process")
    if runner is not None and cfg.coevo.mode != "weights":
        raise SystemExit(f"esopt: error: coevo.mode={cfg.coevo.mode} runs in one process for now; --workers / "
                         "--ray-address play weights-only ES (coevo.mode=weights)")
    run = RunDir.create(cfg)
    print(f"[esopt] run folder: {run.path}", flush=True)
    try:
        trainer = _make_trainer(cfg, run, runner)
    except BaseException:
        _remove_if_empty(run)  # nothing trained: leave no orphan folder behind
        raise
    return run, trainer, 0


def _make_trainer(cfg, run, runner=None):
    cls = _trainer_class(cfg)
    return cls(cfg, run) if runner is None else cls(cfg, run, runner=runner)


def _resume(a, overrides, runner=None):
    from .train.preflight import check_run_config
    from .train.resume_check import check_resume
    from .train.rundir import RunDir

    run = RunDir(Path(a.resume))
    cfg = run.load_config(overrides)
    if a.algo and a.algo != cfg.algo:
        raise SystemExit(f"esopt: error: {a.resume} is a {cfg.algo} run; --algo {a.algo} cannot resume it")
    if runner is not None and cfg.algo == "grpo":
        raise SystemExit(f"esopt: error: {a.resume} is a GRPO run, which runs in one process: resume it without "
                         "--workers / --ray-address")
    check_run_config(cfg, device=runner is None)
    run.lock()
    try:
        check_resume(run, cfg)  # under the lock: what is done cannot change while we check
        trainer = _make_trainer(cfg, run, runner)
        start = trainer.resume()  # replays and verifies the history under the new config
    except BaseException:
        run.unlock()
        raise
    if overrides:  # e.g. es.generations=20 extends the run; later resumes see the same config
        from .config import dump_config
        from .es.history import atomic_write_text

        atomic_write_text(run.config_path, dump_config(cfg))
    return run, cfg, trainer, start


def _remove_if_empty(run) -> None:
    """Delete a run folder created by this process that holds nothing but its config and empty folders."""
    import shutil

    run.unlock()
    files = [p for p in run.path.rglob("*") if p.is_file() and p.name not in ("config.yaml", ".lock")]
    if not files:
        shutil.rmtree(run.path, ignore_errors=True)


def _trainer_class(cfg):
    """The ES Trainer, or the GRPO baseline's (algo: grpo)."""
    if cfg.algo == "grpo":
        from .rl.trainer import GRPOTrainer

        return GRPOTrainer
    from .train.trainer import Trainer

    return Trainer


def _print_summary(summary: dict) -> None:
    algo = summary.get("algo", "es")
    print(f"[esopt] run folder: {summary['run_dir']}")
    if "base" in summary:
        b, f, imp = summary["base"], summary["final"], summary["improvement"]
        print(f"[esopt] held-out reward: base {b['reward']:.4f} -> {algo.upper()} {f['reward']:.4f} "
              f"(paired difference {imp['mean']:+.4f} ± {imp['se']:.4f} SE, n={f['n']})")
        print(f"RESULT heldout_reward_base={b['reward']:.4f}")
    print(f"RESULT heldout_reward_{algo}={summary['final']['reward']:.4f}")


def _default_config() -> str:
    if Path(DEFAULT_CONFIG).exists():
        return DEFAULT_CONFIG
    raise SystemExit(f"esopt: error: no config given and {DEFAULT_CONFIG} not found in {Path.cwd()}")


def cmd_eval(a) -> int:
    from .config import ConfigError, load_config
    from .models import HFPolicy, load_model
    from .train.evaluate import by_task_family, evaluate
    from .train.tasks import TaskSource
    from .utils.seeding import derive_seed

    config, overrides = _split(a.args)
    if a.out and not Path(a.out).parent.is_dir():
        raise ConfigError(f"--out {a.out}: folder {Path(a.out).parent} does not exist")
    if a.run_dir:
        from .export import load_run_weights

        model, tok, cfg, n = load_run_weights(a.run_dir)
        if overrides:
            from .train.preflight import check_env

            cfg = load_config(Path(a.run_dir) / "config.yaml", overrides)
            check_env(cfg.env, cfg.tasks)
        label = f"{a.run_dir} after {n} generations"
        context = _run_context(a.run_dir, cfg, n)
    else:
        from .train.preflight import check_run_config

        cfg = load_config(config or _default_config(), overrides + ([f"model={a.model}"] if a.model else []))
        check_run_config(cfg)
        model, tok = load_model(cfg.model, cfg.runtime.dtype, cfg.runtime.device)
        label = cfg.model
        context = None
    if cfg.runtime.threads:
        import torch

        torch.set_num_threads(cfg.runtime.threads)
    if a.split == "validation" and not cfg.tasks.validation:
        raise ConfigError("--split validation needs a validation split: add tasks.validation=N (e.g. 64)")
    stats, episodes = evaluate(HFPolicy.for_agent(model, tok, cfg.agent), TaskSource(cfg.env, cfg.tasks, cfg.run.seed),
                               cfg, seed=derive_seed("eval", cfg.run.seed), split=a.split, context=context)
    name = "held-out" if a.split == "heldout" else "validation"
    if a.out:
        import json

        Path(a.out).write_text("".join(json.dumps(ep) + "\n" for ep in episodes), encoding="utf-8")
        print(f"[esopt] {len(episodes)} episodes (turn by turn) written to {a.out}")
    print(f"[esopt] {label}: {name} reward {stats['reward']:.4f} ± {stats['reward_se']:.4f}, solved {stats['solved']:.4f}, "
          f"n={stats['n']}")
    families = by_task_family(episodes)
    if len(families) > 1:
        print("[esopt] per task: " + ", ".join(f"{name} {total:g}/{n}" for name, (total, n) in families.items()))
    print(f"RESULT {a.split}_reward={stats['reward']:.4f}")
    print(f"RESULT {a.split}_solved={stats['solved']:.4f}")
    return 0


def _run_context(run_dir, cfg, generations: int):
    """A context run (coevo) is evaluated with its most likely context after `generations`; None otherwise."""
    if cfg.algo != "es":
        return None
    from .agent.rollout import AgentContext
    from .coevo.export import final_context
    from .train.rundir import RunDir

    found = final_context(RunDir(Path(run_dir)).history(), AgentContext.from_config(cfg.agent), upto=generations)
    if found is None:
        return None
    print(f"[esopt] context: the most likely draw after {generations} generations, skills "
          f"{found[1]['draw']['skills']}, slots {found[1]['draw']['slots']}", flush=True)
    return found[0]


def cmd_export(a) -> int:
    from .export import export_run

    info = export_run(a.run_dir, a.out_dir, force=a.force)
    print(f"[esopt] exported {info['generations']} generations of {a.run_dir} to {a.out_dir} (weights {info['weights_hash'][:12]})")
    return 0


def cmd_bench(a) -> int:
    config, overrides = _split(a.args)
    if a.name == "room":  # each task has its own config; the arguments are overrides for all of them
        from .bench.room import main

        if config:
            raise SystemExit(f"esopt: error: bench room takes overrides only (each task names its config); got {config}")
        main(a.tasks.split(",") if a.tasks else [], overrides, a.out or "bench-results/room.json", train=a.train,
             seeds=_ints(a.seeds or "0,1,2", "--seeds"), runs=a.runs or "runs/room")
        return 0
    config = config or _default_config()
    if a.name == "es-memory":
        from .bench.es_memory import main

        main(config, overrides, a.out or "bench-results/es-memory.json", a.repeats or 3)
    elif a.name == "memory":
        from .bench.memory import main

        main(config, overrides, a.out or "bench-results/memory.json", a.repeats or 1,
             tasks=a.tasks.split(",") if a.tasks else None, grpo_sequences=a.grpo_sequences)
    elif a.name == "compare":
        from .bench.compare import main

        main(config, overrides, a.out or "bench-results/compare.json", _ints(a.seeds or "0,1,2", "--seeds"),
             grpo_lrs=_floats(a.grpo_lrs, "--grpo-lrs") if a.grpo_lrs else None,
             es_sigmas=_floats(a.es_sigmas, "--es-sigmas") if a.es_sigmas else None,
             tune_seeds=_ints(a.tune_seeds, "--tune-seeds") if a.tune_seeds else None, jobs=a.jobs,
             budget_seconds=a.budget_seconds)
    elif a.name == "population":
        from .bench.population import main

        models = [m for m in (a.models or "").split(",") if m]
        main(config, overrides, a.out or "bench-results/population.json", models,
             _ints(a.populations or "8,16", "--populations"), seed=a.seed)
    elif a.name == "throughput":
        from .bench.throughput import main

        main(config, overrides, a.out or ("bench-results/throughput-context.json" if a.context
                                          else "bench-results/throughput.json"), context=a.context)
    elif a.name == "perturb":
        from .bench.perturb import main
        from .config import load_config

        cfg = load_config(config, overrides)
        main(cfg.model, a.out or "bench-results/perturb.json", max(a.repeats or 3, 1), cfg.es.sigma.start,
             cfg.es.table_size, cfg.runtime.threads)
    elif a.name == "precision":
        from .bench.precision import main

        main(config, overrides, a.out or "bench-results/precision.json")
    elif a.name == "web":
        from .bench.web import main

        main(a.out or "bench-results/web.json", episodes=a.repeats or 12)
    elif a.name == "multiturn":
        from .bench.multiturn import main

        main(config, overrides, a.out or "bench-results/multiturn.json", max(a.repeats or 3, 1))
    elif a.name == "decode":
        from .bench.decode import main

        main(config, overrides, a.out or "bench-results/decode.json", max(a.repeats or 3, 1))
    elif a.name == "ray":
        from .bench.distributed import main

        main(config, overrides, a.out or "bench-results/ray.json", cores=a.workers or 2, repeats=max(a.repeats or 2, 1))
    elif a.name == "dtype":
        from .bench.dtype import main, parity

        if a.seeds:
            parity(config, overrides, a.out or "bench-results/dtype-parity.json", _ints(a.seeds, "--seeds"), jobs=a.jobs)
        else:
            main(config, overrides, a.out or "bench-results/dtype.json", max(a.repeats or 3, 1))
    elif a.name == "gpu":
        from .bench.gpu import main

        main(config, overrides, a.out or ("bench-results/gpu-tiny.json" if a.tiny else "bench-results/gpu.json"),
             sections=a.sections.split(",") if a.sections else None, tiny=a.tiny, tokenizer=a.tokenizer)
    elif a.name == "horizon":
        from .bench.horizon import main

        main(config, overrides, a.out or "bench-results/horizon.json", _ints(a.seeds or "0,1", "--seeds"),
             tasks=a.tasks.split(",") if a.tasks else None, grpo_lr=a.grpo_lr, jobs=a.jobs,
             es_sigma=a.es_sigma)
    return 0


def _ints(text: str, flag: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"esopt: error: {flag} takes comma-separated integers, got {text!r}") from None


def _floats(text: str, flag: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"esopt: error: {flag} takes comma-separated numbers, got {text!r}") from None


def cmd_report(a) -> int:
    from .report import write_report

    report = write_report(a.run_dir, a.compare or [], a.out)
    print(f"[esopt] report: {report.path.resolve()} (open it in a browser; plots also as PNG files beside it)")
    if report.missing:
        print(f"[esopt] the report lists {len(report.missing)} thing(s) missing or incomplete at its top")
    return 0


AHD_FLAGS = (("--budgets", "budgets"), ("--seeds", "seeds"), ("--methods", "methods"), ("--out", "out"))


def _given(a, flags) -> list[str]:
    """The flags of (flag, attribute) pairs that the command line set."""
    return [flag for flag, attr in flags if getattr(a, attr)]


def cmd_adapt(a) -> int:
    if a.merge:
        return _adapt_merge(a)
    if a.env:
        return _adapt_ahd(a)
    ahd_only = _given(a, AHD_FLAGS)
    if ahd_only:
        raise SystemExit(f"esopt: error: {', '.join(ahd_only)} go with --env ahd-<problem> (heuristic design); "
                         "the adapt config's own settings are adapt.* overrides")
    from .coevo.adapt import run_adapt

    config, overrides = _split(a.args)
    if config is None:
        raise SystemExit("esopt: error: adapt needs a config file with an adapt: section "
                         "(e.g. configs/adapt-demo.yaml)")
    result = run_adapt(config, overrides, a.from_run)
    _print_totals(result["totals"])
    return 1 if result["failed"] else 0


def _print_totals(totals: dict) -> None:
    for key, v in totals.items():
        name = key.replace(" vs ", "_vs_").replace(" @ ", "_b")
        print(f"RESULT adapt_{name}=W{v['win']}/T{v['tie']}/L{v['loss']}")


def _adapt_merge(a) -> int:
    """esopt adapt --merge OUT.json A.json B.json ...: one table from adapt tables of other tasks."""
    other = _given(a, (("--from", "from_run"), ("--env", "env"), *AHD_FLAGS))
    if other:
        raise SystemExit(f"esopt: error: --merge takes adapt.json files only, not {', '.join(other)}")
    from .coevo.adapt_merge import merge
    from .coevo.adapt_table import markdown

    result = merge(a.merge, a.args)
    print(markdown(result["rows"], result["settings"]), end="")
    print(f"[esopt] adapt --merge: {a.merge} and {Path(a.merge).with_suffix('.md')} ({len(result['tasks'])} tasks "
          f"from {len(a.args)} tables)")
    _print_totals(result["totals"])
    return 1 if result["failed"] else 0


def _adapt_ahd(a) -> int:
    """esopt adapt --env ahd-<problem>: the heuristic search's methods x budgets x seeds (docs/ahd.md)."""
    from .ahd.config import DEFAULT_CONFIG as AHD_CONFIG
    from .ahd.run import run_ahd

    if a.from_run:
        raise SystemExit("esopt: error: --from is not supported with --env ahd-<problem> (the search starts from "
                         "the config's model)")
    config, overrides = _split(a.args)
    if config is None and Path(AHD_CONFIG).exists():
        config = AHD_CONFIG
    methods = [m.strip() for m in a.methods.split(",") if m.strip()] if a.methods else None
    from .ahd.sandbox import SandboxUnavailable

    try:
        result = run_ahd(a.env, config, overrides, budgets=_ints(a.budgets, "--budgets") if a.budgets else None,
                         seeds=_ints(a.seeds, "--seeds") if a.seeds else None, methods=methods, out=a.out)
    except SandboxUnavailable as err:  # nothing was run; docs/sandbox.md says what each protection needs
        print(f"esopt: error: {err}", file=sys.stderr)
        return 2
    for key, v in result["totals"].items():
        name = key.replace("+", "_").replace(" vs ", "_vs_").replace(" @ ", "_b")
        print(f"RESULT ahd_{result['problem']}_{name}=W{v['win']}/T{v['tie']}/L{v['loss']}")
    return 1 if result["failed"] else 0


def cmd_baseline(a) -> int:
    """A prompt-only baseline from the field on the config's tasks (GEPA: promptopt/)."""
    import time as _time

    from .config import load_config
    from .promptopt.requires import require_gepa
    from .train.preflight import check_run_config

    require_gepa()  # before anything is written: a missing package is one line naming the extra
    config, overrides = _split(a.args)
    cfg = load_config(config or _default_config(), overrides)
    check_run_config(cfg)
    if a.budget is not None and a.budget < 1:
        raise SystemExit(f"esopt: error: --budget is in episodes, at least 1; got {a.budget}")
    if cfg.run.name is None:
        from .train.rundir import env_slug

        cfg.run.name = f"gepa-{env_slug(cfg.env.id)}-{_time.strftime('%Y%m%d-%H%M%S')}"
    from .promptopt.baseline import GepaBaseline, GepaOptions
    from .train.rundir import RunDir

    opts = GepaOptions(budget=a.budget, train_tasks=a.train_tasks, val_tasks=a.val_tasks, minibatch=a.minibatch,
                       components=[c.strip() for c in a.components.split(",") if c.strip()] if a.components else None,
                       reflection_tokens=a.reflection_tokens, reflection_temperature=a.reflection_temperature,
                       reflection_url=a.reflection_url, reflection_model=a.reflection_model,
                       reflection_key_env=a.reflection_key_env)
    if cfg.coevo.mode != "weights":
        print(f"[esopt] gepa: coevo.mode={cfg.coevo.mode} is not used here; GEPA starts from agent.system_prompt "
              "and agent.examples and ignores the skill library", flush=True)
    run = RunDir.create(cfg)
    print(f"[esopt] run folder: {run.path}", flush=True)
    try:
        try:
            baseline = GepaBaseline(cfg, run, opts)
        except BaseException:
            _remove_if_empty(run)
            raise
        summary = baseline.train()
    finally:
        run.unlock()
    _print_summary(summary)
    g = summary["gepa"]
    print(f"[esopt] gepa: {g['iterations']} iterations, {g['candidates']} candidates, "
          f"{summary['episodes']['used']} of {summary['budget_episodes']} episodes, "
          f"{summary['lm_calls']['reflection']['calls']} reflection calls")
    if "validation" in summary:
        print(f"RESULT validation_reward_gepa={summary['validation']['final']['reward']:.4f}")
    print(f"RESULT gepa_episodes={summary['episodes']['used']}")
    print(f"RESULT gepa_reflection_calls={summary['lm_calls']['reflection']['calls']}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="esopt", description="Evolution strategies for fine-tuning LLM agents.")
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="ES fine-tuning run (or the GRPO baseline)",
                       description="Train with ES (or GRPO with --algo grpo). Args: [CONFIG.yaml] [key.path=value ...]")
    t.add_argument("args", nargs="*", metavar="CONFIG_OR_OVERRIDE")
    t.add_argument("--resume", metavar="RUN_DIR", help="continue a stopped run from its history")
    t.add_argument("--algo", choices=["es", "grpo"], help="es (default) or the grpo baseline: sets the config key algo")
    t.add_argument("--workers", type=int, metavar="N",
                   help="play members on N Ray workers, one model replica each (a local Ray instance started "
                        "here, or the cluster of --ray-address); runtime.threads is per worker (docs/ray.md)")
    t.add_argument("--ray-address", metavar="ADDR",
                   help="play members on an existing Ray cluster: auto (the one `ray start` made here) or "
                        "host:port of its head; workers: --workers, or one per GPU / as many as the cores fit")
    t.set_defaults(func=cmd_train)
    e = sub.add_parser("eval", help="held-out evaluation of a run or a model",
                       description="Evaluate a run's final weights (--run) or a model (--model) on the held-out tasks.")
    e.add_argument("args", nargs="*", metavar="CONFIG_OR_OVERRIDE")
    g = e.add_mutually_exclusive_group()
    g.add_argument("--run", dest="run_dir", metavar="RUN_DIR")
    g.add_argument("--model", metavar="NAME")
    e.add_argument("--split", choices=["heldout", "validation"], default="heldout",
                   help="held-out tasks (final figures, default) or the validation split (tasks.validation puzzles, "
                        "for choosing settings)")
    e.add_argument("--out", metavar="FILE.jsonl", help="also write every episode, turn by turn, one JSON line each")
    e.set_defaults(func=cmd_eval)
    x = sub.add_parser("export", help="write a run's final weights as a Hugging Face folder",
                       description="Write a run's final weights and tokenizer as a Hugging Face folder. The folder is "
                                   "written beside OUT_DIR and renamed into place once complete; a non-empty OUT_DIR "
                                   "is refused unless --force.")
    x.add_argument("run_dir")
    x.add_argument("out_dir")
    x.add_argument("--force", action="store_true",
                   help="replace a non-empty OUT_DIR (only once the new export is complete; default: refuse)")
    x.set_defaults(func=cmd_export)
    b = sub.add_parser("bench", help="benchmarks (print RESULT lines, write JSON)")
    b.add_argument("name", choices=["es-memory", "memory", "perturb", "throughput", "compare", "population",
                                    "precision", "horizon", "multiturn", "decode", "web", "ray", "gpu", "dtype",
                                    "room"])
    b.add_argument("args", nargs="*", metavar="CONFIG_OR_OVERRIDE")
    b.add_argument("--out", help="JSON output path")
    b.add_argument("--context", action="store_true",
                   help="throughput: one generation each of coevo.mode weights / both / context at equal episodes "
                        "(a config with a skill library, e.g. configs/coevo-demo.yaml): the cost of context search")
    b.add_argument("--repeats", type=int, default=None,
                   help="es-memory (default 3) / memory (default 1): fresh-process runs of each phase; "
                        "perturb (default 3): timed rounds; multiturn (default 3): rollouts; decode (default 3): "
                        "batches; dtype (default 3): rounds per batch size; medians are compared; "
                        "web (default 12): episodes per env; ray (default 2): timed generations per setup")
    b.add_argument("--tasks", help="memory: comma-separated subset of 4x4-demo,9x9-h5,9x9-h10,9x9-h15 (default: all); "
                                   "horizon: horizons as 4x4-bN / 9x9-hN, N blanks and 3N turns "
                                   "(default 4x4-b2,4x4-b4,4x4-b6; the paper's: 9x9-h5,9x9-h10,9x9-h15); "
                                   "room: task names (bench/room.py TASKS) or name=config:override,... (default: all)")
    b.add_argument("--seeds", help="compare: run seeds of the final runs of each method's chosen setting "
                                   "(default 0,1,2); horizon: run seeds (default 0,1); room: ES run seeds (default "
                                   "0,1,2); dtype: a learning-parity "
                                   "check of float32 vs bfloat16 over these seeds instead of the speed figures")
    b.add_argument("--train", type=int, default=0,
                   help="room: train ES on this many tasks with the most room (validation success in [0.1, 0.7], "
                        "lowest first), --seeds each (default 0: the base table only)")
    b.add_argument("--runs", help="room: folder of the ES runs (default runs/room; finished runs are read back)")
    b.add_argument("--grpo-lrs", help="compare: GRPO learning rates swept (default 1e-6,1e-5,1e-4)")
    b.add_argument("--es-sigmas", help="compare: ES sigma.start values swept, sigma.end scaled alike "
                                       "(default: the config's sigma x 0.5,1,2); as many as --grpo-lrs")
    b.add_argument("--tune-seeds", help="compare: run seeds of the sweep, chosen on validation (default: the first of "
                                        "--seeds)")
    b.add_argument("--budget-seconds", type=float, default=None,
                   help="compare: every run trains for this many seconds (evaluations excluded; run.budget_seconds) "
                        "instead of equal episodes; es.generations is then the most updates a run may make")
    b.add_argument("--grpo-lr", type=float, default=None,
                   help="horizon: GRPO learning rate (default: grpo_best_lr of compare.json beside --out, else 1e-5)")
    b.add_argument("--es-sigma", type=float, default=None,
                   help="horizon: ES sigma.start, sigma.end scaled alike (default: es_best_sigma of compare.json "
                        "beside --out, else the config's)")
    b.add_argument("--jobs", type=int, default=1,
                   help="compare, horizon, dtype --seeds: training runs side by side (default 1; seconds are then shared-machine "
                        "figures; give each run its share of the cores with runtime.threads)")
    b.add_argument("--models", help="population: comma-separated backbones, weaker first (aliases, folders, exports)")
    b.add_argument("--populations", help="population: comma-separated population sizes (default 8,16)")
    b.add_argument("--seed", type=int, default=0, help="population: run seed")
    b.add_argument("--workers", type=int, default=None,
                   help="ray: total cores N compared (default 2): one process with N threads, 1 Ray worker x N "
                        "threads, N Ray workers x 1 thread")
    b.add_argument("--sections", help="gpu: comma-separated subset of demo-float32,demo-bfloat16,4b,27b,compiled (default: all; "
                                      "the others are kept from an earlier --out with the same settings)")
    b.add_argument("--tokenizer", help="gpu: tokenizer of the random-weight 4b/27b models, a folder or model name "
                                       "(default: the config's model's)")
    b.add_argument("--tiny", action="store_true",
                   help="gpu: every section at tiny shapes on the CPU (a check of the bench itself, seconds)")
    b.add_argument("--grpo-sequences", type=int, default=None,
                   help="memory: GRPO updates on the longest N turn sequences (default: two micro-batches; 0: all)")
    b.set_defaults(func=cmd_bench)
    r = sub.add_parser("report", help="write a run's HTML report (plots, config, trajectory viewer)",
                       description="Write one self-contained HTML page about a run (finished, running or stopped) "
                                   "and its plots as PNG files beside it (default RUN_DIR/report/report.html).")
    r.add_argument("run_dir", metavar="RUN_DIR")
    r.add_argument("--compare", nargs="+", action="extend", metavar="RUN_DIR", help="runs to overlay on the plots")
    r.add_argument("--out", metavar="FILE", help="HTML file to write (the PNGs go beside it)")
    r.set_defaults(func=cmd_report)
    d = sub.add_parser("adapt", help="test-time adaptation table: none / context / weights / both (/ gepa) x tasks "
                                     "x budgets; with --env ahd-<problem>, heuristic design (EoH / Sample, with "
                                     "and without ES)",
                       description="Adapt a starting agent (the base model, or --from a run's final weights) to the "
                                   "task variants of CONFIG's adapt: section under episode budgets; writes one run "
                                   "folder per sub-run and adapt.json / adapt.md with paired wins, ties and losses. "
                                   "Re-running skips finished sub-runs. Args: CONFIG.yaml [key.path=value ...] "
                                   "(adapt.budgets=[32] etc. set the adapt section); --merge OUT.json A.json B.json "
                                   "joins the tables of adapt commands over other tasks")
    d.add_argument("args", nargs="*", metavar="CONFIG_OR_OVERRIDE")
    d.add_argument("--from", dest="from_run", metavar="RUN_DIR",
                   help="start every sub-run from this run's final weights (and a context run's final context)")
    d.add_argument("--env", metavar="ahd-PROBLEM",
                   help="heuristic design instead (ahd-tsp, ahd-knapsack, ahd-binpack): methods eoh, eoh+es, sample, "
                        "sample+es at the budgets and seeds of CONFIG (default configs/ahd.yaml; docs/ahd.md)")
    d.add_argument("--budgets", metavar="B,B", help="with --env: LLM calls per run (default: the config's grid.budgets)")
    d.add_argument("--seeds", metavar="S,S", help="with --env: run seeds (default: the config's grid.seeds)")
    d.add_argument("--methods", metavar="M,M", help="with --env: any of eoh,eoh+es,sample,sample+es")
    d.add_argument("--out", metavar="DIR", help="with --env: the folder of the runs and the table "
                                                "(default <grid.out_dir>/<grid.name or ahd>)")
    d.add_argument("--merge", metavar="OUT.json", help="merge the adapt.json files given as arguments (other tasks, "
                                                       "same settings, budgets and starting weights) into one table: "
                                                       "OUT.json and OUT.md")
    d.set_defaults(func=cmd_adapt)
    g = sub.add_parser("baseline", help="prompt-only baseline from the field (GEPA) on the config's tasks",
                       description="Optimise the agent's context (agent.system_prompt and agent.examples' texts) with "
                                   "GEPA on the config's training tasks, the task model (weights frozen) as task and "
                                   "reflection LM, under a budget of episodes; then evaluate the best candidate on the "
                                   "held-out tasks as an ES run does. Needs the prompt-opt extra. "
                                   "Args: gepa CONFIG.yaml [key.path=value ...] (docs/adapt.md)")
    g.add_argument("name", choices=["gepa"])
    g.add_argument("args", nargs="*", metavar="CONFIG_OR_OVERRIDE")
    g.add_argument("--budget", type=int, default=None,
                   help="episodes GEPA may play, validation passes included (default: the config's ES training "
                        "episodes, es.generations x es.population x es.episodes_per_member)")
    g.add_argument("--train-tasks", type=int, default=64, help="GEPA's trainset: the first N training tasks (64)")
    g.add_argument("--val-tasks", type=int, default=None,
                   help="GEPA's valset: the first N validation episodes (default all of tasks.validation; without a "
                        "validation split, 32 further training tasks)")
    g.add_argument("--minibatch", type=int, default=3, help="GEPA's reflection minibatch (3)")
    g.add_argument("--components", help="comma-separated components to optimise (default: system_prompt and every "
                                        "example message, example_<i>_<role>)")
    g.add_argument("--reflection-tokens", type=int, default=256, help="new tokens per reflection reply (256)")
    g.add_argument("--reflection-temperature", type=float, default=0.7, help="reflection sampling temperature (0.7)")
    g.add_argument("--reflection-url", help="an OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1) as the "
                                            "reflection LM instead of the task model")
    g.add_argument("--reflection-model", help="the endpoint's model name (with --reflection-url)")
    g.add_argument("--reflection-key-env", help="environment variable holding the endpoint's API key")
    g.set_defaults(func=cmd_baseline)
    return p


def parse(argv=None):
    """Parse the command line; config overrides (key=value) may come anywhere, also after options
    (`esopt train CONFIG --algo grpo grpo.lr=1e-5`)."""
    parser = build_parser()
    a, extra = parser.parse_known_args(argv)
    stray = [x for x in extra if x.startswith("-") or not hasattr(a, "args")]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        a.args = list(a.args) + extra
    return a


def user_errors() -> tuple[type[BaseException], ...]:
    """Errors a user can fix (bad settings, a damaged or busy run folder, a full disk): one line."""
    from .config import ConfigError
    from .es.history import RunFolderError
    from .dist.errors import ReplicaError
    from .models.loading import ModelError

    return ConfigError, ModelError, RunFolderError, ReplicaError, OSError


def main(argv=None) -> int:
    a = parse(argv)
    try:
        return a.func(a)
    except user_errors() as err:
        print(f"esopt: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
