"""An LLM tournament against a load generator replaying its prompts, on each LLM server, same run (issue 32).

For each server (llama-cpp-python's, one request at a time, with `--prompt-cache-mb` of saved prompt
states; llama.cpp's llama-server with `--parallel` slots and continuous batching, built by
`make llama-server`) and each concurrency c:

(a) tournament: `spielbus.run.run_tournament`, as `spielbus run` (embedded nats-server, agent
    processes, the referee in this process): an `llm_policy` agent (direct, answer constrained to
    the legal moves, seeded) against a seeded `random` agent on `--game` (tic-tac-toe by default;
    connect_four gives longer matches, so more turns share a growing prefix), `--matches` matches (at
    least c) in both seat orders, c at once, every agent pointed at the server this script started;
(b) load generator: the requests the tournament's LLM recording holds (agents/llm/recording.py:
    the exact requests, in arrival order), sent straight to the same server by c workers taking
    them in that order, through the same openai backend the agents use (same HTTP bodies).

Decisions per second: the tournament's LLM decisions (moves whose usage counts an LLM call or a
response-cache hit) over the span from the first match's start to the last match's end; the load
generator's rate is the same number of decisions over its own span (it sends the same server
requests). The ratio is (a)/(b): the share of what the server gives a bare client that a tournament
gets. Prompt tokens: sent is the servers' own count of each request's prompt (usage); evaluated is
what the server actually ran through the model, read from its log over the phase (`prompt eval
time = ... / N tokens`: llama-cpp-python's per-request perf line, with `--verbose True`;
llama-server's per-task timings), the rest came from its prompt cache. Server s: the server's own
time per request (its `total time` lines), summed over the phase: for llama-cpp-python, which
serves one request at a time, the span minus this is time the server waited for the client. Client
CPU s: CPU seconds of everything but the server over the phase (this process: the referee, or the
load generator's HTTP client; and the agent processes and nats-server the tournament started and
ended), what competed with the server for the cores.

Limits: the setup of a tournament (nats-server, agent processes: several seconds) is outside its
span. llama-cpp-python counts a prompt remainder of one token as generation, not prompt eval (it
always re-runs at least the last prompt token), so its evaluated count is low by up to one token
per request. Both servers run with the same thread count (llama-cpp-python's default: half the
cores) and take turns (concurrency outside, server inside; the idle one only holds memory). Each
phase starts on a freshly started server (its start and warm-up request outside the phase's span
and counts): the load generator sends the tournament's very prompts, which a prompt cache kept
from the tournament (llama-cpp-python's saved states, llama-server's slots) would already hold. On a
loaded machine, compare the ratios and the two servers within one run, not absolute rates across
runs.

    .venv/bin/python benchmarks/llm_throughput.py [--concurrency 1 2 4 8] [--matches 8] [--game tic_tac_toe]
        [--servers llama-cpp-python llama-server] [--parallel 8] [--prompt-cache-mb 256]   # defaults
        [--max-turns N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console

from agents.llm.base import BackendRequest, LLMError
from agents.llm.config import LLMConfig
from agents.llm.openai_backend import OpenAIBackend
from agents.llm.recording import INDEX
from agents.llm.server import SERVER_KINDS, EmbeddedServer, ServerKind, find_llama_server
from referee.config import TournamentConfig
from spielbus.run import RunOptions, run_tournament

EVAL_LINE = re.compile(rb"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")
TOTAL_LINE = re.compile(rb"\btotal time =\s*([\d.]+) ms")
TIMEOUT_S = 600.0


@dataclass
class Phase:
    decisions: int
    requests: int
    seconds: float
    sent: int  # prompt tokens, as the server counted each request's prompt
    evaluated: int  # prompt tokens the server ran through the model
    server_s: float  # the server's own time over the phase's requests, summed
    client_cpu_s: float  # CPU of this process and of the children the phase ended (agents, nats-server)
    errors: int = 0

    @property
    def rate(self) -> float:
        return self.decisions / self.seconds


def _cpu_s() -> float:
    """CPU seconds of this process and of its children that have ended (not the running server)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class LogCounter:
    """Prompt tokens evaluated and the server's time per request (summed), from its log, between
    `mark()` and `count()`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def mark(self) -> None:
        self.offset = self.path.stat().st_size

    def count(self) -> tuple[int, float]:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            text = f.read()
        evaluated = sum(int(m.group(1)) for m in EVAL_LINE.finditer(text))
        return evaluated, sum(float(m.group(1)) for m in TOTAL_LINE.finditer(text)) / 1000


def _config(
    base_url: str, concurrency: int, matches: int, game: str, max_turns: int | None = None
) -> TournamentConfig:
    llm = {"base_url": base_url, "timeout_s": TIMEOUT_S, "retries": 0}
    return TournamentConfig.model_validate(
        {
            "name": "llm_throughput",
            **({"max_turns": max_turns} if max_turns else {}),
            "games_per_pairing": max(1, matches // 2),
            "concurrency": concurrency,
            "deadline_ms": int(TIMEOUT_S * 1000),
            "seed": 1,
            "allow_fallbacks": True,
            "games": [{"name": game}],
            "agents": {
                "llm": {"kind": "llm_policy", "options": {"seed": 1, "llm": llm}},
                "rnd": {"kind": "random", "options": {"seed": 5}},
            },
        }
    )


def recorded_requests(folder: Path) -> tuple[list[dict[str, Any]], int]:
    """The recording's requests in arrival order (one per outcome), and the prompt tokens of its replies."""
    docs: dict[str, dict[str, Any]] = {}
    out, sent = [], 0
    for line in (folder / INDEX).read_text().splitlines():
        entry = json.loads(line)
        key = entry["key"]
        if key not in docs:
            docs[key] = json.loads((folder / f"{key}.json").read_text())
        out.append(docs[key]["request"])
        sent += int(docs[key]["responses"][entry["i"]].get("prompt_tokens", 0))
    return out, sent


async def tournament(
    url: str, log: LogCounter, concurrency: int, matches: int, game: str, max_turns: int | None = None
) -> tuple[Phase, list[dict[str, Any]]]:
    config = _config(url, concurrency, matches, game, max_turns)
    with tempfile.TemporaryDirectory(prefix="llm_throughput-") as tmp:
        log.mark()
        cpu = _cpu_s()
        result = await run_tournament(config, RunOptions(run_dir=tmp, quiet=True), Console(quiet=True))
        evaluated, server_s = log.count()
        cpu = _cpu_s() - cpu
        requests, sent = recorded_requests(result.path / "llm")
        records = [json.loads(line) for line in (result.path / "matches.jsonl").read_text().splitlines()]
    t0, t1 = min(r["started_at"] for r in records), max(r["ended_at"] for r in records)
    decisions = sum(
        1
        for r in records
        for m in r["moves"]
        if m.get("usage") and (m["usage"].get("llm_calls") or m["usage"].get("cache_hits"))
    )
    fallbacks = sum(1 for r in records for m in r["moves"] if (m.get("stats") or {}).get("fallback"))
    return Phase(decisions, len(requests), t1 - t0, sent, evaluated, server_s, cpu, fallbacks), requests


async def load_generator(
    url: str, log: LogCounter, concurrency: int, requests: list[dict[str, Any]], decisions: int
) -> Phase:
    backend = OpenAIBackend(LLMConfig(base_url=url, timeout_s=TIMEOUT_S))
    queue = list(reversed(requests))
    sent = errors = 0

    async def worker() -> None:
        nonlocal sent, errors
        while queue:
            doc = queue.pop()
            req = BackendRequest(
                model=doc["model"],
                messages=tuple((r, c) for r, c in doc["messages"]),
                temperature=doc["temperature"],
                max_tokens=doc["max_tokens"],
                seed=doc["seed"],
                top_p=doc["top_p"],
                n=doc["n"],
                schema=doc["schema"],
                extra=doc["extra"],
            )
            try:
                reply = await backend.complete(req, TIMEOUT_S)
                sent += reply.prompt_tokens
            except LLMError:
                errors += 1

    try:
        log.mark()
        cpu = _cpu_s()
        t0 = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.monotonic() - t0
        evaluated, server_s = log.count()
        cpu = _cpu_s() - cpu
    finally:
        await backend.aclose()
    return Phase(decisions, len(requests), seconds, sent, evaluated, server_s, cpu, errors)


def _row(server: str, c: int, who: str, p: Phase) -> str:
    share = p.evaluated / p.sent if p.sent else float("nan")
    return (
        f"| {server} | {c} | {who} | {p.decisions} | {p.requests} | {p.seconds:.1f} | {p.rate:.2f} "
        f"| {p.sent} | {p.evaluated} | {share:.2f} | {p.server_s:.1f} | {p.client_cpu_s:.1f} | {p.errors} |"
    )


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument(
        "--matches",
        type=int,
        default=8,
        help="matches per phase (both seat orders; at least the concurrency)",
    )
    ap.add_argument("--game", default="tic_tac_toe", help="the game of every match (an OpenSpiel name)")
    ap.add_argument(
        "--max-turns",
        type=int,
        default=None,
        help="end each match after this many turns (long games: chess, go); default the game's own end",
    )
    ap.add_argument("--servers", nargs="+", choices=SERVER_KINDS, default=list(SERVER_KINDS))
    ap.add_argument("--parallel", type=int, default=8, help="llama-server's slots")
    ap.add_argument(
        "--prompt-cache-mb",
        type=int,
        default=256,
        help="llama-cpp-python's saved prompt states (agents/llm/llama_cpp_serve.py; 0: off, "
        "only the previous request's prefix is reused)",
    )
    args = ap.parse_args()
    servers: list[ServerKind] = list(args.servers)
    if "llama-server" in servers and find_llama_server() is None:
        print(
            "llama-server is not built (`make llama-server`): measuring llama-cpp-python only",
            file=sys.stderr,
        )
        servers.remove("llama-server")
    header = (
        "| server | concurrency | phase | decisions | server requests | span s | decisions/s "
        "| prompt tokens sent | evaluated | evaluated/sent | server s | client CPU s "
        "| fallbacks or errors |\n" + "|---" * 13 + "|"
    )
    rows: list[str] = []
    ratios: list[str] = []
    rates: dict[tuple[str, int], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="llm_throughput-logs-") as logs, contextlib.ExitStack() as stack:
        started: dict[ServerKind, tuple[EmbeddedServer, LogCounter]] = {}
        for kind in servers:
            server = EmbeddedServer(
                server=kind,
                parallel=args.parallel if kind == "llama-server" else 1,
                verbose=True,
                log_path=Path(logs) / f"{kind}.log",
                prompt_cache_mb=args.prompt_cache_mb,
            )
            stack.callback(server.stop)
            server.start()
            assert server.log_path is not None
            started[kind] = server, LogCounter(server.log_path)
        # Concurrency outside, server inside: the two servers at one concurrency run minutes apart.
        for c in args.concurrency:
            for kind, (server, log) in started.items():
                # Each phase on a freshly started server: the load generator sends the tournament's
                # very prompts, which a kept prompt cache (saved states, slots) would already hold.
                server.stop()
                server.start()
                t, requests = await tournament(
                    server.base_url, log, c, max(args.matches, c), args.game, args.max_turns
                )
                server.stop()
                server.start()
                g = await load_generator(server.base_url, log, c, requests, t.decisions)
                rows += [_row(kind, c, "tournament", t), _row(kind, c, "load generator", g)]
                rates[kind, c] = (t.rate, g.rate)
                ratios.append(f"{kind} c={c}: tournament/load generator {t.rate / g.rate:.2f}")
                print(rows[-2], rows[-1], ratios[-1], sep="\n", flush=True)
    print("\n" + header)
    print("\n".join(rows))
    print("\n".join(ratios))
    if len(servers) == 2:
        for c in args.concurrency:
            (t1, g1), (t2, g2) = rates[servers[0], c], rates[servers[1], c]
            print(f"c={c}: {servers[1]}/{servers[0]}: tournament {t2 / t1:.2f}, load generator {g2 / g1:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
