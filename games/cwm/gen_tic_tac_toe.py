"""Generalized tic-tac-toe (6x6, win length 4) of "Code World Models for General Game Playing"
(Lehrach et al., appendix I.4): OpenSpiel's own `mnk` game, `mnk(m=6,n=6,k=4)`.

OpenSpiel's m,n,k-game fits the appendix exactly (checked in tests/test_cwm_gen_tic_tac_toe.py):
6x6 board, 'x' (player 0) moves first, a player wins at once with four or more marks in an
unbroken horizontal, vertical or diagonal line, a full board without a line is a draw. So this
module registers no game; it adds what a C++ game lacks: the rules text (sent with a match's
first turn, `games.rules`) and a JSON view (`games.view.json_view`).

OpenSpiel's parameters: `m` is the number of columns, `n` the number of rows, `k` the line
length; action `a` is the cell (row a // m, column a % m), written `x(row,col)` / `o(row,col)`.

Limits: the rules text is the appendix's text for any m, n, k (the paper only uses 6, 6, 4).
Spielbus has no alias name for this configuration; write `mnk(m=6,n=6,k=4)`.
"""

from __future__ import annotations

from typing import Any

import pyspiel

SPEC = "mnk(m=6,n=6,k=4)"

RULES = (
    "Generalized Tic-Tac-Toe ({rows}x{cols}, win length {k}, 2 players). Board: a {rows}x{cols} grid "
    "({cells} cells), rows numbered 0 to {last_row} and columns 0 to {last_col}, initially empty. Player 0 "
    "uses 'x' and moves first, player 1 uses 'o'; players alternate placing their mark on an unoccupied "
    "cell, written mark(row,col), e.g. x(2,3). A player wins by being the first to place {k} of their marks "
    "in an unbroken straight line: horizontal (same row), vertical (same column) or diagonal (either "
    "direction). The game ends immediately when a player has such a line (that player wins). If all cells "
    "are filled and neither player has a line of {k}, the game is a draw."
)


def _params(game: pyspiel.Game) -> tuple[int, int, int]:
    p = game.get_parameters()
    return int(p["n"]), int(p["m"]), int(p["k"])


def mnk_rules(game: pyspiel.Game) -> str:
    rows, cols, k = _params(game)
    return RULES.format(rows=rows, cols=cols, k=k, cells=rows * cols, last_row=rows - 1, last_col=cols - 1)


def mnk_json_view(state: pyspiel.State) -> dict[str, Any]:
    """The whole board (perfect information): rows of '.', 'x', 'o', whose turn, the winner."""
    rows, cols, k = _params(state.get_game())
    board = [["."] * cols for _ in range(rows)]
    for i, action in enumerate(state.history()):
        board[action // cols][action % cols] = "x" if i % 2 == 0 else "o"
    winner = None
    if state.is_terminal():
        r = state.returns()
        winner = 0 if r[0] > 0 else 1 if r[1] > 0 else None
    return {
        "rows": rows,
        "cols": cols,
        "win_length": k,
        "board": ["".join(row) for row in board],
        "to_move": None if state.is_terminal() else state.current_player(),
        "winner": winner,
        "draw": state.is_terminal() and winner is None,
    }
