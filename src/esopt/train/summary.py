"""The end of a run, for any algorithm: summary.json (base vs final held-out
figures with their paired difference)."""
from __future__ import annotations

from ..es.perturb import weights_hash
from ..utils.memory import peak_rss_mb
from ..utils.seeding import derive_seed
from ..models.policy import DecodeAborted
from . import failures, stop
from .evaluate import evaluate, evaluate_attempts, paired_difference, pass_at_figures, pass_at_note, summarize
from .rundir import RunDir


def eval_splits(cfg, boundary: bool, generation: int = 0) -> list[str]:
    """The splits one evaluation plays. Without a validation split: held-out, always. With one:
    validation always, held-out only at the run's boundaries (before training, at the end; the
    start is the boundary at generation 0), so nothing chosen during a run looks at held-out
    figures; eval.heldout=end plays it at the end only, never not at all."""
    if not cfg.tasks.validation:
        return ["heldout"]
    when = cfg.eval.heldout
    heldout = boundary and (when == "start_end" or (when == "end" and generation > 0))
    return ["validation", "heldout"] if heldout else ["validation"]


TRAJECTORY_PREFIX = {"heldout": "eval", "validation": "val"}  # trajectories/<prefix>_genNNNN.jsonl
ATTEMPTS = "attempts_gen{:04d}"  # trajectories/attempts_genNNNN.jsonl: pass@k's sampled held-out episodes (eval.pass_at)


def record_eval(trainer, generation: int, boundary: bool = True, unit: str = "generations", context=None,
                context_note: dict | None = None, play=None, command: str = "esopt train") -> dict:
    """Evaluation after `generation` updates by a trainer (its run folder, policy, tasks, cfg and log), with the
    unperturbed weights: per split (eval_splits)
    the trajectories and a log line, and one metrics line (heldout_* and validation_* keys).
    context (coevo): the context to play instead of the agent's own, described in the metrics
    line by context_note. play(split, seed) -> (figures, episode records), if given, plays a split
    elsewhere (on Ray workers); by default `policy` plays it here. Returns {split: figures}. When every
    episode of a split fails, the run stops there (train/failures.py; `command` is how it is resumed)."""
    run, policy, tasks, cfg, log = trainer.run, trainer.policy, trainer.tasks, trainer.cfg, trainer.log
    line: dict = {"kind": "eval", "generation": generation}
    if context_note is not None:
        line["context"] = context_note
    out, played = {}, False
    earlier = recorded_eval(run, generation)
    for split in eval_splits(cfg, boundary, generation):
        name = "held-out" if split == "heldout" else split
        stats = reused(run, generation, split, earlier)
        if stats is not None:  # a resumed run: played by the process before, with these weights
            log(f"[esopt] {name} after {generation} {unit}: reward {stats['reward']:.3f} ± {stats['reward_se']:.3f} "
                f"(solved {stats['solved']:.3f}, n={stats['n']}; recorded before the resume, not played again)")
        else:
            seed = derive_seed("eval", cfg.run.seed)
            phase = f"the {name} evaluation after {generation} {unit}"
            with stop.phase(phase):  # a Ctrl-C ends it at once, unrecorded (the resume plays it)
                try:
                    stats, episodes = (play(split, seed) if play else
                                       evaluate(policy, tasks, cfg, seed=seed, split=split, context=context,
                                                abort=stop.requested))
                except DecodeAborted:
                    raise stop.StoppedDuring(phase) from None
                if stop.requested():  # asked for after the last decode step (in an env's step): as its line said,
                    raise stop.StoppedDuring(phase)  # it is not recorded
            run.write_trajectories(f"{TRAJECTORY_PREFIX[split]}_gen{generation:04d}",
                                   [{"generation": generation, **ep} for ep in episodes])
            log(f"[esopt] {name} after {generation} {unit}: reward {stats['reward']:.3f} ± {stats['reward_se']:.3f} "
                f"(solved {stats['solved']:.3f}, n={stats['n']}, {stats['seconds']:.0f}s){tools_note(stats)}"
                f"{failures.note(episodes)}")
            failures.stop_if_all_failed(episodes, f"the {name} evaluation after {generation} {unit}", run.path,
                                        command)
            played = True
        if split == "heldout" and cfg.eval.pass_at:
            played = record_attempts(trainer, generation, unit, stats, earlier, context) or played
        line.update({f"{split}_{k}": v for k, v in stats.items() if k != "per_task"})
        out[split] = stats
    if earlier is not None and not played:  # its metrics line is there already
        return out
    line["peak_rss_mb"] = peak_rss_mb()  # this process's peak so far; before the first update: inference only
    if earlier is not None:  # one line per evaluation: the earlier one (fewer splits) gives way to this one
        line = {**{k: v for k, v in earlier.items() if k != "time"}, **line}
        run.drop_eval_lines(generation)
    run.log(line)
    return out


def record_attempts(trainer, generation: int, unit: str, stats: dict, earlier: dict | None, context=None) -> bool:
    """pass@k (eval.pass_at) after `generation` updates, into the held-out `stats`: its sampled attempts played here
    with the trainer's policy (train/evaluate.py evaluate_attempts; also in a Ray run, whose greedy episodes the
    workers play), written to trajectories/attempts_genNNNN.jsonl, and a log line; or, after a resume, the figures
    of the attempts recorded before (reused's rule). True when they were played now."""
    run, cfg, log = trainer.run, trainer.cfg, trainer.log
    found = reused_attempts(run, generation, cfg, earlier)
    if found is not None:
        stats.update(found)
        log(f"[esopt] held-out pass@k after {generation} {unit}: {pass_at_note(found)} (recorded before the resume, "
            "not played again)")
        return False
    phase = f"the held-out pass@k attempts after {generation} {unit}"
    with stop.phase(phase):  # as the greedy evaluation: a Ctrl-C ends it unrecorded (the resume plays it)
        try:
            figures, episodes = evaluate_attempts(trainer.policy, trainer.tasks, cfg, derive_seed("eval", cfg.run.seed),
                                                  "heldout", context, abort=stop.requested)
        except DecodeAborted:
            raise stop.StoppedDuring(phase) from None
        if stop.requested():
            raise stop.StoppedDuring(phase)
    run.write_trajectories(ATTEMPTS.format(generation), [{"generation": generation, **ep} for ep in episodes])
    stats.update(figures)
    log(f"[esopt] held-out pass@k after {generation} {unit}: {pass_at_note(figures)} ({figures['pass_at_n']} sampled "
        f"attempts per episode, temperature {cfg.eval.pass_at_temperature or cfg.agent.sampling.temperature:g}, "
        f"{figures['pass_at_seconds']:.0f}s){failures.note(episodes)}")
    return True


def reused_attempts(run: RunDir, generation: int, cfg, earlier: dict | None) -> dict | None:
    """pass@k figures from attempts recorded before a resume (reused's rule: the base evaluation's, or those its
    surviving metrics line has), if all of them are on disk."""
    if generation != 0 and (earlier is None or "heldout_pass_at_n" not in earlier):
        return None
    episodes = run.read_trajectories(ATTEMPTS.format(generation))
    n = cfg.eval.attempts()
    if not episodes or {ep.get("attempt") for ep in episodes} != set(range(n)):
        return None
    figures = pass_at_figures(episodes, cfg.eval.pass_at)
    figures.update(pass_at_n=n, pass_at_seconds=(earlier or {}).get("heldout_pass_at_seconds", 0.0))
    return figures


def recorded_eval(run: RunDir, generation: int) -> dict | None:
    """The metrics line of an evaluation after `generation` updates that an earlier process of this run
    recorded (kept by a resume: train/rundir.py truncate_metrics), if any."""
    lines = [m for m in run.metrics() if m.get("kind") == "eval" and m.get("generation") == generation]
    return lines[-1] if lines else None


def reused(run: RunDir, generation: int, split: str, earlier: dict | None) -> dict | None:
    """A split's figures recorded before a resume, so a resumed run never plays an evaluation twice: its
    episodes are on disk and were played with the weights it has now (its metrics line survived the
    resume's truncation, or it is the base evaluation, whose weights never change)."""
    if generation != 0 and (earlier is None or f"{split}_reward" not in earlier):
        return None
    episodes = run.read_trajectories(f"{TRAJECTORY_PREFIX[split]}_gen{generation:04d}")
    if not episodes or failures.count(episodes)[0] == len(episodes):  # none, or the run stopped on them
        return None
    stats = summarize(episodes)
    stats["seconds"] = (earlier or {}).get(f"{split}_seconds", 0.0)
    return stats


def load_eval(run: RunDir, generation: int, split: str = "heldout"):
    """The figures of an earlier evaluation, from its recorded episodes (after a resume); held-out with pass@k when
    its attempts were recorded too."""
    episodes = run.read_trajectories(f"{TRAJECTORY_PREFIX[split]}_gen{generation:04d}")
    if not episodes:
        return None
    stats = summarize(episodes)
    attempts = run.read_trajectories(ATTEMPTS.format(generation)) if split == "heldout" else []
    if attempts:
        cfg = run.load_config()
        if cfg.eval.pass_at:
            stats.update(pass_at_figures(attempts, cfg.eval.pass_at), pass_at_n=cfg.eval.attempts())
    return stats


def _paired(final: dict, base: dict | None) -> dict:
    out = {"final": {k: v for k, v in final.items() if k != "per_task"}}
    if base is not None:
        diff, se = paired_difference(final["per_task"], base["per_task"])
        out["base"] = {k: v for k, v in base.items() if k != "per_task"}
        out["improvement"] = {"mean": diff, "se": se}
    return out


def finish_run(run: RunDir, model, evals: dict, generations: int, log=print, **extra) -> dict:
    """Write summary.json from the evaluations {generation: {split: figures}} and close the run (its
    algorithm then refreshes the report, report.refresh_report). Top-level final/base/improvement
    are held-out figures; a run with a validation split also gets them for validation under
    "validation". `generations`: the planned number of updates; a run stopped earlier by
    run.budget_seconds records the updates it made (the last evaluation's) and the plan under
    "planned_generations"."""
    done = max(evals) if evals else generations
    summary = {"run_dir": str(run.path), **extra, "generations": done, "weights_hash": weights_hash(model)}
    if done != generations:
        summary["planned_generations"] = generations
    for split in ("heldout", "validation"):
        final = evals[done].get(split)
        if final is None:
            continue
        figures = _paired(final, (evals.get(0) or {}).get(split) or load_eval(run, 0, split))
        if split == "heldout":
            summary.update(figures)
        else:
            summary["validation"] = figures
    run.write_json("summary.json", summary)
    run.close()
    return summary


def tools_note(stats: dict) -> str:
    """The evaluation line's tool figures, when its episodes called tools (train/evaluate.py tool_figures)."""
    if "tool_use" not in stats:
        return ""
    return f" | tool use {stats['tool_use']:.3f}, {stats['tool_calls']:.2f} calls/episode"
