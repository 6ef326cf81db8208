"""`esopt baseline gepa`: GEPA's own options on the command line; the run goes through the
session every algorithm shares (esopt.train.session)."""
from __future__ import annotations

from ...utils.args import default_config, names, split_args


def add_arguments(g) -> None:
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


def run(a, print_summary) -> int:
    from ...train.session import train
    from .baseline import GepaOptions
    from .requires import require_gepa

    require_gepa()  # before anything is written: a missing package is one line naming the extra
    if a.budget is not None and a.budget < 1:
        raise SystemExit(f"esopt: error: --budget is in episodes, at least 1; got {a.budget}")
    config, overrides = split_args(a.args)
    opts = GepaOptions(budget=a.budget, train_tasks=a.train_tasks, val_tasks=a.val_tasks, minibatch=a.minibatch,
                       components=names(a.components), reflection_tokens=a.reflection_tokens,
                       reflection_temperature=a.reflection_temperature, reflection_url=a.reflection_url,
                       reflection_model=a.reflection_model, reflection_key_env=a.reflection_key_env)
    summary = train(config or default_config(), overrides, algo_name="gepa", gepa=opts)
    print_summary(summary)
    g = summary["gepa"]
    print(f"[esopt] gepa: {g['iterations']} iterations, {g['candidates']} candidates, "
          f"{summary['episodes']['used']} of {summary['budget_episodes']} episodes, "
          f"{summary['lm_calls']['reflection']['calls']} reflection calls")
    if "validation" in summary:
        print(f"RESULT validation_reward_gepa={summary['validation']['final']['reward']:.4f}")
    print(f"RESULT gepa_episodes={summary['episodes']['used']}")
    print(f"RESULT gepa_reflection_calls={summary['lm_calls']['reflection']['calls']}")
    return 0
