"""`human`: a person plays from a web page, as an ordinary agent on the bus.

The referee treats this seat like any other agent: the same `turn` requests, the same clock,
the same fault policy. With `move_s`, the person's own clock for a move starts when their page
first shows the turn (not when the turn was sent: a person who opens the page late loses
nothing), capped by the referee's deadline. Each turn waits on the seat's page (`agents.human.seat`) until the
player chooses a legal move, by a button or by clicking the board; a player who does not move
in time (the page closed, the person away) runs out the turn's clock, and the runtime refuses
the turn at the end of it like any agent's strategy that overruns (the referee records an
`error` fault saying the player or strategy did not decide before the deadline), after which the
tournament's fault policy applies.

The page is served by this process, on `seat_port` (0: any free port) of `seat_host`
(127.0.0.1), and guarded by a seat token: `SPIELBUS_SEAT_TOKEN` from the environment (what
`spielbus run` passes, so it can print the address; 16 to 128 URL-safe characters), else a
fresh random one. Whoever started the seat is told the address with the token
(`seat NAME: http://...#token=...`) on the terminal only: when standard output is not a terminal
(a log file, a pipe) the address is printed without it and the whole address is written to a
private file (mode 0600) in a new temporary folder, whose path is printed; when the token came
from `SPIELBUS_SEAT_TOKEN` the launcher tells the player, so only the address without it is
printed. Limits: one player per
agent name (run one replica); nothing is learned or searched, the person is the strategy.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
from pathlib import Path

from pydantic import Field

from agents.base import Decision, MatchContext, Strategy, StrategyOptions, TurnExpired
from agents.human.seat import TOKEN_ENV, Seat, SeatServer, start_seat, tell_player
from bus.protocol import MatchEnded, MatchStarted, Turn


class HumanOptions(StrategyOptions):
    seat_port: int = Field(default=0, ge=0, le=65535, description="port of the seat page (0: any free port)")
    seat_host: str = Field(
        default="127.0.0.1", description="address the seat page listens on (0.0.0.0: every interface)"
    )
    move_s: float | None = Field(
        default=None,
        gt=0,
        le=86_400,
        allow_inf_nan=False,
        description="the person's time per move, counted from when their page first shows the turn "
        "(a turn sent before the page was first opened waits for it); the tournament's deadline_ms "
        "caps it. None: the referee's deadline alone, counted from when the turn was sent",
    )


class HumanStrategy(Strategy):
    kind = "human"
    Options = HumanOptions

    def __init__(self, options: StrategyOptions) -> None:
        super().__init__(options)
        assert isinstance(options, HumanOptions)
        self.opts = options
        self.seat = Seat(token=secrets.token_urlsafe(24))
        self.server: SeatServer | None = None

    async def start(self, name: str) -> None:
        """Serve the seat page. ValueError (`spielbus agent` exits 2 with it) for a bad
        `SPIELBUS_SEAT_TOKEN` or a port that cannot be served."""
        given = os.environ.get(TOKEN_ENV)
        if given:
            try:
                self.seat = Seat(token=given)
            except ValueError as exc:
                raise ValueError(f"{TOKEN_ENV}: {exc}") from None
        self.seat.agent = name
        try:
            self.server = await start_seat(self.seat, self.opts.seat_port, self.opts.seat_host)
        except OSError as exc:
            where = f"{self.opts.seat_host}:{self.opts.seat_port}"
            raise ValueError(f"cannot serve the seat page on {where}: {exc.strerror or exc}") from None
        # The player's address, token included, for whoever started the seat only: never to a log,
        # a pipe or the bus. A launcher that gave the token tells the player itself.
        if given:
            print(f"seat {name}: {self.server.url} (its token: from {TOKEN_ENV})", flush=True)
            return
        private = Path(tempfile.mkdtemp(prefix="spielbus-seat-")) / f"{name}.url"
        print(tell_player(f"seat {name}", self.server, sys.stdout.isatty(), private), flush=True)

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        try:
            action = await self.seat.wait(turn, ctx.deadline, self.opts.move_s)
        except TimeoutError:
            raise TurnExpired("the player did not move before the deadline") from None
        return Decision(action=action)

    async def match_started(self, msg: MatchStarted, ctx: MatchContext) -> None:
        self.seat.started(msg)

    async def match_ended(self, msg: MatchEnded, ctx: MatchContext) -> None:
        self.seat.ended(msg)

    async def close(self) -> None:
        if self.server is not None:
            await self.server.stop()
