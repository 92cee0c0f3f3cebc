"""A chess turn's CPU, full against compact (issue 44): the referee's encoding and the agent's strict
validation, warm, in this process, at a few plies of a seeded random game.

Full: `encode_turn` with the legal moves and their SAN texts (`games.view.legal_actions`, as the
referee builds them per decision) and the seat's history; the agent's `Turn.model_validate_json`.
Compact: the legal ids and `encode_compact_turn`; the agent's `ANY_TURN.validate_json` (what an
agent that asked for compact turns runs). CPU time (`time.process_time`), the median of `--rounds`
rounds of `--reps` turns each, so a loaded machine's waits are not counted, only its slower cores.

    .venv/bin/python benchmarks/turn_cpu.py [--plies 20 100] [--reps 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyspiel

from bus.protocol import ANY_TURN, GameSpec, Turn
from games.loader import initial_state, load_game
from games.view import GameFacts, SeatHistory, legal_actions
from referee.turns import TurnFrame, encode_compact_turn, encode_turn


def _cpu_us(fn: Callable[[], object], reps: int, rounds: int) -> float:
    out = []
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(reps):
            fn()
        out.append((time.process_time() - t0) / reps * 1e6)
    return statistics.median(out)


def measure(
    plies: int, state: pyspiel.State, hist: SeatHistory, frame: TurnFrame, args: argparse.Namespace
) -> None:
    seat = state.current_player()

    def full() -> bytes:
        return encode_turn(frame, state, seat, 7, hist, legal=legal_actions(state, seat)).data

    def compact() -> bytes:
        return encode_compact_turn(frame, state, seat, 7, state.legal_actions(seat)).data

    full_bytes, compact_bytes = full(), compact()
    rows = (
        ("referee: encode", _cpu_us(full, args.reps, args.rounds), _cpu_us(compact, args.reps, args.rounds)),
        (
            "agent: validate",
            _cpu_us(lambda: Turn.model_validate_json(full_bytes), args.reps, args.rounds),
            _cpu_us(lambda: ANY_TURN.validate_json(compact_bytes), args.reps, args.rounds),
        ),
    )
    n = len(state.legal_actions(seat))
    print(f"chess, ply {plies}, {n} legal moves: full {len(full_bytes)} bytes, compact {len(compact_bytes)}")
    for label, a, b in rows:
        print(f"  {label:16s} full {a:7.1f} us   compact {b:7.1f} us   compact/full {b / a:.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plies", type=int, nargs="+", default=[20, 100])
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    spec = GameSpec(name="chess")
    game = load_game(spec)
    facts = GameFacts.of(game)
    for plies in args.plies:
        rng = random.Random(plies)
        state, hist = initial_state(game), SeatHistory(2)
        while len(state.history()) < plies and not state.is_terminal():
            action = rng.choice(state.legal_actions())
            hist.record(state, state.current_player(), action, facts=facts)
            state.apply_action(action)
        measure(
            plies, state, hist, TurnFrame("m-1", spec, ["a", "b"], 60_000, match_seed=1, facts=facts), args
        )


if __name__ == "__main__":
    main()
