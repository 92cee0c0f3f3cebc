"""Word games as OpenSpiel Python games.

Importing this package registers `ghost`, `word_chain` and `wordnt` with
`pyspiel.register_game` (rules, parameters and limits are in each module's
docstring). Word lists live in `games.word.wordlists`.
"""

from __future__ import annotations

from games.word import ghost, word_chain, wordnt

__all__ = ["ghost", "word_chain", "wordnt"]
