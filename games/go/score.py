"""Tromp-Taylor area score of a finished Go match: black's area minus white's, komi left out.

Tromp-Taylor area is a player's stones plus the empty regions that touch only that player's
stones, counted on the final position as it stands. The board is read from OpenSpiel's own text
of the final state (`X` black, `O` white, `+` empty), so no Go rules are restated; it is what
OpenSpiel's own scorer counts (its winner is the sign of this less komi).

Limits: dead stones are not removed (nobody marks them): a dead stone counts for its owner and
makes the region around it nobody's, so after a game that ends with stones left in the other
side's area this is not the territory a Go player would count. Table 3 of the LLM-MCTS paper
("Can Large Language Models Play Games?") reports territory; spielbus/go_report.py shows a
dead-stone-aware score (GNU Go's `final_score`, games/go/gnugo.py) beside this one.
"""

from __future__ import annotations

import re

from bus.protocol import MatchRecord
from games.loader import initial_state, load_game

_ROW = re.compile(r"^\s*\d+ ([+XO.]+)\s*$")


def board_rows(text: str) -> list[str]:
    """The board rows of an OpenSpiel Go state's text, top row first."""
    return [m.group(1) for line in text.splitlines() if (m := _ROW.match(line))]


def area(rows: list[str]) -> tuple[int, int]:
    """(black, white) Tromp-Taylor area of a board given as rows of `X`, `O`, `+`."""
    n, m = len(rows), len(rows[0]) if rows else 0
    black = sum(r.count("X") for r in rows)
    white = sum(r.count("O") for r in rows)
    seen: set[tuple[int, int]] = set()
    for i in range(n):
        for j in range(m):
            if rows[i][j] not in "+." or (i, j) in seen:
                continue
            stack, region, borders = [(i, j)], 0, set()
            seen.add((i, j))
            while stack:
                a, b = stack.pop()
                region += 1
                for x, y in ((a + 1, b), (a - 1, b), (a, b + 1), (a, b - 1)):
                    if 0 <= x < n and 0 <= y < m:
                        c = rows[x][y]
                        if c in "+." and (x, y) not in seen:
                            seen.add((x, y))
                            stack.append((x, y))
                        elif c in "XO":
                            borders.add(c)
            if borders == {"X"}:
                black += region
            elif borders == {"O"}:
                white += region
    return black, white


def tromp_taylor_score(record: MatchRecord) -> float | None:
    """Black's Tromp-Taylor area minus white's at the end of a Go match record (komi left out);
    None if it is not Go."""
    if record.game.name != "go" or not record.moves:
        return None
    state = initial_state(load_game(record.game))
    for m in record.moves:
        state.apply_action(m.action)
    black, white = area(board_rows(str(state)))
    return float(black - white)
