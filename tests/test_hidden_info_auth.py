"""Hidden information end to end, with auth on: what each account can receive leaks no other seat's
private cards or dice before the match ends. Every account kind is measured: the agents, the
spectator, a bot-check user and a second referee-account connection (what `submit` logs in as)
each subscribe to everything they may try (`>` included); the server refuses what they may not.

Each bot logs in as its own agent user and subscribes to everything its account may
subscribe to (its turn and notify subjects, its `$SRV` discovery subjects; wider
subscriptions are refused by the server). Every byte it receives is kept. A turn is
then proven independent of the other seats' private chance outcomes: it is rebuilt
with each hidden chance outcome replaced by every alternative, and the bytes must
not change. A spectator, likewise, sees private chance outcomes only in `ended`.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from bus.auth import SPECTATOR_INBOX, AuthBundle, config_path, load_auth, write_auth
from bus.connect import connect, flush
from bus.protocol import MatchEvent, MatchRecord, Turn
from bus.server import EmbeddedNats
from bus.streams import ensure_streams
from bus.subjects import Subjects
from games.loader import load_game
from games.view import CHANCE, SeatHistory, observation_text
from referee.turns import TurnFrame, build_turn
from referee.worker import RefereeWorker
from tests.helpers import spec

S = Subjects()
GAMES = ["leduc_poker", "liars_dice", "simplified_holdem"]
MATCHES_PER_GAME = 4


@pytest.fixture(scope="module")
def auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedNats, AuthBundle]]:
    out = tmp_path_factory.mktemp("hidden-auth")
    write_auth(["hia", "hib"], out)
    with EmbeddedNats(config=config_path(out)) as srv:
        yield srv, load_auth(out)


WIDE = [">", "spielbus.>", "spielbus.match.>", "spielbus.turn.>", "spielbus.notify.>", "_INBOX.>", "$SRV.>"]


class Capture:
    """A connection that keeps every message its account lets it receive on `subjects`."""

    def __init__(self, nc: NATS) -> None:
        self.nc = nc
        self.received: list[tuple[str, bytes]] = []

    async def start(self, subjects: list[str]) -> None:
        for subject in subjects:
            await self.nc.subscribe(subject, cb=self._keep)
        await flush(self.nc)

    async def _keep(self, msg: Msg) -> None:
        self.received.append((msg.subject, msg.data))

    def on(self, prefix: str) -> list[tuple[str, bytes]]:
        return [(s, d) for s, d in self.received if s.startswith(prefix)]


class CapturingBot:
    """A bot that keeps every message its account receives, and answers turns with a random legal move."""

    def __init__(self, nc: NATS, name: str, seed: int) -> None:
        self.nc = nc
        self.name = name
        self.rng = random.Random(seed)
        self.received: list[tuple[str, bytes]] = []
        self.refused: list[str] = []

    async def start(self) -> None:
        for subject in [
            S.notify(self.name),
            "$SRV.PING",
            "$SRV.INFO",
            "$SRV.STATS",
            f"$SRV.*.{self.name}",
            f"$SRV.*.{self.name}.*",
            # Refused by the server (reported through the error callback): nothing arrives on them.
            ">",
            "spielbus.>",
            "_INBOX.>",
        ]:
            await self.nc.subscribe(subject, cb=self._keep)
        await self.nc.subscribe(S.turn(self.name), queue=self.name, cb=self._turn)
        await flush(self.nc)

    async def _keep(self, msg: Msg) -> None:
        self.received.append((msg.subject, msg.data))

    async def _turn(self, msg: Msg) -> None:
        self.received.append((msg.subject, msg.data))
        turn = json.loads(msg.data)
        action = self.rng.choice(turn["legal_actions"])["id"]
        move = {"v": 1, "type": "move", "match_id": turn["match_id"], "turn": turn["turn"], "action": action}
        await msg.respond(json.dumps(move).encode())


def _final_view(record: MatchRecord, seat: int) -> dict[str, Any]:
    """A finished match's last view of `seat` (`match_ended`'s `history` and `observation`), rebuilt
    with the seat's own visibility, as its turns are."""
    game = load_game(record.game)
    state = game.new_initial_state()
    hist = SeatHistory(game.num_players())
    for m in record.moves:
        hist.record(state, m.player, m.action)
        state.apply_action(m.action)
    assert state.is_terminal()
    return {
        "history": [json.loads(item.model_dump_json(exclude_none=True)) for item in hist.items[seat]],
        "observation": observation_text(state, seat),
    }


def _replay_turn(record: MatchRecord, upto: int, seat: int, received: Turn, swap: dict[int, int]) -> Turn:
    """Seat's turn after `record.moves[:upto]`, with chance steps in `swap` replaced (index -> action)."""
    game = load_game(record.game)
    state = game.new_initial_state()
    hist = SeatHistory(game.num_players())
    for i, m in enumerate(record.moves[:upto]):
        action = swap.get(i, m.action)
        hist.record(state, m.player, action)
        state.apply_action(action)
    assert state.current_player() == seat
    turn = build_turn(
        TurnFrame(record.match_id, record.game, record.seats, received.deadline_ms, match_seed=record.seed),
        state,
        seat,
        received.turn,
        hist,
        rules=received.rules,
        retry=received.retry,
    )
    # The send time is the referee's clock at that moment, not game information: taken as received.
    return turn.model_copy(update={"sent_at": received.sent_at})


def _alternatives(record: MatchRecord, upto: int, hidden: list[int]) -> Iterator[dict[int, int]]:
    """Every other outcome of each hidden chance step (one step varied at a time, the rest replayed)."""
    game = load_game(record.game)
    for idx in hidden:
        state = game.new_initial_state()
        for m in record.moves[:idx]:
            state.apply_action(m.action)
        for alt, _ in state.chance_outcomes():
            if alt == record.moves[idx].action:
                continue
            # The rest of the prefix must stay playable (e.g. the deck changes which cards remain).
            probe = state.clone()
            probe.apply_action(alt)
            ok = True
            for m in record.moves[idx + 1 : upto]:
                legal = (
                    [a for a, _ in probe.chance_outcomes()]
                    if probe.is_chance_node()
                    else probe.legal_actions()
                )
                if m.action not in legal:
                    ok = False
                    break
                probe.apply_action(m.action)
            if ok:
                yield {idx: alt}


def _check_seat(record: MatchRecord, seat: int, bot: CapturingBot) -> int:
    """Every turn this seat received is byte-for-byte independent of what it may not know."""
    turns = [
        (subj, data)
        for subj, data in bot.received
        if subj == S.turn(bot.name) and json.loads(data)["match_id"] == record.match_id
    ]
    mine = [m for m in record.moves if m.player == seat]
    checked = 0
    for (_, data), move in zip(turns, mine, strict=True):
        raw: dict[str, Any] = json.loads(data)
        received = Turn.model_validate(raw)
        # The send time is a clock reading, not game information: compared without it.
        assert isinstance(raw.pop("sent_at"), float)
        assert received.turn == move.turn and received.seat == seat
        assert received.state is None  # never the full history of an imperfect-information game
        upto = record.moves.index(move)
        hidden = [
            i
            for i, (m, item) in enumerate(zip(record.moves[:upto], received.history, strict=True))
            if m.player == CHANCE and item.action is None
        ]
        # Rebuilt as the referee builds it, the turn is exactly the bytes on the wire...
        rebuilt = _replay_turn(record, upto, seat, received, {})
        assert json.loads(rebuilt.model_dump_json(exclude_none=True, exclude={"sent_at"})) == raw
        # ...and stays the same whatever the hidden chance outcomes were.
        for swap in _alternatives(record, upto, hidden):
            other = _replay_turn(record, upto, seat, received, swap)
            assert json.loads(other.model_dump_json(exclude_none=True, exclude={"sent_at"})) == raw, (
                record.game.name,
                swap,
            )
            checked += 1
    return checked


async def test_bots_and_spectator_see_no_private_information_before_the_end(
    auth: tuple[EmbeddedNats, AuthBundle],
) -> None:
    srv, bundle = auth
    conns: list[NATS] = []

    async def login(user: str, password: str, **kw: Any) -> NATS:
        nc = await connect(srv.url, name=user, user=user, password=password, **kw)
        conns.append(nc)
        return nc

    try:
        bots = {}
        for i, name in enumerate(("hia", "hib")):
            u = bundle.agent(name)
            bots[name] = CapturingBot(await login(u.user, u.password), name, seed=i)
            await bots[name].start()
        spect = bundle.spectator()
        spectator = await login(spect.user, spect.password)
        events: list[MatchEvent] = []

        async def watch(msg: Msg) -> None:
            events.append(MatchEvent.model_validate_json(msg.data))

        await spectator.subscribe("spielbus.match.>", cb=watch)
        await flush(spectator)
        # Every other account kind, listening as widely as it may try.
        spy = Capture(await login(spect.user, spect.password, inbox_prefix=SPECTATOR_INBOX))
        await spy.start([*WIDE, f"{SPECTATOR_INBOX}.>"])
        check = bundle.botcheck("hia")
        checker = Capture(await login(check.user, check.password, inbox_prefix=check.inbox_prefix()))
        await checker.start([*WIDE, f"{check.inbox_prefix()}.>"])
        ref = bundle.referee()
        second_referee = Capture(await login(ref.user, ref.password))
        await second_referee.start(WIDE)
        referee = await login(ref.user, ref.password)
        await ensure_streams(referee.jetstream(), S)
        worker = RefereeWorker(referee)
        specs = []
        for game in GAMES:
            for k in range(MATCHES_PER_GAME):
                seats = ["hia", "hib"] if k % 2 == 0 else ["hib", "hia"]
                specs.append(spec(game, seats, seed=100 + k))
        records = await asyncio.gather(*(worker.play(s) for s in specs))
        for nc in conns:
            await flush(nc)
        await flush(spectator)
    finally:
        for nc in conns:
            await nc.close()

    checked = 0
    for rec in records:
        assert rec.faults == [] and rec.outcome in ("decisive", "draw"), rec
        for seat, name in enumerate(rec.seats):
            checked += _check_seat(rec, seat, bots[name])
    assert checked > 0  # the alternatives were really tried

    for bot in bots.values():
        # Nothing arrived through the refused wide subscriptions: only its own subjects, and the
        # referee's empty discovery requests (it asks `$SRV.INFO.<name>` for provenance).
        for subj, data in bot.received:
            assert subj in (S.turn(bot.name), S.notify(bot.name)) or (
                subj.startswith("$SRV.") and data == b""
            ), subj
        by_id = {rec.match_id: rec for rec in records}
        for subj, data in bot.received:
            if subj == S.notify(bot.name):
                note = json.loads(data)
                assert note["type"] in ("match_started", "match_ended")
                assert set(note) <= {
                    "v", "type", "match_id", "game", "seat", "seats", "returns", "outcome",
                    "history", "observation",
                }  # fmt: skip
                if note["type"] == "match_ended":
                    # The final view is the seat's own: its history and observation, nothing more.
                    rec = by_id[note["match_id"]]
                    assert rec.seats[note["seat"]] == bot.name
                    assert {"history": note["history"], "observation": note["observation"]} == _final_view(
                        rec, note["seat"]
                    )

    _check_spectator(records, events)

    # The spectator's wide subscriptions: match events only, and the same ones.
    assert spy.received and all(subj.startswith("spielbus.match.") for subj, _ in spy.received)
    _check_spectator(records, [MatchEvent.model_validate_json(d) for _, d in spy.received])
    # bot-check of hia: nothing at all (it asks only when it runs, and only its own bot).
    assert checker.received == []
    # A second referee-account connection: match events, and on `_INBOX.>` the agents' replies
    # (moves naming public actions) and JetStream acks, never a turn or a notification.
    ours = {rec.match_id for rec in records}
    mine = [(s, d) for s, d in second_referee.received if s.startswith("spielbus.match.")]
    assert mine and len(mine) == len(second_referee.on("spielbus."))  # no spielbus.turn/notify
    _check_spectator(records, [MatchEvent.model_validate_json(d) for _, d in mine])
    by_id = {rec.match_id: rec for rec in records}
    replies = 0
    for _subj, data in second_referee.on("_INBOX."):
        body = json.loads(data) if data.startswith(b"{") else {}
        if body.get("type") != "move" or body.get("match_id") not in ours:
            assert "legal_actions" not in body and "observation" not in body, body  # no turn ever
            continue
        assert set(body) <= {"v", "type", "match_id", "turn", "action"}
        public = {m.action for m in by_id[body["match_id"]].moves if m.player != CHANCE}
        assert body["action"] in public
        replies += 1
    assert replies > 0


def _check_spectator(records: list[MatchRecord], events: list[MatchEvent]) -> None:
    by_match: dict[str, list[MatchEvent]] = defaultdict(list)
    for ev in events:
        by_match[ev.match_id].append(ev)
    for rec in records:
        evs = by_match[rec.match_id]
        assert evs[0].type == "started" and evs[-1].type == "ended"
        assert evs[-1].record is not None and evs[-1].record.moves == rec.moves  # all revealed at the end
        before = evs[:-1]
        game = load_game(rec.game)
        state = game.new_initial_state()
        moved = [e for e in before if e.type == "moved"]
        assert len(moved) == len(rec.moves)
        for ev, true in zip(moved, rec.moves, strict=True):
            assert ev.record is None and ev.observation is None
            assert ev.move is not None
            if ev.hidden:
                assert ev.move.action == -1 and ev.move.text == "(hidden)"
            else:
                # A shown step is one every seat may know.
                others = [a for a, _ in state.chance_outcomes()] if state.is_chance_node() else []
                if true.player == CHANCE:
                    for seat in range(game.num_players()):
                        mine = state.clone()
                        mine.apply_action(true.action)
                        for alt in others:
                            if alt == true.action:
                                continue
                            o = state.clone()
                            o.apply_action(alt)
                            assert o.information_state_string(seat) != mine.information_state_string(seat)
                assert ev.move.action == true.action
            state.apply_action(true.action)
        # The first chance steps deal each seat its private card or dice: never shown before `ended`.
        chance = [e for e in moved if e.move is not None and e.move.player == CHANCE]
        assert chance and all(e.hidden for e in chance[: game.num_players()])
        text = " ".join(e.model_dump_json() for e in before)
        assert "Private:" not in text and "Roll " not in text
