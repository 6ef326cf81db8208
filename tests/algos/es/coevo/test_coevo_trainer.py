"""The context search inside the trainer: finding a known-good skill, resume equality, per-member
contexts in real rollouts, export, and no change at all with coevo.mode=weights."""
import contextlib
import json

import pytest
import torch
import yaml

from esopt.agent.rollout import AgentContext, Episode
from esopt.algos.es.coevo.assemble import assemble
from esopt.algos.es.coevo.genome import Draw
from esopt.es.perturb import weights_hash
from esopt.export import export_run
from esopt.train.rundir import RunDir
from esopt.algos.es.trainer import Trainer

LIBRARY = ['coevo.skills=[{name: A, text: alpha}, {name: B, text: bravo}, {name: H, text: harm}]',
           'coevo.slots={strategy: ["", one, two]}']


def context_bonus(ctx: AgentContext) -> float:
    """+1 for skill B, -1 for skill H, +1 for the strategy slot's "one"; skill A is irrelevant
    (0 without a context: the trainer passes none with coevo.mode=weights)."""
    if ctx is None:
        return 0.0
    text = ctx.system_prompt
    return ("## B\nbravo" in text) - ("## H\nharm" in text) + ("## strategy\none" in text)


def per_episode(context, n):
    return list(context) if isinstance(context, list) else [context] * n


def context_rollout(policy, envs, ids, obs, cfg, seed, on_turn=None, rows=None, context=None):
    """A stand-in agent rewarded by its context alone."""
    ctxs = per_episode(context, len(ids))
    return [Episode(task=i, observation0=o, reward=context_bonus(c), done=True) for i, o, c in zip(ids, obs, ctxs)]


def weight_and_context_rollout(policy, envs, ids, obs, cfg, seed, on_turn=None, rows=None,
                               context=None):
    """Reward = a linear function of the weights (of each row's member, side terms included) + the context bonus."""
    ctxs = per_episode(context, len(ids))
    tokens = torch.arange(3, 13).view(1, -1)
    out = []
    for i, (task, o) in enumerate(zip(ids, obs)):
        with torch.no_grad(), (rows.context([i]) if rows else contextlib.nullcontext()):
            r = float(policy.model(tokens).logits[0, -1, :16].sum())
        out.append(Episode(task=task, observation0=o, reward=r + context_bonus(ctxs[i]), done=True))
    return out


def make_trainer(cfg, rollout, run=None):
    tr = Trainer(cfg, run or RunDir.create(cfg), log=lambda *a: None)
    tr.rollout_fn = rollout
    return tr


def test_context_mode_finds_the_skill_and_leaves_weights(tiny_cfg, tmp_path):
    cfg = tiny_cfg("run.name=ctx", "coevo.mode=context", *LIBRARY, "es.population=8", "es.generations=30",
                   "es.episodes_per_member=1", "eval.at_start=false")
    tr = make_trainer(cfg, context_rollout)
    base = weights_hash(tr.model)
    tr.train()
    assert weights_hash(tr.model) == base  # mode=context never touches the weights
    p = tr.context.search.probs()
    assert p["skills"]["B"] > 0.95 and p["skills"]["H"] < 0.05 and p["slots"]["strategy"][1] > 0.9
    hist = json.loads((tr.run.path / "history.json").read_text())
    rec = hist["generations"][-1]
    assert rec["seeds"] == [] and rec["coefficients"] == [] and rec["sigma"] == 0.0
    assert len(rec["context"]["draws"]) == 8 and rec["context"]["units"] == list(range(8))
    assert hist["meta"]["context"]["library_hash"] == tr.context.search.lib.digest
    evals = [m for m in tr.run.metrics() if m["kind"] == "eval"]
    assert evals[-1]["context"]["choice"] == "most_likely" and "B" in evals[-1]["context"]["draw"]["skills"]

    info = export_run(tr.run.path, tmp_path / "exported")
    md = (tmp_path / "exported" / "SKILL.md").read_text()
    assert "## B\nbravo" in md and "## strategy\none" in md and "harm" not in md
    chosen = yaml.safe_load((tmp_path / "exported" / "context.yaml").read_text())
    assert "B" in chosen["draw"]["skills"] and chosen["draw"]["slots"]["strategy"] == 1
    assert info["context"]["draw"] == chosen["draw"] and info["weights_hash"] == base


def test_eval_run_plays_the_run_context(tiny_cfg, capsys):
    from esopt.cli import main

    cfg = tiny_cfg("run.name=ctx-eval", "coevo.mode=context", *LIBRARY, "es.generations=12", "es.episodes_per_member=1",
                   "eval.at_start=false")
    tr = make_trainer(cfg, context_rollout)
    tr.train()
    capsys.readouterr()
    assert main(["eval", "--run", str(tr.run.path)]) == 0
    out = capsys.readouterr().out
    final = [m for m in tr.run.metrics() if m["kind"] == "eval"][-1]
    assert f"skills {final['context']['draw']['skills']}" in out and "'B'" in out
    assert f"RESULT heldout_reward={final['heldout_reward']:.4f}" in out  # the trainer's final evaluation, replayed


@pytest.mark.parametrize("noise", [[], ["es.noise=lowrank", "es.rank=2"]], ids=["fullrank", "lowrank"])
def test_both_mode_resume_equals_uninterrupted(tiny_cfg, noise):
    extra = ("coevo.mode=both", *LIBRARY, "es.sigma.start=0.05", "es.sigma.end=0.05", *noise)
    full = make_trainer(tiny_cfg("run.name=both-full", *extra), weight_and_context_rollout)
    base = weights_hash(full.model)
    full.train()
    want = weights_hash(full.model)
    assert want != base
    records = json.loads((full.run.path / "history.json").read_text())["generations"]
    assert records[0]["context"]["units"] == [0, 0, 1, 1]
    assert records[0]["context"]["logits"] != records[-1]["context"]["logits"]  # the logits moved

    first = make_trainer(tiny_cfg("run.name=both-killed", *extra), weight_and_context_rollout)
    first.generation(0)
    first.generation(1)
    path = first.run.path
    del first  # "killed" between generations: only the files remain
    run = RunDir(path)
    second = make_trainer(run.load_config(), weight_and_context_rollout, run)
    assert second.resume() == 2
    assert second.context.search.genome.to_json() == records[1]["context"]["logits"]
    second.train(2)
    assert weights_hash(second.model) == want
    assert json.loads((path / "history.json").read_text())["generations"] == records
    assert second.context.search.genome.to_json() == full.context.search.genome.to_json()


def test_resume_refuses_a_changed_library_or_tampered_logits(tiny_cfg):
    from esopt.es.history import RunFolderError

    first = make_trainer(tiny_cfg("run.name=tamper", "coevo.mode=both", *LIBRARY), weight_and_context_rollout)
    first.generation(0)
    first.generation(1)
    path = first.run.path
    del first
    run = RunDir(path)
    changed = run.load_config(['coevo.skills=[{name: A, text: alpha!}, {name: B, text: bravo}, {name: H, text: harm}]'])
    with pytest.raises(RunFolderError, match="skill library differs"):
        make_trainer(changed, weight_and_context_rollout, run).resume()
    with pytest.raises(RunFolderError, match="coevo.mode=both"):
        make_trainer(run.load_config(["coevo.mode=weights"]), weight_and_context_rollout, run).resume()
    data = json.loads((path / "history.json").read_text())
    data["generations"][1]["context"]["logits"]["skills"]["B"] += 0.5
    (path / "history.json").write_text(json.dumps(data))
    run = RunDir(path)
    with pytest.raises(RunFolderError, match="generation 1"):
        make_trainer(run.load_config(), weight_and_context_rollout, run).resume()


def play_one_generation(cfg):
    """(trainer, system prompts of each generate() batch, the system prompt each member's recorded
    draw assembles) after generation 0."""
    tr = Trainer(cfg, RunDir.create(cfg), log=lambda *a: None)
    batches = []
    generate = tr.policy.generate

    def spy(convs, *a, **k):
        batches.append({c[0]["content"] for c in convs})
        return generate(convs, *a, **k)

    tr.policy.generate = spy
    tr.generation(0)
    lib = tr.context.search.lib
    want = [assemble(AgentContext(system_prompt="base"), lib, Draw.from_json(d, lib)).system_prompt
            for d in tr.history.records[0]["context"]["draws"]]
    return tr, batches, want


@pytest.mark.parametrize("noise", [[], ["es.noise=lowrank"]], ids=["fullrank", "lowrank"])
def test_members_see_their_recorded_contexts_in_real_rollouts(tiny_cfg, noise):
    """Real tiny-model episodes: every conversation a member's episodes decode starts with the context
    its recorded draw assembles (pairs share one), and different draws reach the policy."""
    cfg = tiny_cfg("run.name=real", "coevo.mode=both", *LIBRARY, "es.generations=1", "es.population=8",
                   "agent.system_prompt=base", *noise)
    tr, batches, want = play_one_generation(cfg)
    assert want[0::2] == want[1::2] and len(set(want)) > 1  # pairs share; draws differ across pairs
    assert set().union(*batches) == set(want)
    traj = tr.run.read_trajectories("gen0000")
    assert {t["member"] for t in traj} == set(range(8))


def test_context_mode_decodes_one_batch_per_distinct_context(tiny_cfg):
    """coevo.mode=context: members that drew the same context share a batch (and its whole prompt
    prefix); no batch mixes two contexts; rewards and trajectories stay in member order."""
    cfg = tiny_cfg("run.name=ctx-groups", "coevo.mode=context", *LIBRARY, "es.generations=1", "es.population=8",
                   "agent.system_prompt=base")
    tr, batches, want = play_one_generation(cfg)
    rec = tr.history.records[0]
    assert len(set(want)) > 1 and all(len(b) == 1 for b in batches)  # never two contexts in one batch
    assert set().union(*batches) == set(want)
    traj = tr.run.read_trajectories("gen0000")
    assert [t["member"] for t in traj] == sorted(t["member"] for t in traj)
    for k in range(8):  # each member's reward is the mean of its own episodes
        mine = [t["reward"] for t in traj if t["member"] == k]
        assert rec["rewards"][k] == pytest.approx(sum(mine) / len(mine))


def test_weights_mode_is_byte_identical_to_plain_es(tiny_cfg):
    """coevo.mode=weights (the default) with a library configured writes exactly plain ES's history."""
    plain = make_trainer(tiny_cfg("run.name=plain", "es.generations=2"), weight_and_context_rollout)
    plain.train()
    with_lib = make_trainer(tiny_cfg("run.name=withlib", "es.generations=2", "coevo.mode=weights", *LIBRARY),
                            weight_and_context_rollout)
    with_lib.train()
    a = (plain.run.path / "history.json").read_bytes()
    assert a == (with_lib.run.path / "history.json").read_bytes()
    assert weights_hash(plain.model) == weights_hash(with_lib.model)
    data = json.loads(a)
    assert "context" not in data["meta"]
    assert set(data["generations"][0]) == {"generation", "sigma", "alpha", "population", "seeds", "signs", "rewards",
                                           "shaped", "coefficients", "nonfinite_rewards", "weights_hash"}
    assert with_lib.context.meta() == {} and with_lib.context.ask(0, []) is None  # the library is not searched
    assert all(r is not None for rec in data["generations"] for r in rec["rewards"])  # members really played
    assert len({r for rec in data["generations"] for r in rec["rewards"]}) > 1


def test_report_shows_the_context_search(tiny_cfg):
    from esopt.report import write_report
    from esopt.report.context import trajectory
    from esopt.report.load import load_run

    cfg = tiny_cfg("run.name=ctx-report", "coevo.mode=context", *LIBRARY, "es.population=8", "es.generations=12",
                   "es.episodes_per_member=1", "eval.at_start=false")
    tr = make_trainer(cfg, context_rollout)
    tr.train()
    points = trajectory(load_run(tr.run.path))
    assert [g for g, _ in points] == list(range(13))
    assert points[0][1]["B"] == pytest.approx(0.5) and points[-1][1]["B"] > points[0][1]["B"] + 0.2
    assert points[-1][1]["H"] < points[0][1]["H"] - 0.2
    assert points[-1][1]["strategy = alternative 1"] > 0.5
    report = write_report(tr.run.path)
    html = report.path.read_text()
    section = html.split('<section id="context">', 1)[1].split("</section>", 1)[0]
    assert "<td>B</td><td>skill</td><td>0.500</td>" in section and "The best member of each generation" in section
    assert any(p.name == "report-context.png" for p in report.pngs)
