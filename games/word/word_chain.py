"""Word chain (the Minimax-ToT paper, appendix A) as an OpenSpiel Python game: `word_chain`.

Two players take turns saying a word. Each word must start with the last letter
of the previous word (the opener's first word starts with the game's first
letter), must not repeat an earlier word, and must be in the list of valid
words: WordNet 3.0 adjectives by default (`pos=adj`). A player's score is the
total number of letters of their words, except that only half (rounded down)
of the opener's first word counts. The first to reach `threshold` letters (40)
wins at once. A player with no valid word left loses; a word outside the list
is an illegal move, which the referee treats by its fault policy (a loss under
the default `forfeit`, as in the paper). Returns are +1 / -1.

Every word of the list has an action id (its index in the sorted list), so
OpenSpiel algorithms see an ordinary action space; `action_to_string` is the
word itself, which the referee matches case-insensitively against free text.

Parameters: `threshold` (40), `pos` (adj | noun | verb | adv; picks the shipped
WordNet list `wordnet_<pos>`), `words` (a shipped list name or a file path;
overrides `pos` when set), `first_letter` ("" means a chance node draws it
uniformly; the paper plays each of the 26 letters twice, once per seat order).

Limits: validity is membership in the list (no inflection or spelling
variants beyond WordNet's exception lists); only single a-z words; the action
space is the size of the list (about 19k for adjectives), so tree search
without a strong prior is hopeless; observations are strings only.
"""

from __future__ import annotations

import functools
from typing import Any

import pyspiel

from games.game_type import text_game_type
from games.word.common import LETTERS, WordGame
from games.word.wordlists import load_words

POS_NAMES = {"adj": "adjectives", "noun": "nouns", "verb": "verbs", "adv": "adverbs"}
_DEFAULTS: dict[str, Any] = {"threshold": 40, "pos": "adj", "words": "", "first_letter": ""}

GAME_TYPE = text_game_type(
    "word_chain",
    "Word chain (the Minimax-ToT paper rules)",
    chance_mode=pyspiel.GameType.ChanceMode.EXPLICIT_STOCHASTIC,
    information=pyspiel.GameType.Information.PERFECT_INFORMATION,
    utility=pyspiel.GameType.Utility.ZERO_SUM,
    parameters=_DEFAULTS,
)

RULES = (
    "Word chain. Two players take turns saying one English word. Only {kind} are valid (checked "
    "against {source}). Each word must start with the last letter of the previous word, and no "
    "word may be repeated. Your score is the total number of letters of your words; only half "
    "(rounded down) of the opener's first word counts. The first player to reach {t} letters "
    "wins. A word that is not valid, or having no valid word, loses. Answer with the word only."
)


@functools.lru_cache(maxsize=16)
def _by_letter(words: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    out: dict[str, list[int]] = {c: [] for c in LETTERS}
    for i, w in enumerate(words):
        out[w[0]].append(i)
    return {c: tuple(ids) for c, ids in out.items()}


class WordChainGame(WordGame):
    def rules_text(self) -> str:
        return RULES.format(kind=POS_NAMES[self.pos], source=self.source, t=self.threshold)

    def __init__(self, params: dict[str, Any] | None = None) -> None:
        p = {**_DEFAULTS, **(params or {})}
        self.threshold = int(p["threshold"])
        if self.threshold < 1:
            raise ValueError("threshold must be positive")
        self.pos = str(p["pos"])
        if self.pos not in POS_NAMES:
            raise ValueError(f"pos must be one of {', '.join(POS_NAMES)}, not {self.pos!r}")
        self.words_name = str(p["words"]) or f"wordnet_{self.pos}"
        self.source = "WordNet 3.0" if self.words_name.startswith("wordnet") else self.words_name
        self.first_letter = str(p["first_letter"]).strip().lower()
        if self.first_letter and (len(self.first_letter) != 1 or self.first_letter not in LETTERS):
            raise ValueError(f"first_letter must be empty or one letter a-z, not {self.first_letter!r}")
        self.words = load_words(self.words_name)
        self.index = {w: i for i, w in enumerate(self.words)}
        self.by_letter = _by_letter(self.words)
        info = pyspiel.GameInfo(
            num_distinct_actions=len(self.words),
            max_chance_outcomes=26,
            num_players=2,
            min_utility=-1.0,
            max_utility=1.0,
            utility_sum=0.0,
            # Every word scores at least one letter (half of a 2+ letter opener), so each player
            # reaches the threshold within `threshold` words.
            max_game_length=2 * self.threshold + 1,
        )
        super().__init__(GAME_TYPE, info, p)

    def new_initial_state(self) -> WordChainState:
        return WordChainState(self)


class WordChainState(pyspiel.State):
    def __init__(self, game: WordChainGame) -> None:
        super().__init__(game)
        self._g = game
        self.letter = game.first_letter  # the letter the next word must start with ("" = not drawn yet)
        self.played: list[int] = []
        self.scores = [0, 0]
        self.player = 0
        self.winner: int | None = None
        self.reason = ""

    # --- OpenSpiel API -------------------------------------------------------------------------
    def current_player(self) -> int:
        if self.winner is not None:
            return pyspiel.PlayerId.TERMINAL
        if not self.letter:
            return pyspiel.PlayerId.CHANCE
        return self.player

    def chance_outcomes(self) -> list[tuple[int, float]]:
        return [(i, 1.0 / 26) for i in range(26)]

    def _legal_actions(self, player: int) -> list[int]:
        if self.winner is not None or not self.letter:
            return []
        used = set(self.played)
        return [i for i in self._g.by_letter[self.letter] if i not in used]

    def legal_action_texts(self, player: int) -> list[tuple[int, str]]:
        """Legal ids with their words in one call (`games.view.legal_actions` uses it): a turn
        can have thousands of words, and one pyspiel round trip per word costs tens of ms."""
        if player != self.current_player():
            return []
        words = self._g.words
        return [(i, words[i]) for i in self._legal_actions(player)]

    def _apply_action(self, action: int) -> None:
        if not self.letter:  # chance: the first letter
            self.letter = LETTERS[action]
            self._check_stuck()
            return
        word = self._g.words[action]
        mover = self.player
        self.scores[mover] += len(word) // 2 if not self.played and mover == 0 else len(word)
        self.played.append(action)
        self.letter = word[-1]
        if self.scores[mover] >= self._g.threshold:
            self.winner = mover
            self.reason = f"player {mover} reached {self.scores[mover]} letters"
            return
        self.player = 1 - mover
        self._check_stuck()

    def _check_stuck(self) -> None:
        # OpenSpiel needs a legal action at every non-terminal node; a player with no valid word
        # left has "failed to respond", which loses.
        if not self._legal_actions(self.player):
            self.winner = 1 - self.player
            self.reason = f'player {self.player} has no valid word starting with "{self.letter}" left'

    def _action_to_string(self, player: int, action: int) -> str:
        if player == pyspiel.PlayerId.CHANCE:
            return f"first letter {LETTERS[action]}"
        return self._g.words[action]

    def is_terminal(self) -> bool:
        return self.winner is not None

    def returns(self) -> list[float]:
        if self.winner is None:
            return [0.0, 0.0]
        return [1.0 if p == self.winner else -1.0 for p in range(2)]

    def __str__(self) -> str:
        return " ".join(self._g.words[i] for i in self.played)

    # --- Text views --------------------------------------------------------------------------
    def text_view(self, player: int) -> str:
        g = self._g
        lines = [f"You are player {player}." if player >= 0 else "Spectator view."]
        lines.append(
            f"Scores (letters): player 0: {self.scores[0]}, player 1: {self.scores[1]}; {g.threshold} wins."
        )
        if self.played:
            lines.append("Words so far: " + ", ".join(g.words[i] for i in self.played) + ".")
        else:
            lines.append("No word has been said yet.")
        if self.winner is not None:
            lines.append(f"Game over: player {self.winner} won ({self.reason}).")
        elif self.letter:
            you = " (you)" if player == self.player else ""
            lines.append(
                f"Turn: player {self.player}{you}. The next word must start with "
                f'"{self.letter}" and be one of the valid {POS_NAMES[g.pos]} not used yet.'
            )
        lines.append(g.rules_text())
        return "\n".join(lines)

    def json_view(self) -> dict[str, Any]:
        return {
            "words": [self._g.words[i] for i in self.played],
            "scores": list(self.scores),
            "next_letter": self.letter or None,
            "to_move": None if self.winner is not None or not self.letter else self.player,
            "threshold": self._g.threshold,
            "winner": self.winner,
        }


pyspiel.register_game(GAME_TYPE, WordChainGame)
