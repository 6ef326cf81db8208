"""A verifiers environment trained through `esopt serve`: verifiers plays each episode against the
generation's members (every model call goes to the server's /v1/chat/completions) and scores it with
its own rubric; this script posts each score as the episode's reward.

It runs in a venv of its own (make install-verifiers makes .venv-verifiers): verifiers 0.4.0 pins
mcp==2.0.0 and openai<3, which cannot sit next to esopt's. It needs nothing from esopt but HTTP.

    .venv-verifiers/bin/python examples/verifiers_harness.py RUN_DIR [--taskset MODULE] [--concurrency 8]

The environment is verifiers' own pieces, offline (no hub, no sandbox, no tunnel):
- taskset: `Arithmetic` below (in-memory problems; reward 1/attempts once the reply's last number is
  the answer), or any verifiers taskset module given by --taskset (its tasks' data need an `answer`,
  a number, for the feedback turns);
- env `Feedback`: multi-turn, the env answers "wrong, try again" until the reply is the answer or
  max_turns is spent;
- harness `InProcessChat`: one chat call per turn, in this process, through the rollout's interception
  endpoint (verifiers' bundled harnesses install uv and their packages from the network, and stream).
Each episode's task is picked by the seed the server gives it, so every member of a generation plays
the same tasks. An episode verifiers could not play is not posted: the finish request counts it as
run.failure_reward. Served with serve.evaluations=harness, the run's evaluations come the same way
(episodes played with `center`, the same seeds at every evaluation), so its summary, RESULT lines and
report are verifiers' scores, not a figure of esopt's own env.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sys
import time
from pathlib import Path

import httpx
import verifiers.v1 as vf
from verifiers.v1.dialects.chat import message_to_wire

__all__ = ["Arithmetic", "InProcessChat", "Feedback"]  # verifiers loads a plugin module's classes by id
PLUGIN = "verifiers_harness"
sys.modules.setdefault(PLUGIN, sys.modules[__name__])  # the id resolves when this file runs as __main__
KEY = "ESOPT_SERVE_TOKEN"  # verifiers reads the API key from a named variable: the server's token, if any
RETRY = "That is wrong, try again. Reply with just the answer."


class Problem(vf.TaskData):
    answer: str


def answered(reply: str, answer: str) -> bool:
    """The reply's last number is the answer ("The answer is 42." counts)."""
    numbers = re.findall(r"-?\d+", reply)
    return bool(numbers) and numbers[-1] == answer


class ArithmeticTask(vf.Task[Problem]):
    @vf.reward
    async def solved(self, task: Problem, trace: vf.Trace) -> float:
        return 1.0 / max(trace.num_turns, 1) if answered(trace.last_reply, task.answer) else 0.0


class Arithmetic(vf.Taskset[ArithmeticTask]):
    def load(self):
        rng = random.Random(0)
        for _ in range(64):
            a, b, op = rng.randint(2, 60), rng.randint(2, 30), rng.choice("+-*")
            answer = {"+": a + b, "-": a - b, "*": a * b}[op]
            yield ArithmeticTask(Problem(prompt=f"What is {a} {op} {b}? Reply with just the number.",
                                         answer=str(answer)), self.config.task)


class InProcessChat(vf.Harness[vf.HarnessConfig]):
    """One chat call per turn, in this process (Harness.launch allows it when every model call goes
    through the rollout's endpoint and secret, so verifiers' trace records the turn)."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True  # a later user turn runs it again on the whole conversation
    EXECUTES_CODE = NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data):
        system, prompt = self.resolve_prompt(data)
        messages = [{"role": "system", "content": system}] if system else []
        messages += [{"role": "user", "content": prompt}] if isinstance(prompt, str) else \
            [message_to_wire(m) for m in prompt or []]
        async with httpx.AsyncClient(timeout=None, trust_env=False) as http:
            r = await http.post(f"{endpoint}/chat/completions", json={"model": ctx.model, "messages": messages},
                                headers={"Authorization": f"Bearer {secret}"})
        if r.is_error:
            return vf.ProgramResult(exit_code=1, stdout="", stderr=r.text)
        return vf.ProgramResult(0, r.json()["choices"][0]["message"]["content"] or "", "")


class Feedback(vf.SingleAgentEnv):
    async def run(self, task, agents):
        async with agents.agent.interaction(task) as chat:
            turn = await chat.turn()
            while not turn.terminated and not answered(turn.last_reply, task.data.answer):
                turn = await chat.turn(RETRY)  # ends at max_turns


async def train(run_dir: str, taskset: str = PLUGIN, concurrency: int = 8, max_turns: int = 3) -> None:
    run = Path(run_dir)
    while not (run / "serve.json").exists():  # written once the server listens
        await asyncio.sleep(0.1)
    where = json.loads((run / "serve.json").read_text())
    os.environ.setdefault(KEY, "none")
    env = vf.load_environment(vf.resolve_env_config({
        "id": PLUGIN, "taskset": {"id": taskset},
        "agent": {"harness": {"id": PLUGIN}, "runtime": {"type": "subprocess"}, "max_turns": max_turns},
        "interception": {"type": "server"},  # a loopback server per rollout, no tunnel
    }))
    tasks = list(env.taskset)
    client = vf.EvalClientConfig(base_url=where["base_url"], api_key_var=KEY)
    limit = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=where["url"], timeout=None,
                                 headers={"Authorization": f"Bearer {os.environ[KEY]}"}) as es, env.serving():

        async def play(e: dict) -> None:
            async with limit:
                task = tasks[e["seed"] % len(tasks)]
                episode = await env.run_episode(task, vf.ModelContext(model=e["member"], client=client))
            trace = episode.traces[0] if episode.traces else None
            if not episode.ok or trace is None or trace.reward is None:
                print(f"[verifiers] {e['id']} failed: {episode.errors or (trace and trace.errors)}", flush=True)
                return
            post = {"episode": e["id"], "reward": trace.reward, "metadata": {"task": task.data.idx,
                                                                             "turns": trace.num_turns}}
            (await es.post("/es/reward", json=post)).raise_for_status()

        while True:
            gen = (await es.post("/es/generation/start")).json()
            if "error" in gen:  # training is over
                return
            t0 = time.time()
            await asyncio.gather(*(play(e) for e in gen["episodes"] if e["id"] not in gen["rewarded"]))
            done = (await es.post("/es/generation/finish", json={"missing": "failure_reward"})).json()
            if gen.get("kind") == "evaluation":  # serve.evaluations=harness: played with center, the run's figures
                print(f"[verifiers] {done['evaluation']} evaluation after {done['generation']} updates: reward "
                      f"{done['reward']:.3f} ± {done['reward_se']:.3f} ({time.time() - t0:.1f}s)", flush=True)
            else:
                print(f"[verifiers] generation {done['generation']}: member rewards {done['rewards']} "
                      f"({time.time() - t0:.1f}s)", flush=True)
            if done.get("finished"):
                return


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir")
    p.add_argument("--taskset", default=PLUGIN, help="a verifiers taskset module (default: Arithmetic here)")
    p.add_argument("--concurrency", type=int, default=8, help="episodes played at once")
    p.add_argument("--max-turns", type=int, default=3)
    a = p.parse_args()
    asyncio.run(train(a.run_dir, a.taskset, a.concurrency, a.max_turns))
