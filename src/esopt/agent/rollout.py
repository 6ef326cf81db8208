"""Run many episodes of one policy together: each turn, every live episode's
conversation is decoded in one batched generation, then stepped in its env.

A failure inside one episode (its env raising, or answering reset/step with
something that is not what the TextEnv protocol says) is recorded with the
traceback and ends that episode with the failure reward; the others go on. An
episode the env does not end is truncated at its turn limit (``max_turns``). Envs that run
elsewhere (browser envs in worker processes) are all started on their reset or
step before any is waited for (``call_envs``), so they work side by side.
"""
from __future__ import annotations

import math
import traceback
from dataclasses import asdict, dataclass, field, replace

from ..models.decode import Caches, DecodeOptions, RowWeights
from ..models.policy import DecodeAborted
from .timebox import CallTimeout, time_limit
from .tools import ToolSettings, chat, read_calls, resolve_format, result_messages, run_calls, tools_of


@dataclass
class Episode:
    task: str  # identifies the task (e.g. the puzzle) for pairing across members
    observation0: str
    turns: list[dict] = field(default_factory=list)
    reward: float = 0.0
    done: bool = False
    solved: bool = False
    error: str | None = None
    truncated: bool = False  # ended by its turn limit (the env's truncated, or the rollout's max_turns)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class AgentContext:
    """What the agent sees besides the episode: the part co-evolution will search."""

    system_prompt: str = ""
    examples: tuple = ()  # few-shot chat messages placed before the episode
    history: str = "window"  # full | window
    window: int = 0

    @classmethod
    def from_config(cls, agent_cfg) -> "AgentContext":
        return cls(agent_cfg.system_prompt, tuple(agent_cfg.examples), agent_cfg.history, agent_cfg.window)

    def conversation(self, past: list[tuple], observation, tools: list[dict] | None = None,
                     fmt: str = "system") -> list[dict]:
        """The chat of one turn: system prompt, examples, the kept past (observation, reply) pairs and this
        observation. An observation is a string (a user message) or a list of ``tool`` messages (the
        results of the last reply's calls). With tools (their schemas), the chat is given them as format
        ``fmt`` says (agent/tools.py chat)."""
        msgs = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        msgs += [dict(m) for m in self.examples]
        kept = past if self.history == "full" else (past[-self.window :] if self.window else [])
        for obs, reply in kept:
            msgs += _observed(obs) + [{"role": "assistant", "content": reply}]
        msgs += _observed(observation)
        return chat(msgs, tools, fmt) if tools else msgs


def _observed(observation) -> list[dict]:
    return [{"role": "user", "content": observation}] if isinstance(observation, str) else list(observation)


@dataclass(frozen=True)
class RolloutSettings:
    """How episodes are played, besides the agent's context: built once from the config
    (train/evaluate.py rollout_settings) and passed whole.

    decode: how each turn's replies are decoded (its seed is the rollout's: turn k decodes with
    seed + 7919 k); failure_reward: an episode that fails ends with it; max_live: episodes under way
    at once (None: all); kv_reuse: auto keeps each episode's keys/values across its turns when history
    is full and the policy offers new_turn_cache() (agent.kv_reuse; models/turncache.py), so a turn
    encodes only its new tokens; off re-encodes every prompt; max_turns: the turn limit, an int, or
    (env.max_turns or None, default): the configured limit, else each env's own ``max_turns``, else the
    default; record_ids: each turn also keeps `prompt_ids` and `token_ids`, the exact prompt and
    generated tokens (for training on them: GRPO); tools: how the calls of an env's tools are run
    (agent/tools.py ToolSettings); call_timeout: seconds one call of the env's reset, step or close may take
    before it is stopped and its episode fails (None: no limit; agent/timebox.py)."""

    decode: DecodeOptions = DecodeOptions()
    failure_reward: float = 0.0
    max_live: int | None = None
    kv_reuse: str = "auto"
    max_turns: int | tuple | None = None
    record_ids: bool = False
    tools: ToolSettings = ToolSettings()
    call_timeout: float | None = None  # seconds one env call (reset, step, close) may take (agent/timebox.py)
    max_observation_chars: int | None = None  # a longer observation fails its episode before it is tokenized

    def seeded(self, seed: int) -> "RolloutSettings":
        """The same settings with the decoding seed `seed`."""
        return replace(self, decode=self.decode.but(seed=seed))


def rollout(policy, envs, tasks: list[str], observations: list[str], context: AgentContext | list[AgentContext],
            settings: RolloutSettings = RolloutSettings(), rows: RowWeights | None = None, on_turn=None,
            abort=None) -> list[Episode]:
    """Play every env to the end, as ``settings`` says. An env comes already reset with its first
    observation, or with None in ``observations``: then it is reset when its episode starts, and at most
    ``settings.max_live`` episodes are under way at once; the next waiting one starts as soon as one
    ends (browser episodes hold a page each while they run).

    context: one AgentContext for every episode, or a list with one per episode (members that
    play different contexts in one batch; they must agree on history and window).
    rows (RowWeights), if given: episode i plays under the weights rows.context([i]) puts in place (low-rank
    members: one member per row); rows.groups (one id per episode, e.g. its member) lets episodes with
    equal ids share one encoding of the common prompt prefix.
    Caches live only in this call: the per-episode keys/values (settings.kv_reuse) and the shared prompt
    prefix (system prompt, examples) encoded once per rollout, not once per turn; they hold keys/values
    of this call's weights only and are dropped on return.
    An episode still running at its turn limit is truncated (recorded as such) whatever the env says.
    Tools: an env with a ``tools()`` method (agent/tools.py) has them in its prompt; a reply that calls
    tools (holds <tool_call> blocks) has its calls run, not stepped, and their results (or errors) are the
    next turn's observation, as tool messages; a reply without calls, or any reply on the episode's last
    allowed turn, is stepped as usual. Each turn records its calls (``tool_calls``: name, arguments,
    result or error, seconds).
    on_turn(turn, done, played), if given, is called after every turn: the turns so far, the
    episodes finished, and the episodes that played this turn.
    abort() -> bool, if given, is asked before every turn and at every decode step: once it is true the
    rollout stops there and raises models.policy.DecodeAborted (an evaluation that a Ctrl-C ends).
    """
    if settings.kv_reuse not in ("auto", "off"):
        raise ValueError(f"agent.kv_reuse must be auto or off, got {settings.kv_reuse!r}")
    context = list(context) if isinstance(context, (list, tuple)) else [context] * len(envs)
    if len(context) != len(envs) or len({(c.history, c.window) for c in context}) > 1:
        raise ValueError(f"rollout needs one context or one per episode ({len(envs)}), all with the same history "
                         f"and window; got {len(context)}")
    turns = None
    if settings.kv_reuse == "auto" and envs and context[0].history == "full" and hasattr(policy, "new_turn_cache"):
        turns = policy.new_turn_cache()
    # the weights do not change within this call: what is encoded under them may be reused until it returns
    prefixes = policy.new_prefix_store() if hasattr(policy, "new_prefix_store") else None
    tokenizer = getattr(policy, "tokenizer", None)
    game = _Game(policy, envs, context, settings, Caches(turns, None, prefixes),
                 (resolve_format(settings.tools.format, tokenizer), tokenizer))
    try:
        return game.play(tasks, observations, rows, on_turn, abort)
    finally:
        if turns is not None:
            turns.disable("rollout ended")  # frees every episode's keys/values


class _Game:
    """One rollout's episodes, turn by turn (rollout's docstring)."""

    def __init__(self, policy, envs, context, settings: RolloutSettings, caches: Caches, calls=("system", None)):
        self.policy, self.envs, self.context, self.settings, self.caches = policy, envs, context, settings, caches
        self.limits = [turn_limit(env, settings.max_turns) for env in envs]
        # how tools reach the prompt (template or system) and the tokenizer whose own form may read calls
        self.fmt, self.tokenizer = calls
        self.tools: list[list] = [[] for _ in envs]  # each episode's env's tools, read when it starts

    def play(self, tasks, observations, rows, on_turn, abort) -> list[Episode]:
        envs, s = self.envs, self.settings
        episodes = [Episode(task=t, observation0=o or "") for t, o in zip(tasks, observations)]
        current = list(observations)
        waiting = [i for i, o in enumerate(observations) if o is None][::-1]  # popped from the end: in order
        past: list[list[tuple[str, str]]] = [[] for _ in envs]
        for i in [i for i, o in enumerate(observations) if o is not None]:  # envs that came already reset
            if not self._read_tools(i, episodes):
                current[i] = None
        turn = 0
        while True:
            live = [i for i, ep in enumerate(episodes) if not ep.done and current[i] is not None]
            starting = []
            while waiting and (s.max_live is None or len(live) + len(starting) < s.max_live):
                starting.append(waiting.pop())
            live += self._start(starting, episodes, current)
            live.sort()
            if not live:
                return episodes
            if abort is not None and abort():
                raise DecodeAborted
            convs = [self._conversation(i, past[i], current[i]) for i in live]
            fitting, convs = self._fitting(live, convs, episodes)
            turns = self.caches.turns
            if turns is not None and len(fitting) < len(live):  # failed past the positions: their keys/values go
                turns.drop([i for i in live if episodes[i].done])
            live = fitting
            if not live:
                continue
            ids: list | None = [] if s.record_ids else None
            caches = Caches(turns, live if turns is not None else None, self.caches.prefixes)
            replies = self.policy.generate(convs, s.decode.but(seed=s.decode.seed + 7919 * turn),
                                           rows=None if rows is None else rows.of(live), caches=caches,
                                           token_ids=ids, abort=abort)
            self._step(live, replies, ids, episodes, current, past)
            if turns is not None:  # finished episodes free their keys/values
                turns.drop([i for i in live if episodes[i].done])
            turn += 1
            if on_turn:
                on_turn(turn, sum(ep.done for ep in episodes), len(live))

    def _fitting(self, live: list[int], convs: list, episodes: list[Episode]) -> tuple[list[int], list]:
        """The live episodes whose prompt and reply fit the model's positions, and their conversations; each
        other one fails with the reason (models/policy.py past_positions), before it is decoded."""
        past = getattr(self.policy, "past_positions", None)
        reasons = past(convs, self.settings.decode.max_new_tokens) if past else [None] * len(live)
        for i, why in zip(live, reasons):
            if why:
                episodes[i].error = why
                episodes[i].reward, episodes[i].done = self.settings.failure_reward, True
        return ([i for i, why in zip(live, reasons) if not why], [c for c, why in zip(convs, reasons) if not why])

    def _start(self, starting: list[int], episodes: list[Episode], current: list) -> list[int]:
        """Reset the envs of episodes that start now; the ones that started (a failed reset ends its episode)."""
        started = []
        for i, result in call_envs(self.envs, starting, "reset", [()] * len(starting),
                                      self.settings.call_timeout).items():
            result = checked(result, "reset", self.settings.max_observation_chars)
            if isinstance(result, EnvFailure):
                episodes[i].error = result.traceback
                episodes[i].reward, episodes[i].done = self.settings.failure_reward, True
                continue
            if not self._read_tools(i, episodes):
                continue
            current[i] = episodes[i].observation0 = result[0]
            self.limits[i] = turn_limit(self.envs[i], self.settings.max_turns)  # an env may set its limit in reset
            started.append(i)
        return started

    def _conversation(self, i: int, past, observation) -> list[dict]:
        ctx = self.context[i]
        if not self.tools[i]:
            return ctx.conversation(past, observation)
        return ctx.conversation(past, observation, [t.schema() for t in self.tools[i]], self.fmt)

    def _read_tools(self, i: int, episodes: list[Episode]) -> bool:
        """Read the tools of episode i's env; False (its episode failed, with the reason) if they cannot be."""
        try:
            self.tools[i] = tools_of(self.envs[i])
        except (Exception, SystemExit) as err:  # a tools() that raises, or a tool that cannot be declared
            episodes[i].error = f"the env's tools: {type(err).__name__}: {err}"
            episodes[i].reward, episodes[i].done = self.settings.failure_reward, True
            return False
        return True

    def _tool_turn(self, i: int, reply: str, episodes: list[Episode]) -> list[dict] | None:
        """The reply's calls run, if it calls this episode's tools and this is not its last allowed turn:
        the tool messages that answer them (None: the reply is stepped)."""
        if not self.tools[i] or self.limits[i] is not None and len(episodes[i].turns) + 1 >= self.limits[i]:
            return None
        calls = read_calls(reply, self.tokenizer, self.fmt)
        if not calls:
            return None
        records = run_calls(self.tools[i], calls, self.settings.tools)
        episodes[i].turns.append({"response": reply, "action": None, "feedback": None, "reward": 0.0,
                                  "tool_calls": records})
        return result_messages(records)

    def _step(self, live: list[int], replies: list[str], ids, episodes: list[Episode], current: list, past) -> None:
        """Each live episode's reply run as tool calls, or stepped in its env; and the turn recorded."""
        called = {i: self._tool_turn(i, reply, episodes) for i, reply in zip(live, replies)}
        to_step = [(i, r) for i, r in zip(live, replies) if called[i] is None]
        stepped = call_envs(self.envs, [i for i, _ in to_step], "step", [(r,) for _, r in to_step],
                            self.settings.call_timeout)
        for k, (i, reply) in enumerate(zip(live, replies)):
            ep = episodes[i]
            if called[i] is not None:  # a tool turn: its results are the next observation
                if ids is not None:
                    ep.turns[-1]["prompt_ids"], ep.turns[-1]["token_ids"] = ids[k]
                past[i].append((current[i], reply))
                current[i] = called[i]
                continue
            result = checked(stepped[i], "step", self.settings.max_observation_chars)
            if isinstance(result, EnvFailure):  # the turn stays in the record: the reply that made it fail
                ep.turns.append({"response": reply, "action": None, "feedback": None, "reward": None, "failed": True})
                ep.error = result.traceback
                ep.reward, ep.done = self.settings.failure_reward, True
                continue
            obs, reward, terminated, truncated, info = result
            ep.turns.append({"response": reply, "action": info.get("action"), "feedback": info.get("feedback"),
                             "reward": reward, **info.get("record", {})})
            if ids is not None:
                ep.turns[-1]["prompt_ids"], ep.turns[-1]["token_ids"] = ids[k]
            ep.reward += float(reward)
            past[i].append((current[i], reply))
            current[i] = obs
            over_limit = self.limits[i] is not None and len(ep.turns) >= self.limits[i] and not terminated
            if terminated or truncated or over_limit:
                ep.done, ep.solved = True, bool(info.get("solved", False))
                ep.truncated = bool(truncated or over_limit) and not terminated
                if over_limit and not truncated:
                    close_quietly(self.envs[i], self.settings.call_timeout)


def turn_limit(env, max_turns) -> int | None:
    """An episode's turn limit: max_turns if an int; for (configured, default): the configured one,
    else the env's own ``max_turns``, else the default."""
    if max_turns is None or isinstance(max_turns, int):
        return max_turns
    configured, default = max_turns
    own = getattr(env, "max_turns", None)
    return configured or (own if isinstance(own, int) and not isinstance(own, bool) and own > 0 else default)


def checked(result, method: str, max_chars: int | None = None):
    """An env's answer to reset/step as the protocol says (obs, info) / (obs, reward, terminated,
    truncated, info), or an EnvFailure saying what came back instead; also one whose observation, still to
    be played, is longer than max_chars (tokenizing a megabyte would stall the run, and no model fits it)."""
    if isinstance(result, EnvFailure):
        return result
    size = 2 if method == "reset" else 5
    ok = isinstance(result, tuple) and len(result) == size and isinstance(result[0], str) \
        and isinstance(result[-1], dict)
    if ok and method == "step":
        if isinstance(result[1], (str, bytes, bool)) or type(result[1]).__name__ == "bool_":
            return EnvFailure(f"the env's step() returned the reward {_short(result[1])} (a "
                              f"{type(result[1]).__name__}); a reward is a finite number")
        try:
            result = (result[0], float(result[1]), bool(result[2]), bool(result[3]), result[4])
        except (TypeError, ValueError):
            ok = False
        else:
            if not math.isfinite(result[1]):  # NaN or infinity: no number to learn from, and not JSON
                return EnvFailure(f"the env's step() returned the reward {result[1]!r}; a reward is a finite number")
    if ok and max_chars is not None and len(result[0]) > max_chars and (method == "reset" or not any(result[2:4])):
        return EnvFailure(f"the env's {method}() returned an observation of {len(result[0]):,} characters; "
                          f"agent.max_observation_chars is {max_chars:,} (raise it if the model's positions hold it)")
    if ok:
        return result
    shape = "(observation: str, info: dict)" if method == "reset" else \
        "(observation: str, reward: float, terminated: bool, truncated: bool, info: dict)"
    return EnvFailure(f"the env's {method}() returned {_short(result)}; a TextEnv's {method} returns {shape}")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def close_quietly(env, limit: float | None = None) -> None:
    """Close an env the rollout truncated (the env did not end its episode itself), within the time limit."""
    try:
        with time_limit(limit, "the env's close()"):
            env.close()
    except (Exception, SystemExit, CallTimeout):
        pass


@dataclass(frozen=True)
class EnvFailure:
    """An env call that raised: its traceback (the episode fails with it)."""

    traceback: str


def call_envs(envs, indices: list[int], method: str, args: list[tuple], limit: float | None = None) -> dict:
    """``envs[i].<method>(*args)`` for each index, as {index: result or EnvFailure}. Envs that offer
    ``start_<method>``/``finish_<method>`` (browser envs in worker processes, envs/browser/workers.py)
    all get started before any is waited for, so they run at the same time; the others run in turn.
    limit: seconds each call (each start, each finish) may take; past it the call is stopped and its
    episode fails (agent/timebox.py)."""
    out: dict = {}
    started = set()
    for i, a in zip(indices, args):
        start = getattr(envs[i], "start_" + method, None)
        if start is not None:
            try:
                with time_limit(limit, f"the env's {method}()"):
                    start(*a)
                started.add(i)
            except (Exception, SystemExit, CallTimeout):  # sys.exit() in an env fails its episode, not the run
                out[i] = EnvFailure(traceback.format_exc())
    for i, a in zip(indices, args):
        if i in out:
            continue
        try:
            with time_limit(limit, f"the env's {method}()"):
                out[i] = getattr(envs[i], "finish_" + method)() if i in started else getattr(envs[i], method)(*a)
        except (Exception, SystemExit, CallTimeout):
            out[i] = EnvFailure(traceback.format_exc())
    return out
