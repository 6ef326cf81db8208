"""A harness that trains through `esopt serve`: it plays each generation's members with the openai client
and posts one reward per episode. Run it beside the server: python examples/serve_harness.py RUN_DIR

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
        for member in gen["members"]:
            envs, _, observations = tasks.train(gen["episodes_per_member"], gen["generation"])
            mine = [e for e in gen["episodes"] if e["member"] == member]
            for episode, env, obs in zip(mine, envs, observations):
                if obs is None:  # an env that is reset when its episode starts
                    obs, _ = env.reset()
                past, total, limit = [], 0.0, turn_limit(env, cfg.env.max_turns)
                while True:
                    answer = llm.chat.completions.create(model=member, messages=agent.conversation(past, obs),
                                                         temperature=0, max_tokens=cfg.agent.max_new_tokens)
                    reply = answer.choices[0].message.content
                    following, reward, done, truncated, _ = env.step(reply)
                    total += reward
                    past.append((obs, reply))
                    obs = following
                    if done or truncated or (limit and len(past) >= limit):
                        break
                es.post("/es/reward", json={"episode": episode["id"], "reward": total}).raise_for_status()
        if es.post("/es/generation/finish", json={}).json().get("finished"):
            return


if __name__ == "__main__":
    main(sys.argv[1])
