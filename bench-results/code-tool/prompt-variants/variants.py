"""The prompt variants tried on the validation split before the room check (docs/results/code-tool.md):
each is overrides of code-tool-draft.yaml (the first draft of configs/code-tool.yaml: products of two
3-digit numbers, one worked example with call, result and boxed answer), played on 32 validation tasks.
Run from the repository root: PYTHONPATH=src python bench-results/code-tool/prompt-variants/variants.py v1.json"""
import collections
import json
import sys

import torch

import esopt

torch.set_num_threads(1)
variants = json.load(open(sys.argv[1]))
for name, ov in variants.items():
    stats, eps = esopt.evaluate(config="bench-results/code-tool/prompt-variants/code-tool-draft.yaml", overrides=["runtime.threads=1", "tasks.validation=32"] + ov, split="validation")
    n = len(eps)
    valid = sum(any(t.get("python_ok") for t in e["turns"]) for e in eps)
    called = sum(any(t.get("tool_calls") for t in e["turns"]) for e in eps)
    last = collections.Counter(e["turns"][-1]["response"][:60] for e in eps).most_common(2)
    print(f"\nVARIANT {name}: solved {stats['solved']:.3f} called {called/n:.2f} valid {valid/n:.2f} turns {sum(len(e['turns']) for e in eps)/n:.2f} last {last}", flush=True)
