"""`gnugo`: GNU Go (Debian's `gnugo`) over GTP playing OpenSpiel Go.

Each turn the engine is set to the game (`boardsize` and `komi` from the game's parameters,
OpenSpiel's defaults where absent), cleared, given the match's moves so far from the turn's
action list (`play B C3`, `play W PASS`, black first) and asked for a move for the seat's colour.
The vertex is mapped back to OpenSpiel's action id exactly (games/go/gtp.py). GNU Go runs with
Chinese (area) rules, as OpenSpiel scores, and positional superko, as OpenSpiel judges. By
default it moves with `kgs-genmove_cleanup`, which captures the other side's dead stones before
passing: OpenSpiel counts the final position as it stands (Tromp-Taylor), so with plain
`genmove` GNU Go passes with dead stones of the other side still on the board, which then count
against it (it lost a 5x5 game to a random player that way).

Options: `level` (GNU Go's `--level`, 0..10; 10, its default, is the strongest), `cleanup`
(true: `kgs-genmove_cleanup`, false: plain `genmove`), `path`
(default: `gnugo` on PATH, then `/usr/games/gnugo`), `seed` (GNU Go's random seed: with it a
level plays the same moves on any machine; GNU Go's strength is set by its level, not by time).

Faults: one engine process per agent, one command at a time (a lock). An engine found dead at
the start of a turn is replaced; one that dies or stops answering during a move fails that move
(the referee records `error`), and the next turn starts a new one. A move OpenSpiel does not
allow (a repetition OpenSpiel forbids), or `resign` (OpenSpiel's Go has no resignation), is
played as a pass and the note says so.

Finding, starting and setting up the engine, and its dead-stone-aware `final_score`, are
games/go/gnugo.py's (spielbus/go_report.py scores with them too). Limits: handicap games
(OpenSpiel's `handicap` parameter) are refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from pydantic import Field, model_validator

from agents.base import Decision, MatchContext, Strategy, StrategyOptions
from bus.protocol import GameSpec, MatchEnded, Turn
from games.go.gnugo import find_gnugo, gnugo_argv, go_setup, replay
from games.go.gtp import GtpEngine, GtpEngineDied, GtpError, action_of

log = logging.getLogger(__name__)

INSTALL_HINT = (
    "install it with `apt-get install gnugo` (Debian/Ubuntu; `make system-deps` does it), "
    "or name the binary with --path"
)


class GnuGoOptions(StrategyOptions):
    level: int = Field(default=10, ge=0, le=10, description="GNU Go's --level (10: strongest, its default)")
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="GNU Go's --seed")
    cleanup: bool = Field(
        default=True,
        description="capture dead stones before passing (kgs-genmove_cleanup), as area scoring needs",
    )
    path: str | None = Field(default=None, description="the gnugo binary (default: PATH, /usr/games)")

    @model_validator(mode="after")
    def _binary(self) -> GnuGoOptions:
        found = find_gnugo(self.path)
        if found is None:
            where = f"no executable {self.path!r}" if self.path else "not on PATH nor /usr/games/gnugo"
            raise ValueError(f"GNU Go binary not found ({where}): {INSTALL_HINT}")
        self.path = found
        return self


class GnuGoStrategy(Strategy):
    kind = "gnugo"
    version = "1"
    Options = GnuGoOptions
    games = ("go",)

    def __init__(self, options: GnuGoOptions) -> None:
        super().__init__(options)
        self.opts = options
        self._engine: GtpEngine | None = None
        self._lock = asyncio.Lock()
        self.restarts = 0

    @property
    def engine_pid(self) -> int | None:
        return self._engine.pid if self._engine is not None and self._engine.alive else None

    def _genmove(self, game: GameSpec, moves: list[int], seat: int, timeout_s: float) -> str:
        if self._engine is None or not self._engine.alive:
            if self._engine is not None:
                self._engine.kill()
                self.restarts += 1
            assert self.opts.path is not None
            self._engine = GtpEngine(gnugo_argv(self.opts.path, self.opts.level, self.opts.seed), timeout_s)
        size, komi = go_setup(game)
        self._engine.timeout_s = timeout_s
        replay(self._engine, size, komi, moves)
        command = "kgs-genmove_cleanup" if self.opts.cleanup else "genmove"
        return self._engine.command(command, "B" if seat == 0 else "W")

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        if turn.game.name != "go" or turn.state is None:
            raise ValueError(f"gnugo plays go only, not {turn.game.label()}")
        size, _ = go_setup(turn.game)
        timeout_s = max(0.5, ctx.limit(turn).share(0.8))
        async with self._lock:
            try:
                answer = await asyncio.to_thread(
                    self._genmove, turn.game, list(turn.state), turn.seat, timeout_s
                )
            except (GtpEngineDied, GtpError, OSError) as exc:
                # The engine is in an unknown state: the next turn gets a new one.
                log.warning("gnugo failed (%s); it restarts on the next turn", exc)
                await asyncio.to_thread(self._drop)
                raise RuntimeError(f"gnugo engine failed: {type(exc).__name__}: {exc}") from exc
        legal = {a.id for a in turn.legal_actions}
        action = action_of(answer, size)
        if action is not None and action in legal:
            return Decision(action=action, note=f"gtp {answer}")
        why = "resigns" if action is None else f"plays {answer}, which OpenSpiel does not allow here"
        return Decision(action=size * size, note=f"gnugo {why}: passes instead")

    def _drop(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.kill()
            self.restarts += 1

    async def match_ended(self, msg: MatchEnded, ctx: MatchContext) -> None:
        # A dead engine is replaced now, so the next match does not pay for it on its first move.
        if self._engine is not None and not self._engine.alive and not self._lock.locked():
            self._drop()

    async def close(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(engine.close)
