import json
import string

import pytest
import torch

from esopt.es.perturb import weights_hash
from esopt.algos.grpo.trainer import GRPOTrainer
from esopt.train.rundir import RunDir

from grpo_toy import CapitalTasks

TOY = ["algo=grpo", "grpo.steps=4", "grpo.puzzles_per_step=4", "grpo.group_size=8", "grpo.lr=1e-3",
       "grpo.micro_batch=32", "agent.max_new_tokens=2", "tasks.heldout=8"]


def toy_trainer(cfg, run=None):
    tr = GRPOTrainer(cfg, run or RunDir.create(cfg), log=lambda *a: None)
    tr.tasks = CapitalTasks()
    return tr


def p_capital(tr) -> float:
    """Probability that a reply to a held-out prompt starts with a capital letter (both turns' prompts)."""
    tok = tr.tokenizer
    caps = [tok.convert_tokens_to_ids(c) for c in string.ascii_uppercase]
    ps = []
    for obs in ["Task 5000: say a word.", "Task 5000, turn 2: say a word."]:
        text = tok.apply_chat_template([{"role": "user", "content": obs}], add_generation_prompt=True, tokenize=False)
        with torch.no_grad():
            logits = tr.model(torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])).logits[0, -1]
        ps.append(float(torch.softmax(logits, -1)[caps].sum()))
    return sum(ps) / len(ps)


def test_grpo_learns_the_toy_task(tiny_cfg):
    tr = toy_trainer(tiny_cfg("run.name=toy", *TOY))
    p0 = p_capital(tr)
    rewards = [tr.step(t)["reward_mean"] for t in range(4)]
    p1 = p_capital(tr)
    assert rewards[0] < 0.35 and rewards[-1] > 0.8, rewards
    assert p0 < 0.2 and p1 > 0.6, (p0, p1)


def test_ratio_is_one_at_the_first_inner_step_then_moves(tiny_cfg):
    tr = toy_trainer(tiny_cfg("run.name=ratio", *TOY, "grpo.inner_steps=3", "grpo.micro_batch=5", "grpo.kl_coef=0.05"))
    stats = tr.step(0)
    inner = tr.last_update["inner"]
    assert len(inner) == 3
    assert inner[0]["ratio_max_dev"] == 0.0 and inner[0]["kl"] == 0.0  # policy = player = reference before any update
    assert inner[1]["ratio_max_dev"] > 0 and inner[1]["kl"] > 0
    assert stats["ratio_max_dev"] == inner[-1]["ratio_max_dev"] and stats["episodes"] == 32


def test_flat_groups_leave_the_weights_alone(tiny_cfg):
    tr = toy_trainer(tiny_cfg("run.name=flat", *TOY))

    class NoReward(CapitalTasks):  # every episode scores 0: every group flat, nothing to learn
        def train(self, n, generation, repeat=1):
            envs, ids, obs = super().train(n, generation, repeat)
            for e in envs:
                e.step = (lambda step: lambda action: _zero(step(action)))(e.step)
            return envs, ids, obs

    tr.tasks = NoReward()
    before = weights_hash(tr.model)
    stats = tr.step(0)
    assert stats["flat_groups"] == 4 and stats["reward_max"] == 0.0
    assert weights_hash(tr.model) == before


def _zero(result):
    obs, _, term, trunc, info = result
    return obs, 0.0, term, trunc, info


def test_run_folder_and_resume_equivalence(tiny_cfg):
    full = toy_trainer(tiny_cfg("run.name=full", *TOY, "grpo.steps=3", "grpo.inner_steps=2"))
    summary = full.train()
    want = weights_hash(full.model)
    assert want != full.base_weights_hash
    p = full.run.path
    for f in ("config.yaml", "metrics.jsonl", "summary.json", "trajectories/gen0002.jsonl",
              "trajectories/eval_gen0000.jsonl", "trajectories/eval_gen0003.jsonl", "checkpoint/model.safetensors",
              "checkpoint/optimizer.pt", "checkpoint/state.json"):
        assert (p / f).exists(), f
    assert summary["algo"] == "grpo" and summary["generations"] == 3 and summary["weights_hash"] == want
    assert {"base", "final", "improvement"} <= set(summary) and summary["final"]["n"] == 8
    train = [m for m in full.run.metrics() if m["kind"] == "train"]
    assert len(train) == 3
    for k in ("reward_mean", "reward_max", "reward_min", "reward_std", "loss", "kl", "clip_frac", "grad_norm",
              "time_rollout", "time_update", "episodes"):
        assert k in train[0], k
    traj = full.run.read_trajectories("gen0000")
    assert len(traj) == 32 and traj[0]["group"] == 0 and traj[-1]["group"] == 3
    assert "token_ids" not in traj[0]["turns"][0] and "response" in traj[0]["turns"][0]
    with pytest.raises(FileExistsError):
        RunDir.create(full.cfg)

    cfg = tiny_cfg("run.name=killed", *TOY, "grpo.steps=3", "grpo.inner_steps=2", "grpo.checkpoint_every=2")
    first = toy_trainer(cfg)
    first.evaluate(0)
    for t in range(3):  # the checkpoint after step 2 survives; step 3's work is lost with the process
        first.step(t)
        if t == 1:
            first.save_checkpoint(2)
    run_path = first.run.path
    del first
    run = RunDir(run_path)
    second = toy_trainer(run.load_config(), run)
    assert second.resume() == 2
    summary = second.train(2)
    assert weights_hash(second.model) == want and summary["weights_hash"] == want
    assert "base" in summary  # the base evaluation is read back from the killed run's files
    assert [m["generation"] for m in second.run.metrics() if m["kind"] == "train"] == [0, 1, 2]
    assert json.loads((run_path / "checkpoint" / "state.json").read_text())["step"] == 3


def test_a_failed_rollout_or_update_is_recorded_and_the_run_goes_on(tiny_cfg):
    tr = toy_trainer(tiny_cfg("run.name=fails", *TOY, "grpo.steps=3"))
    play, update = tr.play, tr.update
    hashes = []

    def flaky_play(t, on_turn=None):
        hashes.append(weights_hash(tr.model))
        if t == 1:
            raise RuntimeError("simulated rollout failure")
        return play(t, on_turn)

    def flaky_update(samples):
        if len(hashes) == 3:  # step 2's update
            raise RuntimeError("simulated out of memory")
        return update(samples)

    tr.play, tr.update = flaky_play, flaky_update
    summary = tr.train()
    train = [m for m in tr.run.metrics() if m["kind"] == "train"]
    assert [m["generation"] for m in train] == [0, 1, 2]
    assert "simulated rollout failure" in train[1]["rollout_error"] and train[1]["episodes"] == 0
    assert "simulated out of memory" in train[2]["update_error"] and train[2]["episodes"] == 32
    assert "rollout_error" not in train[0] and "update_error" not in train[0]
    assert hashes[1] != hashes[0]  # step 0 updated
    assert hashes[2] == hashes[1] == weights_hash(tr.model) == summary["weights_hash"]  # steps 1 and 2 did not
    assert tr.run.read_trajectories("gen0001") == [] and len(tr.run.read_trajectories("gen0002")) == 32
    assert all(p.grad is None for p in tr.params)  # the failed update's partial gradients were dropped
    assert (tr.run.path / "report" / "report.html").exists()  # the report copes with the failed step's NaNs


def test_a_decaying_learning_rate_reaches_the_optimizer_step_by_step(tiny_cfg):
    """grpo.lr_schedule: each step's AdamW lr is the schedule's (recorded in the metrics), set every step, so a
    resumed optimizer (whose saved lr is the last step's) follows it too; past grpo.schedule_steps it stays at
    grpo.lr_end."""
    import math

    cfg = tiny_cfg("run.name=decay", *TOY, "grpo.lr_schedule=cosine", "grpo.lr_end=1e-4", "grpo.schedule_steps=3")
    tr = toy_trainer(cfg)
    seen = []
    step = tr.optimizer.step

    def spy(*a, **k):
        seen.append(tr.optimizer.param_groups[0]["lr"])
        return step(*a, **k)

    tr.optimizer.step = spy
    lrs = [tr.step(t)["lr"] for t in range(4)]
    mid = 1e-4 + (1e-3 - 1e-4) * (1 + math.cos(math.pi / 2)) / 2
    assert lrs == pytest.approx([1e-3, mid, 1e-4, 1e-4]) and seen == pytest.approx(lrs)
    linear = toy_trainer(tiny_cfg("run.name=linear", *TOY, "grpo.lr_schedule=linear"))  # over grpo.steps=4
    assert [linear.lr_at(t) for t in range(4)] == pytest.approx([1e-3, 2e-3 / 3, 1e-3 / 3, 0.0])
    flat = toy_trainer(tiny_cfg("run.name=flatlr", *TOY))
    assert {flat.lr_at(t) for t in range(9)} == {1e-3}
