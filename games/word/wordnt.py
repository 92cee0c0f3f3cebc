"""Wordn't (the Wordn't paper) as an OpenSpiel Python game: `wordnt`.

`players` players (default 4) play `rounds` rounds (default 10). At the start
of each round chance nodes draw the seat order (one seat at a time, uniformly
among the seats not yet placed, so the referee's seeded RNG shuffles it). On
their turn a player adds one letter at the start or the end of the string
("prepend x" / "append x"; on the empty string only "append x"), or challenges
the previous player:

- "challenge word": the string is a word of at least `min_word_length` letters
  (default 4). If it is in the list, the challenged player loses the round,
  otherwise the challenger does.
- "challenge dead": no word of the list contains the string. The challenged
  player "names a word": the game looks one up in the list for them (as a bot
  would). If there is one, the challenger loses the round, otherwise the
  challenged player does.

A round ends on a challenge; the loser gets one loss. Returns are minus each
player's total losses (higher is better; rank by returns for finishing order).

Limits: words shorter than `min_word_length` are not words for any purpose
(neither for "challenge word" nor as words to build towards). A string as long
as the longest word only admits challenges, which keeps rounds finite. No
rule ends a round without a challenge. Observations are strings only.
"""

from __future__ import annotations

from typing import Any

import pyspiel

from games.game_type import text_game_type
from games.word.common import LETTERS, WordGame
from games.word.wordlists import find_word_containing, has_substring_word, word_set, words_at_least

PREPEND = 0  # 0..25: prepend letter
APPEND = 26  # 26..51: append letter
CHALLENGE_WORD = 52
CHALLENGE_DEAD = 53
NUM_ACTIONS = 54
_DEFAULTS: dict[str, Any] = {"players": 4, "rounds": 10, "min_word_length": 4, "words": "scowl70"}
_MAX_PLAYERS = 16

GAME_TYPE = text_game_type(
    "wordnt",
    "Wordn't",
    chance_mode=pyspiel.GameType.ChanceMode.EXPLICIT_STOCHASTIC,
    information=pyspiel.GameType.Information.PERFECT_INFORMATION,
    utility=pyspiel.GameType.Utility.CONSTANT_SUM,
    parameters=_DEFAULTS,
    max_num_players=_MAX_PLAYERS,
)

RULES = (
    "Wordn't. Players take turns in this round's order. On your turn either add ONE letter at the "
    'start ("prepend x") or at the end ("append x") of the string, or challenge the previous '
    'player. "challenge word": the string already is an English word of at least {n} letters; '
    '"challenge dead": no word (of {n}+ letters) contains the string. A correct challenge makes the '
    "challenged player lose the round, a wrong one makes the challenger lose it. So: never spell a "
    "word, and keep the string inside some real word. The round ends at the first challenge; each "
    "round shuffles the order. Fewest total losses wins."
)


def action_text(action: int) -> str:
    if action < APPEND:
        return f"prepend {LETTERS[action]}"
    if action < CHALLENGE_WORD:
        return f"append {LETTERS[action - APPEND]}"
    return "challenge word" if action == CHALLENGE_WORD else "challenge dead"


def apply_letter(string: str, action: int) -> str:
    """The string after a letter action (prepend 0..25, append 26..51)."""
    if action < APPEND:
        return LETTERS[action] + string
    return string + LETTERS[action - APPEND]


class WordntGame(WordGame):
    def rules_text(self) -> str:
        return RULES.format(n=self.min_len)

    def __init__(self, params: dict[str, Any] | None = None) -> None:
        p = {**_DEFAULTS, **(params or {})}
        self.n = int(p["players"])
        if not 2 <= self.n <= _MAX_PLAYERS:
            raise ValueError(f"players must be 2..{_MAX_PLAYERS}")
        self.rounds = int(p["rounds"])
        if self.rounds < 1:
            raise ValueError("rounds must be at least 1")
        self.min_len = int(p["min_word_length"])
        self.words_name = str(p["words"])
        words = words_at_least(self.words_name, self.min_len)
        if not words:
            raise ValueError(f"no word of at least {self.min_len} letters in {self.words_name}")
        self.words = word_set(self.words_name, self.min_len)
        self.max_len = max(len(w) for w in words)
        info = pyspiel.GameInfo(
            num_distinct_actions=NUM_ACTIONS,
            max_chance_outcomes=self.n,
            num_players=self.n,
            min_utility=-float(self.rounds),
            max_utility=0.0,
            utility_sum=-float(self.rounds),
            max_game_length=self.rounds * (self.max_len + 1 + self.n),
        )
        super().__init__(GAME_TYPE, info, p)

    def new_initial_state(self) -> WordntState:
        return WordntState(self)

    def is_word(self, s: str) -> bool:
        return s in self.words

    def is_live(self, s: str) -> bool:
        """Some word of at least min_word_length letters contains s."""
        return has_substring_word(self.words_name, self.min_len, s)


class WordntState(pyspiel.State):
    def __init__(self, game: WordntGame) -> None:
        super().__init__(game)
        self._g = game
        self.round = 0  # index of the current round
        self.order: list[int] = []  # this round's seat order (built by chance nodes)
        self.pos = 0  # index into `order` of the player to move
        self.string = ""
        self.last_mover: int | None = None  # who made the current string (the one a challenge targets)
        self.losses = [0] * game.n
        self.results: list[str] = []  # one line per finished round

    # --- OpenSpiel API -------------------------------------------------------------------------
    def current_player(self) -> int:
        if self.round >= self._g.rounds:
            return pyspiel.PlayerId.TERMINAL
        if len(self.order) < self._g.n:
            return pyspiel.PlayerId.CHANCE
        return self.order[self.pos]

    def chance_outcomes(self) -> list[tuple[int, float]]:
        rest = [s for s in range(self._g.n) if s not in self.order]
        return [(s, 1.0 / len(rest)) for s in rest]

    def _legal_actions(self, player: int) -> list[int]:
        if self.string == "":
            return list(range(APPEND, CHALLENGE_WORD))
        letters = list(range(CHALLENGE_WORD)) if len(self.string) < self._g.max_len else []
        return [*letters, CHALLENGE_WORD, CHALLENGE_DEAD]

    def _apply_action(self, action: int) -> None:
        if self.is_chance_node():
            self.order.append(action)
            if len(self.order) == self._g.n - 1:  # the last seat is forced: no chance node for it
                self.order.append(next(s for s in range(self._g.n) if s not in self.order))
            return
        mover = self.order[self.pos]
        if action < CHALLENGE_WORD:
            self.string = apply_letter(self.string, action)
            self.last_mover = mover
            self.pos = (self.pos + 1) % self._g.n
            return
        challenged = self.last_mover
        assert challenged is not None
        s = self.string
        if action == CHALLENGE_WORD:
            upheld = self._g.is_word(s)
            why = f'"{s}" is a word' if upheld else f'"{s}" is not a word'
        else:
            example = find_word_containing(self._g.words_name, self._g.min_len, s)
            upheld = example is None
            why = f'no word contains "{s}"' if upheld else f'"{s}" is in "{example}"'
        loser = challenged if upheld else mover
        self.losses[loser] += 1
        self.results.append(
            f"round {self.round + 1}: seat {mover} said {action_text(action)} against seat {challenged}: "
            f"{why}; seat {loser} lost"
        )
        self.round += 1
        self.order, self.pos, self.string, self.last_mover = [], 0, "", None

    def _action_to_string(self, player: int, action: int) -> str:
        if player == pyspiel.PlayerId.CHANCE:
            return f"seat {action} is number {len(self.order) + 1} this round"
        return action_text(action)

    def is_terminal(self) -> bool:
        return self.round >= self._g.rounds

    def returns(self) -> list[float]:
        return [float(-x) for x in self.losses]

    def __str__(self) -> str:
        return f"round {self.round + 1} order {self.order} string {self.string!r} losses {self.losses}"

    # --- Text views --------------------------------------------------------------------------
    def text_view(self, player: int) -> str:
        g = self._g
        lines = [f"You are seat {player} of {g.n}." if player >= 0 else f"Spectator view ({g.n} seats)."]
        if self.is_terminal():
            lines.append(f"Game over after {g.rounds} rounds. Losses: {self._losses_text()}.")
        else:
            lines.append(f"Round {self.round + 1} of {g.rounds}. Losses so far: {self._losses_text()}.")
            if len(self.order) == g.n:
                lines.append("Order this round: " + ", ".join(f"seat {s}" for s in self.order) + ".")
                cur = self.order[self.pos]
                you = " (you)" if cur == player else ""
                lines.append(
                    f'String: "{self.string}" ({len(self.string)} letters).'
                    if self.string
                    else 'String: (empty); the first player picks any letter with "append x".'
                )
                lines.append(f"Turn: seat {cur}{you}.")
                if self.last_mover is not None:
                    lines.append(f"The previous player (whom you may challenge) is seat {self.last_mover}.")
            else:
                lines.append("The order of this round is being drawn.")
        if self.results:
            lines.append("Last round: " + self.results[-1] + ".")
        lines.append(g.rules_text())
        return "\n".join(lines)

    def _losses_text(self) -> str:
        return ", ".join(f"seat {s}: {x}" for s, x in enumerate(self.losses))

    def json_view(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "rounds": self._g.rounds,
            "order": list(self.order),
            "string": self.string,
            "to_move": self.current_player() if self.current_player() >= 0 else None,
            "previous": self.last_mover,
            "losses": list(self.losses),
            "min_word_length": self._g.min_len,
        }


pyspiel.register_game(GAME_TYPE, WordntGame)
