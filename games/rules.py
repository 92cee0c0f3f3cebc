"""Rules text sent with a match's first turn, so an LLM agent knows what it plays.

OpenSpiel carries no rules prose; known games get a short text here, our own Python
games provide theirs as `game.rules_text()` (for their parameters), and any other game gets a generic text
built from its type (name, players, information) that tells the agent to choose
among the legal action texts.
"""

from __future__ import annotations

import pyspiel

_RULES: dict[str, str] = {
    "tic_tac_toe": "Tic-tac-toe on a 3x3 board. Players alternate placing their mark (x moves first) "
    "in an empty cell, named x(row,col). Three in a row, column or diagonal wins; a full board is a draw.",
    "connect_four": "Connect Four on a 6x7 board. Players alternate dropping a piece into a column "
    "(0-6); it falls to the lowest empty cell. Four in a row in any direction wins.",
    "kuhn_poker": "Kuhn poker: each player antes 1 and gets one private card. Players may pass or bet "
    "1 in turn. If all remaining players have acted, the highest card among those still in wins the pot.",
    "leduc_poker": "Leduc hold'em: a six-card deck (two suits of J, Q, K). Each player gets one private "
    "card; a betting round; one public card; a second betting round. A pair with the public card "
    "wins, otherwise the higher card. Actions: fold, call, raise.",
    "liars_dice": "Liar's dice: each player rolls hidden dice. Players in turn bid a quantity and face "
    "value across all dice, each bid higher than the last, or call 'Liar' on the previous bid. On a "
    "call, dice are revealed: if the bid holds the caller loses, otherwise the bidder loses.",
    "goofspiel": "Goofspiel: players hold cards 1..N and bid simultaneously on a revealed prize card; "
    "the highest bid wins the prize's points, ties discard it. Most points at the end wins.",
    "backgammon": "Backgammon: move your checkers around the board by the dice rolled and bear them all "
    "off first. Actions name the checker moves for the current roll.",
    "chess": "Chess under the standard rules. The observation is the position in FEN; actions are moves "
    "in standard algebraic notation.",
}


def rules_text(game: pyspiel.Game) -> str:
    gt = game.get_type()
    own = getattr(game, "rules_text", None)
    text = own() if callable(own) else _RULES.get(gt.short_name)
    if gt.short_name == "mnk":  # generalized tic-tac-toe: the text depends on m, n, k
        from games.cwm.gen_tic_tac_toe import mnk_rules

        text = mnk_rules(game)
    if text is None:
        info = (
            "perfect" if gt.information == pyspiel.GameType.Information.PERFECT_INFORMATION else "imperfect"
        )
        text = f"{gt.long_name} ({gt.short_name}), {game.num_players()} players, {info} information."
    return text + " On your turn, answer with exactly one of the legal actions."
