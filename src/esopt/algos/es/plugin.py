"""ES as the harness sees it (esopt.train.algorithm): a seed history that replays to the weights,
members on Ray workers, and with coevo.mode context/both a context that travels with the weights."""
from __future__ import annotations

import json
from pathlib import Path

from ...train.algorithm import Algorithm, product


class ES(Algorithm):
    name, title, unit, budget_key, record = "es", "ES", "generations", "es.generations", "history"
    on_ray = schedules = True
    frozen = Algorithm.frozen + (
        "es.scope", "es.noise", "es.sigma_scale", "es.rank", "es.table_size", "es.lowrank_others", "es.update_rounding",
        "es.optimizer", "es.momentum", "es.adam", "es.population", "es.antithetic", "es.shaping",
        # the context search; its library by content (coevo.library_hash), so the library's file may move
        "coevo.mode", "coevo.lr", "coevo.init_prob", "coevo.init_logits", "coevo.logit_clip", "coevo.library_hash")

    computed = {"coevo.library_hash": ("coevo", lambda coevo: library_hash(coevo))}

    def recorded_keys(self, cfg) -> tuple[str, ...]:
        """The frozen settings but those of an es.optimizer the run does not use: a run with the default
        sgd records none of them (as runs did before es.optimizer; a record without it means sgd)."""
        unused = {"sgd": ("es.optimizer", "es.momentum", "es.adam"), "momentum": ("es.adam",),
                  "adam": ("es.momentum",)}[cfg.es.optimizer]
        return tuple(k for k in self.frozen if k not in unused)

    def check(self, cfg, on_ray: bool = False) -> None:
        from ...utils.settings import ConfigError

        if on_ray and cfg.es.drop_tied_rounds:
            raise ConfigError(f"es.drop_tied_rounds={cfg.es.drop_tied_rounds} plays further rounds of tasks in one "
                              "process for now; drop --workers / --ray-address, or set es.drop_tied_rounds=0")
        if on_ray and cfg.coevo.mode != "weights":
            raise ConfigError(f"coevo.mode={cfg.coevo.mode} runs in one process for now; --workers / --ray-address "
                              "play weights-only ES (coevo.mode=weights)")
        if cfg.coevo.mode == "weights":
            return
        from ...agent.rollout import AgentContext
        from .coevo.search import ContextSearch

        ContextSearch(cfg, AgentContext.from_config(cfg.agent))  # raises ConfigError naming what is wrong
        if cfg.coevo.grow.every:  # coevo.proposer: an http(s) URL, a model, its API key's variable set
            from .coevo.proposer import check_proposer

            check_proposer(cfg.coevo.proposer)

    def extend(self, old, new, log=print) -> None:
        """More generations than the run started with: the schedules keep the plan they were following
        (the added generations use the end values) unless es.schedule_generations says otherwise."""
        if new.es.generations > old.es.generations and not new.es.schedule_generations:
            new.es.schedule_generations = old.es.schedule_generations or old.es.generations
            log(f"[esopt] extending to {new.es.generations} generations: sigma and alpha keep their "
                f"{new.es.schedule_generations}-generation schedules (later generations use the end values); to "
                f"stretch them instead, add es.schedule_generations={new.es.generations}")

    def trainer(self, cfg, run, runner=None, log=print, **options):
        from .trainer import Trainer

        return Trainer(cfg, run, log=log, runner=runner, **options)

    def done(self, run, cfg) -> int:
        from ...es.history import History, RunFolderError

        path = run.path / "history.json"
        if path.exists():
            return len(History.load(path))
        trained = [m for m in run.metrics() if m.get("kind") == "train"]
        if trained:
            raise RunFolderError(f"{run.path} has metrics of {len(trained)} trained generation(s) but no history.json, "
                                 "the record resume replays: restore history.json, or start a new run (resuming "
                                 "would start over and overwrite these metrics)")
        return 0

    def holds(self, path: Path) -> bool:
        return (Path(path) / "history.json").exists()

    def recorded_settings(self, path: Path) -> dict | None:
        import json

        try:
            settings = json.loads((Path(path) / "history.json").read_text()).get("meta", {}).get("settings")
        except (OSError, ValueError, AttributeError):
            return None  # a damaged history is reported by whatever reads it next
        return settings if isinstance(settings, dict) else None

    def load_weights(self, run, cfg, model, upto: int | None = None) -> int:
        from ...es.build import make_perturber
        from ...train.weights import replay, start_from

        start_from(run, model)
        return replay(run.history(), make_perturber(model, cfg.es), upto=upto)

    def final_context(self, run, cfg, upto: int):
        from ...agent.rollout import AgentContext
        from .coevo.export import final_context

        return final_context(run.history(), AgentContext.from_config(cfg.agent), upto=upto)

    def export_files(self, folder: Path, run, cfg) -> dict | None:
        from ...agent.rollout import AgentContext
        from .coevo.export import write_context_files

        return write_context_files(folder, run.history(), AgentContext.from_config(cfg.agent))

    def episodes_per_update(self, c) -> int | None:
        return product(c, "es.population", "es.episodes_per_member")

    def settings_rows(self, c, meta: dict) -> list[tuple[str, str]]:
        sig, alp = c("es.sigma") or {}, c("es.alpha") or {}
        sig, alp = (x if isinstance(x, dict) else {} for x in (sig, alp))
        es = (f"G={c('es.population')} members ({'antithetic' if c('es.antithetic') else 'independent'}), "
              f"T={c('es.generations')} generations, {c('es.episodes_per_member')} episodes per member, "
              f"shaping {c('es.shaping')}, scope {c('es.scope')}")
        sched = (f"sigma {sig.get('start')} -> {sig.get('end')} ({sig.get('schedule')}), "
                 f"alpha {alp.get('start')} -> {alp.get('end')} ({alp.get('schedule')})")
        noise = meta.get("noise", c("es.noise"))
        # the noise as recorded (history meta: kind, chunk, table size...): a report draws a mapping as a table
        return [("ES", es), ("schedules", sched),
                ("noise", noise if isinstance(noise, dict) else json.dumps(noise) if isinstance(noise, list) else str(noise))]


def library_hash(coevo) -> str | None:
    """The digest of the skill library a coevo config (a CoevoConfig or its dict) searches; None with
    coevo.mode=weights (no search)."""
    from ...config import CoevoConfig
    from .coevo.library import load_library

    coevo = coevo if isinstance(coevo, CoevoConfig) else CoevoConfig.model_validate(coevo or {})
    return None if coevo.mode == "weights" else load_library(coevo).digest
