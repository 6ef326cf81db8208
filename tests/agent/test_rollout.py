from esopt.agent.rollout import AgentContext, RolloutSettings, rollout
from esopt.models.decode import DecodeOptions
from esopt.envs import make


class ScriptedPolicy:
    """Answers from a per-conversation script keyed on the board text."""

    def __init__(self, answer):
        self.answer = answer
        self.batches = []

    def generate(self, convs, options, **kw):
        self.batches.append(len(convs))
        return [self.answer(c) for c in convs]


class ExplodingEnv:
    max_turns = 3

    def step(self, action):
        raise RuntimeError("env crashed")


def test_batched_turns_solve_and_failure_isolated():
    from esopt.envs.sudoku import generate_puzzle

    puzzles = [generate_puzzle(4, 2, s) for s in range(3)]
    envs, obs = [], []
    for p in puzzles:
        e = make("sudoku", puzzle=p, reward="partial")
        envs.append(e)
        obs.append(e.reset()[0])
    envs.append(ExplodingEnv())
    obs.append("whatever")

    def answer(conv):
        """Finds the env showing this observation and plays its first blank correctly."""
        text = conv[-1]["content"]
        for env in envs[:3]:
            if env._obs == text:
                r, c = next((r, c) for r, c in env.puzzle.blank_cells if env.board[r][c] == 0)
                return f"r{r + 1}c{c + 1}={env.puzzle.solution[r][c]}"
        return "r1c1=1"  # the env that crashes

    policy = ScriptedPolicy(answer)
    eps = rollout(policy, envs, ["a", "b", "c", "d"], obs, AgentContext(), RolloutSettings(DecodeOptions(8), failure_reward=-1.0))
    assert policy.batches[0] == 4  # every live episode decoded together
    assert eps[3].error and "env crashed" in eps[3].error and eps[3].reward == -1.0
    for ep in eps[:3]:
        assert ep.done and ep.error is None
        assert len(ep.turns) >= 1 and {"response", "action", "feedback", "reward"} <= set(ep.turns[0])
    assert all(ep.solved and ep.reward == 1.0 and len(ep.turns) == 2 for ep in eps[:3])
    assert policy.batches == [4, 3]  # the crashed episode left the batch; the rest went on


def test_unparseable_answers_consume_turns_until_truncation():
    env = make("sudoku", size=4, blanks=2)
    o, _ = env.reset(seed=1)
    eps = rollout(ScriptedPolicy(lambda c: "hello"), [env], ["x"], [o], AgentContext(), RolloutSettings(DecodeOptions(4)))
    assert len(eps[0].turns) == 6 and not eps[0].solved and eps[0].reward == 0.0
    assert "parse" in eps[0].turns[0]["feedback"]


def test_context_window_and_examples():
    ctx = AgentContext(system_prompt="S", examples=({"role": "user", "content": "ex"}, {"role": "assistant", "content": "r1c1=1"}),
                       history="window", window=1)
    past = [("o1", "a1"), ("o2", "a2")]
    msgs = ctx.conversation(past, "o3")
    assert [m["content"] for m in msgs] == ["S", "ex", "r1c1=1", "o2", "a2", "o3"]
    full = AgentContext(history="full").conversation(past, "o3")
    assert [m["content"] for m in full] == ["o1", "a1", "o2", "a2", "o3"]
    assert [m["content"] for m in AgentContext().conversation(past, "o3")] == ["o3"]


def test_string_and_boolean_rewards_fail_their_episode():
    """docs/envs.md: a reward is a finite number; "1" or True is not taken as 1.0."""

    class Worded:
        max_turns = 1

        def __init__(self, reward):
            self.reward = reward

        def reset(self, seed=None):
            return "q", {}

        def step(self, action):
            return "", self.reward, True, False, {}

    envs = [Worded("1"), Worded(True), Worded(1)]
    eps = rollout(ScriptedPolicy(lambda c: "a"), envs, ["a", "b", "c"], [None] * 3, AgentContext(),
                  RolloutSettings(DecodeOptions(4), failure_reward=-1.0))
    assert "returned the reward '1' (a str); a reward is a finite number" in eps[0].error and eps[0].reward == -1.0
    assert "returned the reward True (a bool)" in eps[1].error
    assert eps[2].error is None and eps[2].reward == 1.0


def test_sys_exit_in_env_or_reward_code_fails_only_its_episode():
    """sys.exit() in an env's step or a dataset reward function is that episode's failure, not the run's end."""
    import sys

    from esopt.envs.dataset.env import DatasetEnv

    class Exiting:
        max_turns = 1

        def reset(self, seed=None):
            return "q", {}

        def step(self, action):
            sys.exit(3)

    def reward(completion, **row):
        sys.exit(4)

    envs = [Exiting(), DatasetEnv("q", {}, reward, "mine:reward"), make("sudoku", size=4, blanks=1)]
    eps = rollout(ScriptedPolicy(lambda c: "r1c1=1"), envs, ["a", "b", "c"], [None] * 3, AgentContext(),
                  RolloutSettings(DecodeOptions(4), failure_reward=-1.0))
    assert "SystemExit: 3" in eps[0].error and eps[0].reward == -1.0
    assert "reward function mine:reward raised SystemExit: 4" in eps[1].error
    assert eps[2].error is None


def test_an_env_call_past_its_time_limit_fails_only_its_episode():
    """run.call_timeout_s: a step that never returns (a user's `except Exception` inside it included) is stopped
    at its limit and fails its episode; the others go on, and the alarm is left as it was."""
    import signal
    import time

    class Stuck:
        max_turns = 2

        def reset(self, seed=None):
            return "q", {}

        def step(self, action):
            while True:
                try:
                    time.sleep(10)
                except Exception:  # cannot swallow the time limit
                    pass

    t0 = time.monotonic()
    envs = [Stuck(), make("sudoku", size=4, blanks=1)]
    eps = rollout(ScriptedPolicy(lambda c: "r1c1=1"), envs, ["a", "b"], [None] * 2, AgentContext(),
                  RolloutSettings(DecodeOptions(4), failure_reward=-1.0, call_timeout=0.3))
    assert time.monotonic() - t0 < 5
    assert "CallTimeout: the env's step() took longer than 0.3 s (run.call_timeout_s)" in eps[0].error
    assert eps[0].reward == -1.0 and eps[1].error is None
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and signal.getsignal(signal.SIGALRM) == signal.SIG_DFL


def test_an_observation_past_the_size_limit_fails_its_episode_before_tokenizing():
    class Huge:
        max_turns = 2

        def __init__(self, size):
            self.size = size

        def reset(self, seed=None):
            return "x" * self.size, {}

        def step(self, action):
            return "y" * 50, 0.0, True, False, {}  # the last observation is not played: not refused

    policy = ScriptedPolicy(lambda c: "a")
    eps = rollout(policy, [Huge(1 << 20), Huge(10)], ["a", "b"], [None] * 2, AgentContext(),
                  RolloutSettings(DecodeOptions(4), max_observation_chars=20))
    assert "returned an observation of 1,048,576 characters; agent.max_observation_chars is 20" in eps[0].error
    assert eps[1].error is None and policy.batches == [1]  # the huge one never reached the model
