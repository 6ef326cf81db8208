"""esopt: evolution strategies for fine-tuning LLM agents with inference memory.

The Python API (docs/api.md) is what the command line calls:

    import esopt
    summary = esopt.fit("configs/demo.yaml", ["es.population=16"])   # esopt train
    summary = esopt.fit(resume="runs/RUN", overrides=["es.generations=20"])
    stats, episodes = esopt.evaluate(run="runs/RUN")                  # esopt eval --run
"""

__version__ = "0.1.0"


def fit(config=None, overrides=(), *, resume=None, algo=None, workers=None, address=None) -> dict:
    """Train as `esopt train` does (same checks, run folder, lock, resume and signals): from a config
    file (or an esopt.config.Config) and key=value overrides, or resume a run folder. Returns the
    run's summary (summary.json). Bad settings raise esopt.config.ConfigError before anything is written."""
    from .train.session import train

    return train(config, list(overrides), resume_dir=resume, algo_name=algo, workers=workers, address=address,
                 strict=True)


def evaluate(run=None, config=None, overrides=(), *, model=None, split="heldout"):
    """Evaluate as `esopt eval` does: a run's final weights (run=RUN_DIR) or a model (config, model);
    returns (figures, episode records)."""
    from .train.evaluate import evaluate_weights

    stats, episodes, _ = evaluate_weights(run, config, list(overrides), model, split)
    return stats, episodes


__all__ = ["__version__", "evaluate", "fit"]
