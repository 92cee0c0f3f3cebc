"""Hand of war (appendix I.10 of "Code World Models for General Game Playing", Lehrach et al.) as
an OpenSpiel Python game: `hand_of_war`.

A 16-card deck (J, Q, K, A in four suits; A is high, suits never matter) is dealt evenly, face
down, into two draw piles of 8; each player draws three cards into a hand. In a battle, player 0
and then player 1 place one hand card face down; both are revealed and the higher rank takes all
cards at stake into its win pile; then both players draw back to three. Equal ranks start a
showdown: each player burns the top card of its draw pile face down, then player 0 and then
player 1 place a hand card face up; the higher rank takes every card at stake (tied cards, burned
cards, the new cards); another tie repeats the showdown. Hands are refilled only after a battle or
showdown is won. The game ends at once when a player must draw or burn from an empty draw pile
(or must play from an empty hand, see below): the larger win pile wins, equal piles draw. Win
piles are never reshuffled. A player who owns all 16 cards (win pile, hand and draw pile) wins at
once; that is rare (the loser has no card left anywhere, e.g. after a long showdown). Returns
+1 / -1, or 0 for a draw.

Our readings where the appendix is open (the paper's own code is not public):
- Sequential moves, as its notation says ("player 0 always moves first, followed by player 1"):
  a face-down battle card is hidden from the opponent until both are down; a showdown card is
  face up, so player 1 sees player 0's showdown card before choosing.
- Chance draws each card when it is drawn or burned, uniformly from all cards not yet seen by
  anyone. That is the same distribution as shuffling and dealing two piles up front (every
  interleaving of draws from two uniformly shuffled piles is a uniformly random sequence), and it
  lets a seat see its own draws at once. Burned cards stay face down for good (they move to the
  winner's pile unseen).
- Three ties in a row empty both hands; the next showdown cannot be played, which ends the game
  like an empty draw pile. Cards still at stake when the game ends count for nobody.
- Actions are cards: id = rank * 4 + suit, rank J Q K A = 0..3, suit s h d c = 0..3 ("As").

Information: a seat sees its hand, its own draws, both piles' sizes, every revealed card (the
appendix's PubliclyRevealedCards), and the fact (not the card) that the opponent drew, burned or
placed a card face down. `information_state_string` is the present view plus the seat's log.
Limits: strings only, no tensors.
"""

from __future__ import annotations

from typing import Any

import pyspiel

from games.cwm.common import EventLog, PaperGame, to_move
from games.game_type import text_game_type

RANKS = "JQKA"
SUITS = "shdc"
DECK = 16
HAND = 3
PILE = DECK // 2

GAME_TYPE = text_game_type(
    "hand_of_war",
    "Hand of war",
    chance_mode=pyspiel.GameType.ChanceMode.EXPLICIT_STOCHASTIC,
    information=pyspiel.GameType.Information.IMPERFECT_INFORMATION,
    utility=pyspiel.GameType.Utility.ZERO_SUM,
    parameters={},
)

RULES = (
    "Hand of War. A 16-card deck (J, Q, K, A in four suits; ranking Ace (high), K, Q, J; suits do not "
    "matter) is shuffled and dealt evenly into two face-down draw piles; each player draws the top three "
    "cards into a hand. Battle: player 0 and then player 1 each place one card from their hand face down; "
    "both are flipped and the higher rank takes both cards into its win pile; then both players draw from "
    "their draw pile back to three cards. Showdown (the cards tie): each player places 1 card from their "
    "draw pile face down, then player 0 and then player 1 place one card from their hand face up; the "
    "higher card wins all cards in the showdown; another tie repeats the showdown (burn 1, choose a card); "
    "hands are replenished to three cards after the showdown. The game ends immediately if one player "
    "owns all 16 cards, or when a player must draw or burn a card and their draw pile is empty (or must "
    "play a card with an empty hand): the player with more cards in their win pile wins, equal win piles "
    "are a draw. The win pile is never reshuffled into the draw pile. Cards played so far are listed as "
    "PubliclyRevealedCards. Your actions are the cards in your hand, e.g. As or Kh."
)


def card_name(card: int) -> str:
    return RANKS[card // 4] + SUITS[card % 4]


def rank(card: int) -> int:
    return card // 4


def _names(cards: list[int]) -> str:
    return " ".join(card_name(c) for c in cards) if cards else "(none)"


class HandOfWarGame(PaperGame):
    def __init__(self, params: dict[str, Any] | None = None) -> None:
        if params:
            raise ValueError(f"hand_of_war takes no parameters; passed {params}")
        info = pyspiel.GameInfo(
            num_distinct_actions=DECK,
            max_chance_outcomes=DECK,
            num_players=2,
            min_utility=-1.0,
            max_utility=1.0,
            utility_sum=0.0,
            max_game_length=2 * DECK,  # each card is drawn or burned once and played at most once
        )
        super().__init__(GAME_TYPE, info, {})

    def rules_text(self) -> str:
        return RULES

    def new_initial_state(self) -> HandOfWarState:
        return HandOfWarState(self)


class HandOfWarState(pyspiel.State):
    def __init__(self, game: HandOfWarGame) -> None:
        super().__init__(game)
        self.unseen = list(range(DECK))  # cards still in a draw pile, known to nobody
        self.pile = [PILE, PILE]
        self.hands: list[list[int]] = [[], []]
        self.wins: list[list[int]] = [[], []]
        self.stake: list[int] = []  # cards on the table in the current battle or showdown
        self.burned = 0  # of them, face down
        self.chosen: list[int | None] = [None, None]
        self.showdown = 0  # how many ties the current battle has had
        self.revealed: list[int] = []
        # Chance steps due next, as (player, "draw" | "burn"); the deal is three draws each.
        self.pending: list[tuple[int, str]] = [(0, "draw")] * HAND + [(1, "draw")] * HAND
        self.over = False
        self.winner: int | None = None
        self.reason = ""
        self.log = EventLog()

    # --- OpenSpiel API -------------------------------------------------------------------------
    def current_player(self) -> int:
        if self.over:
            return pyspiel.PlayerId.TERMINAL
        if self.pending:
            return pyspiel.PlayerId.CHANCE
        return 0 if self.chosen[0] is None else 1

    def chance_outcomes(self) -> list[tuple[int, float]]:
        p = 1.0 / len(self.unseen)
        return [(c, p) for c in self.unseen]

    def _legal_actions(self, player: int) -> list[int]:
        if self.over or self.pending or player != self.current_player():
            return []
        return sorted(self.hands[player])

    def _apply_action(self, action: int) -> None:
        if self.pending:
            self._chance(action)
        else:
            self._play(self.current_player(), action)
        self._settle()

    def _chance(self, card: int) -> None:
        if card not in self.unseen:
            raise ValueError(f"card {card_name(card)} is not in a draw pile")
        player, kind = self.pending.pop(0)
        self.unseen.remove(card)
        self.pile[player] -= 1
        if kind == "draw":
            self.hands[player].append(card)
            self.log.add(f"player {player} drew a card", {player: f"you drew {card_name(card)}"})
        else:
            self.stake.append(card)
            self.burned += 1
            self.log.add(f"player {player} burned a card face down")

    def _play(self, player: int, card: int) -> None:
        if card not in self.hands[player]:
            raise ValueError(f"player {player} does not hold {card_name(card)}")
        self.hands[player].remove(card)
        self.chosen[player] = card
        self.stake.append(card)
        if self.showdown:
            self.revealed.append(card)
            self.log.add(f"player {player} played {card_name(card)} face up")
        else:
            self.log.add(
                f"player {player} placed a card face down",
                {player: f"you placed {card_name(card)} face down"},
            )
        if player == 1:
            self._battle()

    def _battle(self) -> None:
        a, b = self.chosen
        assert a is not None and b is not None
        if not self.showdown:
            self.revealed += [a, b]
        self.chosen = [None, None]
        if rank(a) == rank(b):
            self.showdown += 1
            self.log.add(f"battle: {card_name(a)} against {card_name(b)}: a tie, showdown")
            self.pending = [(0, "burn"), (1, "burn")]
            return
        winner = 0 if rank(a) > rank(b) else 1
        self.log.add(
            f"battle: {card_name(a)} against {card_name(b)}: player {winner} wins {len(self.stake)} cards"
        )
        self.wins[winner] += self.stake
        self.stake, self.burned, self.showdown = [], 0, 0
        if len(self.wins[winner]) + len(self.hands[winner]) + self.pile[winner] == DECK:
            self._end(f"player {winner} owns all {DECK} cards", winner)
            return
        self.pending = [(p, "draw") for p in (0, 1) for _ in range(HAND - len(self.hands[p]))]

    def _settle(self) -> None:
        """End the game where the next step cannot be done (appendix: 'an action they cannot complete')."""
        if self.over:
            return
        if self.pending:
            player, kind = self.pending[0]
            if self.pile[player] == 0:
                self._end(f"player {player} must {kind} a card but its draw pile is empty")
        else:
            player = self.current_player()
            if not self.hands[player]:
                self._end(f"player {player} must play a card but its hand is empty")

    def _end(self, reason: str, winner: int | None = None) -> None:
        self.over = True
        self.pending = []
        if winner is None:
            n0, n1 = len(self.wins[0]), len(self.wins[1])
            winner = 0 if n0 > n1 else 1 if n1 > n0 else None
            reason += f"; win piles {n0} to {n1}"
        self.winner = winner
        self.reason = reason + (f": player {winner} wins" if winner is not None else ": a draw")
        self.log.add(f"game over: {self.reason}")

    def _action_to_string(self, player: int, action: int) -> str:
        name = card_name(action)
        return f"deal {name}" if player == pyspiel.PlayerId.CHANCE else name

    def is_terminal(self) -> bool:
        return self.over

    def returns(self) -> list[float]:
        if not self.over or self.winner is None:
            return [0.0, 0.0]
        return [1.0 if p == self.winner else -1.0 for p in range(2)]

    def __str__(self) -> str:
        """The whole state (every hidden card): for logs, never sent to a seat."""
        return (
            f"hands {_names(self.hands[0])} | {_names(self.hands[1])}; piles {self.pile}; "
            f"win piles {len(self.wins[0])} {len(self.wins[1])}; stake {_names(self.stake)}; "
            f"unseen {_names(self.unseen)}" + (f"; over: {self.reason}" if self.over else "")
        )

    # --- Views ---------------------------------------------------------------------------------
    def text_view(self, player: int) -> str:
        other = 1 - player
        lines = [f"Hand of War. You are player {player}."]
        lines.append(f"Your hand: {_names(sorted(self.hands[player]))}.")
        lines.append(f"Draw piles: you {self.pile[player]} cards, opponent {self.pile[other]} cards.")
        lines.append(
            f"Win piles: you {len(self.wins[player])} cards, opponent {len(self.wins[other])} cards."
        )
        if self.stake:
            mode = f"Showdown {self.showdown}" if self.showdown else "Battle"
            lines.append(f"{mode}: {len(self.stake)} cards at stake, {self.burned} of them burned face down.")
        for p in (0, 1):
            card = self.chosen[p]
            if card is not None:
                who = "you" if p == player else f"player {p}"
                shown = card_name(card) if self.showdown or p == player else "a card"
                lines.append(f"On the table: {who} placed {shown} face {'up' if self.showdown else 'down'}.")
        lines.append(f"PubliclyRevealedCards: {_names(self.revealed)}.")
        if self.over:
            lines.append(f"Game over: {self.reason}.")
        elif self.pending:
            lines.append("Cards are being drawn.")
        else:
            turn = self.current_player()
            what = "place a card face up" if self.showdown else "place a card face down"
            lines.append(f"Turn: {'you' if turn == player else f'player {turn}'} ({what}).")
        return "\n".join(lines)

    def info_view(self, player: int) -> str:
        seen = self.log.lines(player)
        return (
            self.text_view(player)
            + "\nWhat you have seen so far:\n"
            + "\n".join(f"{i + 1}. {line}" for i, line in enumerate(seen))
        )

    def json_view(self, seat: int) -> dict[str, Any]:
        table = {}
        for p in (0, 1):
            card = self.chosen[p]
            if card is not None:
                table[str(p)] = card_name(card) if self.showdown or p == seat else "face down"
        return {
            "seat": seat,
            "hand": [card_name(c) for c in sorted(self.hands[seat])],
            "draw_piles": list(self.pile),
            "win_piles": [len(w) for w in self.wins],
            "showdown": self.showdown,
            "at_stake": len(self.stake),
            "burned_at_stake": self.burned,
            "table": table,
            "publicly_revealed_cards": [card_name(c) for c in self.revealed],
            "to_move": to_move(self),
            "winner": self.winner if self.over else None,
            "over": self.over,
        }


pyspiel.register_game(GAME_TYPE, HandOfWarGame)
