"""The turn on the wire: what the referee sends a seat, and how it reads the answer's action.

A turn has two halves. The match-constant half, one `TurnFrame` per match: match id, game,
seats, deadline, the match's seed and the game-type facts (and, written once per seat, the
bytes every turn of that seat starts with). The per-turn half: the state, the seat, the turn
counter, the seat's history, and the rules, retry note, legal list and tensors where they apply.
What a seat may see of the state (the hidden-information rule) is the games' business
(games/view.py); this module only puts it on the wire.

`encode_turn` writes the bytes the referee sends without a per-turn `Turn` model (the model and
its serialisation were a measurable part of each move): every value by pydantic's own serializer
(`pydantic_core.to_json`), fields in `Turn`'s order, None fields left out, so the bytes are
exactly `build_turn(...).model_dump_json(exclude_none=True)` (tests/test_turn_encoding.py
compares them across games; tests/test_golden_bytes.py pins them).

`encode_compact_turn` writes a `compact_turn` (issue 44) for agents that asked for one in their
discovery metadata: the action list and the legal ids only, no view, no legal texts and no history
(tests/test_compact_turns.py). `Offer` is one decision's legal actions as the referee judges the
answer, with the texts built only when needed for a compact turn.
"""

from __future__ import annotations

import random
import time

import pyspiel
from pydantic_core import to_json

from bus.protocol import PROTOCOL_VERSION, GameSpec, LegalAction, MatchSpec, Turn, TurnBudget
from games.view import (
    GameFacts,
    SeatHistory,
    action_text,
    known_entry,
    legal_actions,
    seat_tensors,
    seat_view,
)


class TurnFrame:
    """The match-constant half of every turn of one match. `facts` may be set once the game is
    loaded (they are read from the state when absent)."""

    __slots__ = ("_prefix", "deadline_ms", "facts", "game", "match_id", "match_seed", "seats")

    def __init__(
        self,
        match_id: str,
        game: GameSpec,
        seats: list[str],
        deadline_ms: int,
        *,
        match_seed: int | None = None,
        facts: GameFacts | None = None,
    ) -> None:
        self.match_id = match_id
        self.game = game
        self.seats = seats
        self.deadline_ms = deadline_ms
        self.match_seed = match_seed
        self.facts = facts
        self._prefix: dict[int, bytes] = {}

    @classmethod
    def of(cls, spec: MatchSpec, facts: GameFacts | None = None) -> TurnFrame:
        """The frame of a scheduled match: its turns carry the match's seed."""
        return cls(spec.match_id, spec.game, spec.seats, spec.deadline_ms, match_seed=spec.seed, facts=facts)

    def facts_of(self, state: pyspiel.State) -> GameFacts:
        return self.facts if self.facts is not None else GameFacts.of(state.get_game())

    def prefix(self, seat: int, kind: str = "turn") -> bytes:
        """The start of every turn of `seat` (its fields up to `seats`), written once per seat;
        `kind` is the message type (`turn`, or `compact_turn`)."""
        key = seat if kind == "turn" else -1 - seat
        out = self._prefix.get(key)
        if out is None:
            out = self._prefix[key] = b"".join(
                (
                    b'{"v":',
                    to_json(PROTOCOL_VERSION),
                    b',"type":',
                    to_json(kind),
                    b',"match_id":',
                    to_json(self.match_id),
                    b',"game":',
                    to_json(self.game, exclude_none=True),
                    b',"seat":',
                    to_json(seat),
                    b',"seats":',
                    to_json(self.seats),
                )
            )
        return out


def build_turn(
    frame: TurnFrame,
    state: pyspiel.State,
    seat: int,
    turn: int,
    history: SeatHistory | None,
    *,
    rules: str | None = None,
    retry: str | None = None,
    legal: list[LegalAction] | None = None,
    tensors: bool = False,
    budget: TurnBudget | None = None,
) -> Turn:
    """The turn for `seat`. Built unvalidated (`model_construct`): every field comes from the
    referee and the game, not from the wire; the one check a game's output needs, finite numbers
    in its JSON view, is made by `seat_view`. The agent validates the turn strictly where it
    arrives. The referee sends `encode_turn`'s bytes instead, which are this turn's JSON, except to
    a seat in its own process (`referee.request.ask_local`), which gets this model. Its history is
    a copy of the seat's list, which grows on as the match goes."""
    facts = frame.facts_of(state)
    observation, observation_json, full = seat_view(state, seat, facts)
    info_tensor, obs_tensor = seat_tensors(state, seat, facts) if tensors else (None, None)
    return Turn.model_construct(
        match_id=frame.match_id,
        game=frame.game,
        seat=seat,
        seats=frame.seats,
        turn=turn,
        deadline_ms=frame.deadline_ms,
        observation=observation,
        observation_json=observation_json,
        legal_actions=legal if legal is not None else legal_actions(state, seat),
        history=list(history.items[seat]) if history is not None else [],
        state=full,
        rules=rules,
        retry=retry,
        match_seed=frame.match_seed,
        information_state_tensor=info_tensor,
        observation_tensor=obs_tensor,
        budget=budget,
        # Built right before it is sent: lets an agent count its deadline from the referee's clock.
        sent_at=time.time(),
    )


class EncodedTurn:
    """A turn as the referee sends it: exactly `build_turn(...).model_dump_json(exclude_none=True)`.
    `sent_at` is last, so a turn asked again is re-stamped without writing the rest again."""

    __slots__ = ("_head", "data", "match_id", "sent_at", "turn")

    def __init__(self, match_id: str, turn: int, head: bytes, sent_at: float) -> None:
        self.match_id = match_id
        self.turn = turn
        self.sent_at = sent_at
        self._head = head
        self.data = head + b',"sent_at":' + to_json(sent_at) + b"}"

    def stamped(self, sent_at: float) -> EncodedTurn:
        """The same turn sent at `sent_at`."""
        return EncodedTurn(self.match_id, self.turn, self._head, sent_at)


def encode_turn(
    frame: TurnFrame,
    state: pyspiel.State,
    seat: int,
    turn: int,
    history: SeatHistory | None,
    *,
    rules: str | None = None,
    retry: str | None = None,
    legal: list[LegalAction] | None = None,
    tensors: bool = False,
    budget: TurnBudget | None = None,
) -> EncodedTurn:
    """`build_turn`'s turn as the bytes the referee sends (same arguments, same checks).
    `tensors`: add the seat's OpenSpiel tensors, `budget`: the seat's LLM budget (both absent by
    default: the turn's bytes are then unchanged)."""
    facts = frame.facts_of(state)
    observation, observation_json, full = seat_view(state, seat, facts)
    legal = legal if legal is not None else legal_actions(state, seat)
    parts = [
        frame.prefix(seat),
        b',"turn":',
        to_json(turn),
        b',"deadline_ms":',
        to_json(frame.deadline_ms),
        b',"observation":',
        to_json(observation),
    ]
    if observation_json is not None:
        parts += (b',"observation_json":', to_json(observation_json, exclude_none=True))
    parts += (b',"legal_actions":', to_json(legal, exclude_none=True), b',"history":[')
    if history is not None:
        parts.append(b",".join(history.encoded[seat]))
    parts.append(b"]")
    if full is not None:
        parts += (b',"state":', to_json(full))
    if rules is not None:
        parts += (b',"rules":', to_json(rules))
    if retry is not None:
        parts += (b',"retry":', to_json(retry))
    if frame.match_seed is not None:
        parts += (b',"match_seed":', to_json(frame.match_seed))
    if tensors:
        info_tensor, obs_tensor = seat_tensors(state, seat, facts)
        if info_tensor is not None:
            parts += (b',"information_state_tensor":', to_json(info_tensor))
        if obs_tensor is not None:
            parts += (b',"observation_tensor":', to_json(obs_tensor))
    if budget is not None:
        parts += (b',"budget":', to_json(budget, exclude_none=True))
    # Stamped right before it is sent: lets an agent count its deadline from the referee's clock.
    return EncodedTurn(frame.match_id, turn, b"".join(parts), time.time())


def encode_compact_turn(
    frame: TurnFrame,
    state: pyspiel.State,
    seat: int,
    turn: int,
    legal_ids: list[int],
    *,
    retry: str | None = None,
    budget: TurnBudget | None = None,
) -> EncodedTurn:
    """The `compact_turn` for `seat` (perfect-information games only): exactly
    `CompactTurn(...).model_dump_json(exclude_none=True)`. No view, no legal texts (OpenSpiel's
    `action_to_string` per legal action is most of a chess turn's cost), no history."""
    parts = [
        frame.prefix(seat, "compact_turn"),
        b',"turn":',
        to_json(turn),
        b',"deadline_ms":',
        to_json(frame.deadline_ms),
        b',"legal_ids":',
        to_json(legal_ids),
        b',"state":',
        to_json(state.history()),
    ]
    if retry is not None:
        parts += (b',"retry":', to_json(retry))
    if frame.match_seed is not None:
        parts += (b',"match_seed":', to_json(frame.match_seed))
    if budget is not None:
        parts += (b',"budget":', to_json(budget, exclude_none=True))
    return EncodedTurn(frame.match_id, turn, b"".join(parts), time.time())


def match_action(legal: list[LegalAction], action: int | None, text: str | None) -> int | None:
    """The legal id an answer names, or None. An id wins over a text; texts match case-insensitively."""
    if action is not None:
        return action if any(la.id == action for la in legal) else None
    if text is None:
        return None
    wanted = text.strip().casefold()
    hits = [la.id for la in legal if la.text.strip().casefold() == wanted]
    return hits[0] if len(hits) == 1 else None


class Offer:
    """The legal actions of one decision. A full turn lists them with their texts (`legal`, built at
    once); a compact turn sends only `ids`, and a text is then computed for the action played alone
    (or for all of them if the answer names a text). Either way the referee judges, records and
    picks random moves alike: same ids in the same order, same texts."""

    __slots__ = ("_ids", "_known", "_legal", "_seat", "_state", "compact")

    def __init__(
        self,
        state: pyspiel.State,
        seat: int,
        known: dict[tuple[int, str], LegalAction] | None = None,
        *,
        compact: bool = False,
    ) -> None:
        self._state, self._seat, self._known, self.compact = state, seat, known, compact
        self._legal = None if compact else legal_actions(state, seat, known)
        self._ids: list[int] | None = None

    @property
    def legal(self) -> list[LegalAction]:
        if self._legal is None:
            self._legal = legal_actions(self._state, self._seat, self._known)
        return self._legal

    @property
    def ids(self) -> list[int]:
        if self._ids is None:
            self._ids = (
                self._state.legal_actions(self._seat)
                if self._legal is None
                else [la.id for la in self._legal]
            )
        return self._ids

    def match(self, action: int | None, text: str | None) -> int | None:
        """`match_action` on these actions."""
        if self._legal is None and action is not None:
            return action if action in self.ids else None
        return match_action(self.legal, action, text)

    def entry(self, action: int) -> LegalAction:
        """The legal `action` with its text (for the record)."""
        if self._legal is not None:
            return next(la for la in self._legal if la.id == action)
        pair = (action, action_text(self._state, self._seat, action))
        return known_entry(self._known if self._known is not None else {}, pair)

    def choice(self, rng: random.Random) -> LegalAction:
        """A uniformly random legal action (the `random` policy): the same draw as over `legal`."""
        if self._legal is not None:
            return rng.choice(self._legal)
        return self.entry(rng.choice(self.ids))
