"""esopt bench room: where a small model can learn. ES makes no update when every member scores
the same, so a task is worth training on when the base model sometimes succeeds and sometimes not.

1. Base success (``--tasks``): the config's model plays each task's validation split once
   (tasks.validation episodes; the model loaded once), giving reward and success rate with SE.
   Nothing here reads a held-out split.
2. ES (``--train K``): the K tasks with the most room, i.e. the lowest validation success within
   [ROOM_LOW, ROOM_HIGH] whose base model does not play nearly every task alike (the same replies,
   turn by turn, in at least CONSTANT_SHARE of the episodes: its success is then a
   constant's score, and ES can only move the constant; letter counting level 0 taught this,
   docs/results/room.md), each trained with ``--seeds`` (one `esopt train` process per seed, its
   run folder under --runs, reused or resumed when it is there already); reported: held-out reward
   before and after (mean over seeds) and the per-seed paired improvement with its SE over seeds.

Each task is a config file and overrides (TASKS; ``name=config:override,override`` on the command
line adds one), so its context (system prompt, examples) is the task's own config's.
"""
from __future__ import annotations

import time
from pathlib import Path

from ...utils.stats import mean_se  # SE over seeds / episodes, as evaluations compute it

ROOM_LOW, ROOM_HIGH = 0.1, 0.7
CONSTANT_SHARE = 0.9  # a task whose most given replies are at least this share of episodes has no room

# name -> (config, overrides): GEM games that run offline (docs/gem.md) and reasoning-gym datasets
# with short questions and answers at easy curriculum levels (docs/reasoning-gym.md). The configs'
# worked examples are of Guess The Number and leg counting; other reasoning-gym tasks get a worked
# question of their own (without one, SmolLM2-135M answers "The final answer is 24." and scores 0:
# chosen on the validation split), GEM games other than Guess The Number none.
_GEM, _RG, _NO_EXAMPLE = "configs/gem.yaml", "configs/reasoning-gym.yaml", "agent.examples=[]"


def _example(question: str, answer: str) -> str:
    """agent.examples: one worked question in reasoning-gym's format (answer_format=tag)."""
    q = question.replace('"', '\\"')
    return (f'agent.examples=[{{role: user, content: "{q}\\n\\nEnd your reply with the final answer between '
            f'<answer> and </answer>."}}, {{role: assistant, content: "<answer>{answer}</answer>"}}]')


_LETTERS = _example('How many times does the letter "a" appear in the text: "banana split"?', "3")
TASKS: dict[str, tuple[str, list[str]]] = {
    "gem-guess-easy": (_GEM, ["env.options.task=game:GuessTheNumber-v0-easy"]),
    "gem-guess-hard": (_GEM, ["env.options.task=game:GuessTheNumber-v0-hard"]),
    "gem-mastermind-easy": (_GEM, ["env.options.task=game:Mastermind-v0-easy", _NO_EXAMPLE]),
    "gem-fifteen-easy": (_GEM, ["env.options.task=game:FifteenPuzzle-v0-easy", _NO_EXAMPLE]),
    "rg-leg-counting-0": (_RG, ["env.options.dataset=leg_counting", "env.options.level=0"]),
    "rg-leg-counting-1": (_RG, ["env.options.dataset=leg_counting", "env.options.level=1"]),
    "rg-basic-arithmetic-0": (_RG, ["env.options.dataset=basic_arithmetic", "env.options.level=0",
                                    _example("Calculate 3 + 4.", "7")]),
    **{f"rg-letter-counting-{level}": (_RG, ["env.options.dataset=letter_counting", f"env.options.level={level}",
                                              _LETTERS]) for level in (0, 1)},
    "rg-spell-backward-0": (_RG, ["env.options.dataset=spell_backward", "env.options.level=0",
                                  _example("Spell this word backward (example: sun -> nus): cat", "tac")]),
    "rg-count-bits-0": (_RG, ["env.options.dataset=count_bits", "env.options.level=0",
                              _example("How many 1 bits are there in the binary representation of the number 5?",
                                       "2")]),
    "rg-chain-sum-1": (_RG, ["env.options.dataset=chain_sum", "env.options.level=1",
                             _example("State the final answer to the following arithmetic problem: 12 + 30 - 5 =",
                                      "37")]),
    "rg-gcd-0": (_RG, ["env.options.dataset=gcd", "env.options.level=0",
                       _example("Find the Greatest Common Divisor (GCD) of these numbers: 12, 18. Give only the GCD "
                                "as your final answer.", "6")]),
}


def parse_task(text: str) -> tuple[str, tuple[str, list[str]]]:
    """A task named on the command line: a TASKS name, or name=config[:override,override,...]."""
    if "=" not in text:
        if text not in TASKS:
            raise ValueError(f"unknown task {text!r}; known: {', '.join(TASKS)} (or name=config:override,...)")
        return text, TASKS[text]
    name, _, rest = text.partition("=")
    config, _, overrides = rest.partition(":")
    return name, (config, [o for o in overrides.split(",") if o])


def base_table(tasks: dict, extra: list[str], log=print) -> dict:
    """Validation reward and success of the base model per task (one model load)."""
    import torch

    from ...config import ConfigError, load_config
    from ...models import HFPolicy, load_model
    from ...train.evaluate import evaluate
    from ...train.preflight import check_run_config
    from ...train.tasks import TaskSource
    from ...utils.seeding import derive_seed

    out, model = {}, None
    for name, (config, overrides) in tasks.items():
        cfg = load_config(config, overrides + extra)
        if not cfg.tasks.validation:
            raise ValueError(f"task {name}: its config has no validation split (tasks.validation=0)")
        try:
            check_run_config(cfg)
        except ConfigError as err:  # e.g. a level with too few distinct questions for the splits: say so, go on
            out[name] = {"config": config, "overrides": overrides, "refused": str(err)}
            log(f"[bench room] {name}: refused: {err}")
            continue
        if model is None:
            if cfg.runtime.threads:
                torch.set_num_threads(cfg.runtime.threads)
            model, tok, model_name = *load_model(cfg.model, cfg.runtime.dtype, cfg.runtime.device), cfg.model
        elif cfg.model != model_name:
            raise ValueError(f"task {name}: model {cfg.model}, but the table is of {model_name}")
        t0 = time.time()
        stats, episodes = evaluate(HFPolicy.for_agent(model, tok, cfg.agent), TaskSource(cfg.env, cfg.tasks, cfg.run.seed),
                                   cfg, seed=derive_seed("eval", cfg.run.seed), split="validation")
        solved = [float(ep["solved"]) for ep in episodes]
        reply, share, distinct = top_reply(episodes)
        out[name] = {"config": config, "overrides": overrides, "episodes": stats["n"], "tasks": stats["tasks"],
                     "reward": stats["reward"], "reward_se": stats["reward_se"], "solved": stats["solved"],
                     "solved_se": mean_se(solved)[1], "turns": sum(len(ep["turns"]) for ep in episodes) / len(episodes),
                     "errors": stats["errors"], "top_reply": reply, "top_reply_share": share,
                     "distinct_replies": distinct, "seconds": time.time() - t0}
        r = out[name]
        log(f"[bench room] {name}: validation success {r['solved']:.3f} ± {r['solved_se']:.3f}, reward "
            f"{r['reward']:.3f} ± {r['reward_se']:.3f}, n={r['episodes']}, {r['turns']:.1f} turns/episode, "
            f"replies {reply!r} in {share:.0%} of episodes ({distinct} distinct), {r['seconds']:.0f}s")
    return out


def top_reply(episodes: list[dict]) -> tuple[str, float, int]:
    """(the most given episode's replies, every turn's joined by " / "; its share of the episodes; how
    many distinct ones). Whole episodes, not first turns: a game whose first prompt is the same for
    every task may open with one move and still play each task its own way."""
    from collections import Counter

    plays = Counter(replies(ep) for ep in episodes)
    if not plays:
        return "", 0.0, 0
    top, count = plays.most_common(1)[0]
    return " / ".join(top), count / sum(plays.values()), len(plays)


def replies(ep: dict) -> tuple[str, ...]:
    """An episode's replies, every turn's, in order (what top_reply counts and esopt probe compares)."""
    return tuple(t.get("response") or "" for t in ep.get("turns") or ())


def constant(row: dict) -> bool:
    """The base model plays nearly every task alike (older tables lack the share: not constant)."""
    return row.get("top_reply_share", 0.0) >= CONSTANT_SHARE


def in_band(row: dict) -> bool:
    """The task was played (not refused) and its validation success lies in [ROOM_LOW, ROOM_HIGH]."""
    return "solved" in row and ROOM_LOW <= row["solved"] <= ROOM_HIGH


def with_room(table: dict, k: int) -> list[str]:
    """The k tasks with the lowest validation success inside [ROOM_LOW, ROOM_HIGH], constant ones left out."""
    inside = [n for n, r in table.items() if in_band(r) and not constant(r)]
    return sorted(inside, key=lambda n: (table[n]["solved"], n))[:k]


def train_seeds(name: str, config: str, overrides: list[str], seeds: list[int], runs: str, log=print) -> dict:
    """ES on one task, one run per seed; held-out base -> final and the paired improvement over seeds."""
    from ..runs import train_run

    per_seed = []
    for seed in seeds:
        r = train_run(config, overrides + [f"run.seed={seed}"], runs, f"{name}-seed{seed}", log=log)
        s = r["summary"]
        per_seed.append({"seed": seed, "base": s["base"]["reward"], "final": s["final"]["reward"],
                         "base_solved": s["base"]["solved"], "final_solved": s["final"]["solved"],
                         "improvement": s["improvement"]["mean"], "improvement_se": s["improvement"]["se"],
                         "n": s["final"]["n"], "wall_seconds": r.get("wall_seconds")})
    imp, imp_se = mean_se([p["improvement"] for p in per_seed])
    res = {"seeds": per_seed, "base": mean_se([p["base"] for p in per_seed])[0],
           "final": mean_se([p["final"] for p in per_seed])[0],
           "base_solved": mean_se([p["base_solved"] for p in per_seed])[0],
           "final_solved": mean_se([p["final_solved"] for p in per_seed])[0],
           "improvement": imp, "improvement_se": imp_se}
    log(f"[bench room] {name}: held-out reward {res['base']:.3f} -> {res['final']:.3f} (improvement {imp:+.3f} ± "
        f"{imp_se:.3f} SE over {len(seeds)} seeds), success {res['base_solved']:.3f} -> {res['final_solved']:.3f}")
    return res


def main(task_names: list[str], extra: list[str], out: str, train: int = 0, seeds=(0, 1, 2), runs: str = "runs/room",
         train_overrides: list[str] | None = None) -> dict:
    from ..common import write_results

    tasks = dict(parse_task(t) for t in (task_names or list(TASKS)))
    details: dict = {"room": [ROOM_LOW, ROOM_HIGH], "extra_overrides": extra}
    table = base_table(tasks, extra)
    details["base"] = table
    results = {f"{n}_validation_solved": r["solved"] for n, r in table.items() if "solved" in r}
    if train:
        chosen = with_room(table, train)
        details["chosen"] = chosen
        for n, r in table.items():
            if in_band(r) and constant(r):
                print(f"[bench room] {n}: left out: the base model replies {r['top_reply']!r} to "
                      f"{r['top_reply_share']:.0%} of its tasks, so its success is a constant's score", flush=True)
        print(f"[bench room] most room (validation success in [{ROOM_LOW}, {ROOM_HIGH}]): {', '.join(chosen) or 'none'}",
              flush=True)
        details["es"] = {}
        for n in chosen:
            config, overrides = tasks[n]
            res = train_seeds(n, config, overrides + extra + list(train_overrides or []), list(seeds), runs)
            details["es"][n] = res
            results[f"{n}_heldout_improvement"] = res["improvement"]
            results[f"{n}_heldout_improvement_se"] = res["improvement_se"]
    write_results(out, "room", results, details)
    Path(out).with_suffix(".md").write_text(markdown(details))
    return details


def markdown(details: dict) -> str:
    """The tables of docs/results/room.md."""
    lines = ["| task | validation success (base) | reward | turns/episode | n | most given replies (share) |",
             "|---|---|---|---|---|---|"]
    for n, r in details["base"].items():
        if "refused" in r:
            lines.append(f"| {n} | refused: {r['refused']} | | | | |")
            continue
        shown = " ".join(r.get("top_reply", "").split())[:40].replace("|", "\\|").replace("`", "'")  # one cell
        top = (f"`{shown}`" + f" ({r['top_reply_share']:.0%})"
               + (": constant" if constant(r) else "")) if "top_reply" in r else ""
        lines.append(f"| {n} | {r['solved']:.3f} ± {r['solved_se']:.3f} | {r['reward']:.3f} ± {r['reward_se']:.3f} | "
                     f"{r['turns']:.1f} | {r['episodes']} | {top} |")
    if details.get("es"):
        lines += ["", "| task | seeds | held-out reward base -> ES | improvement (± SE over seeds) | per seed (± paired SE "
                  "over the held-out tasks) | success base -> ES |", "|---|---|---|---|---|---|"]
        for n, r in details["es"].items():
            per = " / ".join(f"{p['improvement']:+.3f} ± {p['improvement_se']:.3f}" for p in r["seeds"])
            lines.append(f"| {n} | {len(r['seeds'])} | {r['base']:.3f} -> {r['final']:.3f} | {r['improvement']:+.3f} ± "
                         f"{r['improvement_se']:.3f} | {per} | {r['base_solved']:.3f} -> {r['final_solved']:.3f} |")
    return "\n".join(lines) + "\n"

