"""pass@k (eval.pass_at, issue 52 item 4): the unbiased estimator against hand-computed values, its standard error
over tasks, the config's checks, and the figures where they appear: a training run's metrics, summary.json,
console and report, `esopt eval`'s RESULT lines; with eval.pass_at empty (the default) nothing changes, and the
sampled attempts never move the greedy figures."""
from __future__ import annotations

import json
import math

import pytest
from conftest import TINY_OVERRIDES

from esopt.cli import main
from esopt.config import ConfigError, load_config
from esopt.train.evaluate import pass_at_figures
from esopt.utils.stats import pass_at_k

COIN = ["env.id=coin_envs:Coin", "agent.system_prompt=", "tasks.heldout=4"]


@pytest.mark.parametrize("n,c,k,want", [
    (4, 0, 1, 0.0), (4, 0, 4, 0.0),  # c = 0: never
    (4, 4, 1, 1.0), (4, 4, 3, 1.0),  # c = n: always
    (4, 1, 1, 0.25),  # pass@1 = c / n
    (4, 1, 2, 1 - 3 / 6),  # 1 - C(3,2)/C(4,2)
    (4, 2, 2, 1 - 1 / 6),  # 1 - C(2,2)/C(4,2)
    (4, 2, 3, 1.0),  # n - c < k: every draw of 3 holds a success
    (4, 1, 4, 1.0), (5, 0, 5, 0.0),  # k = n: any success
    (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
])
def test_estimator_matches_hand_computed_values(n, c, k, want):
    assert pass_at_k(n, c, k) == pytest.approx(want, abs=1e-12)


def test_estimator_refuses_k_past_n_and_counts_outside_0_n():
    for n, c, k in ((4, 1, 5), (4, 1, 0), (4, 5, 2), (4, -1, 2)):
        with pytest.raises(ValueError):
            pass_at_k(n, c, k)


def test_figures_are_means_over_tasks_with_their_standard_error():
    def ep(task, solved, error=None):
        return {"task": task, "solved": solved, "reward": float(solved), "error": error}

    episodes = ([ep("a", True)] + [ep("a", False)] * 3 + [ep("b", False)] * 3
                + [ep("b", False, error="Traceback ...")])  # a failed episode is an unsolved attempt
    got = pass_at_figures(episodes, [1, 2, 4])
    # per task: a has c=1 of n=4, b c=0 of 4; pass@1 [0.25, 0], pass@2 [0.5, 0], pass@4 [1, 0]
    for k, a in ((1, 0.25), (2, 0.5), (4, 1.0)):
        mean, sd = a / 2, math.sqrt(((a / 2) ** 2 * 2) / 1)  # sample SD of [a, 0]
        assert got[f"pass_at_{k}"] == pytest.approx(mean) and got[f"pass_at_{k}_se"] == pytest.approx(sd / math.sqrt(2))
    one = pass_at_figures([ep("a", True), ep("a", False)], [1])
    assert one == {"pass_at_1": 0.5, "pass_at_1_se": 0.0}  # one task: SE 0 (as the reward's)


@pytest.mark.parametrize("overrides,says", [
    (["eval.pass_at=[1,8]", "eval.pass_at_n=4"], "eval.pass_at has k=8 but eval.pass_at_n=4 attempts"),
    (["eval.pass_at=[0,2]"], "eval.pass_at takes distinct ks >= 1"),
    (["eval.pass_at=[2,2]"], "eval.pass_at takes distinct ks >= 1"),
    (["eval.pass_at_n=4"], "eval.pass_at_n=4 needs eval.pass_at"),
    (["eval.pass_at=[2]", "eval.pass_at_temperature=null"], "eval.pass_at needs sampled attempts"),
    (["eval.pass_at=[2]", "serve.evaluations=harness"], "eval.pass_at is played by esopt, not by a harness"),
])
def test_config_check_refuses_in_one_line(overrides, says, capsys):
    with pytest.raises(ConfigError, match=says):
        load_config(None, overrides)
    assert main(["eval", "configs/demo.yaml", "model=tiny-llama", *overrides]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err


def test_config_defaults_and_order():
    cfg = load_config(None, [])
    assert cfg.eval.pass_at == [] and cfg.eval.attempts() == 0
    cfg = load_config(None, ["eval.pass_at=[4,1]"])
    assert cfg.eval.pass_at == [1, 4] and cfg.eval.attempts() == 4
    assert load_config(None, ["eval.pass_at=[1,2]", "eval.pass_at_n=6"]).eval.attempts() == 6
    cfg = load_config(None, ["eval.pass_at=[2]", "eval.pass_at_temperature=null", "agent.sampling.temperature=0.7"])
    assert cfg.eval.attempts() == 2


def train(tmp_path, name, *extra):
    return main(["train", "configs/demo.yaml", *TINY_OVERRIDES, "es.generations=1", *COIN, *extra,
                 f"run.out_dir={tmp_path}", f"run.name={name}"])


def test_a_training_run_records_pass_at_k_and_leaves_every_other_figure_as_it_was(esopt_cache, tmp_path, capsys):
    assert train(tmp_path, "plain") == 0
    plain_out = capsys.readouterr().out
    assert train(tmp_path, "passk", "eval.pass_at=[1,2]", "eval.pass_at_n=3") == 0
    out = capsys.readouterr().out
    plain, passk = (json.loads((tmp_path / n / "summary.json").read_text()) for n in ("plain", "passk"))

    # eval.pass_at=[] (the default): no pass@k anywhere, no attempts recorded
    assert "pass_at" not in json.dumps(plain) and "pass@" not in plain_out and "pass_at" not in plain_out
    assert not list((tmp_path / "plain" / "trajectories").glob("attempts_*"))
    metrics = [json.loads(line) for line in (tmp_path / "plain" / "metrics.jsonl").read_text().splitlines()]
    assert not [k for m in metrics for k in m if "pass_at" in k]

    # the attempts never move the greedy figures, the training or its weights
    assert passk["weights_hash"] == plain["weights_hash"]
    for when in ("base", "final"):
        figures = {k: v for k, v in passk[when].items() if "pass_at" not in k and k != "seconds"}
        assert figures == {k: v for k, v in plain[when].items() if k != "seconds"}
    assert passk["improvement"] == plain["improvement"]
    for g in (0, 1):  # the greedy episodes, byte for byte
        a, b = ((tmp_path / n / "trajectories" / f"eval_gen{g:04d}.jsonl").read_text() for n in ("plain", "passk"))
        assert a == b

    # with eval.pass_at: the figures, from the recorded attempts, in summary.json, metrics, console and RESULT lines
    for g, when in ((0, "base"), (1, "final")):
        attempts = [json.loads(line) for line in
                    (tmp_path / "passk" / "trajectories" / f"attempts_gen{g:04d}.jsonl").read_text().splitlines()]
        assert len(attempts) == 3 * 4 and sorted({ep["attempt"] for ep in attempts}) == [0, 1, 2]
        by_task = {}
        for ep in attempts:
            by_task.setdefault(ep["task"], set()).add(ep["turns"][0]["response"])
        assert any(len(r) > 1 for r in by_task.values())  # sampled: a task's attempts differ
        want = pass_at_figures(attempts, [1, 2])
        assert {k: passk[when][k] for k in want} == pytest.approx(want) and passk[when]["pass_at_n"] == 3
        assert 0 < want["pass_at_2"] <= 1 and want["pass_at_2"] >= want["pass_at_1"]
        line = [m for m in map(json.loads, (tmp_path / "passk" / "metrics.jsonl").read_text().splitlines())
                if m.get("kind") == "eval" and m["generation"] == g][0]
        assert line["heldout_pass_at_1"] == pytest.approx(want["pass_at_1"])
        assert line["heldout_pass_at_2_se"] == pytest.approx(want["pass_at_2_se"])
        assert (f"[esopt] held-out pass@k after {g} generations: pass@1 {want['pass_at_1']:.3f} ± "
                f"{want['pass_at_1_se']:.3f}, pass@2 {want['pass_at_2']:.3f}") in out
        assert f"RESULT heldout_pass_at_2_{'base' if g == 0 else 'es'}={want['pass_at_2']:.4f}" in out
    assert out.strip().splitlines()[-1].startswith("RESULT heldout_reward_es=")  # the headline stays last

    # the report's summary has the table
    html = (tmp_path / "passk" / "report" / "report.html").read_text()
    assert "held-out pass@k" in html and "<th>pass@2 ± SE</th>" in html
    assert "pass@" not in (tmp_path / "plain" / "report" / "report.html").read_text()

    # esopt eval of the run: the same greedy figures, and the final pass@k again (same seeds, same attempts)
    assert main(["eval", "--run", str(tmp_path / "passk")]) == 0
    result = [line for line in capsys.readouterr().out.splitlines() if line.startswith("RESULT")]
    assert result == [f"RESULT heldout_reward={passk['final']['reward']:.4f}",
                      f"RESULT heldout_solved={passk['final']['solved']:.4f}",
                      *(f"RESULT heldout_pass_at_{k}{s}={passk['final'][f'pass_at_{k}{s}']:.4f}"
                        for k in (1, 2) for s in ("", "_se"))]


def test_esopt_eval_prints_pass_at_k_reproducibly(esopt_cache, capsys):
    cmd = ["eval", "configs/demo.yaml", "model=tiny-llama", "agent.max_new_tokens=4", "agent.examples=[]",
           "runtime.threads=1", "tasks.validation=0", *COIN, "eval.pass_at=[1,2]"]
    assert main(cmd) == 0
    out = capsys.readouterr().out
    result = [line for line in out.splitlines() if line.startswith("RESULT")]
    names = [line.split("=")[0] for line in result]
    assert names == ["RESULT heldout_reward", "RESULT heldout_solved", "RESULT heldout_pass_at_1",
                     "RESULT heldout_pass_at_1_se", "RESULT heldout_pass_at_2", "RESULT heldout_pass_at_2_se"]
    values = {line.split("=")[0][7:]: float(line.split("=")[1]) for line in result}
    assert 0 <= values["heldout_pass_at_1"] <= values["heldout_pass_at_2"] <= 1
    assert "(2 sampled attempts per episode)" in out
    assert main(cmd) == 0  # the same seeds: the same attempts, the same figures
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith("RESULT")] == result
    assert main(cmd[:-1] + ["eval.pass_at=[1,2]", "run.seed=1"]) == 0  # another run seed: other attempts
    other = [line for line in capsys.readouterr().out.splitlines() if line.startswith("RESULT heldout_pass")]
    assert other != result[2:]


def test_a_resumed_run_keeps_its_base_pass_at_k(esopt_cache, tmp_path, capsys):
    """An extended run's base figures come from its recorded episodes (summary.py load_eval): pass@k from the
    recorded attempts, not played again."""
    assert train(tmp_path, "r", "eval.pass_at=[1,2]") == 0
    before = json.loads((tmp_path / "r" / "summary.json").read_text())
    base_attempts = (tmp_path / "r" / "trajectories" / "attempts_gen0000.jsonl").read_text()
    assert main(["train", "--resume", str(tmp_path / "r"), "es.generations=2"]) == 0
    after = json.loads((tmp_path / "r" / "summary.json").read_text())
    timeless = lambda d: {k: v for k, v in d.items() if not k.endswith("seconds")}  # noqa: E731
    assert after["generations"] == 2 and timeless(after["base"]) == timeless(before["base"])
    assert "pass_at_2_se" in after["base"]
    assert (tmp_path / "r" / "trajectories" / "attempts_gen0000.jsonl").read_text() == base_attempts
    assert "pass_at_2" in after["final"] and (tmp_path / "r" / "trajectories" / "attempts_gen0002.jsonl").exists()
