"""Stockfish against Stockfish through the arena against a tight python-chess loop, same run (issue 32).

For each setting (nodes per move x concurrency) and each round, alternating:

(a) arena: `spielbus.run.run_tournament`, exactly as `spielbus run` (embedded nats-server, the two
    `stockfish` agents as processes, one referee worker in this process): a round robin of two
    identical Stockfish agents (fixed nodes, one thread, 16 MB hash) over `--openings` openings in
    both colours (8 games by default);
(b) loop: the same games driven by python-chess directly, each game in flight with its own two
    Stockfish processes (one per side), as engine testers (fastchess, cutechess-cli) run concurrent
    games and as the arena's `stockfish` agents keep one engine per match in flight; the same
    `Limit`, the same openings and colours, the same concurrency;
(c) bus floor (`--floor`, on by default): the loop with each side's engine moved behind a bare NATS
    request, the least any arena over a bus can do: two child processes (this script with
    `--floor-agent`), each holding one engine per game in flight and a board per game, answer
    `nc.request`s that carry the start FEN and the game's moves so far (as a turn carries the
    history) with the engine's move; no referee, no protocol model, no validation, no record. Its
    ratio to the loop bounds what the arena's can reach on this machine;
(d) arena with full turns (`--full`, on by default): (a) with the referee told to ignore the
    agents' request for compact turns (issue 44; a patch of this script's referee only), so every
    turn carries the legal moves' SAN texts and the history, as before compact turns existed.

Plies per second: (a) counts the plies of the match records over the span from the first match's
start to the last match's end; (b) from before its engines start to its last ply (each side starts
its engines once inside the timed span, as the arena's agents do on their first move). Prints the
median over rounds of each, the ratio (a)/(b), and per ply the CPU time of each process of the
arena (this process: referee, runner and collector; the agent processes; the Stockfish engines;
nats-server) over the same span, sampled from /proc every 50 ms (so within 50 ms at each edge).

Every phase, the floor's children included, runs on the event loop our processes run on
(bus/loop.py: uvloop unless `SPIELBUS_EVENT_LOOP=asyncio`), so the floor stays the least a bus allows.

The load average (1 minute) is printed before and after each setting: on a shared machine the
ratios are what they are under that load.

Limits: Linux only (/proc); the setup of a run (starting nats-server and the agent processes,
about 5-10 s) is outside both spans. A loaded machine widens the gap (the arena has more
processes to schedule); compare ratios of the same run, not numbers across runs.

    .venv/bin/python benchmarks/engine_match.py [--nodes 230 3000] [--concurrency 1 2] [--rounds 2]
        [--no-floor] [--no-full]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import chess
import chess.engine
from nats.aio.msg import Msg
from rich.console import Console

from agents.stockfish_agent import find_stockfish
from bus import loop as bus_loop
from bus.server import EmbeddedNats
from games.chess.openings import opening_fen
from referee.config import TournamentConfig
from referee.worker import ProvenanceCache
from spielbus.run import RunOptions, run_tournament

OPENINGS = ["e4 e5 Nf3 Nc6", "d4 d5 c4 e6", "e4 c5 Nf3 d6", "d4 Nf6 c4 g6"]
MAX_TURNS = 400
DEADLINE_MS = 60_000
TICKS = os.sysconf("SC_CLK_TCK")


class CpuSampler:
    """CPU seconds of this process and its descendants, by kind, read from /proc every `period` s."""

    def __init__(self, period: float = 0.05) -> None:
        self.period = period
        self.seen: dict[int, tuple[str, float]] = {}
        # (wall time, CPU seconds by pid) per sample, to count only a span of the run.
        self.history: list[tuple[float, dict[int, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _stat(pid: int) -> tuple[int, float, str] | None:
        try:
            raw = Path(f"/proc/{pid}/stat").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return None
        fields = raw[raw.rindex(")") + 2 :].split()
        return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS, cmd

    def _kind(self, pid: int, cmd: str) -> str | None:
        """By the program run (argv[0]), not a word anywhere in the command line: an agent process
        runs `python -m agents stockfish ...`, which once counted it among the engines. None for an
        empty command line (a process that has exited), which keeps the kind seen before."""
        if pid == os.getpid():
            return "this process (referee, runner)"
        if not cmd.strip():
            return None
        program = Path(cmd.split()[0]).name
        if program == "stockfish":
            return "stockfish engines"
        if program.startswith("nats-server"):
            return "nats-server"
        return "agent processes"

    def sample(self) -> None:
        stats = {}
        for name in os.listdir("/proc"):
            if name.isdigit() and (s := self._stat(int(name))) is not None:
                stats[int(name)] = s
        me = os.getpid()
        for pid, (_ppid, cpu, cmd) in stats.items():
            p, depth = pid, 0
            while p in stats and p != me and depth < 20:
                p, depth = stats[p][0], depth + 1
            if p == me:
                kind = self._kind(pid, cmd) or (self.seen[pid][0] if pid in self.seen else "agent processes")
                self.seen[pid] = (kind, cpu)
        self.history.append((time.time(), {pid: cpu for pid, (_, cpu) in self.seen.items()}))

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.sample()

    def __enter__(self) -> CpuSampler:
        self.sample()
        self.start = dict(self.seen)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def by_kind(self, t0: float, t1: float) -> dict[str, float]:
        """CPU seconds by kind between the samples nearest wall times `t0` and `t1`."""
        first = min(self.history, key=lambda h: abs(h[0] - t0))[1]
        last = min(self.history, key=lambda h: abs(h[0] - t1))[1]
        out: dict[str, float] = defaultdict(float)
        for pid, cpu in last.items():
            out[self.seen[pid][0]] += cpu - first.get(pid, 0.0)
        return dict(out)


def _limit(nodes: int) -> chess.engine.Limit:
    return chess.engine.Limit(nodes=nodes, time=DEADLINE_MS / 1000 * 0.5)  # as agents/stockfish_agent.py


def _games(openings: list[str]) -> list[tuple[str, bool]]:
    """Each opening's start FEN, in both colours."""
    return [(opening_fen(o), flip) for o in openings for flip in (False, True)]


async def _start_engine() -> tuple[asyncio.SubprocessTransport, chess.engine.UciProtocol]:
    """A Stockfish process configured as the arena's agents configure theirs."""
    path = find_stockfish()
    assert path is not None
    transport, engine = await chess.engine.popen_uci(path)
    await engine.configure({"Threads": 1, "Hash": 16, "Skill Level": 20})
    return transport, engine


def _over(board: chess.Board) -> bool:
    """The game ended as OpenSpiel's chess ends it (mate, stalemate, too little material, a third
    repetition or 50 moves without a capture or pawn move: no claim needed), or `MAX_TURNS` plies."""
    return (
        board.is_game_over()
        or board.is_repetition(3)
        or board.halfmove_clock >= 100
        or len(board.move_stack) >= MAX_TURNS
    )


@dataclass
class Result:
    rates: list[float] = field(default_factory=list)
    plies: list[int] = field(default_factory=list)
    cpu_us: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    # Per round, ms per ply: from a turn's (or request's) send to its reply, summed over the moves;
    # the rest of the wall is the driver's own (referee or floor driver) between a reply and the next.
    trip_ms: list[float] = field(default_factory=list)

    def add(self, plies: int, seconds: float, cpu: dict[str, float], trip_s: float | None = None) -> None:
        self.rates.append(plies / seconds)
        self.plies.append(plies)
        if trip_s is not None:
            self.trip_ms.append(trip_s / plies * 1e3)
        for kind, s in cpu.items():
            self.cpu_us[kind].append(s / plies * 1e6)


def _config(nodes: int, concurrency: int, openings: list[str]) -> TournamentConfig:
    sf = {"kind": "stockfish", "options": {"nodes": nodes, "threads": 1, "hash_mb": 16}}
    return TournamentConfig.model_validate(
        {
            "name": "engine_match",
            "format": "round_robin",
            "games_per_pairing": 1,
            "concurrency": concurrency,
            "deadline_ms": DEADLINE_MS,
            "max_turns": MAX_TURNS,
            "seed": 1,
            "openings": openings,
            "games": [{"name": "chess"}],
            "agents": {"sf_a": sf, "sf_b": dict(sf)},
        }
    )


@contextlib.contextmanager
def full_turns(on: bool) -> Iterator[None]:
    """While on, this process's referee forgets every agent's request for compact turns."""
    if not on:
        yield
        return
    original = ProvenanceCache.get

    async def get(self: ProvenanceCache, agent: str):  # type: ignore[no-untyped-def]
        prov = await original(self, agent)
        self.compact.discard(agent)
        return prov

    ProvenanceCache.get = get  # type: ignore[method-assign]
    try:
        yield
    finally:
        ProvenanceCache.get = original  # type: ignore[method-assign]


async def arena(nodes: int, concurrency: int, openings: list[str], out: Result, full: bool = False) -> None:
    config = _config(nodes, concurrency, openings)
    with (
        tempfile.TemporaryDirectory(prefix="engine_match-") as tmp,
        full_turns(full),
        CpuSampler() as cpu,
    ):
        result = await run_tournament(config, RunOptions(run_dir=tmp, quiet=True), Console(quiet=True))
        records = [json.loads(line) for line in (result.path / "matches.jsonl").read_text().splitlines()]
    t0, t1 = min(r["started_at"] for r in records), max(r["ended_at"] for r in records)
    # `latency_ms`: the referee's clock from a turn's send to its reply (a ply of the agent's, the
    # bus's both ways); one match at a time (c = 1) the rest of the span is the referee's own.
    trip = sum(m["latency_ms"] for r in records for m in r["moves"]) / 1e3
    out.add(sum(len(r["moves"]) for r in records), t1 - t0, cpu.by_kind(t0, t1), trip)


async def loop(nodes: int, concurrency: int, openings: list[str], out: Result) -> None:
    limit, games = _limit(nodes), _games(openings)
    plies = 0
    with CpuSampler() as cpu:
        t0, w0 = time.perf_counter(), time.time()
        queue = list(enumerate(games))
        started: list[tuple[asyncio.SubprocessTransport, chess.engine.UciProtocol]] = []

        async def worker() -> None:
            nonlocal plies
            engines = []
            for _ in range(2):  # this worker's games' own engines, one per side
                started.append(await _start_engine())
                engines.append(started[-1][1])
            while queue:
                gid, (fen, flip) = queue.pop(0)
                board = chess.Board(fen)
                while not _over(board):
                    engine = engines[(board.turn == chess.WHITE) ^ flip]
                    played = await engine.play(board, limit, game=gid)
                    assert played.move is not None
                    board.push(played.move)
                    plies += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - t0
        for transport, engine in started:
            await engine.quit()
            transport.close()
    out.add(plies, seconds, cpu.by_kind(w0, w0 + seconds))


async def floor_agent(url: str, subject: str, nodes: int) -> None:
    """Child process of the bus floor: an engine per driver worker (so per game in flight), a board
    per game kept and extended."""
    import nats

    limit = _limit(nodes)
    boards: dict[str, chess.Board] = {}
    engines: dict[int, chess.engine.UciProtocol] = {}
    nc = await nats.connect(url)

    async def on_request(msg: Msg) -> None:
        req = json.loads(msg.data)
        engine = engines.get(req["w"])
        if engine is None:
            _, engine = await _start_engine()
            engines[req["w"]] = engine
        board = boards.get(req["g"]) or chess.Board(req["fen"])
        for uci in req["moves"][len(board.move_stack) :]:
            board.push_uci(uci)
        boards[req["g"]] = board
        played = await engine.play(board, limit, game=req["g"])
        assert played.move is not None
        await msg.respond(played.move.uci().encode())

    await nc.subscribe(subject, cb=on_request)
    await nc.flush()
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent closes it
    await nc.drain()
    for engine in engines.values():
        await engine.quit()


async def floor(nodes: int, concurrency: int, openings: list[str], out: Result) -> None:
    import nats

    games = _games(openings)
    plies, trip = 0, 0.0
    with EmbeddedNats(jetstream=False) as srv, CpuSampler() as cpu:
        children = [
            await asyncio.create_subprocess_exec(
                *[sys.executable, __file__, "--floor-agent", srv.url, f"floor.{side}", "--nodes", str(nodes)],
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            for side in (0, 1)
        ]
        for child in children:
            assert child.stdout is not None and (await child.stdout.readline()).strip() == b"ready"
        nc = await nats.connect(srv.url)
        t0, w0 = time.perf_counter(), time.time()
        queue = list(enumerate(games))

        async def worker(w: int) -> None:
            nonlocal plies, trip
            while queue:
                gid, (fen, flip) = queue.pop(0)
                board = chess.Board(fen)
                moves: list[str] = []
                while not _over(board):
                    side = int((board.turn == chess.WHITE) ^ flip)
                    req = json.dumps({"w": w, "g": str(gid), "fen": fen, "moves": moves}).encode()
                    sent = time.perf_counter()
                    reply = await nc.request(f"floor.{side}", req, timeout=DEADLINE_MS / 1000)
                    trip += time.perf_counter() - sent
                    uci = reply.data.decode()
                    board.push_uci(uci)
                    moves.append(uci)
                    plies += 1

        await asyncio.gather(*(worker(w) for w in range(concurrency)))
        seconds = time.perf_counter() - t0
        await nc.close()
        for child in children:
            assert child.stdin is not None
            child.stdin.close()
            await asyncio.wait_for(child.wait(), 10)
    out.add(plies, seconds, cpu.by_kind(w0, w0 + seconds), trip)


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, nargs="+", default=[230, 3000])
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 2])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--openings", type=int, default=4, help=f"how many of {OPENINGS} (games = 2 x this)")
    p.add_argument("--no-floor", dest="floor", action="store_false", help="skip the bus floor phase")
    p.add_argument("--no-full", dest="full", action="store_false", help="skip the full-turns arena phase")
    p.add_argument("--floor-agent", nargs=2, metavar=("URL", "SUBJECT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.floor_agent:
        url, subject = args.floor_agent
        await floor_agent(url, subject, nodes=args.nodes[0])
        return
    if find_stockfish() is None:
        sys.exit("stockfish not found (apt-get install stockfish)")
    openings = OPENINGS[: args.openings]
    for nodes in args.nodes:
        for conc in args.concurrency:
            a, b, f, full = Result(), Result(), Result(), Result()
            load0 = os.getloadavg()[0]
            for _ in range(args.rounds):
                await arena(nodes, conc, openings, a)
                if args.full:
                    await arena(nodes, conc, openings, full, full=True)
                await loop(nodes, conc, openings, b)
                if args.floor:
                    await floor(nodes, conc, openings, f)
            ra, rb = statistics.median(a.rates), statistics.median(b.rates)
            print(
                f"nodes {nodes}, concurrency {conc}, {2 * len(openings)} games, {args.rounds} rounds "
                f"(load average {load0:.1f} before, {os.getloadavg()[0]:.1f} after):"
            )
            print(f"  arena {ra:7.0f} plies/s  (plies per round {a.plies})")
            print(f"  loop  {rb:7.0f} plies/s  (plies per round {b.plies})   arena/loop = {ra / rb:.2f}")
            wa, wb = 1e3 / ra, 1e3 / rb
            print(f"  wall per ply: arena {wa:.2f} ms, loop {wb:.2f} ms, overhead {wa - wb:.2f} ms")
            phases = [("arena", a), ("loop", b)]
            if args.full:
                rfull = statistics.median(full.rates)
                print(
                    f"  arena, full turns {rfull:7.0f} plies/s  (plies per round {full.plies})   "
                    f"compact/full = {ra / rfull:.2f}, full/loop = {rfull / rb:.2f}"
                )
                phases.append(("arena, full turns", full))
            if args.floor:
                rf = statistics.median(f.rates)
                print(
                    f"  floor {rf:7.0f} plies/s  (plies per round {f.plies})   floor/loop = {rf / rb:.2f}, "
                    f"arena/floor = {ra / rf:.2f}, floor overhead {1e3 / rf - wb:.2f} ms per ply"
                )
                phases.append(("floor", f))
            for label, res in phases:
                parts = ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in sorted(res.cpu_us.items()))
                print(f"  CPU us per ply, {label}: {parts}")
            for label, res in phases:
                if res.trip_ms:
                    trip, wall = statistics.median(res.trip_ms), 1e3 / statistics.median(res.rates)
                    print(
                        f"  wall per ply, {label}: {trip:.2f} ms from a turn's send to its reply, "
                        f"{wall - trip:.2f} ms the driver's own (exact at concurrency 1)"
                    )


if __name__ == "__main__":
    bus_loop.run(main())
