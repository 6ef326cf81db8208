"""Where a run's metric records go besides RUN/metrics.jsonl (which stays the record): TensorBoard
scalars under RUN/tb (log.tensorboard) and Weights & Biases (log.wandb, the `wandb` extra).

Every sink gets the numeric fields of each record as `<kind>/<field>` (kind: train, eval, ...) with
the record's generation as its step."""
from __future__ import annotations

import hashlib
from pathlib import Path


def scalars(record: dict) -> dict[str, float]:
    """The record's numeric fields as `<kind>/<field>`: what a sink plots."""
    kind = record.get("kind", "train")
    return {f"{kind}/{k}": v for k, v in record.items()
            if isinstance(v, (int, float)) and k not in ("time", "generation")}


class TensorBoardSink:
    def __init__(self, writer):
        self.writer = writer

    @classmethod
    def open(cls, run_path: Path) -> "TensorBoardSink | None":
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # tensorboard is optional at run time
            return None
        return cls(SummaryWriter(str(Path(run_path) / "tb")))

    def log(self, record: dict) -> None:
        step = record.get("generation", 0)
        for k, v in scalars(record).items():
            self.writer.add_scalar(k, v, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def wandb_run_id(run_path: Path) -> str:
    """One W&B run per run folder: a resumed run continues the same W&B run."""
    return "esopt-" + hashlib.sha1(str(Path(run_path).resolve()).encode()).hexdigest()[:16]


def wandb_missing(mode: str) -> str | None:
    """Why log.wandb=<mode> cannot run here (None: it can)."""
    if mode == "off":
        return None
    try:
        import wandb  # noqa: F401
    except ImportError:
        return (f"log.wandb={mode} needs the wandb package: pip install 'esopt[wandb]' "
                "(or log.wandb=off)")
    return None


class WandbSink:
    """A W&B run in RUN/wandb/: offline needs no network (upload later with `wandb sync`)."""

    def __init__(self, run):
        self.run = run

    @classmethod
    def open(cls, run_path: Path, cfg) -> "WandbSink":
        import wandb

        settings = wandb.Settings(console="off", silent=True, disable_git=True, save_code=False,
                                  x_disable_stats=True)
        run = wandb.init(project=cfg.log.wandb_project, entity=cfg.log.wandb_entity, mode=cfg.log.wandb,
                         dir=str(run_path), id=wandb_run_id(run_path), name=Path(run_path).name,
                         config=cfg.model_dump(mode="json"), resume="allow", settings=settings)
        run.define_metric("generation")
        run.define_metric("*", step_metric="generation")
        return cls(run)

    def log(self, record: dict) -> None:
        self.run.log({"generation": record.get("generation", 0), **scalars(record)})

    def close(self) -> None:
        self.run.finish()


def open_sinks(run_path: Path, cfg) -> list:
    """The sinks cfg.log asks for, opened on the run folder."""
    sinks = []
    if cfg.log.tensorboard:
        tb = TensorBoardSink.open(run_path)
        if tb is not None:
            sinks.append(tb)
    if cfg.log.wandb != "off":
        sinks.append(WandbSink.open(run_path, cfg))
    return sinks
