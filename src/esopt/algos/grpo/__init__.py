"""Gradient-based baselines in the ES harness: multi-turn GRPO."""
from .grpo import clipped_loss, collate, group_advantages, response_logprobs, set_token_weights, turn_samples

__all__ = ["group_advantages", "turn_samples", "set_token_weights", "collate", "response_logprobs", "clipped_loss"]
