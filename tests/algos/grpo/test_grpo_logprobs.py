"""response_logprobs (shared prompt prefix encoded once, output head only where tokens
are scored) equals the log-probs from the full model's logits over every position of
plainly left-padded rows, on tiny Llama and Qwen2, for the trained policy (with
gradients) and for the frozen reference (no_grad)."""
import copy

import pytest
import torch

from esopt.agent.rollout import AgentContext
from esopt.models.tiny import build_tiny
from esopt.algos.grpo.grpo import TurnSample, body_tokens, collate, micro_batches, response_logprobs, set_token_weights

CONTEXT = AgentContext(system_prompt="You fill Sudoku cells. Reply with one move like r1c2=3.", history="full")
TURNS = [  # (observation, reply): prompts and replies of different lengths
    ("Board A. Empty: r1c1.", "r1c1=2"),
    ("Board B: r1c1=2 accepted. Empty: r2c2, r3c3.", "r2c2=3 and then r3c3=1"),
    ("Board C. Empty: r4c4.", "r4c4=4"),
    ("Board A. Empty: r1c1.", "no"),
]


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def tiny(request):
    model, tok = build_tiny(request.param)
    return model.eval(), tok


def samples_of(tok, turns=TURNS) -> list[TurnSample]:
    out = []
    for k, (obs, reply) in enumerate(turns):
        text = tok.apply_chat_template(CONTEXT.conversation([], obs), add_generation_prompt=True, tokenize=False)
        prompt = tok(text, add_special_tokens=False)["input_ids"]
        out.append(TurnSample(prompt, tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id],
                              advantage=1.0 - k, episode=k))
    set_token_weights(out, "token")
    return out


def full_logits_logprobs(model, samples, pad_id, temperature=1.0):
    """The naive computation: plain left padding, logits at every position, log-softmax, pick the targets."""
    batch = collate(samples, pad_id, share_prefix=False)
    assert batch.prefix_len == 0 and batch.attention_mask[:, -1].all()
    R = batch.targets.shape[1]
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                   position_ids=batch.position_ids).logits
    logp = torch.log_softmax(logits[:, -R - 1:-1].float() / temperature, -1)
    picked = logp.gather(-1, batch.targets[..., None]).squeeze(-1)
    return torch.where(batch.mask, picked, torch.zeros_like(picked))


def grads(model, logp, batch):
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad((logp * batch.weights).sum(), params)])


@pytest.mark.parametrize("share", [True, False])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_policy_logprobs_and_gradient_equal_full_logits(tiny, temperature, share):
    model, tok = tiny
    samples = samples_of(tok)
    batch = collate(samples, tok.pad_token_id, share_prefix=share)
    assert (batch.prefix_len > 0) == share  # the chat template and system prompt are common to all rows
    assert (~batch.mask).any()  # replies of different lengths: padding in the response window
    model.requires_grad_(True)
    try:
        got = response_logprobs(model, batch, temperature)
        want = full_logits_logprobs(model, samples, tok.pad_token_id, temperature)
        assert got.shape == want.shape and got.requires_grad
        assert torch.allclose(got, want, atol=1e-5, rtol=1e-5)
        assert torch.all(got[~batch.mask] == 0)
        g_got, g_want = grads(model, got, batch), grads(model, want, batch)
    finally:
        model.requires_grad_(False)
    assert float((g_got - g_want).norm() / g_want.norm()) < 1e-5


def test_reference_logprobs_equal_full_logits(tiny):
    model, tok = tiny
    reference = copy.deepcopy(model).eval().requires_grad_(False)  # as GRPOTrainer keeps it
    samples = samples_of(tok)
    batch = collate(samples, tok.pad_token_id)
    assert batch.prefix_len > 0
    with torch.no_grad():
        got = response_logprobs(reference, batch)
        want = full_logits_logprobs(reference, samples, tok.pad_token_id)
    assert not got.requires_grad
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5)


def test_identical_prompts_share_all_but_their_last_token(tiny):
    """A group's first turns: the same prompt in every row, only the replies differ."""
    model, tok = tiny
    turns = [("Board A. Empty: r1c1.", reply) for reply in ["r1c1=2", "r1c1=3", "I think r1c1=4", "r1"]]
    samples = samples_of(tok, turns)
    batch = collate(samples, tok.pad_token_id)
    assert batch.prefix_len == len(samples[0].prompt_ids) - 1
    with torch.no_grad():
        got = response_logprobs(model, batch)
        want = full_logits_logprobs(model, samples, tok.pad_token_id)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5)


def test_micro_batches_pick_the_cheaper_order_and_keep_the_gradient(tiny):
    """Two groups whose first-turn prompts are identical within the group: sorted by token
    ids, each micro-batch is one group (long shared prefix); sorted by length, the groups
    mix. Either way the gradient accumulated over micro-batches is the full batch's."""
    model, tok = tiny
    boards = {"A": "Board A. Empty: r1c1.", "B": "Board B. Empty: r2c2."}
    turns = [(boards[b], "r1c1=2" + "!" * (4 * k)) for b in "AB" for k in range(4)]  # replies of 7 to 19 tokens
    samples = samples_of(tok, turns)
    by_length = sorted(samples, key=lambda s: len(s.prompt_ids) + len(s.response_ids))
    by_ids = sorted(samples, key=lambda s: (s.prompt_ids, s.response_ids))
    assert {s.episode // 4 for s in by_length[:4]} == {0, 1}  # by length the groups mix
    costs = [sum(body_tokens(collate(o[i:i + 4], tok.pad_token_id)) for i in (0, 4)) for o in (by_length, by_ids)]
    assert costs[1] < costs[0]
    batches = micro_batches(samples, 4, tok.pad_token_id)
    assert [b.prefix_len for b in batches] == [len(samples[0].prompt_ids) - 1] * 2  # one group per micro-batch
    assert sum(body_tokens(b) for b in batches) == costs[1]
    model.requires_grad_(True)
    try:
        got = sum(grads(model, response_logprobs(model, b), b) for b in batches)
        whole = collate(samples, tok.pad_token_id, share_prefix=False)
        want = grads(model, response_logprobs(model, whole), whole)
    finally:
        model.requires_grad_(False)
    assert float((got - want).norm() / want.norm()) < 1e-5
