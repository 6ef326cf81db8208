"""One tree of typed configs: YAML files plus dotted overrides, validated.

    cfg = load_config("configs/demo.yaml", ["es.population=8", "env.blanks=3"])

Any unknown key or bad value raises ConfigError with one line naming the key
and what is allowed.
"""
from __future__ import annotations

import difflib
import sys
from pathlib import Path
from typing import Any, Literal, Union

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from .utils.settings import ConfigError, Strict  # noqa: F401 - re-exported: esopt.config.ConfigError


class Schedule(Strict):
    start: float = Field(gt=0)
    end: float = Field(ge=0)
    schedule: Literal["cosine", "linear", "constant"] = "cosine"
    warmup: int = Field(0, ge=0)


class AdamSettings(Strict):
    beta1: float = Field(0.9, ge=0, lt=1)
    beta2: float = Field(0.999, ge=0, lt=1)
    eps: float = Field(1e-8, gt=0)


class ESConfig(Strict):
    generations: int = Field(12, ge=1)
    population: int = Field(8, ge=2)
    antithetic: bool = True
    episodes_per_member: int = Field(32, ge=1)
    sigma: Schedule = Schedule(start=2e-3, end=1e-3, schedule="cosine")
    alpha: Schedule = Schedule(start=2e-3, end=2e-3, schedule="constant")
    # the generations sigma and alpha are scheduled over (0: es.generations); a run extended on resume
    # keeps the plan it started with (set here then), so sigma never rises again unless asked
    schedule_generations: int = Field(0, ge=0)
    shaping: Literal["zscore", "centered_rank", "none"] = "zscore"
    # what ES moves: full, all_linear, a preset for parameter-efficient ES (norms, attention, mlp, last:N),
    # or a list of glob patterns over parameter names (es/perturb.py select_parameters)
    scope: Union[str, list[str]] = "full"
    noise: Literal["gaussian", "table", "counter", "lowrank"] = "gaussian"
    # each tensor's share of sigma and alpha: none (absolute, the same for every tensor) or rms (relative to the
    # tensor's RMS and to the share of tensors in scope, so one sigma fits every es.scope; es/scales.py)
    sigma_scale: Literal["none", "rms"] = "none"

    @field_validator("scope")
    @classmethod
    def _scope(cls, v):
        if isinstance(v, str) and v not in ("full", "all_linear", "norms", "attention", "mlp") and not (
                v.startswith("last:") and v[5:].isdigit() and int(v[5:]) >= 1):
            raise ValueError(f"unknown es.scope {v!r}: full, all_linear, norms, attention, mlp, last:N (the last N "
                             "blocks), or a list of parameter name patterns like ['*.mlp.*']")
        return v
    table_size: int = Field(1 << 25, ge=1 << 22)  # floats in the shared noise table (es.noise=table)
    rank: int = Field(1, ge=1)  # rank of A B^T per linear weight (es.noise=lowrank)
    # es.noise=lowrank: in-scope tensors that are not linear weights (norms, embeddings, biases):
    # frozen, or full-rank Gaussian noise applied per member (members then decode one after another)
    lowrank_others: Literal["frozen", "full"] = "frozen"
    # es.noise=lowrank (frozen others): members decoded together in one batched rollout; 0 = the
    # whole population locally, population / workers on Ray (a run is bit-reproducible across
    # worker counts only with the same value; docs/ray.md)
    members_per_rollout: int = Field(0, ge=0)
    kernels: Literal["auto", "numba", "torch"] = "auto"  # full-rank perturb/restore: auto = numba with es.noise=table
    # how the update enters bfloat16/float16 weights (float32 weights are unaffected): compensated
    # (a bf16 buffer in host memory keeps what rounding left out), stochastic (unbiased, noisy, no
    # memory) or nearest (rounds most of a small update away); docs/method.md
    update_rounding: Literal["compensated", "stochastic", "nearest"] = "compensated"
    # signal diagnostics in each generation's metrics (diag_*, algos/es/diagnostics.py): basic (from the
    # episodes: ties, identical antithetic pairs, distinct replies, reward spread) or full (also the
    # update as made vs as meant: share of weights moved, cosine; 5-20% more update time, full-rank noise)
    diagnostics: Literal["basic", "full"] = "basic"
    # tasks with signal (algos/es/droptied.py, docs/method.md): after the members played the generation's
    # tasks, those on which every member scored alike are dropped and as many fresh tasks from the training
    # stream are played by every member, for up to this many further rounds (each one's episodes counted);
    # the update uses the rewards of the tasks kept. 0: off. Local runs only (not --workers, not esopt serve)
    drop_tied_rounds: int = Field(0, ge=0)
    # what the update does with its noise sum (es/optim.py): sgd (today's step, no state), momentum (one
    # float32 buffer per tuned element) or adam (two); the state is rebuilt by replaying the history
    optimizer: Literal["sgd", "momentum", "adam"] = "sgd"
    momentum: float = Field(0.9, ge=0, lt=1)  # es.optimizer=momentum: v <- momentum * v + g
    adam: AdamSettings = AdamSettings()  # es.optimizer=adam


class GRPOConfig(Strict):
    """Multi-turn GRPO baseline (algo: grpo): groups of episodes per puzzle, clipped policy gradient."""

    steps: int = Field(12, ge=1)  # T, optimizer updates (each on freshly played groups)
    puzzles_per_step: int = Field(32, ge=1)  # distinct training puzzles per step
    group_size: int = Field(8, ge=2)  # episodes per puzzle; advantages are normalised within the group
    temperature: float | None = Field(1.0, gt=0)  # training-episode temperature (none: agent.sampling.temperature)
    lr: float = Field(1e-6, gt=0)
    # the learning rate step by step: constant (grpo.lr), or from grpo.lr down to grpo.lr_end by cosine or linear
    # over grpo.schedule_steps steps (0: grpo.steps), grpo.lr_end after them (es/schedules.py); a decay meant to
    # end within a time budget (run.budget_seconds) names the steps that fit in it
    lr_schedule: Literal["constant", "cosine", "linear"] = "constant"
    lr_end: float = Field(0.0, ge=0)
    schedule_steps: int = Field(0, ge=0)
    weight_decay: float = Field(0.0, ge=0)
    clip_eps: float = Field(0.2, gt=0, lt=1)  # ratio clipped to [1 - eps, 1 + eps]
    kl_coef: float = Field(0.0, ge=0)  # 0: no KL term and no reference model in memory
    scale_std: bool = True  # advantage = (r - group mean) / (group std + eps); false: r - group mean
    loss_norm: Literal["token", "episode"] = "token"
    inner_steps: int = Field(1, ge=1)  # optimizer steps on each batch of episodes (PPO epochs)
    micro_batch: int = Field(8, ge=1)  # turn sequences per forward/backward (gradient accumulation)
    max_grad_norm: float = Field(1.0, ge=0)  # 0: no clipping
    checkpoint_every: int = Field(0, ge=0)  # also checkpoint every N steps (0: only at the end)


def _merged(base: dict, over: dict) -> dict:
    """``over`` on top of ``base``, nested mappings merged key by key (env.web.workers=2 keeps the file's
    other env.options.web keys)."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


class EnvConfig(Strict):
    """env: which environment (env.id) and its own settings (env.options, typed by the env's spec:
    esopt.envs.spec). Keys of an env's options written directly under env (env.size=9, as configs
    before env.options did) are read as env.options keys."""

    # a registered env (sudoku, browsergym, gem, reasoning-gym, dataset, vowels), an esopt.envs entry point,
    # or package.module:attr (an EnvSpec, a TextEnv class or a factory; docs/envs.md)
    id: str = "sudoku"
    # turn limit of an episode: the rollout truncates there (none: the env's default, e.g. sudoku 3 x blanks)
    max_turns: int | None = Field(None, ge=1)
    options: Any = None  # the env's own settings, validated by its options model (docs/envs.md)

    @model_validator(mode="before")
    @classmethod
    def _flat_options(cls, data):
        if isinstance(data, dict):
            data = dict(data)
            loose = {k: data.pop(k) for k in list(data) if k not in cls.model_fields}
            if loose:
                opts = data.get("options")
                if hasattr(opts, "model_dump"):
                    opts = opts.model_dump()
                data["options"] = _merged(opts or {}, loose)  # env.size=9 on the command line wins
        return data

    @model_validator(mode="after")
    def _typed_options(self):
        from .envs.spec import OptionsError, UnknownEnv, resolve

        opts = self.options
        if opts is not None and not isinstance(opts, dict) and hasattr(opts, "model_dump"):
            opts = opts.model_dump()
        elif opts is not None and not isinstance(opts, dict):
            raise ValueError(f"env.options must be a mapping of the env's settings, got {opts!r}")
        try:
            typed = resolve(self.id).validate_options(opts or {})
        except (OptionsError, UnknownEnv) as err:
            raise ValueError(str(err)) from None
        object.__setattr__(self, "options", typed)
        return self


class TasksConfig(Strict):
    fresh_each_generation: bool = True  # new training puzzles every generation
    heldout: int = Field(64, ge=1)  # held-out puzzles (disjoint from training): final figures only
    # held-out tasks to pass over first: the held-out set is tasks heldout_skip .. heldout_skip + heldout - 1 of
    # the held-out stream (a fresh set for final figures once the first ones have been looked at); training and
    # validation stay disjoint from all of them
    heldout_skip: int = Field(0, ge=0)
    heldout_repeats: int = Field(1, ge=1)  # episodes per held-out puzzle; the SE is over per-puzzle means
    # validation puzzles (disjoint from training and held-out) for choosing hyperparameters; 0 = no
    # validation split. With one, evaluations between the first and the last use it alone: held-out
    # is evaluated only before training and at the end.
    validation: int = Field(0, ge=0)


class SamplingConfig(Strict):
    temperature: float = Field(0.0, ge=0)  # 0 = greedy
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = Field(0, ge=0)  # 0 = off


class ToolsConfig(Strict):
    """agent.tools: how the calls of an env's tools are run (agent/tools.py, docs/envs.md "Tools")."""

    # how the tools reach the prompt: template (the chat template's tools slot), system (esopt's block in the
    # system prompt), auto (template when the tokenizer's template has a tools slot, else system)
    format: Literal["auto", "template", "system"] = "auto"
    call_timeout: float = Field(10.0, gt=0)  # seconds one call may run; past it the model reads an error
    max_result_chars: int = Field(2000, ge=1)  # a longer result is cut (the model is told how much)
    max_calls: int = Field(4, ge=1)  # calls run per reply; more are answered with an error


class AgentConfig(Strict):
    system_prompt: str = ""
    examples: list[dict[str, str]] = []  # few-shot chat turns [{role, content}, ...] before the episode
    history: Literal["full", "window"] = "window"
    window: int = Field(0, ge=0)  # turns of past (observation, answer) kept with history=window
    # keep each episode's keys/values across its turns within one rollout, so a turn encodes only its new
    # tokens: auto = on with history=full (the prompt then extends the last one), off = re-encode every prompt
    kv_reuse: Literal["auto", "off"] = "auto"

    @field_validator("kv_reuse", mode="before")
    @classmethod
    def _yaml_off(cls, v):  # YAML reads a bare `off` as false
        return "off" if v is False else v
    max_new_tokens: int = Field(16, ge=1)
    batch_size: int = Field(64, ge=1)  # episodes decoded together
    # KV caches: dynamic (grow as tokens are decoded), static (preallocated, fixed shapes) or compiled (static,
    # and on CUDA a compiled forward whose CUDA graphs replay a decode step in one launch); models/static.py
    decode: Literal["dynamic", "static", "compiled"] = "dynamic"
    sampling: SamplingConfig = SamplingConfig()
    tools: ToolsConfig = ToolsConfig()
    # an env observation longer than this fails its episode before it is tokenized (a megabyte would stall the
    # run for minutes, and fits no model's positions)
    max_observation_chars: int = Field(100_000, ge=1)


class RuntimeConfig(Strict):
    device: str = "cpu"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    threads: int | None = Field(None, ge=1)


class EvalConfig(Strict):
    every: int = Field(0, ge=0)  # held-out evaluation every N generations (0 = only at start and end)
    # also evaluate each time the updates' training seconds pass a multiple of this (evaluations excluded,
    # train/loop.py): one run gives its curve against training time; none: off
    every_seconds: float | None = Field(None, gt=0)
    at_start: bool = True
    # when held-out is played in a run with a validation split: start_end (before training and at the end),
    # end (at the end only), never (tuning runs: validation alone); without a validation split it is
    # what every evaluation plays, so it must stay start_end
    heldout: Literal["start_end", "end", "never"] = "start_end"
    # pass@k on held-out (train/evaluate.py evaluate_attempts): the ks, e.g. [1, 4, 8]; each held-out episode is
    # then also played pass_at_n more times with sampling, besides the greedy evaluation (unchanged); [] = off.
    # Costs pass_at_n x the held-out episodes at every held-out evaluation
    pass_at: list[int] = []
    pass_at_n: int = Field(0, ge=0)  # sampled attempts per held-out episode (0: the largest k); n > k lowers the SE
    pass_at_temperature: float | None = Field(1.0, gt=0)  # the attempts' temperature (none: agent.sampling's)

    @field_validator("pass_at")
    @classmethod
    def _ks(cls, v):
        if any(k < 1 for k in v) or len(set(v)) != len(v):
            raise ValueError(f"eval.pass_at takes distinct ks >= 1 (e.g. [1, 4, 8]), got {v}")
        return sorted(v)

    def attempts(self) -> int:
        """Sampled attempts per held-out episode for pass@k (0 when eval.pass_at is empty)."""
        return (self.pass_at_n or max(self.pass_at)) if self.pass_at else 0


class RunConfig(Strict):
    seed: int = 0
    out_dir: str = "runs"
    name: str | None = None  # run folder name; default: <env>-<timestamp>
    failure_reward: float = 0.0  # reward of an episode whose rollout raised
    # seconds one call of the env's code (reset, step, close; a reward function runs inside step) may take: past
    # it the call is stopped and its episode fails (agent/timebox.py); none: no limit
    call_timeout_s: float | None = Field(300.0, gt=0)
    # stop training once its updates have taken this many seconds (evaluations excluded; train/loop.py):
    # runs compared at equal wall-clock (`esopt bench compare --budget-seconds`); none: every update runs
    budget_seconds: float | None = Field(None, gt=0)


class LogConfig(Strict):
    """Where a run's metrics go besides RUN/metrics.jsonl (train/sinks.py)."""
    tensorboard: bool = True  # scalars under RUN/tb (needs the tensorboard package; skipped without it)
    # Weights & Biases (the `wandb` extra): online streams to the server; offline writes RUN/wandb/ with no
    # network, to upload later with `wandb sync RUN/wandb/offline-run-*`
    wandb: Literal["off", "online", "offline"] = "off"
    wandb_project: str = Field("esopt", min_length=1)
    wandb_entity: str | None = None  # team or user (none: the account's default)

    @field_validator("wandb", mode="before")
    @classmethod
    def _yaml_off(cls, v):  # YAML reads a bare `off` as false
        return "off" if v is False else v


class SkillEntry(Strict):
    name: str
    text: str


class ProposerConfig(Strict):
    """coevo.proposer: an OpenAI-compatible chat endpoint that proposes skills (none: the model being tuned)."""

    url: str  # base URL, e.g. http://127.0.0.1:8000/v1 (POST <url>/chat/completions), or the full .../chat/completions
    model: str
    api_key_env: str | None = None  # name of the environment variable holding the API key (none: send no key)
    timeout_s: float = Field(120.0, gt=0)


class GrowConfig(Strict):
    """coevo.grow: library growth from the generation's best and worst episodes (algos/es/coevo/grow.py)."""

    every: int = Field(0, ge=0)  # propose after every N-th generation (not the last); 0 = off
    candidates: int = Field(1, ge=1)  # proposals per growth step (each shows other episodes)
    best: int = Field(2, ge=1)  # best episodes shown per proposal
    worst: int = Field(2, ge=1)  # worst episodes shown per proposal
    obs_chars: int = Field(600, ge=50)  # first observation of a shown episode, cut to this many characters
    max_new_tokens: int = Field(96, ge=8)  # proposal length limit; a proposal that hits it is truncated (rejected)
    max_chars: int = Field(300, ge=20)  # longest accepted skill text
    minibatch: int = Field(16, ge=1)  # training tasks the gate plays, with and without the candidate
    # admit iff mean(with) >= mean(without) - tolerance_se * SE(paired differences); docs/method.md
    tolerance_se: float = Field(0.0, ge=0)
    init_prob: float = Field(0.25, gt=0, lt=1)  # inclusion probability an admitted skill starts with
    max_skills: int = Field(32, ge=1)  # no growth once the library holds this many skills


class CoevoConfig(Strict):
    """The context genome (algos/es/coevo/): what the agent sees is searched alongside (or instead of) its weights."""

    mode: Literal["weights", "context", "both"] = "weights"  # weights: today's ES, the library unused
    lr: float = Field(1.0, gt=0)  # step size of the score-function update of the logits
    init_prob: float = Field(0.5, gt=0, lt=1)  # initial inclusion probability of every skill
    # initial logits by name: a number for a skill, one number per alternative for a slot
    init_logits: dict[str, Union[float, list[float]]] = {}
    logit_clip: float = Field(5.0, gt=0)  # logits stay in [-clip, clip]: no choice becomes certain
    skills: list[SkillEntry] = []  # named snippets, each included or not (Bernoulli)
    # slots with alternatives, one chosen per member (categorical): system_prompt (a string each),
    # examples (a list of {role, content} messages each), any other name (a text section each)
    slots: dict[str, list[Union[str, list[dict[str, str]]]]] = {}
    library: str | None = None  # a YAML file {skills, slots} or a Markdown file whose ## sections are skills
    grow: GrowConfig = GrowConfig()  # library growth (Trace2Skill-style proposals through a gate)
    proposer: ProposerConfig | None = None  # who proposes skills: none = the model being tuned (greedy)


class ServeConfig(Strict):
    """esopt serve's admission limits (serve/limits.py, docs/serve.md): a request past one is refused with one
    JSON error line before any tokenizing or decoding."""

    max_body_bytes: int = Field(1 << 20, ge=1024)  # a larger request body: 413
    # the most tokens one reply may ask for (max_tokens); 0: 8 x agent.max_new_tokens, at least 256, at most
    # half the model's positions
    max_tokens: int = Field(0, ge=0)
    max_n: int = Field(16, ge=1)  # replies per request
    max_stop_chars: int = Field(256, ge=1)  # characters per stop string
    max_metadata_bytes: int = Field(64 << 10, ge=0)  # a reward's metadata, as JSON
    # a chat request not answered within this many seconds (waiting and decoding): 504, its decoding stopped
    request_timeout_s: float = Field(300.0, gt=0)
    # who plays the evaluations (base, every, final; held-out and validation): esopt, on the config's env, or the
    # harness, with center, posting rewards as for a generation (docs/serve.md)
    evaluations: Literal["esopt", "harness"] = "esopt"


class Config(Strict):
    model: str = "smollm2-135m-instruct"
    algo: Literal["es", "grpo", "gepa"] = "es"  # the training algorithm (esopt.train.algorithm)
    runtime: RuntimeConfig = RuntimeConfig()
    es: ESConfig = ESConfig()
    grpo: GRPOConfig = GRPOConfig()
    env: EnvConfig = Field(default_factory=EnvConfig)  # built when used: it resolves the env (esopt.envs.spec)
    tasks: TasksConfig = TasksConfig()
    agent: AgentConfig = AgentConfig()
    eval: EvalConfig = EvalConfig()
    run: RunConfig = RunConfig()
    log: LogConfig = LogConfig()
    coevo: CoevoConfig = CoevoConfig()
    serve: ServeConfig = ServeConfig()  # esopt serve's admission limits

    @field_validator("model")
    @classmethod
    def _absolute_model_path(cls, value: str) -> str:
        """A model given as a local folder or file is kept as an absolute path, so the run folder's
        config names the same model from any directory (resume, eval, export); aliases and hub ids stay."""
        path = Path(value).expanduser()
        local = value.startswith((".", "~", "/")) or path.is_dir() or path.suffix == ".gguf"
        return str(path.resolve()) if local and path.exists() else value

    @model_validator(mode="after")
    def _consistent(self):
        if self.algo == "grpo" and (self.grpo.temperature or self.agent.sampling.temperature) <= 0:
            raise ValueError("algo=grpo needs sampled training episodes (equal greedy episodes give no signal): "
                             "set grpo.temperature > 0 or agent.sampling.temperature > 0")
        if self.algo == "es" and self.es.antithetic and self.es.population % 2:
            raise ValueError(f"es.population must be even with es.antithetic=true (members come in +/- pairs), "
                             f"got {self.es.population}")
        if self.coevo.mode != "weights":
            if self.algo != "es":
                raise ValueError(f"coevo.mode={self.coevo.mode} needs algo=es (the GRPO baseline trains weights only)")
            if not (self.coevo.skills or self.coevo.slots or self.coevo.library or self.coevo.grow.every):
                raise ValueError(f"coevo.mode={self.coevo.mode} needs a skill library: set coevo.skills, coevo.slots "
                                 "or coevo.library (a YAML or SKILL.md file), or grow one (coevo.grow.every)")
        elif self.coevo.grow.every:
            raise ValueError("coevo.grow.every needs coevo.mode context or both (grown skills join the context "
                             "search); with coevo.mode=weights set coevo.grow.every=0")
        if self.eval.heldout != "start_end" and not self.tasks.validation:
            raise ValueError(f"eval.heldout={self.eval.heldout} needs a validation split (tasks.validation > 0): "
                             "without one every evaluation plays the held-out split")
        if self.eval.pass_at:
            n, k = self.eval.attempts(), max(self.eval.pass_at)
            if k > n:
                raise ValueError(f"eval.pass_at has k={k} but eval.pass_at_n={n} attempts: pass@k needs n >= k "
                                 f"(set eval.pass_at_n >= {k}, or 0 for the largest k)")
            if (self.eval.pass_at_temperature or self.agent.sampling.temperature) <= 0:
                raise ValueError("eval.pass_at needs sampled attempts (greedy ones are all alike): set "
                                 "eval.pass_at_temperature > 0 or agent.sampling.temperature > 0")
            if self.serve.evaluations == "harness":
                raise ValueError("eval.pass_at is played by esopt, not by a harness: with serve.evaluations=harness "
                                 "set eval.pass_at=[]")
        elif self.eval.pass_at_n:
            raise ValueError(f"eval.pass_at_n={self.eval.pass_at_n} needs eval.pass_at (the ks, e.g. [1, 4])")
        if isinstance(self.es.scope, list) and not [p for p in self.es.scope if str(p).strip()]:
            raise ValueError("es.scope is an empty list: give parameter name patterns (e.g. ['*.mlp.*']), "
                             "or full / all_linear")
        return self


def _allowed_keys(model_cls: type[BaseModel], path: tuple) -> list[str]:
    cls = model_cls
    for part in path:
        field = cls.model_fields.get(part)
        ann = getattr(field, "annotation", None)
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return []
        cls = ann
    return list(cls.model_fields)


def _format_error(err: ValidationError) -> str:
    e = err.errors()[0]
    loc = tuple(str(x) for x in e["loc"])
    if not loc or (e["type"] == "value_error" and loc == ("env",)):  # a check across keys: its message names them
        return e["msg"].removeprefix("Value error, ")
    key = ".".join(loc)
    if e["type"] == "extra_forbidden":
        allowed = _allowed_keys(Config, loc[:-1])
        close = difflib.get_close_matches(loc[-1], allowed, n=1, cutoff=0.6)
        hint = f" (did you mean {'.'.join((*loc[:-1], close[0]))}?)" if close else ""
        return f"unknown config key '{key}'{hint}; allowed here: {', '.join(allowed)}"
    got = e.get("input")
    section = _allowed_keys(Config, loc) if e["type"] in ("model_type", "dict_type") else []
    if section and not isinstance(got, dict):  # a section given one value: say which keys it has
        return (f"'{key}' is a section, not a value (its keys: {', '.join(section)}): set one of them, "
                f"e.g. {key}.{section[0]}={got}")
    return f"bad value for '{key}': {got!r} ({e['msg']})"


def set_dotted(tree: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for p in parts[:-1]:
        if not isinstance(node.get(p, {}), dict):
            raise ConfigError(f"cannot set '{dotted}': '{p}' is not a section")
        node = node.setdefault(p, {})
    node[parts[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like key.path=value (e.g. es.population=8)")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"override {text!r} has no key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as err:
        inner = raw.strip()
        if inner.startswith("[") and inner.endswith("]") and "[" not in inner[1:-1]:
            # a flat list of plain words YAML cannot read (es.scope=[*.mlp.*]: * starts a YAML alias)
            return key, [x.strip().strip("'\"") for x in inner[1:-1].split(",") if x.strip()]
        if raw.lstrip().startswith(("[", "{")):  # a list or mapping that does not parse: say so, naming the key
            problem = str(getattr(err, "problem", None) or err).splitlines()[0]
            raise ConfigError(f"override {key}={raw} is not a valid YAML list or mapping ({problem}); "
                              f"e.g. {key}=[a,b] (quote it in the shell)") from None
        value = raw
    return key, value


def build_config(tree: dict) -> Config:
    try:
        return Config.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(_format_error(err)) from None


def read_config_tree(path: str | Path, _chain: tuple[Path, ...] = ()) -> dict:
    """A config file's YAML as a dict; one clear error when it is missing, not YAML or not a mapping.
    `extends: FILE` (a path relative to the file) starts from that config and sets what the file gives over it;
    a file with another env.id than its base's keeps none of the base's env options, system prompt or examples."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    try:
        with path.open(encoding="utf-8") as f:  # YAML's messages then name the file, not "<unicode string>"
            tree = yaml.safe_load(f)
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {path} is not valid YAML: {err}") from None
    if tree is None:  # read as "all defaults" it would start the 135M model's longest run without a word
        raise ConfigError(f"config file {path} is empty: give at least the settings you mean (e.g. model, env.id, "
                          "es.generations), or start from configs/demo.yaml")
    if not isinstance(tree, dict):
        raise ConfigError(f"config file {path} must hold a mapping of settings (key: value) at the top level, "
                          f"not a {type(tree).__name__}")
    if "extends" not in tree:
        return tree
    base = tree.pop("extends")
    if not isinstance(base, str) or not base.strip():
        raise ConfigError(f"config file {path}: extends must name one config file (a path relative to {path.parent}), "
                          f"not {base!r}")
    chain, base_path = (*_chain, path.resolve()), path.parent / base
    if not base_path.is_file():
        raise ConfigError(f"config file {path} extends {base}, which is not a file ({base_path})")
    if base_path.resolve() in chain:
        raise ConfigError(f"config file {path} extends {base}, which is already in its chain "
                          f"({' -> '.join(p.name for p in chain)}): a config cannot extend itself")
    under = read_config_tree(base_path, chain)
    if isinstance(tree.get("env"), dict):  # another env: the base's options and context are not its
        given = {f"agent.{k}" for k in tree["agent"]} if isinstance(tree.get("agent"), dict) else set()
        _switch_env(under, base_path, tree["env"].get("id"), given)
    return _merged(under, tree)  # sections merge key by key, a value or a list replaces


ENV_KEYS = ("id", "max_turns")  # the env section's own keys; every other key is the env's option
AGENT_CONTEXT = ("system_prompt", "examples")  # what the agent is told about its task: written for one env
_NOTICES: set[str] = set()  # said once per process (bench commands load a config many times)


def _switch_env(tree: dict, path, new_id: str | None, given: set[str]) -> str | None:
    """Another env on the command line (or in a file that extends this one) than the file's: the file's
    env options and the agent context (system prompt, examples) were written for the file's env, so they
    are dropped, the context with a notice (returned, said once the config is valid); what the command
    line gives itself stays. No new_id, the same env or a file without an env section: nothing changes."""
    env = tree.get("env")
    if not new_id or not isinstance(env, dict) or new_id == env.get("id", "sudoku"):
        return None
    old_id = env.get("id", "sudoku")
    tree["env"] = {k: v for k, v in env.items() if k in ENV_KEYS}
    agent = tree.get("agent")
    dropped = [k for k in AGENT_CONTEXT if isinstance(agent, dict) and agent.get(k) and f"agent.{k}" not in given]
    for k in dropped:
        del agent[k]
    if not dropped:
        return None
    are, them = ("are", "them") if len(dropped) > 1 else ("is", "it")
    return (f"[esopt] env.id={new_id} replaces {path}'s env ({old_id}): its "
            f"{' and '.join('agent.' + k for k in dropped)}, written for {old_id}, {are} dropped "
            f"(set {them} on the command line to keep {them})")


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    tree: dict = read_config_tree(path) if path is not None else {}
    parsed = [parse_override(item) for item in overrides or []]
    new_id = [v for k, v in parsed if k == "env.id"]
    notice = _switch_env(tree, path, new_id[-1] if new_id else None, {k for k, _ in parsed})
    for key, value in parsed:
        set_dotted(tree, key, value)
    cfg = build_config(tree)  # a config refused stays one line: the notice follows a valid one only
    if notice and notice not in _NOTICES:
        _NOTICES.add(notice)
        print(notice, file=sys.stderr, flush=True)
    return cfg


def dump_config(cfg: Config) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False, allow_unicode=True, width=100)
