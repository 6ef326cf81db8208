"""Shared by the report tests: a model-free Sudoku agent and tiny real runs made with it."""
import json
import random
import re
import shutil

from esopt.config import load_config
from esopt.train.rundir import RunDir
from esopt.algos.es.trainer import Trainer

from conftest import TINY_OVERRIDES


class ScriptedPolicy:
    """Answers Sudoku turns without a model: accepted, refused and unparseable moves, different per seed."""

    tokens_generated = 0

    def generate(self, convs, options, **kwargs):
        rng = random.Random(options.seed)
        replies = []
        for conv in convs:
            obs = conv[-1]["content"]
            empty = re.findall(r"r\d+c\d+", obs.split("Empty cells:")[-1].splitlines()[0])
            if rng.random() < 0.15 or not empty:
                replies.append("I think <b>this</b> & that")  # unparseable, with HTML to escape
            else:
                replies.append(f"{rng.choice(empty)}={rng.randint(1, 4)}")
            self.tokens_generated += 3
        return replies


def scripted_trainer(cfg, run=None, log=lambda *a: None):
    """The real Trainer (tiny random Llama, real ES updates), its episodes played by ScriptedPolicy."""
    tr = Trainer(cfg, run or RunDir.create(cfg), log=log)
    tr.policy = ScriptedPolicy()
    return tr


def make_run(out_dir, name, *extra, log=lambda *a: None):
    """A finished tiny run (3 generations, held-out evaluation after each); returns (run path, summary)."""
    cfg = load_config(None, TINY_OVERRIDES + [f"run.out_dir={out_dir}", f"run.name={name}", "eval.every=1", *extra])
    tr = scripted_trainer(cfg, log=log)
    return tr.run.path, tr.train()


def copy_run(src, dst):
    """A copy of a run folder without its report."""
    shutil.copytree(src, dst)
    shutil.rmtree(dst / "report", ignore_errors=True)
    return dst


def truncate(run):
    """A run killed in generation 2 that also lost files: history and metrics cut mid-way, no evaluation,
    the first generation's episodes deleted, no summary."""
    hist = json.loads((run / "history.json").read_text())
    hist["generations"] = hist["generations"][:2]
    (run / "history.json").write_text(json.dumps(hist))
    train = [ln for ln in (run / "metrics.jsonl").read_text().splitlines() if '"kind": "train"' in ln]
    (run / "metrics.jsonl").write_text(train[0] + "\n" + train[1][: len(train[1]) // 2])  # a write cut short
    for f in ["gen0000.jsonl", "gen0002.jsonl", *(p.name for p in (run / "trajectories").glob("eval_*"))]:
        (run / "trajectories" / f).unlink()
    (run / "summary.json").unlink()
