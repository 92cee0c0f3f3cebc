"""Ghost (the Minimax-ToT paper, section 4.2) as an OpenSpiel Python game: `ghost`.

Two players add one letter at a time at the end of a fragment. A fragment must
stay the start of a word of at least `min_word_length` letters (default 5) and
must not spell such a word. Instead of adding a letter, a player may challenge
the previous player: if some word of the list starts with the fragment, the
challenger loses; otherwise the challenged player loses. Completing a word of
at least `min_word_length` letters loses at once. Single round (the paper's
single-round decisive rule); returns are +1 / -1.

Parameters: `words` (shipped list name or a file path, default `scowl70`),
`min_word_length` (5), `first_letter` ("" lets player 0 choose; a letter starts
the fragment with it and player 0 adds the second letter).

Limits: bluffing is legal (any letter may be added; an impossible fragment only
loses when challenged), so letters are always legal until the fragment is as
long as the longest word, after which only "challenge" is. Shorter words than
`min_word_length` do not count, neither for completing nor for challenges.
The list is a-z only. Observations are strings (no tensors).
"""

from __future__ import annotations

from typing import Any

import pyspiel

from games.game_type import text_game_type
from games.word.common import LETTERS, WordGame
from games.word.wordlists import prefix_set, word_set, words_at_least

CHALLENGE = 26
_DEFAULTS: dict[str, Any] = {"words": "scowl70", "min_word_length": 5, "first_letter": ""}

GAME_TYPE = text_game_type(
    "ghost",
    "Ghost (single round)",
    chance_mode=pyspiel.GameType.ChanceMode.DETERMINISTIC,
    information=pyspiel.GameType.Information.PERFECT_INFORMATION,
    utility=pyspiel.GameType.Utility.ZERO_SUM,
    parameters=_DEFAULTS,
)

RULES = (
    "Ghost. Two players take turns adding one letter (a-z) at the END of the fragment. "
    "The fragment must remain the beginning of an English word of at least {n} letters, and you "
    "must not complete such a word: whoever spells a whole word of {n}+ letters loses at once. "
    'Instead of adding a letter you may say "challenge": you claim that no word starts with the '
    "fragment. If a word of {n}+ letters starting with it exists, the challenger loses; otherwise "
    "the player who added the last letter loses. One round decides the game."
)


class GhostGame(WordGame):
    def rules_text(self) -> str:
        return RULES.format(n=self.min_len)

    def __init__(self, params: dict[str, Any] | None = None) -> None:
        p = {**_DEFAULTS, **(params or {})}
        self.words_name = str(p["words"])
        self.min_len = int(p["min_word_length"])
        if self.min_len < 1:
            raise ValueError("min_word_length must be at least 1")
        self.first_letter = str(p["first_letter"]).strip().lower()
        if self.first_letter and (len(self.first_letter) != 1 or self.first_letter not in LETTERS):
            raise ValueError(f"first_letter must be empty or one letter a-z, not {self.first_letter!r}")
        words = words_at_least(self.words_name, self.min_len)
        if not words:
            raise ValueError(f"no word of at least {self.min_len} letters in {self.words_name}")
        self.words = word_set(self.words_name, self.min_len)
        self.prefixes = prefix_set(self.words_name, self.min_len)
        self.max_len = max(len(w) for w in words)
        info = pyspiel.GameInfo(
            num_distinct_actions=27,
            max_chance_outcomes=0,
            num_players=2,
            min_utility=-1.0,
            max_utility=1.0,
            utility_sum=0.0,
            max_game_length=self.max_len + 1,
        )
        super().__init__(GAME_TYPE, info, p)

    def new_initial_state(self) -> GhostState:
        return GhostState(self)


class GhostState(pyspiel.State):
    def __init__(self, game: GhostGame) -> None:
        super().__init__(game)
        self._g = game
        self.fragment = game.first_letter
        self.player = 0
        self.loser: int | None = None
        self.reason = ""

    # --- OpenSpiel API -------------------------------------------------------------------------
    def current_player(self) -> int:
        return pyspiel.PlayerId.TERMINAL if self.loser is not None else self.player

    def _legal_actions(self, player: int) -> list[int]:
        if self.loser is not None:
            return []
        letters = list(range(26)) if len(self.fragment) < self._g.max_len else []
        return letters + ([CHALLENGE] if self.fragment else [])

    def _apply_action(self, action: int) -> None:
        mover = self.player
        if action == CHALLENGE:
            if self.fragment in self._g.prefixes:
                self.loser = mover
                self.reason = f'challenged "{self.fragment}", but a word starts with it'
            else:
                self.loser = 1 - mover
                self.reason = f'no word starts with "{self.fragment}" (challenge upheld)'
            return
        self.fragment += LETTERS[action]
        if self.fragment in self._g.words:
            self.loser = mover
            self.reason = f'completed the word "{self.fragment}"'
            return
        self.player = 1 - mover

    def _action_to_string(self, player: int, action: int) -> str:
        return "challenge" if action == CHALLENGE else LETTERS[action]

    def is_terminal(self) -> bool:
        return self.loser is not None

    def returns(self) -> list[float]:
        if self.loser is None:
            return [0.0, 0.0]
        return [-1.0 if p == self.loser else 1.0 for p in range(2)]

    def __str__(self) -> str:
        return self.fragment

    # --- Text views --------------------------------------------------------------------------
    def text_view(self, player: int) -> str:
        g = self._g
        lines = [f"You are player {player}." if player >= 0 else "Spectator view."]
        frag = f'"{self.fragment}" ({len(self.fragment)} letters)' if self.fragment else "(empty)"
        lines.append(f"Fragment: {frag}")
        if self.loser is not None:
            lines.append(f"Game over: player {self.loser} lost: {self.reason}.")
        else:
            you = " (you)" if player == self.player else ""
            lines.append(f"Turn: player {self.player}{you}.")
            moves = "a letter a-z" if len(self.fragment) < g.max_len else "no letter (fragment at maximum)"
            if self.fragment:
                moves += ', or "challenge"'
            lines.append(f"Moves: {moves}.")
        lines.append(g.rules_text())
        return "\n".join(lines)

    def json_view(self) -> dict[str, Any]:
        return {
            "fragment": self.fragment,
            "to_move": None if self.loser is not None else self.player,
            "min_word_length": self._g.min_len,
            "loser": self.loser,
        }


pyspiel.register_game(GAME_TYPE, GhostGame)
