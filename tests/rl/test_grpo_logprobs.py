"""response_logprobs (output head only where tokens are scored) equals the log-probs
from the full model's logits over every position, on tiny Llama and Qwen2, for the
trained policy (with gradients) and for the frozen reference (no_grad)."""
import copy

import pytest
import torch

from esopt.agent.rollout import AgentContext
from esopt.models.tiny import build_tiny
from esopt.rl.grpo import TurnSample, collate, response_logprobs, set_token_weights

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


def samples_of(tok) -> list[TurnSample]:
    out = []
    for k, (obs, reply) in enumerate(TURNS):
        text = tok.apply_chat_template(CONTEXT.conversation([], obs), add_generation_prompt=True, tokenize=False)
        prompt = tok(text, add_special_tokens=False)["input_ids"]
        out.append(TurnSample(prompt, tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id],
                              advantage=1.0 - k, episode=k))
    set_token_weights(out, "token")
    return out


def full_logits_logprobs(model, batch, temperature):
    """The naive computation: logits at every position, log-softmax, pick the targets."""
    R = batch.targets.shape[1]
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                   position_ids=batch.position_ids).logits
    logp = torch.log_softmax(logits[:, -R - 1:-1].float() / temperature, -1)
    picked = logp.gather(-1, batch.targets[..., None]).squeeze(-1)
    return torch.where(batch.mask, picked, torch.zeros_like(picked))


def grads(model, logp, batch):
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad((logp * batch.weights).sum(), params)])


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_policy_logprobs_and_gradient_equal_full_logits(tiny, temperature):
    model, tok = tiny
    batch = collate(samples_of(tok), tok.pad_token_id)
    assert (~batch.mask).any()  # replies of different lengths: padding in the response window
    model.requires_grad_(True)
    try:
        got = response_logprobs(model, batch, temperature)
        want = full_logits_logprobs(model, batch, temperature)
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
    batch = collate(samples_of(tok), tok.pad_token_id)
    with torch.no_grad():
        got = response_logprobs(reference, batch)
        want = full_logits_logprobs(reference, batch, 1.0)
    assert not got.requires_grad
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5)
