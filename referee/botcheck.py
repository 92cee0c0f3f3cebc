"""`spielbus bot-check NAME`: a conformance run against a bot that is already on the bus.

Each check is judged exactly as the referee judges a real match (the same
`bus.replies.check_reply`, strict validation included, and the same legality rule), and
each reply and each match record also goes through the collector's path (`record_problem`:
serialized as the `ended` event and read back with the collector's model), so a bot whose
replies the collector would refuse (a `NaN` policy, say) fails here rather than hanging a
tournament. Each failure names its reason:

1. discovery: `$SRV.PING.<name>` and `$SRV.INFO.<name>` answer; an endpoint listens on
   `<prefix>.turn.<name>` in queue group `<name>`;
2. deadline: a first turn (with the rules) is answered with a legal move within `deadline_ms`;
3. unknown fields: a turn carrying fields this protocol version does not define is still answered;
4. retry: a turn carrying `retry` (the reason a previous answer was refused) is answered;
5. notifications: after `match_started`, `match_ended` and odd notifications the bot still plays;
6. games: one full match per game, the bot in every seat, with no fault;
7. concurrency: `concurrency` matches at once, the bot in every seat, with no fault.

The single-turn checks (2 to 5) use tic-tac-toe unless `turn_game` names the bot's game.
The bot plays itself, so the check needs no second agent. With accounts it runs as the
bot's own `botcheck-<name>` user, which may ask and notify that one bot and nothing else
(never the referee's login: that one can publish match events). Limits: the
checks probe behaviour, not strength; a bot that answers only some games it does not
claim (metadata `games`) fails the game checks for those games.

The same checks from a bot author's own tests (docs/protocol.md#checking-a-bot-spielbus-bot-check):

    from referee.botcheck import options_for, run_bot_check

    def test_my_bot_passes_bot_check():          # with the bot serving as "mybot" on $NATS_URL
        run_bot_check("mybot", options=options_for(["tic_tac_toe"])).assert_ok()

`check_bot` is the same as a coroutine (for async tests), `login_from_file` reads the bot-check
login of a bot's login file when the bus has accounts.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats.errors
from nats.aio.client import Client as NATS
from pydantic import BaseModel, ValidationError

from bus.auth import BOTCHECK_CREDS, BOTCHECK_ENV, AuthError, read_login_file
from bus.connect import Login, connect, flush, nats_url
from bus.protocol import (
    PROBE_HEADER,
    FaultPolicy,
    GameSpec,
    MatchEnded,
    MatchEvent,
    MatchRecord,
    MatchSpec,
    MatchStarted,
    MoveRecord,
    Turn,
)
from bus.replies import check_reply
from bus.subjects import Subjects, check_token
from games.loader import load_game, parse_spec
from games.rules import rules_text
from games.view import SeatHistory
from referee.match import MatchRunner
from referee.turns import TurnFrame, build_turn, match_action

DEFAULT_GAMES = ("tic_tac_toe", "connect_four", "kuhn_poker", "liars_dice")
TOURNAMENT = "bot-check"


class CheckResult(BaseModel):
    name: str
    ok: bool
    detail: str = ""


class BotCheckOptions(BaseModel):
    deadline_ms: int = 5000
    games: list[str] = list(DEFAULT_GAMES)
    concurrency: int = 10
    concurrent_game: str = "tic_tac_toe"
    # The single-turn checks' game: None is tic-tac-toe (connect four for unknown fields). A bot that
    # plays one game only (stockfish, gnugo) is checked on that game.
    turn_game: str | None = None
    max_turns: int = 400


def _mid(what: str) -> str:
    return f"botcheck-{what}-{uuid.uuid4().hex[:8]}"


def first_turn(game: GameSpec, match_id: str, seats: list[str], deadline_ms: int) -> Turn:
    """The first decision of `game` for its first seat to act, after seeded chance steps."""
    g = load_game(game)
    state = g.new_initial_state()
    hist = SeatHistory(g.num_players())
    while state.is_chance_node():
        action = state.chance_outcomes()[0][0]
        hist.record(state, -1, action)
        state.apply_action(action)
    seat = state.current_player()
    return build_turn(
        TurnFrame(match_id, game, seats, deadline_ms), state, seat, 1, hist, rules=rules_text(g)
    )


async def ask(nc: NATS, subject: str, payload: bytes, turn: Turn) -> tuple[bool, str, float]:
    """Send one turn; judge the reply as the referee would. Returns (ok, detail, latency ms)."""
    t0 = time.perf_counter()  # not the loop's clock, which may count whole milliseconds (bus/loop.py)
    try:
        msg = await nc.request(subject, payload, timeout=turn.deadline_ms / 1000)
    except nats.errors.NoRespondersError:
        return False, f"no_responder: nobody listens on {subject}", 0.0
    except (nats.errors.TimeoutError, TimeoutError):
        return False, f"timeout: no reply within {turn.deadline_ms} ms", float(turn.deadline_ms)
    latency = (time.perf_counter() - t0) * 1000
    move, reason, detail = check_reply(turn, msg.data, msg.headers)
    if move is None:
        return False, f"{reason}: {detail}", latency
    if match_action(turn.legal_actions, move.action, move.action_text) is None:
        named = f"id {move.action}" if move.action is not None else f"text {move.action_text!r}"
        return False, f"illegal: {named} is not a legal action", latency
    problem = record_problem(
        MatchRecord(
            match_id=turn.match_id,
            tournament=TOURNAMENT,
            game=turn.game,
            seats=turn.seats,
            seed=0,
            moves=[
                MoveRecord(
                    turn=turn.turn,
                    player=turn.seat,
                    action=move.action if move.action is not None else -1,
                    text=move.action_text or "",
                    agent=turn.seats[turn.seat],
                    latency_ms=round(latency, 3),
                    usage=move.usage,
                    stats=move.stats,
                    note=move.note,
                    policy=move.policy,
                )
            ],
        )
    )
    if problem:
        return False, problem, latency
    return True, f"legal move in {latency:.0f} ms (deadline {turn.deadline_ms} ms)", latency


def record_problem(record: MatchRecord) -> str | None:
    """Why the collector would refuse this record, or None: the record path, end to end.

    The referee publishes `ended` as `MatchEvent.model_dump_json(exclude_none=True)` and the
    collector reads it back with `MatchEvent.model_validate_json`; a record that does not
    survive that trip (a non-finite number in a policy, say) would never be stored.
    """
    event = MatchEvent.ended_of(record)
    try:
        data = event.model_dump_json(exclude_none=True).encode()
        back = MatchEvent.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "top level"
        return f"record refused by the collector: {first.get('msg')} at {where}"[:300]
    except ValueError as exc:  # serialization refused (e.g. a value JSON cannot hold)
        return f"record cannot be serialized: {exc}"[:300]
    if back.record is None or back.record.model_dump(exclude_none=True) != record.model_dump(
        exclude_none=True
    ):
        return "record changed on its way through the collector"
    return None


class BotChecker:
    def __init__(
        self, nc: NATS, name: str, *, subjects: Subjects | None = None, options: BotCheckOptions | None = None
    ) -> None:
        self.nc = nc
        self.name = name
        self.subjects = subjects or Subjects()
        self.opts = options or BotCheckOptions()

    # -- the checks -----------------------------------------------------------------------------

    async def discovery(self) -> CheckResult:
        try:
            await self.nc.request(f"$SRV.PING.{self.name}", b"", timeout=2.0)
            msg = await self.nc.request(f"$SRV.INFO.{self.name}", b"", timeout=2.0)
        except nats.errors.NoRespondersError:
            return CheckResult(name="discovery", ok=False, detail=f"no micro service named {self.name!r}")
        except (nats.errors.TimeoutError, TimeoutError):
            return CheckResult(name="discovery", ok=False, detail="$SRV.PING/$SRV.INFO not answered in 2 s")
        try:
            info = json.loads(msg.data)
            endpoints = info.get("endpoints") or []
        except (ValueError, AttributeError):
            return CheckResult(name="discovery", ok=False, detail="$SRV.INFO reply is not a JSON object")
        if info.get("name") != self.name:
            return CheckResult(
                name="discovery", ok=False, detail=f"service name {info.get('name')!r} is not {self.name!r}"
            )
        subject = self.subjects.turn(self.name)
        ep = next((e for e in endpoints if isinstance(e, dict) and e.get("subject") == subject), None)
        if ep is None:
            return CheckResult(name="discovery", ok=False, detail=f"no endpoint on {subject}")
        if ep.get("queue_group") != self.name:
            return CheckResult(
                name="discovery",
                ok=False,
                detail=f"endpoint queue group is {ep.get('queue_group')!r}, must be {self.name!r}",
            )
        meta = info.get("metadata") or {}
        return CheckResult(
            name="discovery",
            ok=True,
            detail=f"kind={meta.get('kind', '?')} version={info.get('version', '?')} "
            f"games={meta.get('games', '?')}",
        )

    def _turn(self, game: str = "tic_tac_toe") -> Turn:
        spec = parse_spec(self.opts.turn_game or game)
        g = load_game(spec)
        return first_turn(spec, _mid("turn"), [self.name] * g.num_players(), self.opts.deadline_ms)

    async def deadline(self) -> CheckResult:
        turn = self._turn()
        ok, detail, _ = await ask(
            self.nc, self.subjects.turn(self.name), turn.model_dump_json(exclude_none=True).encode(), turn
        )
        return CheckResult(name="turn within deadline", ok=ok, detail=detail)

    async def unknown_fields(self) -> CheckResult:
        turn = self._turn("connect_four")
        raw: dict[str, Any] = turn.model_dump(mode="json", exclude_none=True)
        # What a later protocol version might add: top-level, nested and inside list items.
        raw["x_future"] = {"nested": [1, {"deep": True}], "text": "ignore me"}
        raw["clock"] = {"remaining_ms": 1234}
        raw["game"]["x_variant"] = "standard"
        for la in raw["legal_actions"]:
            la["x_hint"] = 0.5
        ok, detail, _ = await ask(self.nc, self.subjects.turn(self.name), json.dumps(raw).encode(), turn)
        return CheckResult(name="unknown fields ignored", ok=ok, detail=detail)

    async def retry(self) -> CheckResult:
        turn = self._turn().model_copy(
            update={"turn": 2, "retry": "illegal: id 99 is not a legal action", "rules": None}
        )
        ok, detail, _ = await ask(
            self.nc, self.subjects.turn(self.name), turn.model_dump_json(exclude_none=True).encode(), turn
        )
        return CheckResult(name="retry message", ok=ok, detail=detail)

    async def notifications(self) -> CheckResult:
        turn = self._turn()
        notify = self.subjects.notify(self.name)
        start = MatchStarted(match_id=turn.match_id, game=turn.game, seat=0, seats=turn.seats)
        started = start.model_dump(mode="json")
        started["x_future"] = [1, 2, 3]
        await self.nc.publish(notify, json.dumps(started).encode())
        # Odd notifications a bot must survive: unknown type, not JSON, an end for an unknown match.
        probe = {PROBE_HEADER: "bot-check"}  # deliberate: the bot need not warn about these
        await self.nc.publish(
            notify, b'{"v": 1, "type": "x_future_event", "match_id": "elsewhere"}', headers=probe
        )
        await self.nc.publish(notify, b"\x00 not json", headers=probe)
        unknown_end = MatchEnded(match_id=_mid("ghost"), seat=0, returns=[0.0, 0.0], outcome="draw")
        await self.nc.publish(notify, unknown_end.model_dump_json().encode())
        await flush(self.nc)
        subject = self.subjects.turn(self.name)
        ok, detail, _ = await ask(self.nc, subject, turn.model_dump_json(exclude_none=True).encode(), turn)
        if not ok:
            return CheckResult(
                name="match_started/match_ended", ok=False, detail=f"after match_started: {detail}"
            )
        end = MatchEnded(match_id=turn.match_id, seat=0, returns=[0.0, 0.0], outcome="draw")
        await self.nc.publish(notify, end.model_dump_json().encode())
        await flush(self.nc)
        # Per-match state is gone now; a new match must still be served.
        again = self._turn()
        ok, detail, _ = await ask(self.nc, subject, again.model_dump_json(exclude_none=True).encode(), again)
        if not ok:
            return CheckResult(
                name="match_started/match_ended", ok=False, detail=f"after match_ended: {detail}"
            )
        return CheckResult(
            name="match_started/match_ended", ok=True, detail="still plays after notifications"
        )

    async def _match(self, game: str, seed: int) -> tuple[bool, str]:
        g = parse_spec(game)
        n = load_game(g).num_players()
        spec = MatchSpec(
            match_id=_mid("match"),
            tournament=TOURNAMENT,
            game=g,
            seats=[self.name] * n,
            seed=seed,
            deadline_ms=self.opts.deadline_ms,
            policy=FaultPolicy(kind="forfeit"),
            max_turns=self.opts.max_turns,
        )
        record = await MatchRunner(self.nc, spec, subjects=self.subjects).run()
        problem = record_problem(record)
        if problem:
            return False, problem
        if record.faults:
            f = record.faults[0]
            return False, f"{f.reason} at turn {f.turn}: {f.detail}"
        if record.outcome == "error":
            return False, f"referee could not play {game}: {record.error}"
        return True, f"{record.outcome} in {len(record.moves)} steps"

    async def game(self, game: str) -> CheckResult:
        ok, detail = await self._match(game, seed=len(game))
        return CheckResult(name=f"full match: {game}", ok=ok, detail=detail)

    async def concurrency(self) -> CheckResult:
        n = self.opts.concurrency
        results = await asyncio.gather(*(self._match(self.opts.concurrent_game, seed=i) for i in range(n)))
        bad = [d for ok, d in results if not ok]
        name = f"{n} concurrent matches"
        if bad:
            return CheckResult(name=name, ok=False, detail=f"{len(bad)} of {n} failed; first: {bad[0]}")
        return CheckResult(name=name, ok=True, detail=f"{n} matches of {self.opts.concurrent_game}, no fault")

    async def run(
        self, on_result: Callable[[CheckResult], Awaitable[None] | None] | None = None
    ) -> list[CheckResult]:
        checks: list[Callable[[], Awaitable[CheckResult]]] = [
            self.discovery,
            self.deadline,
            self.unknown_fields,
            self.retry,
            self.notifications,
            *(lambda g=g: self.game(g) for g in self.opts.games),
            self.concurrency,
        ]
        results = []
        for check in checks:
            try:
                res = await check()
            except Exception as exc:  # a check must never take the whole run down
                res = CheckResult(
                    name=getattr(check, "__name__", "check"), ok=False, detail=f"{type(exc).__name__}: {exc}"
                )
            results.append(res)
            if on_result is not None:
                out = on_result(res)
                if asyncio.iscoroutine(out):
                    await out
        return results


# -- the library API: bot-check from a bot author's own tests -------------------------------------


class BotCheckReport(BaseModel):
    """Every check's result for one bot; `assert_ok()` fails a test naming each failed check."""

    name: str
    results: list[CheckResult]

    @property
    def failed(self) -> list[CheckResult]:
        return [r for r in self.results if not r.ok]

    @property
    def ok(self) -> bool:
        return not self.failed

    def assert_ok(self) -> None:
        if self.failed:
            lines = "\n".join(f"  {r.name}: {r.detail}" for r in self.failed)
            raise AssertionError(
                f"bot-check {self.name}: {len(self.failed)} of {len(self.results)} failed:\n{lines}"
            )


def options_for(
    games: list[str] | None = None, deadline_ms: int = 5000, concurrency: int = 10
) -> BotCheckOptions:
    """The checks' options for a bot checked on `games` (default: DEFAULT_GAMES): the first named
    game also serves the single-turn and concurrent checks, so a one-game bot is checked on its
    game. An unknown game is a ValueError (a usage error, not a failed check)."""
    for g in games or ():
        load_game(g)
    first = games[0] if games else None
    return BotCheckOptions(
        deadline_ms=deadline_ms,
        games=list(games) if games else list(DEFAULT_GAMES),
        concurrency=concurrency,
        turn_game=first,
        concurrent_game=first or "tic_tac_toe",
    )


def login_from_file(path: str | Path) -> tuple[Login, str | None]:
    """The bot-check login (`SPIELBUS_BOTCHECK_*`, and NATS_TLS_CA) and `NATS_URL` of a bot's login file
    (`agents/NAME.env` of `spielbus auth init`, or the one `spielbus run` writes for an external bot)."""
    values = read_login_file(str(path))
    name, password, inbox = (values.get(k, "") for k in BOTCHECK_ENV)
    login: Login
    if values.get(BOTCHECK_CREDS):  # a registered bot's file (`spielbus ladder register`)
        login = {"creds": values[BOTCHECK_CREDS], "inbox_prefix": inbox}
    elif name:
        login = {"user": name, "password": password, "inbox_prefix": inbox}
    else:
        raise AuthError(
            f"{path} holds no bot-check login (SPIELBUS_BOTCHECK_USER= or SPIELBUS_BOTCHECK_CREDS=)"
        )
    if values.get("NATS_TLS_CA"):  # a bus over TLS with a private CA (`auth init --tls-generate`)
        login["tls_ca"] = values["NATS_TLS_CA"]
    return login, values.get("NATS_URL") or None


async def check_bot(
    name: str,
    url: str | None = None,
    *,
    options: BotCheckOptions | None = None,
    prefix: str = "spielbus",
    login: Login | None = None,
    on_result: Callable[[CheckResult], Awaitable[None] | None] | None = None,
) -> BotCheckReport:
    """Run every check against the bot serving as `name` on the bus at `url` (default `$NATS_URL`,
    else the local default), logged in as `login` (default: the environment's NATS_USER/NATS_CREDS;
    with accounts, the bot's bot-check login: `login_from_file`). ConnectionError when the bus
    cannot be reached; a failed check is in the report, never an exception."""
    check_token(name, "agent name")
    nc = await connect(nats_url(url), name=f"spielbus-bot-check-{name}", **(login or {}))
    try:
        checker = BotChecker(nc, name, subjects=Subjects(prefix), options=options)
        return BotCheckReport(name=name, results=await checker.run(on_result))
    finally:
        await nc.drain()


def run_bot_check(
    name: str,
    url: str | None = None,
    *,
    options: BotCheckOptions | None = None,
    prefix: str = "spielbus",
    login: Login | None = None,
) -> BotCheckReport:
    """`check_bot` for synchronous code (a plain pytest test): runs its own event loop, so call it
    from a thread that has none running."""
    return asyncio.run(check_bot(name, url, options=options, prefix=prefix, login=login))
