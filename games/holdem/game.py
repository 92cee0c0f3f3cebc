"""Simplified Texas Hold'em ("LLM Coaching LLM in Self-Play Training", appendix B.1.1): `simplified_holdem`.

N players, blinds 1/2, every player starts each hand with the same `stack`. Four actions:
Fold, Call (check and call are not distinguished), Raise (a fixed size, see below) and
Allin. Two hole cards each, then the flop (3), turn (1) and river (1) with a betting
round before each deal and one after the river.

Betting rules, hand evaluation, showdown and payoffs are OpenSpiel's own: each state
drives a `universal_poker` state (OpenSpiel's ACPC engine, no-limit, full betting) and
maps the four actions onto it. Seats: seat 0 posts the big blind, seat N-1 the small
blind. Preflop, seat 1 acts first (heads-up: the small blind, as in the paper's coach
prompt); after the flop the small blind acts first, except heads-up, where the big blind
(seat 0) does.

- `Raise` adds 1.5 times the current pot (every chip committed so far) on top of the
  highest bet: raise to `max_bet + floor(1.5 * pot)` (never below the engine's minimum
  raise). It is legal only while that stays below the player's whole stack; otherwise
  only `Allin` is offered.
- `Allin` raises to the player's whole stack; offered only when the player can raise.
- `Fold` is offered only when facing a bet (folding a free check is not a move, as in
  the engine and the paper's weights of appendix C).
- Equal stacks mean no side pots can arise: an all-in is always for the same amount as
  any caller's all-in.

Parameters: `players` (2), `stack` (50, the paper's 25 big blinds), and for small
versions (solvers, tests): `ranks` (13, counted up from the deuce), `suits` (4),
`hole_cards` (2), `flop` (3), `turn` (1), `river` (1): the public cards dealt before each
later betting round; a street of 0 cards and every street after it are left out. E.g.
`simplified_holdem(ranks=3,suits=2,hole_cards=1,flop=1,turn=0,stack=10)` is a Leduc-sized game.

Views: the information state string is the seat's view in the wording of the paper's
decision prompt (public cards, pot, betting sequence in ACPC notation `c` / `rX` / `f`
with rounds separated by `/`, own cards, legal actions); `decision_prompt(seat)` gives the
paper's whole prompt, `json_view(seat)` the same facts as JSON. No tensors.
"""

from __future__ import annotations

import math
from typing import Any

import pyspiel

from games.game_type import text_game_type

FOLD, CALL, RAISE, ALLIN = 0, 1, 2, 3
ACTION_NAMES = ("Fold", "Call", "Raise", "Allin")
RANK_CHARS = "23456789TJQKA"
SUIT_CHARS = "cdhs"
RAISE_POT_FRACTION = 1.5
SMALL_BLIND, BIG_BLIND = 1, 2

_DEFAULTS: dict[str, Any] = {
    "players": 2,
    "stack": 50,
    "ranks": 13,
    "suits": 4,
    "hole_cards": 2,
    "flop": 3,
    "turn": 1,
    "river": 1,
}

GAME_TYPE = text_game_type(
    "simplified_holdem",
    "Simplified Texas Hold'em (fold, call, 1.5-pot raise, all-in)",
    chance_mode=pyspiel.GameType.ChanceMode.EXPLICIT_STOCHASTIC,
    information=pyspiel.GameType.Information.IMPERFECT_INFORMATION,
    utility=pyspiel.GameType.Utility.ZERO_SUM,
    parameters=_DEFAULTS,
    max_num_players=10,
)

RULES = (
    "You are a player in a Texas Hold'em game with {n} players.\n"
    "- Each player starts with an initial stack of {stack}\n"
    "- Small blind = 1, Big blind = 2\n"
    "Available actions:\n"
    "- '[Fold]': fold and give up the current hand\n"
    "- '[Call]': call the current bet\n"
    "- '[Raise]': raise on top of the current bet\n"
    "- '[Allin]': bet all remaining chips\n"
    "Notes:\n"
    "- In this simplified version, Call and Check are not distinguished.\n"
    "- '[Raise]' is always fixed to 1.5 times the current pot.\n"
    "- Seat 0 posts the big blind, seat {sb} the small blind. {cards}"
)

PROMPT = """# Texas Hold'em Decision Prompt

You are a player in a **Texas Hold'em game with {n} players**.
Your player ID is **{player}** (starting from 0).

## Game Information
- Each player starts with an initial stack of **{stack}**
- Small blind = 1, Big blind = 2

## Available Actions
- '[Fold]': fold and give up the current hand
- '[Call]': call the current bet
- '[Raise]': raise on top of the current bet
- '[Allin]': bet all remaining chips

**Notes:**
- In this simplified version, *Call* and *Check* are not distinguished.
- '[Raise]' is always fixed to 1.5 times the current pot.

## Output Format
- Your answer must be a probability distribution over the four
  actions '[Fold]', '[Call]', '[Raise]', '[Allin]'.
- Example: '[0.2, 0.3, 0.4, 0.1]'.
- The probabilities must sum to 1.

## Legal Actions
- In some situations, not all four actions are legal (e.g., '[Fold]' may be a dominated strategy).
- You will always be given the set of legal actions for the current round.
- Your probability distribution must **exactly match the legal actions** in order and still sum to 1.

## Current Game Context
- Public cards: [{public}]
- Current pot: [{pot}]
- Game sequence so far: [{sequence}]
  - 'c' = call/check
  - 'rx' = raise to x (x is an integer)
- Your private cards: [{private}]
- Your legal actions: [{legal}]
"""

ROUND_NAMES = ("preflop", "flop", "turn", "river")


def _int_param(p: dict[str, Any], key: str, lo: int, hi: int) -> int:
    value = p[key]
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"simplified_holdem: {key} must be an integer in [{lo}, {hi}], not {value!r}")
    return value


def _board_param(p: dict[str, Any]) -> list[int]:
    """Cards dealt before each later betting round; a street of 0 cards ends the game before it."""
    counts = [_int_param(p, key, 0, 5) for key in ("flop", "turn", "river")]
    return counts[: counts.index(0)] if 0 in counts else counts


class HoldemObserver:
    """PyObserver with the seat's text view and no tensor (information state = observation:
    the text holds the whole public history, so it has perfect recall)."""

    def __init__(self, iig_obs_type: Any = None, params: dict[str, Any] | None = None) -> None:
        if params:
            raise ValueError(f"observation parameters not supported; passed {params}")
        import numpy as np

        self.tensor = np.zeros(0, np.float32)
        self.dict: dict[str, Any] = {}

    def set_from(self, state: Any, player: int) -> None:
        """Nothing to fill: there is no tensor."""

    def string_from(self, state: HoldemState, player: int) -> str:
        return state.info_text(player)


class HoldemGame(pyspiel.Game):
    def __init__(self, params: dict[str, Any] | None = None) -> None:
        p = {**_DEFAULTS, **(params or {})}
        self.n = _int_param(p, "players", 2, 10)
        self.stack = _int_param(p, "stack", BIG_BLIND + 1, 1_000_000)
        self.ranks = _int_param(p, "ranks", 2, 13)
        self.suits = _int_param(p, "suits", 1, 4)
        self.hole = _int_param(p, "hole_cards", 1, 4)
        self.streets = _board_param(p)
        deck = self.ranks * self.suits
        if self.n * self.hole + sum(self.streets) > deck:
            raise ValueError(
                f"simplified_holdem: {self.n} players x {self.hole} hole cards + {sum(self.streets)} board "
                f"cards do not fit a deck of {deck}"
            )
        n = self.n
        blinds = [0] * n
        blinds[0], blinds[n - 1] = BIG_BLIND, SMALL_BLIND
        later_first = 1 if n == 2 else n  # 1-indexed: heads-up the big blind, else the small blind
        self.engine = pyspiel.load_game(
            "universal_poker",
            {
                "betting": "nolimit",
                "bettingAbstraction": "fullgame",
                "numPlayers": n,
                "numRanks": self.ranks,
                "numSuits": self.suits,
                "numHoleCards": self.hole,
                "numRounds": 1 + len(self.streets),
                "numBoardCards": " ".join(str(c) for c in [0, *self.streets]),
                "blind": " ".join(str(b) for b in blinds),
                "firstPlayer": " ".join(["2"] + [str(later_first)] * len(self.streets)),
                "stack": " ".join([str(self.stack)] * n),
            },
        )
        self.blinds = blinds
        # Deal offsets: round r starts once deal_needed[r] cards are out.
        self.deal_needed = [n * self.hole]
        for c in self.streets:
            self.deal_needed.append(self.deal_needed[-1] + c)
        info = pyspiel.GameInfo(
            num_distinct_actions=4,
            max_chance_outcomes=deck,
            num_players=n,
            min_utility=-float(self.stack),
            max_utility=float(self.stack * (n - 1)),
            utility_sum=0.0,
            max_game_length=self.engine.max_game_length(),
        )
        super().__init__(GAME_TYPE, info, p)

    def __deepcopy__(self, memo: dict[int, Any]) -> HoldemGame:
        # States keep a reference to their game; cloning a state must share it, not copy it.
        return self

    def new_initial_state(self) -> HoldemState:
        return HoldemState(self)

    def make_py_observer(
        self, iig_obs_type: Any = None, params: dict[str, Any] | None = None
    ) -> HoldemObserver:
        return HoldemObserver(iig_obs_type, params)

    def card_name(self, card: int) -> str:
        return RANK_CHARS[card // self.suits] + SUIT_CHARS[card % self.suits]

    def rules_text(self) -> str:
        cards = (
            f"Each player gets {self.hole} private card(s); public cards are dealt "
            f"{', '.join(str(c) for c in self.streets) or 'never'} before the later betting rounds; "
            f"the deck has {self.ranks} ranks from the deuce up and {self.suits} suit(s). "
            "The best five-card hand (or fewer with fewer cards) among players still in wins the pot."
        )
        return RULES.format(n=self.n, stack=self.stack, sb=self.n - 1, cards=cards)


class _Hand:
    """Everything that changes during a hand. A state's clone deep-copies its attributes; this
    one copies itself by hand (the engine with its own clone), which is several times faster."""

    __slots__ = ("board", "engine", "folded", "hole", "sequence", "spent", "targets")

    def __init__(self, game: HoldemGame | None) -> None:
        if game is None:
            return
        self.engine = game.engine.new_initial_state()
        self.spent = list(game.blinds)
        self.folded = [False] * game.n
        self.hole: list[list[int]] = [[] for _ in range(game.n)]
        self.board: list[int] = []
        self.sequence: list[list[str]] = [[]]  # ACPC betting strings per round
        self.targets: dict[int, int] | None = None  # legal actions -> engine actions, until the next move

    def __deepcopy__(self, memo: dict[int, Any]) -> _Hand:
        new = _Hand(None)
        new.engine = self.engine.clone()
        new.spent = list(self.spent)
        new.folded = list(self.folded)
        new.hole = [list(h) for h in self.hole]
        new.board = list(self.board)
        new.sequence = [list(r) for r in self.sequence]
        new.targets = self.targets
        return new


class HoldemState(pyspiel.State):
    def __init__(self, game: HoldemGame) -> None:
        super().__init__(game)
        self._g = game
        self._h = _Hand(game)

    @property
    def spent(self) -> list[int]:
        return self._h.spent

    @property
    def folded(self) -> list[bool]:
        return self._h.folded

    @property
    def hole(self) -> list[list[int]]:
        return self._h.hole

    @property
    def board(self) -> list[int]:
        return self._h.board

    @property
    def sequence(self) -> list[list[str]]:
        return self._h.sequence

    # --- the mapping onto the engine --------------------------------------------------------
    def round(self) -> int:
        dealt = sum(len(h) for h in self.hole) + len(self.board)
        return max((r for r, need in enumerate(self._g.deal_needed) if dealt >= need), default=0)

    def pot(self) -> int:
        return sum(self.spent)

    def _targets(self) -> dict[int, int]:
        """Legal actions -> the engine action (raise-to amount for Raise and Allin)."""
        if self._h.targets is not None:
            return self._h.targets
        legal = self._h.engine.legal_actions()
        out: dict[int, int] = {}
        if FOLD in legal:
            out[FOLD] = FOLD
        if CALL in legal:
            out[CALL] = CALL
        raises = [a for a in legal if a > CALL]
        if raises:
            allin = max(raises)
            raise_to = max(max(self.spent) + math.floor(RAISE_POT_FRACTION * self.pot()), min(raises))
            if raise_to < allin:
                out[RAISE] = raise_to
            out[ALLIN] = allin
        self._h.targets = out
        return out

    def raise_to(self) -> int | None:
        return self._targets().get(RAISE)

    # --- OpenSpiel API ----------------------------------------------------------------------
    def current_player(self) -> int:
        return self._h.engine.current_player()

    def _legal_actions(self, player: int) -> list[int]:
        return sorted(self._targets())

    def chance_outcomes(self) -> list[tuple[int, float]]:
        return self._h.engine.chance_outcomes()

    def _apply_action(self, action: int) -> None:
        engine = self._h.engine
        if engine.is_chance_node():
            self._h.targets = None
            if len(self.board) == 0 and sum(len(h) for h in self.hole) < self._g.deal_needed[0]:
                seat = sum(len(h) for h in self.hole) // self._g.hole
                self.hole[seat].append(action)
            else:
                self.board.append(action)
            engine.apply_action(action)
            self._open_rounds()
            return
        player = engine.current_player()
        target = self._targets()[action]
        self._h.targets = None
        rnd = self.round()
        if action == FOLD:
            self.folded[player] = True
            self.sequence[rnd].append("f")
        elif action == CALL:
            self.spent[player] = min(max(self.spent), self._g.stack)
            self.sequence[rnd].append("c")
        else:
            self.spent[player] = target
            self.sequence[rnd].append(f"r{target}")
        engine.apply_action(target)
        self._open_rounds()

    def _open_rounds(self) -> None:
        while len(self.sequence) <= self.round():
            self.sequence.append([])

    def _action_to_string(self, player: int, action: int) -> str:
        if player == pyspiel.PlayerId.CHANCE:
            return f"deal {self._g.card_name(action)}"
        return ACTION_NAMES[action]

    def is_terminal(self) -> bool:
        return self._h.engine.is_terminal()

    def returns(self) -> list[float]:
        return list(self._h.engine.returns())

    def __str__(self) -> str:
        """The whole state (every private card): for logs and the coach's hidden-card clues only."""
        hands = "; ".join(f"P{i}: {self._cards(h)}" for i, h in enumerate(self.hole))
        return f"{hands} | board [{self._cards(self.board)}] | sequence [{self.sequence_text()}]"

    # --- text and JSON views ----------------------------------------------------------------
    def _cards(self, cards: list[int]) -> str:
        return " ".join(self._g.card_name(c) for c in cards)

    def sequence_text(self) -> str:
        return "/".join(",".join(r) for r in self.sequence)

    def legal_names(self) -> list[str]:
        return [ACTION_NAMES[a] for a in self._legal_actions(self.current_player())]

    def role(self, seat: int) -> str:
        g = self._g
        if seat == 0:
            return "big blind"
        if seat == g.n - 1:
            return "small blind"
        return "no blind"

    def info_text(self, seat: int) -> str:
        """Everything `seat` knows, in the wording of the paper's prompt (perfect recall)."""
        g = self._g
        rnd = self.round()
        lines = [
            f"Texas Hold'em with {g.n} players; you are player {seat} ({self.role(seat)}).",
            f"Initial stack {g.stack} each; small blind 1, big blind 2.",
            f"Round: {ROUND_NAMES[rnd] if rnd < len(ROUND_NAMES) else rnd}",
            f"Public cards: [{self._cards(self.board)}]",
            f"Current pot: {self.pot()}",
            f"Chips in the pot by player: {self.spent}",
            f"Game sequence so far: [{self.sequence_text()}]",
            f"Your private cards: [{self._cards(self.hole[seat]) if seat >= 0 else ''}]",
        ]
        cur = self.current_player()
        if self.is_terminal():
            lines.append("Hand over.")
        elif cur == pyspiel.PlayerId.CHANCE:
            lines.append("Dealing cards.")
        elif cur == seat:
            targets = self._targets()
            lines.append(f"Your legal actions: [{', '.join(ACTION_NAMES[a] for a in sorted(targets))}]")
            sizes = [f"{ACTION_NAMES[a]} = raise to {targets[a]}" for a in (RAISE, ALLIN) if a in targets]
            to_call = min(max(self.spent), g.stack) - self.spent[seat]
            lines.append(f"To call: {to_call}" + "".join(f"; {s}" for s in sizes))
        else:
            lines.append(f"Waiting for player {cur}.")
        return "\n".join(lines)

    def decision_prompt(self, seat: int) -> str:
        """The paper's appendix B.1.1 decision prompt for `seat`, filled in."""
        g = self._g
        legal = ", ".join(f"[{n}]" for n in self.legal_names()) if self.current_player() == seat else ""
        return PROMPT.format(
            n=g.n,
            player=seat,
            stack=g.stack,
            public=self._cards(self.board),
            pot=self.pot(),
            sequence=self.sequence_text(),
            private=self._cards(self.hole[seat]),
            legal=legal,
        )

    def json_view(self, seat: int) -> dict[str, Any]:
        g = self._g
        cur = self.current_player()
        targets = self._targets() if cur == seat and not self.is_terminal() else {}
        return {
            "players": g.n,
            "seat": seat,
            "initial_stack": g.stack,
            "round": self.round(),
            "public_cards": [g.card_name(c) for c in self.board],
            "private_cards": [g.card_name(c) for c in self.hole[seat]],
            "pot": self.pot(),
            "contributions": list(self.spent),
            "folded": list(self.folded),
            "sequence": [list(r) for r in self.sequence],
            "to_act": cur if cur >= 0 else None,
            "legal_actions": [ACTION_NAMES[a] for a in sorted(targets)],
            "raise_to": targets.get(RAISE),
            "allin_to": targets.get(ALLIN),
        }


pyspiel.register_game(GAME_TYPE, HoldemGame)
