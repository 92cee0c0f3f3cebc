"""What the bus costs on a heavy game: chess moves per second through the referee against raw
OpenSpiel chess play in one process, measured in the same run.

(a) raw: OpenSpiel chess in this process, each side playing its first legal action
    (`legal_actions()` + `apply_action()`, plus the SAN text of the move, which the
    referee records too), game after game;
(b) referee: the same play through `MatchRunner` and two instant agent services
    (`first`) on an embedded nats-server: views, messages, validation, legality,
    records and events per move; 1 match at a time, then 8 concurrent matches.

Prints both rates and (a)/(b): how many times slower a move is through the bus.

    .venv/bin/python benchmarks/chess_throughput.py [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import pyspiel
from bus_overhead import referee_moves  # benchmarks/ is on the path when run as a script

from bus.server import EmbeddedNats


def raw_moves(seconds: float) -> tuple[float, int]:
    game = pyspiel.load_game("chess")
    moves = games = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        state = game.new_initial_state()
        while not state.is_terminal() and time.perf_counter() - t0 < seconds:
            action = state.legal_actions()[0]
            state.action_to_string(state.current_player(), action)
            state.apply_action(action)
            moves += 1
        games += 1
    return moves / (time.perf_counter() - t0), games


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=5.0)
    args = p.parse_args()
    raw, games = raw_moves(args.seconds)
    with EmbeddedNats(jetstream=False) as srv:
        one = await referee_moves(srv.url, "chess", 1, args.seconds)
        many = await referee_moves(srv.url, "chess", 8, args.seconds)
    print(f"(a) raw OpenSpiel chess, one process: {raw:9.0f} moves/s ({games} games)")
    print(f"(b) referee + bus, 1 match:           {one:9.0f} moves/s   (a)/(b) = {raw / one:.1f}x")
    print(f"(b) referee + bus, 8 concurrent:      {many:9.0f} moves/s   (a)/(b) = {raw / many:.1f}x")


if __name__ == "__main__":
    asyncio.run(main())
