"""A fixed record set (deterministic) for comparing ratings implementations."""

from __future__ import annotations

import random

from bus.protocol import FaultRecord, GameSpec, MatchRecord, MoveRecord
from referee.outcome import ranks_from_returns

STRENGTH = {"ace": 3.0, "bob": 1.5, "cat": 1.0, "dan": 0.5, "eve": 0.8}


def fixed_records(n: int = 400, seed: int = 7) -> list[MatchRecord]:
    rng = random.Random(seed)
    names = sorted(STRENGTH)
    out: list[MatchRecord] = []
    for i in range(n):
        kind = i % 10
        if kind == 9:  # a three-player match
            seats = rng.sample(names, 3)
            rets = [rng.gauss(STRENGTH[s], 1.0) for s in seats]
            rets = [round(r, 1) for r in rets]
            out.append(_rec(i, "kuhn_poker", seats, rets, "decisive", [], []))
            continue
        a, b = rng.sample(names, 2)
        game = "leduc_poker" if kind == 8 else "chess" if kind == 7 else "tic_tac_toe"
        p = STRENGTH[a] / (STRENGTH[a] + STRENGTH[b])
        u = rng.random()
        faults, forfeited, outcome = [], [], "decisive"
        if kind == 8:
            x = round(rng.gauss(2 * p - 1, 3), 1)
            rets = [x, -x]
        elif u < 0.1:
            rets, outcome = [0.0, 0.0], "draw"
        elif u < 0.15:
            loser = rng.randrange(2)
            reason = rng.choice(["illegal", "timeout", "malformed"])
            faults = [FaultRecord(turn=3, seat=loser, agent=[a, b][loser], reason=reason)]
            forfeited, outcome = [loser], "forfeit"
            rets = [-1.0 if s == loser else 1.0 for s in range(2)]
        else:
            rets = [1.0, -1.0] if rng.random() < p else [-1.0, 1.0]
        if kind == 6 and i % 20 == 6:
            outcome, rets = "error", [0.0, 0.0]
        out.append(_rec(i, game, [a, b], rets, outcome, faults, forfeited))
    return out


def _rec(i, game, seats, rets, outcome, faults, forfeited) -> MatchRecord:
    moves = [
        MoveRecord(
            turn=t,
            player=t % len(seats),
            action=0,
            text="x",
            agent=seats[t % len(seats)],
            forced=(t == 2 and bool(faults)),
        )
        for t in range(1 + i % 5)
    ]
    ranks = (
        ranks_from_returns(rets)
        if outcome != "forfeit"
        else [len(seats) if s in forfeited else 1 for s in range(len(seats))]
    )
    return MatchRecord(
        match_id=f"m{i}",
        tournament="fixed",
        game=GameSpec(name=game),
        seats=seats,
        seed=i,
        moves=moves,
        faults=faults,
        returns=rets,
        outcome=outcome,
        forfeited=forfeited,
        ranks=ranks,
    )
