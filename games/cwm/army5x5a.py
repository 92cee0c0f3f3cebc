"""Generalized chess, variant `army5x5a` (appendix I.5 of "Code World Models for General Game
Playing", Lehrach et al.) as an OpenSpiel Python game: `army5x5a`.

A 5x5 board, rows A-E from top to bottom, columns 1-5 from left to right. Each kind of piece has
a fixed list of (row, column) offsets and jumps straight to the target square (nothing blocks a
move): general X [(1,0), (-1,0), (0,1), (0,-1), (0,-2), (0,2)], infantry I [(1,0), (2,0),
(1,-1), (1,1), (-1,0)], cavalry V [(0,3), (1,2), (2,1), (3,0)]. A move must stay on the board
and must not land on one of the mover's own pieces; landing on an opponent piece captures it.
The general is the target piece: capturing it wins at once (+1 / -1). Player 0 (upper case)
moves first. Moves are written `A2_to_C2`; passing is `PASS`.

Our readings where the appendix is open (the paper names no start position, no orientation, no
limit; its own code is not public):
- Start position, player 0 on top, player 1 its 180-degree rotation at the bottom:
      12345
    A V.X.V
    B IIIII
    C .....
    D iiiii
    E v.x.v
- The offsets are written for player 0, whose forward direction is +row (towards E); player 1
  uses them rotated by 180 degrees (both coordinates negated), so the rules are symmetric.
- PASS is legal only when the player has no piece move (the game never stalls without an action).
- No promotion, no check: a general may move onto an attacked square, and only its capture wins.
- After `max_plies` moves in total (default 100, PASS included) without a captured general the
  game is a draw (0 / 0), which the paper's win/loss/draw payoff implies.
- Actions: from * 25 + to (squares numbered row * 5 + column from A1 = 0), PASS = 625.

Limits: strings only, no tensors.
"""

from __future__ import annotations

from typing import Any

import pyspiel

from games.cwm.common import PaperGame, to_move
from games.game_type import text_game_type

SIZE = 5
SQUARES = SIZE * SIZE
PASS = SQUARES * SQUARES
ROWS = "ABCDE"
PIECES: dict[str, tuple[str, tuple[tuple[int, int], ...]]] = {
    "general": ("X", ((1, 0), (-1, 0), (0, 1), (0, -1), (0, -2), (0, 2))),
    "infantry": ("I", ((1, 0), (2, 0), (1, -1), (1, 1), (-1, 0))),
    "cavalry": ("V", ((0, 3), (1, 2), (2, 1), (3, 0))),
}
SYMBOL_MOVES = {sym: offsets for sym, offsets in PIECES.values()}
TARGET = "X"
START = ("V.X.V", "IIIII", ".....", "iiiii", "v.x.v")
_DEFAULTS: dict[str, Any] = {"max_plies": 100}

GAME_TYPE = text_game_type(
    "army5x5a",
    "Generalized chess (army5x5a)",
    chance_mode=pyspiel.GameType.ChanceMode.DETERMINISTIC,
    information=pyspiel.GameType.Information.PERFECT_INFORMATION,
    utility=pyspiel.GameType.Utility.ZERO_SUM,
    parameters=_DEFAULTS,
)

RULES = (
    "The game of generalized chess is a two player game where each player controls a collection of pieces "
    "and wins by capturing the target piece from the other player. Each kind of game piece has a specific "
    "pattern of movements that it can execute. A piece can execute any one of its available moves as long "
    "as that move stays on the board and doesn't land on another of that player's pieces (pieces jump: "
    "nothing in between blocks a move). If the piece lands on an opponent piece, it captures the opponent "
    "piece and removes it from the board. Allowed piece movements are not the same as in standard chess. "
    "Actions are described using board coordinates: rows are labeled A-E from top to bottom, and columns "
    "are labeled 1-5 from left to right. A move from a starting square to a destination square is written "
    "as 'start_to_end', for example, 'A2_to_C2' means move the piece from square A2 to square C2. Passing "
    "a turn is specified as 'PASS' (allowed only when you have no other move). This 'army5x5a' variant is "
    "played on a 5x5 board with the following pieces and their moves as (row, column) offsets for player "
    "0: general: [(1, 0), (-1, 0), (0, 1), (0, -1), (0, -2), (0, 2)]; infantry: [(1, 0), (2, 0), (1, -1), "
    "(1, 1), (-1, 0)]; cavalry: [(0, 3), (1, 2), (2, 1), (3, 0)]. Player 1 uses the same offsets rotated "
    "by 180 degrees (both negated). Symbols: general 'X', infantry 'I', cavalry 'V'; player 0 pieces are "
    "upper-case (starting at the top, rows A-B), player 1 pieces lower-case (rows D-E). Player 0 moves "
    "first. The 'general' is the target piece: capturing it wins the game. There is no check and no "
    "promotion. If {n} moves in total are made without a general being captured, the game is a draw."
)


def square_name(sq: int) -> str:
    row, col = divmod(sq, SIZE)
    return f"{ROWS[row]}{col + 1}"


def move_name(action: int) -> str:
    if action == PASS:
        return "PASS"
    frm, to = divmod(action, SQUARES)
    return f"{square_name(frm)}_to_{square_name(to)}"


def owner(piece: str) -> int | None:
    if piece == ".":
        return None
    return 0 if piece.isupper() else 1


class Army5x5aGame(PaperGame):
    def __init__(self, params: dict[str, Any] | None = None) -> None:
        p = {**_DEFAULTS, **(params or {})}
        self.max_plies = int(p["max_plies"])
        if self.max_plies < 1:
            raise ValueError("max_plies must be at least 1")
        info = pyspiel.GameInfo(
            num_distinct_actions=PASS + 1,
            max_chance_outcomes=0,
            num_players=2,
            min_utility=-1.0,
            max_utility=1.0,
            utility_sum=0.0,
            max_game_length=self.max_plies,
        )
        super().__init__(GAME_TYPE, info, p)

    def rules_text(self) -> str:
        return RULES.format(n=self.max_plies)

    def new_initial_state(self) -> Army5x5aState:
        return Army5x5aState(self)


class Army5x5aState(pyspiel.State):
    def __init__(self, game: Army5x5aGame) -> None:
        super().__init__(game)
        self._g = game
        self.board = list("".join(START))
        self.player = 0
        self.plies = 0
        self.winner: int | None = None
        self.moves: list[str] = []

    # --- OpenSpiel API -------------------------------------------------------------------------
    def current_player(self) -> int:
        return pyspiel.PlayerId.TERMINAL if self.is_terminal() else self.player

    def piece_moves(self, player: int) -> list[int]:
        sign = 1 if player == 0 else -1
        out = []
        for sq, piece in enumerate(self.board):
            if owner(piece) != player:
                continue
            row, col = divmod(sq, SIZE)
            for dr, dc in SYMBOL_MOVES[piece.upper()]:
                r, c = row + sign * dr, col + sign * dc
                if 0 <= r < SIZE and 0 <= c < SIZE and owner(self.board[r * SIZE + c]) != player:
                    out.append(sq * SQUARES + r * SIZE + c)
        return sorted(set(out))

    def _legal_actions(self, player: int) -> list[int]:
        if self.is_terminal() or player != self.player:
            return []
        return self.piece_moves(player) or [PASS]

    def _apply_action(self, action: int) -> None:
        mover = self.player
        if action not in self._legal_actions(mover):
            raise ValueError(f"illegal move {move_name(action)} for player {mover}")
        if action != PASS:
            frm, to = divmod(action, SQUARES)
            captured = self.board[to]
            self.board[to], self.board[frm] = self.board[frm], "."
            if captured.upper() == TARGET:
                self.winner = mover
        self.moves.append(move_name(action))
        self.plies += 1
        self.player = 1 - mover

    def _action_to_string(self, player: int, action: int) -> str:
        return move_name(action)

    def is_terminal(self) -> bool:
        return self.winner is not None or self.plies >= self._g.max_plies

    def returns(self) -> list[float]:
        if self.winner is None:
            return [0.0, 0.0]
        return [1.0 if p == self.winner else -1.0 for p in range(2)]

    def rows(self) -> list[str]:
        return ["".join(self.board[r * SIZE : (r + 1) * SIZE]) for r in range(SIZE)]

    def __str__(self) -> str:
        return "\n".join(self.rows())

    # --- Views ---------------------------------------------------------------------------------
    def text_view(self, player: int) -> str:
        case = "upper-case" if player == 0 else "lower-case"
        lines = [f"Generalized chess (army5x5a). You are player {player} ({case} pieces)."]
        lines.append("  12345")
        lines += [f"{ROWS[r]} {row}" for r, row in enumerate(self.rows())]
        lines.append(f"Moves made: {self.plies} of {self._g.max_plies}.")
        if self.moves:
            lines.append(f"Last move: {self.moves[-1]}.")
        if self.winner is not None:
            lines.append(f"Game over: player {self.winner} captured the general and wins.")
        elif self.is_terminal():
            lines.append(f"Game over: {self._g.max_plies} moves without a captured general, a draw.")
        else:
            lines.append(f"Turn: {'you' if self.player == player else f'player {self.player}'}.")
        return "\n".join(lines)

    def info_view(self, player: int) -> str:
        return self.text_view(player) + "\nMoves so far: " + (" ".join(self.moves) or "(none)")

    def json_view(self) -> dict[str, Any]:
        return {
            "board": self.rows(),
            "rows": ROWS,
            "to_move": to_move(self),
            "plies": self.plies,
            "max_plies": self._g.max_plies,
            "last_move": self.moves[-1] if self.moves else None,
            "winner": self.winner,
            "over": self.is_terminal(),
        }


pyspiel.register_game(GAME_TYPE, Army5x5aGame)
