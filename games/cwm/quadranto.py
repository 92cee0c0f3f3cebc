"""Quadranto (appendix I.9 of "Code World Models for General Game Playing", Lehrach et al.) as an
OpenSpiel Python game: `quadranto`.

Two players on a 4x4 grid split into four 2x2 quadrants. Chance places player 0 uniformly on a
cell of the top-left quadrant, then player 1 on a cell of the bottom-right one. Players then take
turns, player 0 first: Up, Down, Left, Right or Stay. A player whose move lands on the other
player's cell catches it and wins (+1 / -1). After `max_moves` moves in total (default 20, both
players' moves counted, Stay included) without a catch the game is a draw (0 / 0).

Each seat observes its own cell and only the quadrant of the opponent; neither knows where the
other is exactly until one catches the other. `information_state_string` adds the seat's log: its
own moves and, after each of the opponent's turns, the opponent's quadrant.

Our readings where the appendix is open (the paper's own code is not public):
- A move off the board is not a legal action (Stay always is), so 2 to 5 actions are legal.
- Stay is a move: it counts toward the 20, and it never catches (only landing on a cell does).
- Actions: 0 Up, 1 Down, 2 Left, 3 Right, 4 Stay; chance actions are the cell, row * 4 + column.

Limits: strings only, no tensors.
"""

from __future__ import annotations

from typing import Any

import pyspiel

from games.cwm.common import EventLog, PaperGame, to_move
from games.game_type import text_game_type

SIZE = 4
MOVES = ("Up", "Down", "Left", "Right", "Stay")
STEP = ((-1, 0), (1, 0), (0, -1), (0, 1), (0, 0))
STAY = 4
QUADRANTS = ("top-left", "top-right", "bottom-left", "bottom-right")
START_QUADRANT = (0, 3)  # player 0 top-left, player 1 bottom-right
_DEFAULTS: dict[str, Any] = {"max_moves": 20}

GAME_TYPE = text_game_type(
    "quadranto",
    "Quadranto",
    chance_mode=pyspiel.GameType.ChanceMode.EXPLICIT_STOCHASTIC,
    information=pyspiel.GameType.Information.IMPERFECT_INFORMATION,
    utility=pyspiel.GameType.Utility.ZERO_SUM,
    parameters=_DEFAULTS,
)

RULES = (
    "Quadranto is a partially observable game in which two players try to catch each other in a 4 by 4 "
    "matrix (rows 0-3 from top to bottom, columns 0-3 from left to right). The matrix is divided in 4 "
    "quadrants of 2x2 cells: top-left, top-right, bottom-left, bottom-right. At the beginning, player 0 is "
    "randomly placed in the top left quadrant and player 1 in the bottom right quadrant. Players take turns, "
    'player 0 first. During their turn, each player can move in one of the four cardinal directions, "Up", '
    '"Down", "Left", "Right" (not off the board), or "Stay", which means they remain where they are. When a '
    "player moves, if it lands on the same location where the other player is, it wins and the game ends. "
    "The observation tells the player where it is located and in which quadrant the opponent player is "
    "located; neither player knows exactly where the other player is until one catches the other. If the "
    "players perform a total of {n} moves (Stay counts as a move) without catching each other, the game "
    "ends in a draw and both players get 0 points. If one catches the other, the winning player gets +1 "
    "point and the losing player gets -1 point."
)


def quadrant(cell: int) -> int:
    row, col = divmod(cell, SIZE)
    return (row // 2) * 2 + col // 2


def cell_text(cell: int) -> str:
    row, col = divmod(cell, SIZE)
    return f"(row {row}, column {col})"


def quadrant_cells(q: int) -> list[int]:
    return [c for c in range(SIZE * SIZE) if quadrant(c) == q]


class QuadrantoGame(PaperGame):
    def __init__(self, params: dict[str, Any] | None = None) -> None:
        p = {**_DEFAULTS, **(params or {})}
        self.max_moves = int(p["max_moves"])
        if self.max_moves < 1:
            raise ValueError("max_moves must be at least 1")
        info = pyspiel.GameInfo(
            num_distinct_actions=len(MOVES),
            max_chance_outcomes=SIZE * SIZE,
            num_players=2,
            min_utility=-1.0,
            max_utility=1.0,
            utility_sum=0.0,
            max_game_length=2 + self.max_moves,
        )
        super().__init__(GAME_TYPE, info, p)

    def rules_text(self) -> str:
        return RULES.format(n=self.max_moves)

    def new_initial_state(self) -> QuadrantoState:
        return QuadrantoState(self)


class QuadrantoState(pyspiel.State):
    def __init__(self, game: QuadrantoGame) -> None:
        super().__init__(game)
        self._g = game
        self.pos: list[int | None] = [None, None]
        self.moves = 0
        self.player = 0
        self.winner: int | None = None
        self.log = EventLog()

    # --- OpenSpiel API -------------------------------------------------------------------------
    def current_player(self) -> int:
        if self.is_terminal():
            return pyspiel.PlayerId.TERMINAL
        if None in self.pos:
            return pyspiel.PlayerId.CHANCE
        return self.player

    def chance_outcomes(self) -> list[tuple[int, float]]:
        who = self.pos.index(None)
        cells = quadrant_cells(START_QUADRANT[who])
        return [(c, 1.0 / len(cells)) for c in cells]

    def _targets(self, player: int) -> dict[int, int]:
        """Legal action -> the cell it leads to."""
        here = self.pos[player]
        assert here is not None
        row, col = divmod(here, SIZE)
        out = {}
        for a, (dr, dc) in enumerate(STEP):
            r, c = row + dr, col + dc
            if 0 <= r < SIZE and 0 <= c < SIZE:
                out[a] = r * SIZE + c
        return out

    def _legal_actions(self, player: int) -> list[int]:
        if self.current_player() != player:
            return []
        return sorted(self._targets(player))

    def _apply_action(self, action: int) -> None:
        if None in self.pos:
            who = self.pos.index(None)
            if action not in quadrant_cells(START_QUADRANT[who]):
                raise ValueError(f"player {who} cannot start on cell {action}")
            self.pos[who] = action
            self.log.add(None, {who: f"you start at {cell_text(action)}"})
            return
        mover, other = self.player, 1 - self.player
        target = self._targets(mover).get(action)
        if target is None:
            raise ValueError(f"{MOVES[action]} leaves the board")
        self.pos[mover] = target
        self.moves += 1
        mine = (
            f"you stayed at {cell_text(target)}"
            if action == STAY
            else f"you moved {MOVES[action]} to {cell_text(target)}"
        )
        if action != STAY and target == self.pos[other]:
            self.winner = mover
            caught = (
                f"player {mover} moved {MOVES[action]} onto {cell_text(target)} and caught player {other}"
            )
            self.log.add(caught, {mover: mine + f" and caught player {other}"})
            return
        seen = f"player {mover} moved; it is in the {QUADRANTS[quadrant(target)]} quadrant"
        self.log.add(seen, {mover: mine})
        self.player = other

    def _action_to_string(self, player: int, action: int) -> str:
        if player == pyspiel.PlayerId.CHANCE:
            return f"start at {cell_text(action)}"
        return MOVES[action]

    def is_terminal(self) -> bool:
        return self.winner is not None or self.moves >= self._g.max_moves

    def returns(self) -> list[float]:
        if self.winner is None:
            return [0.0, 0.0]
        return [1.0 if p == self.winner else -1.0 for p in range(2)]

    def __str__(self) -> str:
        """The whole state (both cells): for logs, never sent to a seat."""
        return f"player 0 at {self.pos[0]}, player 1 at {self.pos[1]}, {self.moves} moves"

    # --- Views ---------------------------------------------------------------------------------
    def _grid(self, player: int) -> list[str]:
        """Y = you, ? = the opponent's quadrant (it is somewhere there), . = elsewhere."""
        mine, theirs = self.pos[player], self.pos[1 - player]
        rows = []
        for r in range(SIZE):
            row = ""
            for c in range(SIZE):
                cell = r * SIZE + c
                if self.winner is not None and cell == self.pos[self.winner]:
                    row += "X"
                elif cell == mine:
                    row += "Y"
                elif theirs is not None and quadrant(cell) == quadrant(theirs):
                    row += "?"
                else:
                    row += "."
            rows.append(row)
        return rows

    def text_view(self, player: int) -> str:
        mine, theirs = self.pos[player], self.pos[1 - player]
        lines = [f"Quadranto. You are player {player}."]
        if mine is None:
            lines.append("Players are being placed.")
            return "\n".join(lines)
        lines.append(f"You are at {cell_text(mine)}, in the {QUADRANTS[quadrant(mine)]} quadrant.")
        if theirs is not None:
            lines.append(f"The opponent is in the {QUADRANTS[quadrant(theirs)]} quadrant.")
        lines.append("Map (Y you, ? the opponent's quadrant, X a catch):")
        lines += self._grid(player)
        lines.append(f"Moves made: {self.moves} of {self._g.max_moves}.")
        if self.winner is not None:
            lines.append(f"Game over: player {self.winner} caught player {1 - self.winner} and wins.")
        elif self.is_terminal():
            lines.append(f"Game over: {self._g.max_moves} moves without a catch, a draw.")
        elif theirs is None:
            lines.append("The opponent is being placed.")
        else:
            turn = "you" if self.player == player else f"player {self.player}"
            lines.append(f"Turn: {turn}.")
        return "\n".join(lines)

    def info_view(self, player: int) -> str:
        seen = self.log.lines(player)
        return (
            self.text_view(player)
            + "\nWhat you have seen so far:\n"
            + "\n".join(f"{i + 1}. {line}" for i, line in enumerate(seen))
        )

    def json_view(self, seat: int) -> dict[str, Any]:
        mine, theirs = self.pos[seat], self.pos[1 - seat]
        caught = self.winner is not None
        return {
            "seat": seat,
            "position": list(divmod(mine, SIZE)) if mine is not None else None,
            "quadrant": QUADRANTS[quadrant(mine)] if mine is not None else None,
            "opponent_quadrant": QUADRANTS[quadrant(theirs)] if theirs is not None else None,
            "opponent_position": list(divmod(theirs, SIZE)) if caught and theirs is not None else None,
            "moves": self.moves,
            "max_moves": self._g.max_moves,
            "to_move": to_move(self),
            "winner": self.winner,
            "over": self.is_terminal(),
        }


pyspiel.register_game(GAME_TYPE, QuadrantoGame)
