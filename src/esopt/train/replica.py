"""What plays members: the run's config, a model with its chat policy, perturber and task source,
and the rollout function (replaceable in tests). The ES trainer is one (members played in the
training process); a Ray worker's Replica (train/ray/replica.py) is another. train/members.py
plays units of members on either."""
from __future__ import annotations

from ..es.build import make_perturber
from ..models import HFPolicy
from .evaluate import run_episodes
from .tasks import TaskSource


class ModelReplica:
    def __init__(self, cfg, model, tokenizer, log=print, rollout_fn=None):
        self.cfg, self.model, self.log = cfg, model, log
        self.policy = HFPolicy.for_agent(model, tokenizer, cfg.agent)
        self.perturber = make_perturber(model, cfg.es)
        self.tasks = TaskSource(cfg.env, cfg.tasks, cfg.run.seed)
        self.rollout_fn = rollout_fn or run_episodes
