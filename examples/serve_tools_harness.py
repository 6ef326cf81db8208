"""A harness that trains a tool-using agent through `esopt serve`: each episode asks for a sum, the agent may
call an `add` tool (declared to the server as an OpenAI function tool), this harness runs the calls the served
model makes and sends their results back as `tool` messages, and posts one reward per episode. Run it beside
the server (its task is its own: env.id=external with serve.evaluations=harness, or any env esopt has):

    esopt serve configs/demo.yaml env.id=external serve.evaluations=harness run.name=tools --port 0
    python examples/serve_tools_harness.py runs/tools

Reward: 0.5 for a call of add that returns the sum, 0.5 for a final answer whose last number is the sum."""
from __future__ import annotations

import argparse
import json
import random
import re
import time
from pathlib import Path

import httpx
import openai

TOOLS = [{"type": "function", "function": {
    "name": "add", "description": "Add two integers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer", "description": "the first addend"},
                                                     "b": {"type": "integer", "description": "the second addend"}},
                   "required": ["a", "b"]}}}]


def add(a: int, b: int) -> int:
    return a + b


def task(seed: int) -> tuple[str, int]:
    """The episode's question and its answer, picked by the seed the server gives the episode."""
    rng = random.Random(seed)
    a, b = rng.randint(10, 99), rng.randint(10, 99)
    return f"What is {a} + {b}? Call the add tool, then answer with the number.", a + b


def run_call(call) -> tuple[str, int | None]:
    """A tool call of the reply run here: the text sent back as its tool message, and the value (None: failed)."""
    if call.function.name != "add":
        return f"error: there is no tool {call.function.name} (tools: add)", None
    try:
        args = json.loads(call.function.arguments)
        value = add(int(args["a"]), int(args["b"]))
    except (ValueError, KeyError, TypeError) as err:
        return f"error: add needs integer arguments a and b ({type(err).__name__}: {err})", None
    return str(value), value


def play(llm, model: str, seed: int, max_turns: int, max_tokens: int) -> dict:
    """One episode with the served model: its reward and what happened (calls made, tool messages sent)."""
    question, answer = task(seed)
    messages: list = [{"role": "user", "content": question}]
    called_right, calls, final = False, 0, ""
    for _ in range(max_turns):
        reply = llm.chat.completions.create(model=model, messages=messages, tools=TOOLS, temperature=0,
                                            max_tokens=max_tokens).choices[0]
        message = reply.message
        if not message.tool_calls:  # the answer
            final = message.content or ""
            break
        messages.append(message)  # the assistant's calls, as the server returned them
        for call in message.tool_calls:
            text, value = run_call(call)
            calls += 1
            called_right |= value == answer
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
    numbers = re.findall(r"-?\d+", final)
    solved = bool(numbers) and int(numbers[-1]) == answer
    return {"reward": 0.5 * called_right + 0.5 * solved, "solved": solved, "calls": calls}


def main(run_dir: str, max_turns: int = 3, max_tokens: int = 256) -> dict:
    """Play every generation and evaluation until training is over; totals of what was played."""
    run = Path(run_dir)
    while not (run / "serve.json").exists():  # written once the server listens
        time.sleep(0.1)
    where = json.loads((run / "serve.json").read_text())
    es = httpx.Client(base_url=where["url"], timeout=600)
    llm = openai.OpenAI(base_url=where["base_url"], api_key="none")  # a token here if the server has one
    totals = {"episodes": 0, "calls": 0, "rewards": []}
    while True:
        gen = es.post("/es/generation/start").json()
        if "error" in gen:  # training is over
            return totals
        rewards = []
        for episode in gen["episodes"]:  # each names the model it is played with: member-K, or center
            played = play(llm, episode["member"], episode["seed"], max_turns, max_tokens)
            es.post("/es/reward", json={"episode": episode["id"], "reward": played["reward"],
                                        "metadata": {"solved": played["solved"], "calls": played["calls"]}}
                    ).raise_for_status()
            rewards.append(played["reward"])
            totals["episodes"] += 1
            totals["calls"] += played["calls"]
        totals["rewards"] += rewards
        what = f"{gen['split']} evaluation" if gen.get("kind") == "evaluation" else "generation"
        print(f"[tools] {what} {gen['generation']}: mean reward {sum(rewards) / len(rewards):.3f} over "
              f"{len(rewards)} episodes, {totals['calls']} tool calls so far", flush=True)
        if es.post("/es/generation/finish", json={}).json().get("finished"):
            return totals


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args()
    main(args.run_dir, args.max_turns, args.max_tokens)
