"""Library growth (coevo.grow): screening of malformed proposals, the gate on a toy whose reward
is known, lineage in history.json, resume / export without the proposer, the OpenAI-compatible
proposer against a local fake server, and config errors before anything is written."""
import contextlib
import json

import pytest
import torch

from esopt.agent.rollout import Episode
from esopt.algos.es.coevo.gate import decide
from esopt.algos.es.coevo.proposal import EXAMPLE, pick_sources, proposal_prompt
from esopt.algos.es.coevo.proposer import EndpointProposer, ModelProposer, ProposerError, Reply
from esopt.algos.es.coevo.screen import parse, screen
from esopt.config import ConfigError, ProposerConfig
from esopt.es.perturb import weights_hash
from esopt.train.rundir import RunDir
from esopt.algos.es.trainer import Trainer
from esopt.utils.seeding import derive_seed

LIBRARY = ['coevo.skills=[{name: rules, text: "Each row holds every digit once."}]']
GOOD = "NAME: helpful rule\nSKILL: Always HELP by checking the row, column and box before you answer."
BAD = "NAME: harmful rule\nSKILL: Always HARM the board by writing the first digit that comes to mind."


def task_base(task_id: str) -> float:
    """A per-task reward in [0, 1): episodes differ, so the generation has best and worst ones."""
    return (sum(ord(c) for c in task_id) % 5) / 5


def bonus(ctx) -> float:
    text = "" if ctx is None else ctx.system_prompt
    return ("HELP" in text) - ("HARM" in text)


class ToyRollout:
    """Reward = the task's own part + 1 for a context holding HELP - 1 for one holding HARM (+ a linear
    function of the weights with weights=True); every call is kept (seed, ids, contexts)."""

    def __init__(self, weights: bool = False):
        self.weights, self.calls = weights, []

    def __call__(self, policy, envs, ids, obs, cfg, seed, on_turn=None, rows=None,
                 context=None):
        ctxs = list(context) if isinstance(context, list) else [context] * len(ids)
        self.calls.append({"seed": seed, "ids": list(ids), "contexts": ctxs})
        out = []
        for i, (task, o, c) in enumerate(zip(ids, obs, ctxs)):
            r = task_base(task) + bonus(c)
            if self.weights:
                with torch.no_grad(), (rows.context([i]) if rows else contextlib.nullcontext()):
                    r += float(policy.model(torch.arange(3, 13).view(1, -1)).logits[0, -1, :16].sum())
            out.append(Episode(task=task, observation0=o, turns=[{"response": "r1c1=1", "action": "r1c1=1",
                                                                   "feedback": None, "reward": r}],
                               reward=r, done=True))
        return out


class Scripted:
    """A proposer answering from a script per generation (found from the seed the grower passes)."""

    name = "scripted"

    def __init__(self, run_seed: int, script: dict[int, list[str]]):
        self.by_seed = {derive_seed("grow", run_seed, t): replies for t, replies in script.items()}
        self.prompts = []

    def propose(self, prompts, seed):
        self.prompts += prompts
        replies = self.by_seed[seed]
        return [Reply(replies[k % len(replies)], False) for k in range(len(prompts))]


class Raising:
    name = "raising"

    def propose(self, prompts, seed):
        raise AssertionError("the proposer must not be asked on resume or replay")


def make_trainer(cfg, rollout, proposer=None, run=None):
    tr = Trainer(cfg, run or RunDir.create(cfg), log=lambda *a: None)
    tr.rollout_fn = rollout
    if proposer is not None:
        tr.context.grower.proposer = proposer
    return tr


# ---------------------------------------------------------------------------------------- screening
TASK_TEXT = ("Sudoku 4x4 with 2x2 boxes. Fill every empty cell (.) with a digit 1-4 so that each row, column and "
             "box contains every digit exactly once. Filled cells are final.")
SKILLS = [("rules", "Each row, each column and each 2x2 box holds 1, 2, 3 and 4 exactly once.")]


@pytest.mark.parametrize("text,truncated,reason", [
    ("   \n ", False, "empty"),
    (GOOD, True, "truncated"),
    ("<think>the row has 1 and 2</think>\nNAME: x\nSKILL: Check rows.", False, "reasoning"),
    ("Let me think about this. NAME: x\nSKILL: Check rows.", False, "reasoning"),
    ("Okay, so the agent failed.\nNAME: x\nSKILL: Check rows.", False, "reasoning"),
    ("Check the rows before answering.", False, "format"),
    ("SKILL: Check rows.\nNAME: x", False, "format"),
    ("NAME: x\nSKILL:   ", False, "format"),
    ("NAME: x\nSKILL: " + "Check every row and column twice. " * 12, False, "over length"),
    ("NAME: " + "very " * 15 + "long\nSKILL: Check rows.", False, "over length"),
    ("NAME: copy\nSKILL: Fill every empty cell (.) with a digit 1-4 so that each row, column and box contains every "
     "digit exactly once.", False, "copies the task"),
    ("NAME: example\nSKILL: " + EXAMPLE.split("SKILL: ")[1], False, "copies the prompt's example"),
    ("NAME: dup\nSKILL: Each row, each column and each 2x2 box holds 1, 2, 3, 4 exactly once.", False, "duplicate"),
])
def test_malformed_proposals_are_rejected_with_their_reason(text, truncated, reason):
    cand, why = screen(Reply(text, truncated), [TASK_TEXT], SKILLS, max_chars=200, reference=[EXAMPLE])
    assert cand is None and why.startswith(reason + ":"), why


def test_a_well_formed_new_skill_passes_the_screen():
    reply = Reply("Here is a skill.\n**NAME:** scan for singles\nSKILL: Look for a cell whose row and column\n"
                  "already show three digits.\n\nThis works because...", False)
    cand, why = screen(reply, [TASK_TEXT], SKILLS, max_chars=200, reference=[EXAMPLE])
    assert why == "ok" and cand == ("scan for singles", "Look for a cell whose row and column already show three digits.")
    assert parse("NAME: a\nSKILL: b") == ("a", "b") and parse("SKILL: b") is None


# ---------------------------------------------------------------------------------- prompt, gate rule
def test_sources_are_best_and_worst_and_the_prompt_shows_them():
    traj = [{"generation": 3, "member": k, "task": f"t{k}", "observation0": f"board {k}", "reward": r,
             "turns": [{"response": f"move {k}", "action": f"r1c{k}=1", "feedback": None}]}
            for k, r in enumerate([0.5, 1.0, 0.0, 0.25, 0.75, 0.0])]
    src = pick_sources(traj, 0, best=2, worst=2)
    assert src == [("best", 1), ("best", 4), ("worst", 2), ("worst", 5)]
    assert pick_sources(traj, 1, best=2, worst=2) != src  # another candidate sees other episodes
    prompt = proposal_prompt(traj, src, SKILLS, obs_chars=100, max_chars=300)
    best, worst = prompt.split("BEST EPISODES")[1].split("WORST EPISODES")
    assert "board 1" in best and "r1c4=1" in best and "Reward: 1" in best and "board 2" not in best
    assert "board 2" in worst and "board 5" in worst and "Reward: 0" in worst
    assert "rules: Each row" in prompt and "NAME:" in prompt and "at most 300 characters" in prompt
    mostly_zero = [dict(e, reward=r) for e, r in zip(traj * 2, [0, 0, 0, 0, 0, 1, 0.5, 0, 0, 0, 0, 0])]
    for j in range(4):  # most episodes failed: the best shown are still better than the worst shown
        src = pick_sources(mostly_zero, j, best=2, worst=2)
        assert min(mostly_zero[k]["reward"] for r, k in src if r == "best") > 0
        assert max(mostly_zero[k]["reward"] for r, k in src if r == "worst") == 0
    flat = [dict(e, reward=0.5) for e in traj]
    assert pick_sources(flat, 0, 2, 2) is None  # no contrast, nothing to learn from


def test_the_gate_rule_is_exactly_mean_with_at_least_mean_without_minus_tolerance():
    with_r, without_r = [1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0]  # d = 0, -1, 0, 0: mean -0.25, SE 0.25
    strict = decide(with_r, without_r, 0.0)
    assert strict["diff"] == -0.25 and strict["se"] == 0.25 and not strict["admitted"]
    assert decide(with_r, without_r, 1.0)["admitted"]  # 0.5 >= 0.75 - 1 * 0.25
    assert not decide(with_r, without_r, 0.99)["admitted"]
    assert decide([0.0, 0.0], [0.0, 0.0], 0.0)["admitted"]  # changes nothing: does not hurt
    with pytest.raises(ValueError, match="paired"):
        decide([1.0], [1.0, 0.0], 0.0)


# ----------------------------------------------------------------------------------- in the trainer
GROW = ["coevo.mode=context", *LIBRARY, "coevo.grow.every=1", "coevo.grow.candidates=2", "coevo.grow.minibatch=6",
        "es.population=4", "es.episodes_per_member=4", "eval.at_start=false"]


def test_the_gate_admits_a_helpful_skill_and_rejects_a_harmful_one_with_lineage(tiny_cfg):
    cfg = tiny_cfg("run.name=grow", *GROW, "es.generations=2")
    rollout = ToyRollout()
    proposer = Scripted(cfg.run.seed, {0: [BAD, GOOD]})
    tr = make_trainer(cfg, rollout, proposer)
    tr.train()
    hist = json.loads((tr.run.path / "history.json").read_text())
    growth = hist["generations"][0]["growth"]
    assert "growth" not in hist["generations"][1]  # never after the last generation
    bad, good = growth["candidates"]
    assert bad["verdict"] == "rejected" and bad["reason"].startswith("gate:") and bad["gate"]["diff"] == pytest.approx(-1)
    assert good["verdict"] == "admitted" and good["gate"]["diff"] == pytest.approx(1)
    (admitted,) = growth["admitted"]
    assert admitted["name"] == "helpful rule" and admitted["text"].startswith("Always HELP")
    lin = admitted["lineage"]
    assert lin["generation"] == 0 and lin["proposer"] == "scripted" and lin["candidate"] == 1
    assert lin["gate"]["mean_with"] == pytest.approx(lin["gate"]["mean_without"] + 1) and lin["gate"]["n"] == 6
    traj = tr.run.read_trajectories("gen0000")
    rewards = {(e["member"], e["task"]): e["reward"] for e in traj}
    assert {s["role"] for s in lin["sources"]} == {"best", "worst"}
    for s in lin["sources"]:  # the sources are real episodes of generation 0, best above worst
        assert s["generation"] == 0 and rewards[(s["member"], s["task"])] == s["reward"]
    assert min(s["reward"] for s in lin["sources"] if s["role"] == "best") > \
        max(s["reward"] for s in lin["sources"] if s["role"] == "worst")
    assert admitted["init_logit"] == pytest.approx(-1.0986, abs=1e-4)  # logit(coevo.grow.init_prob=0.25)
    # the grown skill is in the library and the next generation's draws; the gate played training tasks
    assert [s.name for s in tr.context.search.lib.skills] == ["rules", "helpful rule"]
    assert "helpful rule" in hist["generations"][0]["context"]["logits"]["skills"]
    gate_call = next(c for c in rollout.calls if c["seed"] == derive_seed("grow-gate", cfg.run.seed, 0))
    assert len(gate_call["ids"]) == 3 * 6  # without, with each of two candidates
    heldout = set(tr.tasks.heldout()[1])
    assert not heldout & set(gate_call["ids"]) and gate_call["ids"][:6] == gate_call["ids"][6:12]
    train = [m for m in tr.run.metrics() if m["kind"] == "train"]
    assert train[0]["episodes"] == 4 * 4 + 18 and train[0]["grow"]["admitted"] == ["helpful rule"]
    assert train[1]["episodes"] == 16
    assert "BEST EPISODES" in proposer.prompts[0] and "rules: Each row" in proposer.prompts[0]


def test_resume_and_export_rebuild_the_grown_library_without_the_proposer(tiny_cfg, tmp_path):
    from esopt.algos.es.coevo.export import final_context
    from esopt.export import export_run

    extra = ("coevo.mode=both", *LIBRARY, "coevo.grow.every=1", "coevo.grow.minibatch=4", "es.generations=4",
             "es.sigma.start=0.05", "es.sigma.end=0.05", "eval.at_start=false")
    script = {0: [GOOD], 1: ["NAME: second\nSKILL: Write HELP twice in your head before each move."],
              2: ["NAME: third\nSKILL: Prefer cells whose HELP hints are strongest."]}
    full = make_trainer(tiny_cfg("run.name=g-full", *extra), ToyRollout(weights=True),
                        Scripted(0, script))
    full.train()
    want = weights_hash(full.model)
    records = json.loads((full.run.path / "history.json").read_text())["generations"]
    assert [len(r.get("growth", {}).get("admitted", [])) for r in records] == [1, 1, 1, 0]

    first = make_trainer(tiny_cfg("run.name=g-killed", *extra), ToyRollout(weights=True), Scripted(0, script))
    first.generation(0)
    first.generation(1)
    path = first.run.path
    del first
    run = RunDir(path)
    second = make_trainer(run.load_config(), ToyRollout(weights=True), Raising(), run)
    assert second.resume() == 2  # the library comes back from the records, the proposer is not asked
    assert [s.name for s in second.context.search.lib.skills] == ["rules", "helpful rule", "second"]
    assert second.context.search.genome.to_json() == records[1]["context"]["logits"]
    second.context.grower.proposer = Scripted(0, script)  # generation 2 grows again
    second.train(2)
    assert weights_hash(second.model) == want
    assert json.loads((path / "history.json").read_text())["generations"] == records
    assert second.context.search.genome.to_json() == full.context.search.genome.to_json()

    info = export_run(path, tmp_path / "exported")  # from history.json alone
    assert set(info["context"]["probabilities"]["skills"]) == {"rules", "helpful rule", "second", "third"}
    _, mid = final_context(run.history(), second.context.search.base, upto=1)
    assert set(mid["probabilities"]["skills"]) == {"rules", "helpful rule"}


def test_tampered_growth_is_refused_on_resume(tiny_cfg):
    from esopt.es.history import RunFolderError

    cfg = tiny_cfg("run.name=g-tamper", *GROW, "es.generations=3")
    tr = make_trainer(cfg, ToyRollout(), Scripted(cfg.run.seed, {0: [GOOD], 1: [GOOD]}))
    tr.generation(0)
    tr.generation(1)
    path = tr.run.path
    data = json.loads((path / "history.json").read_text())
    data["generations"][0]["growth"]["admitted"][0]["init_logit"] += 0.5
    (path / "history.json").write_text(json.dumps(data))
    run = RunDir(path)
    with pytest.raises(RunFolderError, match="generation 0"):
        make_trainer(run.load_config(), ToyRollout(), Raising(), run).resume()


def test_the_model_being_tuned_proposes_by_default(tiny_cfg):
    """The default proposer: the tiny random model, greedy, through HFPolicy. Its replies are garbage,
    so the screen rejects them, with the reason recorded; nothing joins the library."""
    cfg = tiny_cfg("run.name=g-model", *GROW, "es.generations=2", "coevo.grow.max_new_tokens=12")
    tr = make_trainer(cfg, ToyRollout())
    tr.train()
    growth = tr.history.records[0]["growth"]
    assert growth["proposer"].startswith("model tiny-llama") and len(growth["candidates"]) == 2
    for c in growth["candidates"]:
        assert c["verdict"] == "rejected" and c["reason"].split(":")[0] in ("empty", "truncated", "reasoning", "format")
    assert growth["admitted"] == [] and growth["episodes"] == 0
    assert [s.name for s in tr.context.search.lib.skills] == ["rules"]


def test_model_proposer_tells_truncated_from_finished_replies():
    class Tok:
        eos_token_id = 2

    class Policy:
        tokenizer = Tok()

        def generate(self, convs, options, token_ids=None):
            assert options.sampling.temperature == 0 and all(c[0]["role"] == "user" for c in convs)
            token_ids += [([1], [5, 6, 2]), ([1], [5] * options.max_new_tokens)]
            return ["NAME: a\nSKILL: b", "NAME: a\nSKILL: b b b"]

    replies = ModelProposer(Policy(), 8, "m").propose(["p1", "p2"], seed=0)
    assert [r.truncated for r in replies] == [False, True]


# ----------------------------------------------------------------------- the OpenAI-compatible path
def test_endpoint_proposer_against_a_local_fake_server(fake_chat, monkeypatch):
    monkeypatch.setenv("ESOPT_TEST_PROPOSER_KEY", "sekrit")
    p = EndpointProposer(ProposerConfig(url=fake_chat.url, model="fake-1", api_key_env="ESOPT_TEST_PROPOSER_KEY"), 64)
    fake_chat.replies = [(200, GOOD, "stop"), (200, "NAME: cut\nSKILL: Always", "length")]
    replies = p.propose(["prompt one", "prompt two"], seed=7)
    assert replies == [Reply(GOOD, False), Reply("NAME: cut\nSKILL: Always", True)]
    req = fake_chat.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer sekrit"
    assert req["body"]["model"] == "fake-1" and req["body"]["max_tokens"] == 64 and req["body"]["temperature"] == 0
    assert req["body"]["messages"] == [{"role": "user", "content": "prompt one"}]
    fake_chat.replies = [(500, "", "stop")]
    with pytest.raises(ProposerError, match="HTTP 500"):
        p.propose(["x"], seed=0)


def test_a_run_grows_through_the_endpoint(tiny_cfg, fake_chat):
    cfg = tiny_cfg("run.name=g-endpoint", *GROW, "es.generations=2", "coevo.grow.candidates=1",
                   f"coevo.proposer={{url: '{fake_chat.url}', model: fake-1}}")
    fake_chat.replies = [(200, GOOD, "stop")]
    tr = make_trainer(cfg, ToyRollout())
    tr.train()
    growth = tr.history.records[0]["growth"]
    assert growth["proposer"] == f"endpoint fake-1 at {fake_chat.url}/chat/completions"
    assert [a["name"] for a in growth["admitted"]] == ["helpful rule"] and len(fake_chat.requests) == 1
    assert "BEST EPISODES" in fake_chat.requests[0]["body"]["messages"][0]["content"]


def test_a_failing_endpoint_is_recorded_and_the_run_goes_on(tiny_cfg, fake_chat):
    cfg = tiny_cfg("run.name=g-fail", *GROW, "es.generations=2", f"coevo.proposer={{url: '{fake_chat.url}', model: m}}")
    fake_chat.replies = [(503, "", "stop")]
    tr = make_trainer(cfg, ToyRollout())
    tr.train()
    growth = tr.history.records[0]["growth"]
    assert "HTTP 503" in growth["error"] and growth["admitted"] == [] and len(tr.history.records) == 2


# ------------------------------------------------------------------------------ config and report
@pytest.mark.parametrize("extra,needle", [
    (["coevo.proposer={url: 'ftp://example.org/v1', model: m}"], "coevo.proposer.url='ftp://example.org/v1' is not"),
    (["coevo.proposer={url: 'http://127.0.0.1:9/v1', model: m, api_key_env: ESOPT_TEST_NO_SUCH_KEY}"],
     "coevo.proposer.api_key_env=ESOPT_TEST_NO_SUCH_KEY but that environment variable is not set"),
    (["coevo.mode=weights"], "coevo.grow.every needs coevo.mode context or both"),
])
def test_config_errors_are_one_line_before_anything_is_written(esopt_cache, tmp_path, capsys, monkeypatch, extra,
                                                               needle):
    from conftest import TINY_OVERRIDES
    from esopt.cli import main

    monkeypatch.delenv("ESOPT_TEST_NO_SUCH_KEY", raising=False)
    rc = main(["train", "configs/coevo-demo.yaml", *TINY_OVERRIDES, f"run.out_dir={tmp_path / 'runs'}",
               "coevo.grow.every=1", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_report_lists_lineage_and_every_proposal(tiny_cfg):
    from esopt.report import write_report

    cfg = tiny_cfg("run.name=g-report", *GROW, "es.generations=3")
    tr = make_trainer(cfg, ToyRollout(), Scripted(cfg.run.seed, {0: [BAD, GOOD], 1: ["", "<think>hmm</think>"]}))
    tr.train()
    html = write_report(tr.run.path).path.read_text()
    section = html.split('<section id="context">', 1)[1].split("</section>", 1)[0]
    assert "<td>helpful rule</td><td>skill</td><td>0.250</td>" in section
    assert "grown after generation 1 by scripted" in section and "best episode (member" in section
    assert "Library growth" in section and "rejected: gate: mean reward" in section
    assert "rejected: empty" in section and "rejected: reasoning" in section


def test_growth_starts_from_an_empty_library(tiny_cfg):
    cfg = tiny_cfg("run.name=g-empty", "coevo.mode=context", "coevo.grow.every=1", "coevo.grow.minibatch=4",
                   "es.population=4", "es.episodes_per_member=4", "es.generations=3", "eval.at_start=false")
    tr = make_trainer(cfg, ToyRollout(), Scripted(cfg.run.seed, {0: [GOOD], 1: [GOOD]}))
    tr.train()
    assert [s.name for s in tr.context.search.lib.skills] == ["helpful rule"]
    second = tr.history.records[1]["growth"]["candidates"][0]
    assert second["verdict"] == "rejected" and second["reason"].startswith("duplicate")
    with pytest.raises(ConfigError, match="needs a skill library"):
        tiny_cfg("coevo.mode=context")
