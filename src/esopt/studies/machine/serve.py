"""esopt bench serve: a generation played by HTTP clients through esopt serve vs by esopt's own rollout.

Served: one `esopt serve` run of len(clients) generations; generation g is played by clients[g]
concurrent clients (threads, each with its own `openai` client), which split the generation's
episodes between them and play each turn by turn (the config's env, esopt's task source: the
same episodes a local run plays), then post its reward; the timer runs from the first start
request to the last reward. In-process: `esopt train` with the same config and length; its
time to play a generation (rollout, perturb and restore). Per setting: requests/s, completion tokens/s, mean request
latency, episodes/s, and episodes/s over the in-process rollout's median.
RESULT lines: serve_requests_per_s_c<N>, serve_tokens_per_s_c<N>, serve_latency_s_c<N>,
serve_over_inprocess_episodes_per_s_c<N> for each N, inprocess_episodes_per_s, serve_peak_rss_mb and
serve_rss_growth_mb (the peak over the process's memory when the served run began).
Hostile section (--hostile N, default 2; 0 leaves it out): the same generations served again while N
threads attack the server (studies/machine/hostile.py); serve_hostile_over_clean_episodes_per_s_c<N> (the
honest clients' episodes/s under attack over clean, goal >= 0.8), serve_hostile_peak_rss_mb,
serve_hostile_rss_growth_mb and, once a flood of 30 concurrent ~1 MB prompts was sent (an attack of the cycle),
serve_hostile_flood_rss_growth_mb: the most the process's resident memory rose during one flood (the server is
this process; the attackers' own share is small, their body is one shared 1 MB).
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import mean, median

from ...utils.memory import rss_mb

DEFAULT_CLIENTS = (1, 8, 32)


def _episode(llm, es, cfg, agent, env, obs, member: str, episode: str) -> dict:
    from ...agent.rollout import turn_limit

    if obs is None:
        obs, _ = env.reset()
    past, total, latencies, tokens = [], 0.0, [], 0
    limit = turn_limit(env, cfg.env.max_turns)
    while True:
        t0 = time.perf_counter()
        answer = llm.chat.completions.create(model=member, messages=agent.conversation(past, obs),
                                             temperature=cfg.agent.sampling.temperature,
                                             max_tokens=cfg.agent.max_new_tokens)
        latencies.append(time.perf_counter() - t0)
        tokens += answer.usage.completion_tokens
        reply = answer.choices[0].message.content
        following, reward, done, truncated, _ = env.step(reply)
        total += reward
        past.append((obs, reply))
        obs = following
        if done or truncated or (limit and len(past) >= limit):
            break
    es.post("/es/reward", json={"episode": episode, "reward": total}).raise_for_status()
    return {"latencies": latencies, "tokens": tokens}


def _clients(run: Path, cfg, clients, rows: list, before_last_finish=None) -> None:
    """Plays generation g of the served run with clients[g] concurrent clients (module docstring);
    before_last_finish() is called before the last generation is finished (the server then stops)."""
    import httpx
    import openai

    from ...agent.rollout import AgentContext
    from ...train.tasks import TaskSource

    while not (run / "serve.json").exists():
        time.sleep(0.05)
    where = json.loads((run / "serve.json").read_text())
    agent, tasks = AgentContext.from_config(cfg.agent), TaskSource(cfg.env, cfg.tasks, cfg.run.seed)
    with httpx.Client(base_url=where["url"], timeout=600) as es:
        for n in clients:
            llms = [openai.OpenAI(base_url=where["base_url"], api_key="none", timeout=600) for _ in range(n)]
            t0 = time.perf_counter()
            gen = es.post("/es/generation/start").json()
            work = []
            for member in gen["members"]:
                envs, _, obs = tasks.train(gen["episodes_per_member"], gen["generation"])
                mine = [e for e in gen["episodes"] if e["member"] == member]
                work += [(member, e["id"], env, o) for e, env, o in zip(mine, envs, obs)]
            with ThreadPoolExecutor(n) as pool:
                done = list(pool.map(lambda k: _episode(llms[k % n], es, cfg, agent, work[k][2], work[k][3],
                                                        work[k][0], work[k][1]), range(len(work))))
            wall = time.perf_counter() - t0
            if before_last_finish is not None and len(rows) == len(clients) - 1:
                before_last_finish()
            es.post("/es/generation/finish", json={}).raise_for_status()
            lat = [x for d in done for x in d["latencies"]]
            rows.append({"clients": n, "episodes": len(work), "requests": len(lat), "seconds": wall,
                         "completion_tokens": sum(d["tokens"] for d in done), "latency_s_mean": mean(lat)})
            print(f"[bench serve] {n} clients: {len(work)} episodes, {len(lat)} requests in {wall:.1f}s "
                  f"({len(lat) / wall:.2f} requests/s, latency {mean(lat):.3f}s)", flush=True)


def play_s(metrics: dict) -> float:
    """Seconds esopt's own trainer took to play a generation's members: the rollout, and the perturb and
    restore around it (what the server's time includes when it switches members)."""
    return sum(metrics.get(f"time_{k}", 0.0) for k in ("perturb", "rollout", "restore"))


class PeakRSS:
    """The resident memory of this process when the block starts and its largest while it runs (sampled every
    50 ms), in MB."""

    def __enter__(self):
        self.start = self.peak = rss_mb()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self):
        while not self.done.wait(0.05):
            self.peak = max(self.peak, rss_mb())

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join(1)


def _served(config: str, base: list[str], name: str, cfg, clients, hostile: int = 0) -> tuple[list, PeakRSS, dict]:
    """One served run played by the clients (and `hostile` attacking threads, studies/machine/hostile.py):
    its rows, its resident memory (at the start and the peak), and the attackers' answers."""
    from ...serve.command import serve
    from .hostile import Hostile

    rows: list[dict] = []
    failed, attacks = [], {}

    def play():
        attack = None

        def stop_attack():  # while the server still answers: the counts are its answers
            if attack is not None and not attacks:
                attacks.update(attack.stop())
                attacks["flood_rss_growth_mb"] = attack.flood_growth_mb
        try:
            if hostile:
                while not (work / "serve.json").exists():
                    time.sleep(0.05)
                attack = Hostile(json.loads((work / "serve.json").read_text())["url"], threads=hostile,
                                 server_pid=os.getpid()).start()
            _clients(work, cfg, clients, rows, stop_attack)
        except BaseException as err:  # noqa: BLE001 (the server would wait for it forever)
            failed.append(err)
            os.kill(os.getpid(), signal.SIGINT)
        finally:
            stop_attack()

    work = Path([o for o in base if o.startswith("run.out_dir=")][-1].split("=", 1)[1]) / name
    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    with PeakRSS() as peak:
        try:
            serve(config, [*base, f"run.name={name}"], port=0)
        except BaseException:
            if failed:
                raise RuntimeError(f"bench serve: a client failed: {failed[0]}") from None
            raise
        thread.join(30)
    lines = [m for m in map(json.loads, (work / "metrics.jsonl").read_text().splitlines()) if m.get("kind") == "train"]
    for row, m in zip(rows, lines):  # how the server batched them (serve/runner.py)
        row.update({k: m[k] for k in ("served_batches", "served_rows_per_batch", "served_switches", "served_switch_s",
                                      "served_decode_s") if k in m})
    return rows, peak, attacks


def main(config: str, overrides: list[str], out: str, clients=DEFAULT_CLIENTS, hostile: int = 2) -> dict:
    """hostile: attacking threads beside the clients in a second served run (0: no hostile section)."""
    from ...config import load_config
    from ...train.session import train
    from ..common import write_results

    clients = tuple(clients or DEFAULT_CLIENTS)
    work = Path(out).with_suffix("")
    base = [*overrides, f"es.generations={len(clients)}", "eval.at_start=false", "eval.every=0",
            f"run.out_dir={work}"]
    cfg = load_config(config, [*base, "run.name=served"])
    if any((work / name).exists() for name in ("served", "local", "hostile")):
        raise FileExistsError(f"{work} holds runs of an earlier bench serve: remove it first")
    rows, peak, _ = _served(config, base, "served", cfg, clients)
    train(config, [*base, "run.name=local"])
    local = [m for m in map(json.loads, (work / "local" / "metrics.jsonl").read_text().splitlines())
             if m.get("kind") == "train"]
    episodes = rows[0]["episodes"]
    inprocess = episodes / median(play_s(m) for m in local)
    results = {"inprocess_episodes_per_s": inprocess, "serve_peak_rss_mb": peak.peak,
               "serve_rss_growth_mb": peak.peak - peak.start}
    for r in rows:
        n = r["clients"]
        results[f"serve_requests_per_s_c{n}"] = r["requests"] / r["seconds"]
        results[f"serve_tokens_per_s_c{n}"] = r["completion_tokens"] / r["seconds"]
        results[f"serve_latency_s_c{n}"] = r["latency_s_mean"]
        results[f"serve_over_inprocess_episodes_per_s_c{n}"] = r["episodes"] / r["seconds"] / inprocess
    extra = {}
    if hostile:  # the same clients again, with attackers beside them
        print(f"[bench serve] the same generations with {hostile} hostile clients beside them", flush=True)
        under, hostile_peak, attacks = _served(config, base, "hostile", cfg, clients, hostile)
        # the process ran the clean and the in-process runs before: the growth during this run is its own
        results["serve_hostile_peak_rss_mb"] = hostile_peak.peak
        results["serve_hostile_rss_growth_mb"] = hostile_peak.peak - hostile_peak.start
        if "flood" in attacks:  # the most one flood of ~1 MB prompts grew the process, over its RSS as it began
            results["serve_hostile_flood_rss_growth_mb"] = attacks["flood_rss_growth_mb"]
        for clean, r in zip(rows, under):
            results[f"serve_hostile_over_clean_episodes_per_s_c{r['clients']}"] = clean["seconds"] / r["seconds"]
        extra = {"hostile": under, "hostile_threads": hostile, "attacks": attacks}
    write_results(out, "serve", results, {"config": config, "overrides": list(overrides), "clients": list(clients),
                                          "served": rows, **extra,
                                          "inprocess": [{"generation": m["generation"], "play_s": play_s(m),
                                                         "tokens": m["tokens"]} for m in local]})
    return results
