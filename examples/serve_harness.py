"""A harness that trains through `esopt serve`: it plays each generation's members with the openai client
and posts one reward per episode (and, with serve.evaluations=harness, each evaluation's episodes with
center). Run it beside the server: python examples/serve_harness.py RUN_DIR

This one plays the run's own env (esopt's task source gives each episode's task, so a served run equals
the same run trained in-process); a harness of your own keeps only the HTTP calls and plays its agent."""
import json
import sys
import time
from pathlib import Path

import httpx
import openai

from esopt.agent.rollout import AgentContext, turn_limit
from esopt.config import load_config
from esopt.train.tasks import TaskSource


def main(run_dir: str) -> None:
    run = Path(run_dir)
    while not (run / "serve.json").exists():  # written once the server listens
        time.sleep(0.1)
    where = json.loads((run / "serve.json").read_text())
    cfg = load_config(str(run / "config.yaml"))
    es = httpx.Client(base_url=where["url"], timeout=600)
    llm = openai.OpenAI(base_url=where["base_url"], api_key="none")  # a token here if the server has one
    agent, tasks = AgentContext.from_config(cfg.agent), TaskSource(cfg.env, cfg.tasks, cfg.run.seed)
    while True:
        gen = es.post("/es/generation/start").json()
        if "error" in gen:  # training is over
            return
        if gen.get("kind") == "evaluation":  # serve.evaluations=harness: the split's episodes, played with center
            envs, _, observations = getattr(tasks, gen["split"])()
            groups = [("center", gen["episodes"], envs, observations)]
        else:  # a generation: each member's episodes, on the generation's tasks
            groups = []
            for member in gen["members"]:
                envs, _, observations = tasks.train(gen["episodes_per_member"], gen["generation"])
                groups.append((member, [e for e in gen["episodes"] if e["member"] == member], envs, observations))
        for model, mine, envs, observations in groups:
            for episode, env, obs in zip(mine, envs, observations):
                if obs is None:  # an env that is reset when its episode starts
                    obs, _ = env.reset()
                past, total, solved, limit = [], 0.0, False, turn_limit(env, cfg.env.max_turns)
                while True:
                    answer = llm.chat.completions.create(model=model, messages=agent.conversation(past, obs),
                                                         temperature=0, max_tokens=cfg.agent.max_new_tokens)
                    reply = answer.choices[0].message.content
                    following, reward, done, truncated, info = env.step(reply)
                    total += reward
                    past.append((obs, reply))
                    obs = following
                    if done or truncated or (limit and len(past) >= limit):
                        solved = bool(info.get("solved", False))
                        break
                post = {"episode": episode["id"], "reward": total, "metadata": {"solved": solved}}
                es.post("/es/reward", json=post).raise_for_status()
        if es.post("/es/generation/finish", json={}).json().get("finished"):
            return

if __name__ == "__main__":
    main(sys.argv[1])
