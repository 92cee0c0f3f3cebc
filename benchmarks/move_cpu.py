"""The referee's and the agent runtime's own CPU per move, without a bus, in one process.

What `benchmarks/bus_overhead.py` cannot separate from nats-py, asyncio wake-ups and a loaded
machine's cold caches: the Python work of each side per move, measured warm and in process.

- referee: `MatchRunner.run` over whole matches (turn bytes, the reply's strict validation,
  legality, budget, history, record, the `moved` events' models and JSON, the record's storage
  check) with a stand-in connection: not a NATS client, it answers each turn request with the
  first legal action's `move` (its `json.loads` of the turn is counted too, a few µs) and drops
  publishes;
- agent: `AgentService._handle_turn` (the turn's strict validation, deadline, slot, the strategy
  `first`, the `move` model and its JSON) on every turn of a first-legal match, with a stand-in
  request whose `respond` drops the reply (nats.micro's request accounting and the per-request
  task are left out).

Prints CPU µs (`time.process_time`) per move, the median of `--rounds` rounds (and the fastest
round, the steadier figure on a loaded machine).

    .venv/bin/python benchmarks/move_cpu.py [--game connect_four] [--matches 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from agents.base import StrategyOptions
from agents.random_agent import FirstLegalStrategy
from agents.runtime import AgentService
from bus.protocol import GameSpec, MatchEvent, MatchSpec
from games.loader import initial_state, load_game, parse_spec
from games.view import GameFacts, SeatHistory
from referee.match import MatchRunner
from referee.turns import TurnFrame, build_turn


class _Reply:
    headers = None

    def __init__(self, data: bytes) -> None:
        self.data = data


class StandInConnection:
    """Not a NATS client: answers a turn request with its first legal action, drops publishes."""

    is_connected = True
    is_closed = False

    def __init__(self) -> None:
        self.stats = {"reconnects": 0}

    async def request(self, subject: str, payload: bytes, **_: Any) -> _Reply:
        turn = json.loads(payload)
        move = {
            "v": 1,
            "type": "move",
            "match_id": turn["match_id"],
            "turn": turn["turn"],
            "action": turn["legal_actions"][0]["id"],
        }
        return _Reply(json.dumps(move).encode())

    async def publish(self, subject: str, data: bytes, headers: Any = None) -> None:
        pass


async def referee_us(game: GameSpec, matches: int) -> float:
    moves = 0

    async def sink(event: MatchEvent) -> None:  # what EventPublisher does before its publish
        nonlocal moves
        event.model_dump_json(exclude_none=True).encode()
        moves += event.type == "moved"

    nc: Any = StandInConnection()
    t0 = time.process_time()
    for i in range(matches):
        spec = MatchSpec(
            match_id=f"m-{i}", tournament="t", game=game, seats=["a", "b"], seed=i, deadline_ms=10_000
        )
        await MatchRunner(nc, spec, publish_event=sink).run()
    return (time.process_time() - t0) / max(moves, 1) * 1e6


class _StandInRequest:
    """Not nats.micro's request: carries the turn's bytes, drops the reply."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    async def respond(self, data: bytes) -> None:
        pass


def _first_legal_turns(game: GameSpec) -> list[bytes]:
    """Every turn of one match in which each seat plays its first legal action, as sent."""
    g = load_game(game)
    facts = GameFacts.of(g)
    state, history = initial_state(g), SeatHistory(facts.num_players)
    out: list[bytes] = []
    while not state.is_terminal() and not state.is_chance_node():
        seat = state.current_player()
        turn = build_turn(
            TurnFrame("m", game, ["a", "b"], 10_000, facts=facts), state, seat, len(out) + 1, history
        )
        out.append(turn.model_dump_json(exclude_none=True).encode())
        action = state.legal_actions(seat)[0]
        history.record(state, seat, action, facts=facts)
        state.apply_action(action)
    return out


async def agent_us(game: GameSpec, matches: int) -> float:
    nc: Any = None  # `_handle_turn` never touches the connection
    service = AgentService(nc, FirstLegalStrategy(StrategyOptions()), name="bench")
    turns = _first_legal_turns(game)
    t0 = time.process_time()
    for _ in range(matches):
        for data in turns:
            await service._handle_turn(_StandInRequest(data), time.monotonic())  # type: ignore[arg-type]
    return (time.process_time() - t0) / (matches * len(turns)) * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--game", default="connect_four", help="a two-seat game without chance")
    p.add_argument("--matches", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    game = parse_spec(args.game)
    asyncio.run(referee_us(game, 10))  # warm up: imports, caches
    ref = [asyncio.run(referee_us(game, args.matches)) for _ in range(args.rounds)]
    agent = [asyncio.run(agent_us(game, args.matches)) for _ in range(args.rounds)]
    print(f"game {args.game}, {args.rounds} rounds of {args.matches} matches: median (fastest)")
    for name, us in (("referee CPU per move", ref), ("agent runtime CPU per turn", agent)):
        print(f"{name:<28} {statistics.median(us):6.1f} µs ({min(us):.1f})")


if __name__ == "__main__":
    main()
