"""What one seat may see of a match: text views, legal action texts, the seat's history.

The hidden-information rule lives here. A step of the true history is shown to a
seat only when the seat would tell it apart from every alternative: the step is
replayed with each other legal action and the seat's information state compared.
Its own actions are always shown. This is conservative (a step revealed only
later stays hidden) and costs one clone per legal alternative per step, which is
cheap for the small imperfect-information games OpenSpiel ships. Perfect-
information games show every step and carry the full action list as `state`.

Nothing here ever calls `serialize()`: for Python games that is a pickle, and for
imperfect-information games it holds every private card. The turn's wire encoding is the
referee's (referee/turns.py); this module gives it the seat's views.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import pyspiel
from pydantic_core import to_json

from bus.protocol import HistoryItem, LegalAction, check_finite

CHANCE = int(pyspiel.PlayerId.CHANCE)
SIMULTANEOUS = int(pyspiel.PlayerId.SIMULTANEOUS)


def is_perfect_information(game: pyspiel.Game) -> bool:
    return game.get_type().information == pyspiel.GameType.Information.PERFECT_INFORMATION


@dataclass(frozen=True)
class GameFacts:
    """The game-type facts the views consult on every step, read once (a match keeps one):
    `get_type()` is a pybind round trip that builds a new object each call."""

    short_name: str
    perfect: bool
    information_state_string: bool
    observation_string: bool
    num_players: int
    information_state_tensor: bool = False
    observation_tensor: bool = False

    @classmethod
    def of(cls, game: pyspiel.Game) -> GameFacts:
        gt = game.get_type()
        return cls(
            short_name=gt.short_name,
            perfect=gt.information == pyspiel.GameType.Information.PERFECT_INFORMATION,
            information_state_string=gt.provides_information_state_string,
            observation_string=gt.provides_observation_string,
            num_players=game.num_players(),
            information_state_tensor=gt.provides_information_state_tensor,
            observation_tensor=gt.provides_observation_tensor,
        )


def _facts(state: pyspiel.State, facts: GameFacts | None) -> GameFacts:
    return facts if facts is not None else GameFacts.of(state.get_game())


def seat_info(state: pyspiel.State, seat: int, facts: GameFacts | None = None) -> str:
    """The most complete text the seat may know: information state where the game has one."""
    gt = _facts(state, facts)
    if gt.information_state_string:
        return state.information_state_string(seat)
    if gt.observation_string:
        return state.observation_string(seat)
    if gt.perfect:
        return str(state)
    raise ValueError(f"{gt.short_name} provides no per-seat view")


def observation_text(state: pyspiel.State, seat: int, facts: GameFacts | None = None) -> str:
    """The text an LLM reads: a board for perfect-information games, the information state otherwise."""
    gt = _facts(state, facts)
    if gt.perfect:
        if gt.observation_string:
            text = state.observation_string(seat)
        else:
            text = str(state)
        return text
    return seat_info(state, seat, gt)


def action_text(state: pyspiel.State, player: int, action: int) -> str:
    try:
        return state.action_to_string(player, action)
    except (pyspiel.SpielError, RuntimeError):
        return str(action)


# Every legal action entry built so far in this process, by id and text. An entry is a function of
# its key alone, whatever the game or match, so matches share them: a tic-tac-toe match meets most
# of its 18 entries once, and building them per match was a measurable part of a training step.
# Emptied when it grows past `KNOWN_MAX` (a game with many texts, such as chess or Word chain).
KNOWN: dict[tuple[int, str], LegalAction] = {}
KNOWN_MAX = 100_000


def known_entry(known: dict[tuple[int, str], LegalAction], pair: tuple[int, str]) -> LegalAction:
    """The entry for `pair` from `known`, built and kept there when it is new."""
    entry = known.get(pair)
    if entry is None:
        if len(known) >= KNOWN_MAX:
            known.clear()
        entry = known[pair] = LegalAction.model_construct(id=pair[0], text=pair[1])
    return entry


def legal_actions(
    state: pyspiel.State, seat: int, known: dict[tuple[int, str], LegalAction] | None = None
) -> list[LegalAction]:
    """Every legal action of `seat` with its text. A game may offer `legal_action_texts(seat)`
    (ids and texts in one call, e.g. Word chain's thousands of words) instead of one
    `action_to_string` round trip through pyspiel per action. Built unvalidated: ids and texts
    come from the game itself, not from the wire. `known`: a cache of the (immutable) entries
    already built, keyed by id and text (the referee's is `KNOWN`), so a recurring action is not
    built again."""
    bulk = getattr(state, "legal_action_texts", None)
    pairs = (
        bulk(seat)
        if bulk is not None
        else [(a, action_text(state, seat, a)) for a in state.legal_actions(seat)]
    )
    if known is None:
        return [LegalAction.model_construct(id=a, text=t) for a, t in pairs]
    return [known_entry(known, pair) for pair in pairs]


def _apply(state: pyspiel.State, player: int, action: int, joint: list[int] | None) -> pyspiel.State:
    child = state.clone()
    if joint is not None:
        j = list(joint)
        j[player] = action
        child.apply_actions(j)
    else:
        child.apply_action(action)
    return child


def visible_to(
    state: pyspiel.State,
    player: int,
    action: int,
    joint: list[int] | None = None,
    facts: GameFacts | None = None,
) -> list[bool]:
    """For each seat, whether it can tell that `player` chose `action` at `state` (before applying).

    For a simultaneous node pass the whole `joint` action; `player` is the seat whose part is tested.
    """
    gt = _facts(state, facts)
    n = gt.num_players
    if gt.perfect:
        return [True] * n
    alternatives = (
        [a for a, _ in state.chance_outcomes()] if player == CHANCE else list(state.legal_actions(player))
    )
    alternatives = [a for a in alternatives if a != action]
    taken = _apply(state, player, action, joint)
    seen = []
    for seat in range(n):
        if seat == player:
            seen.append(True)
            continue
        mine = seat_info(taken, seat, gt)
        seen.append(all(seat_info(_apply(state, player, a, joint), seat, gt) != mine for a in alternatives))
    return seen


class SeatHistory:
    """Accumulates each seat's view of the history as the referee applies steps."""

    def __init__(self, num_players: int) -> None:
        self.items: list[list[HistoryItem]] = [[] for _ in range(num_players)]
        # Each item's JSON as `Turn.model_dump_json(exclude_none=True)` writes it, made once per
        # step (not once per turn that shows it): the referee's `encode_turn` joins them.
        self.encoded: list[list[bytes]] = [[] for _ in range(num_players)]
        self.public: list[bool] = []

    def record(
        self,
        state: pyspiel.State,
        player: int,
        action: int,
        joint: list[int] | None = None,
        *,
        text: str | None = None,
        facts: GameFacts | None = None,
    ) -> bool:
        """Record a step before it is applied to `state`. Returns whether every seat sees it.
        `text`: the action's text when the caller has it already (the referee's legal list)."""
        seen = visible_to(state, player, action, joint, facts)
        if text is None:
            text = action_text(state, player, action)
        # Validated although every field comes from the game: the validating constructor (Rust)
        # takes half the time of `model_construct` (Python) for these small models.
        shown = HistoryItem(player=player, action=action, text=text)
        public = all(seen)
        hidden = shown if public else HistoryItem(player=player)
        shown_json = to_json(shown, exclude_none=True)
        hidden_json = shown_json if public else to_json(hidden, exclude_none=True)
        for seat, ok in enumerate(seen):
            self.items[seat].append(shown if ok else hidden)
            self.encoded[seat].append(shown_json if ok else hidden_json)
        self.public.append(public)
        return public


def seat_view(
    state: pyspiel.State, seat: int, facts: GameFacts | None = None
) -> tuple[str, object | None, list[int] | None]:
    """A turn's game-derived fields: observation, observation_json (checked finite), state (the
    full action list, perfect-information games only). The referee puts them on the wire
    (referee/turns.py)."""
    gt = _facts(state, facts)
    observation_json = json_view(state, seat, gt)
    if observation_json is not None:
        check_finite(observation_json, "observation_json")
    full = list(state.history()) if gt.perfect else None
    return observation_text(state, seat, gt), observation_json, full


def seat_tensors(
    state: pyspiel.State, seat: int, facts: GameFacts | None = None
) -> tuple[list[float] | None, list[float] | None]:
    """OpenSpiel's information-state and observation tensors of `seat`, each where the game has one
    (None otherwise). Per seat, so they hold only what the seat may know, like its text view; sent
    only to seats a match asks tensors for (training, docs/env.md)."""
    gt = _facts(state, facts)
    info = list(state.information_state_tensor(seat)) if gt.information_state_tensor else None
    obs = list(state.observation_tensor(seat)) if gt.observation_tensor else None
    return info, obs


def json_view(state: pyspiel.State, seat: int, facts: GameFacts | None = None) -> object | None:
    """A structured view where the game has one: `json_view()` (whole state, perfect-information
    games only) or `json_view(seat)` (the seat's own view)."""
    fn = getattr(state, "json_view", None)
    if fn is None:
        if _facts(state, facts).short_name == "mnk":  # C++ game: the view is built outside
            from games.cwm.gen_tic_tac_toe import mnk_json_view

            return mnk_json_view(state)
        return None
    if inspect.signature(fn).parameters:
        return fn(seat)
    return fn() if _facts(state, facts).perfect else None


def public_observation(state: pyspiel.State, facts: GameFacts | None = None) -> str | None:
    """A spectator's view: the full state for perfect information, nothing otherwise."""
    if _facts(state, facts).perfect:
        return str(state)
    return None
