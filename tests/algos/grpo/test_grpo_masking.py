"""The loss sees exactly the model's own tokens of every turn, never environment text,
and the tokens it scores are exactly the ones the policy generated."""
import pytest
import torch

from esopt.agent.rollout import AgentContext, Episode, RolloutSettings, rollout
from esopt.models import HFPolicy
from esopt.models.decode import DecodeOptions, Sampling
from esopt.models.tiny import build_tiny
from esopt.algos.grpo.grpo import clipped_loss, collate, response_logprobs, set_token_weights, turn_samples

from grpo_toy import CapitalTasks

CONTEXT = AgentContext(system_prompt="You fill Sudoku cells.", history="full")
OBS = ["Board A. Empty: r1c1. Answer with one move.", "Board B: r1c1=2 accepted. Empty: r2c2."]
REPLIES = ["r1c1=2", "r2c2=3 and done"]  # different lengths: the shorter row has prompt tokens in the logits window


@pytest.fixture(scope="module")
def tiny():
    model, tok = build_tiny("llama")
    return model.eval(), tok


def hand_built_episode(tok) -> Episode:
    """Two turns, as rollout(record_ids=True) records them: each turn's chat prompt and its reply + end of turn."""
    ep = Episode(task="t", observation0=OBS[0])
    past = []
    for obs, reply in zip(OBS, REPLIES):
        text = tok.apply_chat_template(CONTEXT.conversation(past, obs), add_generation_prompt=True, tokenize=False)
        ep.turns.append({"response": reply, "prompt_ids": tok(text, add_special_tokens=False)["input_ids"],
                         "token_ids": tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]})
        past.append((obs, reply))
    return ep


def test_mask_covers_exactly_the_replies_of_every_turn(tiny):
    _, tok = tiny
    ep = hand_built_episode(tok)
    samples = turn_samples([ep], [1.0])
    set_token_weights(samples, "token")
    b = collate(samples, tok.pad_token_id)
    for row, reply in enumerate(REPLIES):
        scored = b.targets[row][b.mask[row]].tolist()
        assert tok.decode(scored) == reply + "<|im_end|>"  # the reply and the end-of-turn token, nothing else
        context = tok.decode(b.input_ids[row][b.attention_mask[row].bool()].tolist()[: -len(scored)])
        assert OBS[row] in context and context.endswith("<|im_start|>assistant\n")  # env text: in the input, not scored
    assert int(b.mask.sum()) == sum(len(tok(r)["input_ids"]) + 1 for r in REPLIES)
    assert float(b.weights.sum()) == pytest.approx(1.0)
    # turn 2's prompt holds turn 1's reply (full history): context there, trained in turn 1's sample only
    assert REPLIES[0] in tok.decode(samples[1].prompt_ids)


def manual_objective(model, ep, adv, include_env=False):
    """-(A / N) sum of log p(token) over each turn's reply, one unpadded full forward per turn.
    include_env=True is the bug to catch: environment/prompt tokens scored too."""
    terms, n = [], 0
    for turn in ep.turns:
        ids = torch.tensor(turn["prompt_ids"] + turn["token_ids"])
        logp = torch.log_softmax(model(ids[None]).logits[0, :-1].float(), -1).gather(-1, ids[1:, None])[:, 0]
        kept = logp if include_env else logp[len(turn["prompt_ids"]) - 1:]
        terms.append(kept.sum())
        n += len(kept)
    return -adv * torch.stack(terms).sum() / n


def test_gradient_equals_manual_reply_only_objective(tiny):
    model, tok = tiny
    model.requires_grad_(True)
    params = [p for p in model.parameters()]
    ep = hand_built_episode(tok)
    samples = turn_samples([ep], [1.5])
    set_token_weights(samples, "token")
    b = collate(samples, tok.pad_token_id)
    logp = response_logprobs(model, b)
    loss, _ = clipped_loss(logp, logp.detach(), b, clip_eps=0.2)  # ratio 1: the policy gradient
    got = torch.autograd.grad(loss, params)
    want = torch.autograd.grad(manual_objective(model, ep, 1.5), params)
    wrong = torch.autograd.grad(manual_objective(model, ep, 1.5, include_env=True), params)
    model.requires_grad_(False)
    flat = [torch.cat([t.reshape(-1) for t in gs]).double() for gs in (got, want, wrong)]
    rel = [float((flat[0] - other).norm() / other.norm()) for other in flat[1:]]
    assert rel[0] < 1e-4  # fp32 rounding only (padding, batching, logits_to_keep)
    assert rel[1] > 0.1  # scoring env tokens too: a very different gradient (the test can fail)


def test_logits_only_at_positions_that_predict_reply_tokens(tiny):
    """The output head runs once per scored token, at the position before it, and nowhere
    else: environment/prompt tokens get no logits at all, so no gradient through them."""
    model, tok = tiny
    samples = turn_samples([hand_built_episode(tok)], [1.0])
    set_token_weights(samples, "token")
    b = collate(samples, tok.pad_token_id)
    seen = {}

    def keep(module, inputs, output):
        output.retain_grad()
        seen["logits"] = output

    handle = model.lm_head.register_forward_hook(keep)
    model.requires_grad_(True)
    try:
        logp = response_logprobs(model, b)
        loss, _ = clipped_loss(logp, logp.detach(), b, clip_eps=0.2)
        loss.backward()
    finally:
        handle.remove()
        model.requires_grad_(False)
        model.zero_grad(set_to_none=True)
    logits = seen["logits"]
    assert (~b.mask).any()  # the batch has padding columns in the response window (replies differ in length)
    assert logits.shape == (int(b.mask.sum()), model.config.vocab_size)  # one row per scored token, no more
    R = b.targets.shape[1]
    with torch.no_grad():  # row k = the full model's logits at the position predicting the k-th scored token
        full = model(input_ids=b.input_ids, attention_mask=b.attention_mask, position_ids=b.position_ids).logits
    assert torch.allclose(logits.detach(), full[:, -R - 1:-1][b.mask], atol=1e-5)
    assert torch.all(logits.grad.abs().sum(-1) > 0)  # every scored token is trained
    assert torch.all(logp[~b.mask] == 0)  # off the mask: a constant, nothing to differentiate


def test_rollout_records_the_exact_prompt_and_generated_tokens(tiny):
    model, tok = tiny
    tok.padding_side = "left"
    policy = HFPolicy(model, tok, batch_size=4)
    envs, ids, obs = CapitalTasks().train(3, 0, repeat=2)
    context = AgentContext(system_prompt="Answer with one word.", history="full")
    eps = rollout(policy, envs, ids, obs, context,
                  RolloutSettings(DecodeOptions(5, Sampling(1.0), seed=3), record_ids=True))
    ended = 0
    for ep in eps:
        assert len(ep.turns) == 2
        past, current = [], ep.observation0
        for k, turn in enumerate(ep.turns):
            text = policy.prompt_texts([context.conversation(past, current)])[0]
            assert turn["prompt_ids"] == tok(text, add_special_tokens=False)["input_ids"]
            assert tok.decode(turn["token_ids"], skip_special_tokens=True) == turn["response"]
            gen = turn["token_ids"]
            assert tok.eos_token_id not in gen[:-1]  # cut after the end of turn: the padding is not the reply's
            assert gen[-1] == tok.eos_token_id or len(gen) == 5
            ended += gen[-1] == tok.eos_token_id
            past.append((current, turn["response"]))
            current = f"Task {ep.task}, turn {k + 2}: say a word."
    # replies differ within a group (sampling), and the ids follow every one of them
    assert len({ep.turns[0]["response"] for ep in eps}) > 1
    # without record_ids nothing changes in the episode records
    plain = rollout(policy, *CapitalTasks().train(1, 0), context,
                    RolloutSettings(DecodeOptions(5, Sampling(1.0), seed=3)))
    assert "token_ids" not in plain[0].turns[0]


def test_tool_results_are_context_never_scored(tiny):
    """A tool-using episode (agent/tools.py): the tool's result reaches the next turn's prompt and is
    masked; each turn scores the model's own reply (its tool call, then its answer) and nothing else."""
    import json

    model, tok = tiny
    policy = HFPolicy(model, tok)

    class Lookup:
        max_turns = 3

        def reset(self, seed=None):
            return "What is the capital of Zorbia?", {}

        def capital(self, country: str) -> str:
            """Look a capital up.

            Args:
                country: the country
            """
            return "RESULT-Quxville"

        def tools(self):
            return [self.capital]

        def step(self, action):
            return "", float("Quxville" in action), True, False, {}

        def render_text(self):
            return ""

    replies = ['<tool_call>{"name": "capital", "arguments": {"country": "Zorbia"}}</tool_call>', "It is Quxville"]

    class Scripted:
        tokenizer = tok

        def generate(self, convs, options, token_ids=None, **kw):
            out = [replies[sum(m["role"] == "assistant" for m in c)] for c in convs]
            for text, reply in zip(policy.prompt_texts(convs), out):
                token_ids.append((tok(text, add_special_tokens=False)["input_ids"],
                                  tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]))
            return out

    ep = rollout(Scripted(), [Lookup()], ["t"], [None], CONTEXT, RolloutSettings(DecodeOptions(8), record_ids=True))[0]
    assert ep.reward == 1.0 and ep.turns[0]["tool_calls"][0]["result"] == "RESULT-Quxville"
    samples = turn_samples([ep], [1.0])
    set_token_weights(samples, "token")
    b = collate(samples, tok.pad_token_id)
    for row, reply in enumerate(replies):
        scored = tok.decode(b.targets[row][b.mask[row]].tolist())
        assert scored == reply + "<|im_end|>" and "RESULT" not in scored
    context = tok.decode(samples[1].prompt_ids)
    assert "<tool_response>\nRESULT-Quxville\n</tool_response>" in context  # in the input of turn 2, not scored
    assert json.loads(context.split("<tools>\n")[1].split("\n</tools>")[0])["function"]["name"] == "capital"
