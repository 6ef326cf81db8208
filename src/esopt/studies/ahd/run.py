"""`esopt adapt --env ahd-<problem>`: the heuristic search's methods x budgets x seeds, one
folder per run, and the table of X+ES against X (table.py).

    <out>/                              default <grid.out_dir>/<grid.name or "ahd">
        <problem>/reference.json        the reference heuristic's held-out objective per seed
        <problem>/<method>-b<B>-s<S>/   one run (method eoh, eoh-es, sample, sample-es):
            config.yaml                 what made it (problem, method, budget, seed, model, es, search)
            proposals.jsonl             one record per LLM call (search.py)
            history.json                +ES only: the seed log; replaying it gives the final weights
            best.py                     the best heuristic's code
            summary.json                the outcome; its presence marks the run finished
        ahd.json, ahd.md                the table over every finished run under <out>, and what
                                        their proposals were (table.py)

A re-run skips every run with a summary.json, restarts one without, and refuses a folder made
with another config. A run that raises is recorded (ahd.json "failed", with its traceback) and
the others go on.
"""
from __future__ import annotations

import json
import time
import traceback
from pathlib import Path

import yaml

from ...config import ConfigError
from ...es.history import History, atomic_write_text
from ...utils.jsonl import read_jsonl
from . import table as ahd_table
from ...ahd.config import AHDConfig

FOLDER_FILES = ("proposals.jsonl", "history.json", "best.py", "summary.json")


# ---------------------------------------------------------------------- hooks (tests replace them)
def load_problem(name: str):
    from ...ahd.problems import get_problem

    try:
        return get_problem(name)
    except ValueError as err:
        raise ConfigError(f"--env ahd-{name}: {err}") from None


def make_evaluator(cfg: AHDConfig):
    """evaluate(problem, code, instances) -> Evaluation, in the sandbox with the config's limits."""
    from ...ahd.evaluate import evaluate
    from ...sandbox.parent import Limits

    limits = Limits(**cfg.search.limits.model_dump())
    return lambda problem, code, instances: evaluate(problem, code, instances, limits)


def make_proposer(start: "StartModel", cfg: AHDConfig, perturber, entry: str | None = None):
    from ...models.policy import HFPolicy, Sampling
    from ...ahd.code import block_done
    from ...ahd.weights import ModelProposer

    model, tok = start.get()
    if perturber is None:  # a run without ES starts from the starting weights too
        start.restore()
    policy = HFPolicy(model, tok, batch_size=1)
    return ModelProposer(policy, cfg.search.max_new_tokens, Sampling(**cfg.search.sampling.model_dump()), perturber,
                         stop=block_done(entry) if entry else None)


class StartModel:
    """The proposing model, loaded on first use and restored to its starting weights per run."""

    def __init__(self, cfg: AHDConfig, log=print):
        self.cfg, self.log = cfg, log
        self.model = self.tok = self.state = self.hash = None

    def get(self):
        if self.model is None:
            from ...es.perturb import weights_hash
            from ...models import load_model

            t0 = time.time()
            self.model, self.tok = load_model(self.cfg.model, self.cfg.runtime.dtype, self.cfg.runtime.device)
            self.state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            self.hash = weights_hash(self.model)
            self.log(f"[esopt] ahd: loaded {self.cfg.model} in {time.time() - t0:.0f}s (weights {self.hash[:12]})")
        return self.model, self.tok

    def restore(self) -> None:
        from ...es.perturb import weights_hash

        model, _ = self.get()
        model.load_state_dict(self.state)
        if weights_hash(model) != self.hash:
            raise RuntimeError("the starting weights did not restore bit-exactly")


# ---------------------------------------------------------------------- one run
def run_config(cfg: AHDConfig, problem: str, method: str, budget: int, seed: int) -> dict:
    return {"problem": problem, "method": method, "budget": budget, "seed": seed, "model": cfg.model,
            "runtime": cfg.runtime.model_dump(mode="json"), "es": cfg.es.model_dump(mode="json"),
            "search": cfg.search.model_dump(mode="json")}


def folder_name(method: str, budget: int, seed: int) -> str:
    return f"{method.replace('+', '-')}-b{budget}-s{seed}"


def run_one(folder: Path, rc: dict, cfg: AHDConfig, problem, evaluate, start: StartModel, log=print) -> dict:
    """One search run in `folder` (config.yaml already written); returns its summary."""
    from ...ahd.search import Search, Settings, outcome_json

    for name in FOLDER_FILES:  # a run that stopped half-way starts again
        (folder / name).unlink(missing_ok=True)
    base, es = rc["method"].removesuffix("+es"), rc["method"].endswith("+es")
    s = cfg.search
    settings = Settings(base, rc["budget"], cfg.es.population, s.population, rc["seed"], s.reward, s.invalid_reward)
    validation = problem.instances("validation", s.validation, seed=rc["seed"])
    heldout = problem.instances("heldout", s.heldout, seed=rc["seed"])
    steps = perturber = None
    if es:
        from ...ahd.weights import WeightSteps

        start.restore()
        model, _ = start.get()
        history = History(folder / "history.json", meta={"model": cfg.model, "problem": rc["problem"],
                                                          "method": rc["method"], "seed": rc["seed"]})
        steps = WeightSteps(model, cfg.es, rc["seed"], settings.batches, history)
        perturber = steps.perturber
    proposer = make_proposer(start, cfg, perturber, problem.entry)
    t0 = time.time()
    with open(folder / "proposals.jsonl", "a") as f:
        def on_record(rec):
            f.write(json.dumps(rec) + "\n")
            f.flush()

        search = Search(problem, proposer, settings, evaluate, validation, heldout, steps, on_record, log)
        outcome = outcome_json(search.run())
    summary = {**{k: rc[k] for k in ("problem", "method", "budget", "seed", "model")}, **outcome,
               "wall_s": time.time() - t0}
    if steps is not None:
        summary["weights_hash"] = steps.history.records[-1]["weights_hash"]
        summary["base_weights_hash"] = steps.history.meta["base_weights_hash"]
    atomic_write_text(folder / "best.py", outcome["best"]["code"])
    atomic_write_text(folder / "summary.json", json.dumps(summary, indent=1))
    from ...report import refresh_report

    refresh_report(folder, log)  # never raises
    return summary


# ---------------------------------------------------------------------- the command
def _reference(root: Path, problem, cfg: AHDConfig, evaluate, seeds: list[int], log) -> dict:
    """{seed: held-out objective of the reference} (computed once per seed, kept in reference.json)."""
    path = root / "reference.json"
    known = json.loads(path.read_text()) if path.exists() else {}
    for seed in seeds:
        if str(seed) in known:
            continue
        ev = evaluate(problem, problem.reference, problem.instances("heldout", cfg.search.heldout, seed=seed))
        known[str(seed)] = {"objective": ev.objective if ev.valid else None, "reason": ev.reason}
        log(f"[esopt] ahd {problem.name}: reference held-out objective (seed {seed}) {ev.objective}")
    atomic_write_text(path, json.dumps(known, indent=1))
    return known


def collect(out: Path) -> tuple[list[dict], dict]:
    """Every finished run's summary under `out`, and every problem's reference objectives."""
    summaries, refs = [], {}
    for p in sorted(out.glob("*/*/summary.json")):
        try:
            summary = json.loads(p.read_text())
        except ValueError:
            continue
        proposals = p.parent / "proposals.jsonl"
        if proposals.exists():  # torn or garbage lines are skipped
            summary["proposal_kinds"] = ahd_table.kinds_of(read_jsonl(proposals)[0])
        summaries.append(summary)
    for p in sorted(out.glob("*/reference.json")):
        try:
            refs[p.parent.name] = {s: v.get("objective") for s, v in json.loads(p.read_text()).items()}
        except (ValueError, AttributeError):
            continue
    return summaries, refs


def run_ahd(env: str, config: str | Path | None, overrides: list[str], budgets: list[int] | None = None,
            seeds: list[int] | None = None, methods: list[str] | None = None, out: str | None = None,
            log=print) -> dict:
    """Run (or skip) every method x budget x seed of one problem; write the table; return ahd.json's content."""
    from ...utils.threads import set_threads
    from ...ahd.config import load_ahd_config, problem_of

    name = problem_of(env)
    extra = ([f"grid.budgets={budgets}"] if budgets else []) + ([f"grid.seeds={seeds}"] if seeds else []) \
        + ([f"grid.methods=[{','.join(methods)}]"] if methods else [])
    cfg = load_ahd_config(config, list(overrides) + extra)
    problem = load_problem(name)
    root = Path(out) if out else Path(cfg.grid.out_dir) / (cfg.grid.name or "ahd")
    pdir = root / problem.name
    plan = [(m, b, s) for b in cfg.grid.budgets for s in cfg.grid.seeds for m in cfg.grid.methods]
    for m, b, s in plan:  # refuse a folder made with another config before running anything
        cfile = pdir / folder_name(m, b, s) / "config.yaml"
        if cfile.exists() and yaml.safe_load(cfile.read_text()) != run_config(cfg, problem.name, m, b, s):
            raise ConfigError(f"{cfile.parent} was made with another config: choose another --out, or restore "
                              "the settings it was made with")
    if cfg.runtime.threads:
        set_threads(cfg.runtime.threads)
    pdir.mkdir(parents=True, exist_ok=True)
    evaluate = make_evaluator(cfg)
    _reference(pdir, problem, cfg, evaluate, cfg.grid.seeds, log)  # also: a machine without the sandbox stops here
    start = StartModel(cfg, log)
    failed, statuses = [], {}
    for k, (m, b, s) in enumerate(plan):
        folder = pdir / folder_name(m, b, s)
        label = f"{problem.name} {m} budget {b} seed {s}"
        if (folder / "summary.json").exists():
            statuses[folder.name] = "skipped"
            log(f"[esopt] ahd {k + 1}/{len(plan)} {label}: finished before, skipped")
            continue
        folder.mkdir(parents=True, exist_ok=True)
        rc = run_config(cfg, problem.name, m, b, s)
        atomic_write_text(folder / "config.yaml", yaml.safe_dump(rc, sort_keys=False))
        t0 = time.time()
        try:
            summary = run_one(folder, rc, cfg, problem, evaluate, start, log)
            statuses[folder.name] = "ran"
            held = summary["best"]["heldout"]["objective"]
            log(f"[esopt] ahd {k + 1}/{len(plan)} {label}: best validation {summary['best']['objective']:.6g} "
                f"({summary['best']['id']}), held-out {held} ({time.time() - t0:.0f}s)")
        except Exception:  # recorded; the other runs go on
            err = traceback.format_exc()
            statuses[folder.name] = "failed"
            failed.append({"run_dir": str(folder), "error": err})
            atomic_write_text(folder / "error.txt", err)
            log(f"[esopt] ahd {k + 1}/{len(plan)} {label} failed:\n{err}")
    summaries, refs = collect(root)
    table = ahd_table.build(summaries, refs)
    result = {"root": str(root), "problem": problem.name, "statuses": statuses, "failed": failed, **table}
    atomic_write_text(root / "ahd.json", json.dumps(result, indent=1))
    md = ahd_table.markdown(table)
    head = (f"# esopt adapt: heuristic design ({root})\n\nHeld-out objective (lower is better) of each method's best "
            "heuristic, mean ± SE over seeds; X+ES vs X: per-seed wins/ties/losses, then the mean paired "
            "difference (X - X+ES, positive favours ES) ± SE and its W/T/L at 2 SE.\n\n")
    atomic_write_text(root / "ahd.md", head + md)
    log(md)
    log(f"[esopt] ahd: {root / 'ahd.json'}, {root / 'ahd.md'}"
        + (f"; {len(failed)} run(s) failed (see ahd.json)" if failed else ""))
    return result
