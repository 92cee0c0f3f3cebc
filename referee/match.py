"""One match, refereed: the authoritative state, the clock, the fault policy, the record.

The OpenSpiel state never leaves this module. Chance is sampled from the match's
seeded RNG; simultaneous nodes ask every seat at once. Every answer is checked
here, and every way it can be wrong becomes a `FaultRecord`:

- `no_responder`: nobody listens on the agent's turn subject (answered at once by NATS);
- `timeout`: no reply before the deadline (measured from request to reply);
- `error`: the agent answered with a service error (its strategy raised);
- `malformed`: not JSON, the wrong shape, too large, or for another match or turn;
- `illegal`: a well-formed move naming no legal action;
- `provider`: a move carrying `failure`: the agent's LLM provider failed the decision.

The policy (referee/faults.py, a pure function) then decides: `forfeit` ends the match
against the seat, `retry` asks again with the reason (up to `retries` times, then
forfeits), `random` plays a uniformly random legal action for the seat. A `provider` fault
follows `[policy] provider`: `forfeit`, `random`, or `void` (the default), which ends this play
with `MatchVoided` after telling the seats the match ended as `void` (so they drop its state);
the worker plays it again with the same seed, secret and attempt, so the same chance outcomes.
An internal error becomes outcome `error`, never an exception.

A move's LLM calls (`calls`) are kept in its record. Spectators see a seat's thinking under the
rule for its private information: in `moved` events of perfect-information games; for the other
games only in the `ended` record (`moved` events carry the calls without their texts).

Faults of the referee or the bus are never an agent's (referee/request.py asks the
seat): a request that fails because this referee lost its NATS connection raises
`MatchAborted` (the worker hands the spec back to the work queue and another attempt
replays the match), and a deadline timer that fired late because this referee's event
loop stalled asks the turn again (up to `MAX_LAG_REASKS` times per decision, then the
attempt is aborted) instead of recording a `timeout`. `no_responder` is asked again
with backoff until the turn's deadline runs out.

Chance comes from `random.Random(f"{secret}/{attempt}")`: the secret is drawn with
`secrets` per match (by the submitter, or here when the spec has none), never sent
to an agent, and written to the record only when the match ends; a spec carrying a
record's `secret`, played as its `attempt`, deals the same chance outcomes again.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import pyspiel
from nats.aio.client import Client as NATS

from bus.protocol import (
    FaultRecord,
    LegalAction,
    MatchEnded,
    MatchEvent,
    MatchRecord,
    MatchSpec,
    MatchStarted,
    MoveRecord,
    Provenance,
    VoidedAttempt,
    seat_costs,
)
from bus.replies import MAX_REPLY_BYTES as MAX_REPLY_BYTES  # re-exported: tests and tools read it here
from bus.subjects import Subjects
from games.loader import GameSpecError, initial_state, load_game_async
from games.rules import rules_text
from games.view import (
    KNOWN,
    GameFacts,
    SeatHistory,
    action_text,
    observation_text,
    public_observation,
)
from referee.budget import BudgetMeter
from referee.caps import cap_note
from referee.faults import decide, retry_note
from referee.outcome import ranks_from_returns
from referee.presence import Presence
from referee.records import repair_record
from referee.request import LAG_TOLERANCE_S as LAG_TOLERANCE_S  # re-exported: tests read it here
from referee.request import LocalSeat, RefereeLag, Reply, TurnRequest, ask_local
from referee.request import MatchAborted as MatchAborted  # re-exported: the worker catches it
from referee.turns import Offer, TurnFrame, build_turn, encode_compact_turn, encode_turn

log = logging.getLogger(__name__)

EventSink = Callable[[MatchEvent], Awaitable[None]]
R = TypeVar("R", MoveRecord, FaultRecord)
T = TypeVar("T")

# How often one turn is asked again because of the referee's own lag before the attempt is aborted.
MAX_LAG_REASKS = 2


class _Forfeit(Exception):
    def __init__(self, seat: int) -> None:
        self.seat = seat


class _Void(Exception):
    def __init__(self, fault: FaultRecord) -> None:
        self.fault = fault


class MatchVoided(Exception):
    """A seat's LLM provider failed a decision under `[policy] provider = "void"`: this play of the
    match does not count. `voided` says who, when and why; `record` is the play as far as it went."""

    def __init__(self, voided: VoidedAttempt, record: MatchRecord) -> None:
        super().__init__(f"{voided.agent} turn {voided.turn}: {voided.cause}")
        self.voided = voided
        self.record = record


def chance_rng(secret: str, attempt: int) -> random.Random:
    """The RNG of a match's chance outcomes (and of moves the `random` policy plays for a seat)."""
    return random.Random(f"{secret}/{attempt}")


class MatchRunner:
    """Referees one attempt of one match (`run`): owns the OpenSpiel state, the chance RNG, the
    budgets and the `MatchRecord`; asks each seat through `TurnRequest`, judges the reply, applies
    the fault policy, and publishes the match's events (`started`, `moved`, `forfeit`, `ended`)."""

    def __init__(
        self,
        nc: NATS,
        spec: MatchSpec,
        *,
        subjects: Subjects | None = None,
        publish_event: EventSink | None = None,
        provenance: list[Provenance] | None = None,
        attempt: int = 1,
        presence: Presence | None = None,
        voided: list[VoidedAttempt] | None = None,
        compact: frozenset[str] = frozenset(),
        moved_events: bool = True,
        local_seats: Mapping[str, LocalSeat] | None = None,
    ) -> None:
        self.nc = nc
        self.spec = spec
        self.subjects = subjects or Subjects()
        self.publish_event = publish_event
        self.attempt = attempt
        self.presence = presence
        self.secret = spec.secret or secrets.token_hex(16)
        self.rng = chance_rng(self.secret, attempt)
        self.turn_no = 0
        # Each seat's observation of the final state, once the game reached its end (`match_ended`).
        self._final_views: list[str] | None = None
        self.record = MatchRecord(
            match_id=spec.match_id,
            tournament=spec.tournament,
            game=spec.game,
            seats=list(spec.seats),
            seed=spec.seed,
            provenance=provenance or [],
            attempt=attempt,
            # Absent unless budgets apply, so records without budgets keep their old bytes.
            budgets=spec.budgets or None,
            training=spec.training or None,  # likewise: only training matches (docs/env.md) say so
            voided=list(voided) if voided else None,  # the earlier plays a provider fault voided
        )
        self.budget = BudgetMeter(spec.budgets)
        self._rules_sent: set[int] = set()
        self._subject = {agent: self.subjects.turn(agent) for agent in dict.fromkeys(spec.seats)}
        self._facts: GameFacts | None = None  # read once the game is loaded
        # The part of each seat's turns that never changes in the match, written once.
        self._frame = TurnFrame.of(spec)
        # Seats whose turns carry OpenSpiel tensors (training environments only; docs/env.md).
        self._tensors = frozenset(spec.tensors or ())
        # Agents that asked for compact turns (discovery metadata `turns`; perfect information only).
        self._compact = compact
        # False: no live `moved` events (training sessions nobody watches live; the record has every move).
        self._moved_events = moved_events
        # Agents answered in this process, not over the bus (a training environment's learner).
        self._local = dict(local_seats or {})
        # `moved` and `forfeit` events wait here and go out while the referee waits for a reply
        # (`_pump`), not between a reply and the next turn; `ended` drains them first.
        self._events: asyncio.Queue[tuple[str, dict[str, object]] | None] = asyncio.Queue()
        self._pump_task: asyncio.Task[None] | None = None

    # -- events -------------------------------------------------------------------------------

    def _event(self, kind: str, **fields: object) -> MatchEvent:
        return MatchEvent(
            type=kind,
            match_id=self.spec.match_id,
            tournament=self.spec.tournament,
            game=self.spec.game,
            seats=self.spec.seats,
            attempt=self.attempt,
            **fields,
        )

    def _emit(self, kind: str, **fields: object) -> None:
        """Queue a spectator event (`started`, `moved`, `forfeit`) for `_pump`, in order."""
        if self.publish_event is None:
            return
        if self._pump_task is None:
            self._pump_task = asyncio.create_task(self._pump(), name=f"events-{self.spec.match_id}")
        self._events.put_nowait((kind, fields))

    async def _pump(self) -> None:
        """Build and publish queued events. It runs while the match waits on an agent, so the
        event's model, its JSON and its publish are off the path from a reply to the next turn."""
        assert self.publish_event is not None
        while (item := await self._events.get()) is not None:
            kind, fields = item
            # The queue woke this task before the next turn's publish woke nats-py's flusher, so
            # without this yield the event would be built ahead of the turn's write to the socket.
            await asyncio.sleep(0)
            try:
                await self.publish_event(self._event(kind, **fields))
            except Exception:
                # A lost spectator event must not cost the match; the record still has everything.
                log.warning("match %s: could not publish %s event", self.spec.match_id, kind, exc_info=True)

    async def _flush_events(self) -> None:
        """Every queued event published (before `ended`, which must come after them)."""
        if self._pump_task is not None:
            self._events.put_nowait(None)
            await self._pump_task
            self._pump_task = None

    async def _notify(self, msg: MatchStarted | MatchEnded, agent: str) -> None:
        if agent in self._local:
            return  # a seat in this process reads the match from its turns; nobody hears its subject
        try:
            # exclude_none for `match_ended`: without its optional additions it keeps its old bytes,
            # and hidden history steps are written as in a turn (no action, no text).
            data = msg.model_dump_json(exclude_none=isinstance(msg, MatchEnded))
            await self.nc.publish(self.subjects.notify(agent), data.encode())
        except Exception:
            log.warning("match %s: could not notify %s", self.spec.match_id, agent, exc_info=True)

    # -- asking a seat ------------------------------------------------------------------------

    def _move_record(self, seat: int, action: LegalAction, latency: float, **fields: Any) -> MoveRecord:
        # Validated, though every value is the referee's own or the agent's as its reply was
        # validated (`check_reply`): pydantic's validating constructor runs in Rust and takes half
        # the time of `model_construct` (Python), and the models inside (usage, stats) are kept as
        # they are, not validated again.
        return MoveRecord(
            turn=self.turn_no,
            player=seat,
            action=action.id,
            text=action.text,  # the text the seat was offered: computed once per turn
            agent=self.spec.seats[seat],
            latency_ms=round(latency, 3),
            **fields,
        )

    async def _ask(self, state: pyspiel.State, seat: int) -> tuple[int, MoveRecord]:
        """Get a legal action for `seat`, applying the fault policy (referee/faults.py).
        Raises `_Forfeit`, or `MatchAborted` when the referee stalled too often on this decision."""
        compact = self.spec.seats[seat] in self._compact and self._facts is not None and self._facts.perfect
        # Legal-action entries from the cache every match of this process shares.
        legal = Offer(state, seat, KNOWN, compact=compact)
        retry: str | None = None
        attempt = lag_reasks = 0
        while True:
            try:
                reply = await self._send_turn(state, seat, legal, retry)
            except RefereeLag as lag:
                # Our own stall, not the agent's slowness: ask the same decision again (new turn counter).
                lag_reasks += 1
                log.warning(
                    "match %s: deadline timer fired %.0f ms late (referee stalled); asking %s again",
                    self.spec.match_id,
                    lag.late_s * 1000,
                    self.spec.seats[seat],
                )
                if lag_reasks > MAX_LAG_REASKS:
                    raise MatchAborted(f"referee stalled {lag_reasks} times on one turn") from None
                continue
            attempt += 1
            played = self._judge(seat, legal, reply)
            if not isinstance(played, FaultRecord):
                return played
            self.record.faults.append(played)
            decision = decide(played.reason, attempt, self.spec.policy)
            if decision == "random":
                chosen = legal.choice(self.rng)
                note = f"played at random after {played.reason}"
                return chosen.id, self._move_record(seat, chosen, reply.latency_ms, forced=True, note=note)
            if decision == "retry":
                retry = retry_note(played.reason, played.detail)
                continue
            self._emit("forfeit", fault=self._for_spectators(played))
            if decision == "void":
                raise _Void(played)
            raise _Forfeit(seat)

    async def _send_turn(self, state: pyspiel.State, seat: int, legal: Offer, retry: str | None) -> Reply:
        """Encode this seat's next turn (a new turn counter) and ask its agent."""
        self.turn_no += 1
        agent = self.spec.seats[seat]
        local = self._local.get(agent)
        if local is not None:
            # The model whose JSON the turn's bytes are (`build_turn`): nothing to write and read
            # back in this process.
            turn_model = self._full_turn(build_turn, state, seat, legal, retry)
            return await ask_local(local, turn_model, self.spec.deadline_ms)
        if legal.compact:
            turn = encode_compact_turn(
                self._frame,
                state,
                seat,
                self.turn_no,
                legal.ids,
                retry=retry,
                budget=self.budget.turn_budget(agent),
            )
        else:
            turn = self._full_turn(encode_turn, state, seat, legal, retry)
        request = TurnRequest(
            self.nc, self._subject[agent], turn, agent, self.spec.deadline_ms, self.presence
        )
        return await request.send()

    def _full_turn(
        self,
        make: Callable[..., T],
        state: pyspiel.State,
        seat: int,
        legal: Offer,
        retry: str | None,
    ) -> T:
        """`make` (`encode_turn` or `build_turn`) of this seat's full turn: the rules on its first."""
        agent = self.spec.seats[seat]
        return make(
            self._frame,
            state,
            seat,
            self.turn_no,
            self._history,
            rules=None if seat in self._rules_sent else rules_text(state.get_game()),
            retry=retry,
            legal=legal.legal,
            tensors=agent in self._tensors,
            budget=self.budget.turn_budget(agent),
        )

    def _judge(self, seat: int, legal: Offer, reply: Reply) -> tuple[int, MoveRecord] | FaultRecord:
        """The played action and its record, or the fault: the reply's own, `provider` (the move
        says its LLM provider failed), `illegal` (no legal action named) or `budget` (the seat's
        budget is spent; the move is charged first)."""
        agent = self.spec.seats[seat]
        move, reason, detail = reply.move, reply.reason, reply.detail
        calls = move.calls if move is not None else None
        if move is not None and move.failure is not None:
            # The provider's failure, not the model's play: nothing to charge or match.
            self._rules_sent.add(seat)
            reason, detail = "provider", move.failure.cause
            move = None
        if move is not None:
            self._rules_sent.add(seat)
            usage, stats, over = self.budget.charge(agent, move)
            action = legal.match(move.action, move.action_text)
            if action is not None and over is None:
                offered = legal.entry(action)
                return action, self._move_record(
                    seat,
                    offered,
                    reply.latency_ms,
                    usage=usage,
                    stats=stats,
                    note=cap_note(move.note),
                    policy=move.policy,
                    calls=move.calls,
                )
            reason = "illegal" if over is None else "budget"
            named = f"id {move.action}" if move.action is not None else f"text {move.action_text!r}"
            no_action = move.action is None and move.action_text is None
            detail = "move names no action" if no_action else f"{named} is not a legal action"
            detail = detail if over is None else over
        assert reason is not None
        return FaultRecord(
            turn=self.turn_no,
            seat=seat,
            agent=agent,
            reason=reason,
            detail=detail,
            latency_ms=reply.latency_ms,
            calls=calls,
        )

    # -- the match ----------------------------------------------------------------------------

    async def run(self) -> MatchRecord:
        """Play the match and publish its `ended` event. Raises `MatchAborted` when the bus or the
        referee failed the attempt, or the `ended` event could not be stored: the caller replays."""
        self.record.started_at = time.time()
        try:
            await self._played()
        except MatchAborted:
            raise
        except _Void as void:
            await self._voided(void.fault)
        except Exception as exc:
            log.exception("match %s failed inside the referee", self.spec.match_id)
            self.record.outcome = "error"
            self.record.error = f"{type(exc).__name__}: {exc}"[:1000]
            n = len(self.spec.seats)
            self.record.returns = self.record.returns or [0.0] * n
            self.record.ranks = self.record.ranks or [1] * n
        self.record.ended_at = time.time()
        self.record.cost_usd = seat_costs(self.record)
        # Revealed only now: the match is over, nothing private is left to protect.
        self.record.secret = self.secret
        self.record = repair_record(self.record)
        if self.publish_event is not None:
            await self._flush_events()
            try:
                await self.publish_event(self._event("ended", record=self.record))
            except Exception as exc:
                raise MatchAborted(f"the ended event was not stored: {exc!r}") from exc
        for seat, agent in enumerate(self.spec.seats):
            final = self._final_views is not None and self.record.outcome in ("decisive", "draw")
            await self._notify(
                MatchEnded(
                    match_id=self.spec.match_id,
                    seat=seat,
                    returns=self.record.returns,
                    outcome=self.record.outcome,
                    history=self._history.items[seat] if final else None,
                    observation=self._final_views[seat] if final and self._final_views else None,
                ),
                agent,
            )
        return self.record

    async def _voided(self, fault: FaultRecord) -> None:
        """End this play as void: its events out, the seats told (outcome `void`, so they drop the
        match's state before the replay), then `MatchVoided` for the worker."""
        n = len(self.spec.seats)
        self.record.outcome = "void"
        self.record.returns = [0.0] * n
        self.record.ranks = [1] * n
        self.record.ended_at = time.time()
        await self._flush_events()
        for seat, agent in enumerate(self.spec.seats):
            await self._notify(
                MatchEnded(
                    match_id=self.spec.match_id, seat=seat, returns=self.record.returns, outcome="void"
                ),
                agent,
            )
        voided = VoidedAttempt(
            agent=fault.agent,
            turn=fault.turn,
            cause=fault.detail[:500],
            moves=len(self.record.moves),
            ended_at=self.record.ended_at,
        )
        raise MatchVoided(voided, self.record)

    async def _played(self) -> None:
        """`_run`, and the event pump stopped when the attempt is aborted or cancelled (an internal
        error still ends the match with an `ended` event, after the queued events)."""
        try:
            await self._run()
        except (MatchAborted, asyncio.CancelledError):
            if self._pump_task is not None:  # no `ended` follows: queued events are void
                self._pump_task.cancel()
                self._pump_task = None
            raise

    async def _run(self) -> None:
        spec = self.spec
        try:
            game = await load_game_async(spec.game)
        except GameSpecError as exc:
            raise RuntimeError(str(exc)) from exc
        n = game.num_players()
        if n != len(spec.seats):
            raise RuntimeError(f"{spec.game.label()} has {n} seats, the match spec names {len(spec.seats)}")
        state = initial_state(game)
        self._facts = self._frame.facts = GameFacts.of(game)
        self._history = SeatHistory(n)
        for seat, agent in enumerate(spec.seats):
            await self._notify(
                MatchStarted(match_id=spec.match_id, game=spec.game, seat=seat, seats=spec.seats), agent
            )
        self._emit("started", observation=public_observation(state, self._facts))
        try:
            while not state.is_terminal():
                if self.turn_no >= spec.max_turns:
                    self.record.outcome = "max_turns"
                    self.record.returns = [0.0] * n
                    self.record.ranks = [1] * n
                    return
                if state.is_chance_node():
                    outcomes, probs = zip(*state.chance_outcomes(), strict=True)
                    action = self.rng.choices(outcomes, weights=probs)[0]
                    rec = MoveRecord(
                        turn=self.turn_no, player=-1, action=action, text=action_text(state, -1, action)
                    )
                    await self._apply(state, rec)
                elif state.is_simultaneous_node():
                    await self._simultaneous(state, n)
                else:
                    seat = state.current_player()
                    action, rec = await self._ask(state, seat)
                    await self._apply(state, rec)
        except _Forfeit as f:
            self._forfeit(game, f.seat)
            return
        self.record.returns = [float(r) for r in state.returns()]
        self._final_views = [observation_text(state, seat, self._facts) for seat in range(n)]
        self.record.ranks = ranks_from_returns(self.record.returns)
        self.record.outcome = "draw" if len(set(self.record.ranks)) == 1 else "decisive"

    async def _simultaneous(self, state: pyspiel.State, n: int) -> None:
        seats = [p for p in range(n) if state.legal_actions(p)]
        results = await asyncio.gather(*(self._ask(state, p) for p in seats), return_exceptions=True)
        for r in results:
            if isinstance(r, MatchAborted):
                raise r
        voids = [r for r in results if isinstance(r, _Void)]
        if voids:  # the play is void whatever else happened in it
            raise voids[0]
        forfeits = [r for r in results if isinstance(r, _Forfeit)]
        if forfeits:
            raise forfeits[0]
        for r in results:
            if isinstance(r, BaseException):
                raise r
        joint = [0] * n
        recs = []
        for p, r in zip(seats, results, strict=True):
            assert not isinstance(r, BaseException)
            joint[p] = r[0]
            recs.append(r[1])
        for rec in recs:
            public = self._history.record(
                state, rec.player, rec.action, joint, text=rec.text, facts=self._facts
            )
            self.record.moves.append(rec)
            self._emit_move(rec, public, None)
        state.apply_actions(joint)

    async def _apply(self, state: pyspiel.State, rec: MoveRecord) -> None:
        public = self._history.record(state, rec.player, rec.action, text=rec.text, facts=self._facts)
        state.apply_action(rec.action)
        self.record.moves.append(rec)
        self._emit_move(rec, public, public_observation(state, self._facts) if self._moved_events else None)

    def _emit_move(self, rec: MoveRecord, public: bool, observation: str | None) -> None:
        if not self._moved_events:
            return
        if public:
            self._emit("moved", move=self._for_spectators(rec), observation=observation)
        else:
            # Spectators learn that a seat acted, not what it did, until the `ended` event.
            hidden = MoveRecord(turn=rec.turn, player=rec.player, action=-1, text="(hidden)", agent=rec.agent)
            self._emit("moved", move=hidden, hidden=True)

    def _for_spectators(self, rec: R) -> R:
        """`rec` as a live event may show it: a seat's thinking may name its private information
        (its own cards), so for imperfect-information games the calls go out without their texts,
        which spectators read in the `ended` record, as they do the private steps."""
        if not rec.calls or (self._facts is not None and self._facts.perfect):
            return rec
        bare = [c.model_copy(update={"reasoning": None, "answer": None}) for c in rec.calls]
        return rec.model_copy(update={"calls": bare})

    def _forfeit(self, game: pyspiel.Game, seat: int) -> None:
        n = game.num_players()
        lo, hi = game.min_utility(), game.max_utility()
        self.record.forfeited = [seat]
        self.record.outcome = "forfeit"
        self.record.returns = [float(lo) if p == seat else float(hi) for p in range(n)]
        self.record.ranks = [n if p == seat else 1 for p in range(n)]
