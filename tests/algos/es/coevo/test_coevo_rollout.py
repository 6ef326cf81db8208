import pytest

from esopt.agent.rollout import AgentContext, RolloutSettings, rollout
from esopt.models.decode import DecodeOptions
from esopt.envs import make


class RecordingPolicy:
    def __init__(self):
        self.convs = []

    def generate(self, convs, options, **kw):
        self.convs.append(convs)
        return ["r1c1=1"] * len(convs)


def test_one_context_per_episode():
    envs, obs = [], []
    for s in range(3):
        e = make("sudoku", size=4, blanks=2)
        envs.append(e)
        obs.append(e.reset(seed=s)[0])
    ctxs = [AgentContext(system_prompt=f"prompt {k}", examples=({"role": "user", "content": f"ex {k}"},))
            for k in range(3)]
    policy = RecordingPolicy()
    rollout(policy, envs, ["a", "b", "c"], obs, ctxs, RolloutSettings(DecodeOptions(4)))
    for batch in policy.convs:  # every turn, each episode's conversation starts with its own context
        assert [c[0]["content"] for c in batch] == ["prompt 0", "prompt 1", "prompt 2"][: len(batch)]
        assert [c[1]["content"] for c in batch] == ["ex 0", "ex 1", "ex 2"][: len(batch)]
    with pytest.raises(ValueError, match="one per episode"):
        rollout(policy, envs, ["a", "b", "c"], obs, ctxs[:2], RolloutSettings(DecodeOptions(4)))
    with pytest.raises(ValueError, match="same history"):
        rollout(policy, envs, ["a", "b", "c"], obs, ctxs[:2] + [AgentContext(history="full")], RolloutSettings(DecodeOptions(4)))
