"""`stockfish`: Debian's Stockfish over UCI (python-chess's async engine module) playing OpenSpiel chess.

The position is the game's start (its `fen` parameter, else the standard position)
plus the turn's full action list, so the engine sees the whole move stack
(repetitions, fifty-move counter). The board is kept per match (keyed by match id,
dropped when the match ends, at most `_MAX_BOARDS` kept) and only the new actions
are applied each turn: rebuilding it from the start every turn costs O(n^2) per
game. A turn whose history does not extend the kept one rebuilds it. Its best move
is mapped back to OpenSpiel's action id exactly (games/chess/uci.py).

Options: `skill_level` (0..20, Stockfish's "Skill Level"; 20 is full strength), `elo` (Stockfish's
`UCI_LimitStrength` with that `UCI_Elo`, which Stockfish calibrates against a public engine rating
list: docs/analysis.md "Calibrated ladders"; an Elo outside the engine's range fails the first move),
`nodes`, `depth` and `movetime_ms` (the search stops at the first limit reached; none
set: 100,000 nodes), `threads`, `hash_mb`, `path`. A node or depth limit is fixed work:
with one thread the same level plays the same on a fast or a loaded machine (a time
limit is not: a busy machine searches less in 100 ms). The search never takes more
than half the turn deadline (a wall cap that a node limit should never reach).

Engines: one engine process per match in flight, up to `engines` (default 4), as
engine testers (fastchess, cutechess-cli) give each concurrent game its own engines.
An engine is bound to its match until the match ends, so it keeps its hash between
the match's moves and python-chess sends `ucinewgame` only at the match's first move:
a match plays the same moves whatever else the agent plays at the same time. With
more matches in flight than `engines`, the least recently used engine passes to the
new match (its old match gets another on its next turn, with a fresh `ucinewgame`),
which is how a single shared engine behaved for every match before.

Faults: one search at a time per engine (a lock: UCI engines think about one
position at once). If an engine dies or misbehaves, the move in flight fails (the
referee records `error`) and the next turn starts a new engine in its place.
A missing binary is an option error naming how to install it.

Turns: the agent asks for compact turns (`compact_turns`: the action list and the legal ids, no
legal-move texts, history or views, docs/protocol.md), the only parts an engine reads; full turns
(an older referee, bot-check) are played alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from dataclasses import dataclass, field
from typing import Any

import chess
import chess.engine
from pydantic import Field, model_validator

from agents.base import Decision, DecisionLimit, MatchContext, Strategy, StrategyOptions
from bus.protocol import CompactTurn, MatchEnded, MoveStats, Turn
from games.chess.uci import action_to_move, board_from_history, move_to_action

log = logging.getLogger(__name__)

INSTALL_HINT = (
    "install it with `apt-get install stockfish` (Debian/Ubuntu; `make system-deps` does it), "
    "`brew install stockfish` (macOS), or name the binary with --path"
)
# The default limit: fixed work (about 0.1 s of one core of a 2020s desktop, the time limit it replaces),
# so a skill level means the same strength on any machine and under any load.
DEFAULT_NODES = 100_000
# Boards kept for matches in flight; a match that never sends `ended` is evicted oldest first.
_MAX_BOARDS = 256
# Debian installs games to /usr/games, which is often not on PATH.
_CANDIDATES = ("stockfish", "/usr/games/stockfish")


def find_stockfish(path: str | None = None) -> str | None:
    for cand in (path,) if path else _CANDIDATES:
        found = shutil.which(cand)
        if found:
            return found
    return None


class StockfishOptions(StrategyOptions):
    skill_level: int = Field(default=20, ge=0, le=20, description="Stockfish Skill Level, 20 = full strength")
    elo: int | None = Field(
        default=None,
        ge=1,
        le=4000,
        description="play at this UCI_Elo (UCI_LimitStrength on; overrides skill_level); the engine's "
        "range applies (Stockfish 15.1: 1350-2850)",
    )
    nodes: int | None = Field(
        default=None,
        ge=1,
        le=10**10,
        description=f"nodes per move (none of nodes/depth/movetime: {DEFAULT_NODES})",
    )
    depth: int | None = Field(default=None, ge=1, le=60, description="search depth (plies)")
    movetime_ms: int | None = Field(
        default=None, ge=1, le=3_600_000, description="search time per move (ms); machine-dependent"
    )
    threads: int = Field(default=1, ge=1, le=64)
    engines: int = Field(
        default=4,
        ge=1,
        le=64,
        description="engine processes at most, one per match in flight (more matches share them)",
    )
    hash_mb: int = Field(default=16, ge=1, le=4096)
    path: str | None = Field(default=None, description="the stockfish binary (default: PATH, /usr/games)")

    @model_validator(mode="after")
    def _binary(self) -> StockfishOptions:
        found = find_stockfish(self.path)
        if found is None:
            where = f"no executable {self.path!r}" if self.path else "not on PATH nor /usr/games/stockfish"
            raise ValueError(f"Stockfish binary not found ({where}): {INSTALL_HINT}")
        self.path = found
        return self


@dataclass
class _Engine:
    """One engine process (started on first use) and the match it is bound to."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    protocol: chess.engine.UciProtocol | None = None
    transport: asyncio.SubprocessTransport | None = None
    match_id: str | None = None
    used: int = 0  # when last taken, for least-recently-used reuse

    @property
    def alive(self) -> bool:
        return self.protocol is not None and not (self.transport is not None and self.transport.is_closing())


class StockfishStrategy(Strategy):
    kind = "stockfish"
    version = "1"
    Options = StockfishOptions
    games = ("chess",)
    compact_turns = True

    def __init__(self, options: StockfishOptions) -> None:
        super().__init__(options)
        self.opts = options
        self._engines: list[_Engine] = []
        self._ticks = 0
        self.restarts = 0
        # match id -> (start fen, actions applied, board after them)
        self._boards: dict[str, tuple[str | None, list[int], chess.Board]] = {}

    @property
    def engine_pid(self) -> int | None:
        """The pid of the most recently used live engine (None when none runs)."""
        live = [(e.used, e.transport) for e in self._engines if e.alive and e.transport is not None]
        return max(live, key=lambda u: u[0])[1].get_pid() if live else None

    @property
    def engine_pids(self) -> list[int]:
        return [e.transport.get_pid() for e in self._engines if e.alive and e.transport is not None]

    def _bound_to(self, match_id: str) -> _Engine | None:
        # A scan, not a second map to keep in step: at most `engines` (64) entries.
        return next((e for e in self._engines if e.match_id == match_id), None)

    def _engine_for(self, match_id: str) -> _Engine:
        """The engine bound to `match_id`; else a free one, a new one, or the least recently used."""
        slot = self._bound_to(match_id)
        if slot is None:
            free = [e for e in self._engines if e.match_id is None]
            if free:
                slot = max(free, key=lambda e: e.alive)
            elif len(self._engines) < self.opts.engines:
                slot = _Engine()
                self._engines.append(slot)
            else:  # taken from its match, which gets another engine on its next turn
                slot = min(self._engines, key=lambda e: e.used)
            slot.match_id = match_id
        self._ticks += 1
        slot.used = self._ticks
        return slot

    async def _ensure_engine(self, slot: _Engine) -> chess.engine.UciProtocol:
        if slot.alive:
            assert slot.protocol is not None
            return slot.protocol
        if slot.protocol is not None:
            await self._drop_engine(slot)
            self.restarts += 1
        assert self.opts.path is not None
        slot.transport, engine = await chess.engine.popen_uci(self.opts.path)
        slot.protocol = engine
        try:
            config: dict[str, Any] = {"Threads": self.opts.threads, "Hash": self.opts.hash_mb}
            config["Skill Level"] = self.opts.skill_level
            if self.opts.elo is not None:
                config["UCI_LimitStrength"] = True
                config["UCI_Elo"] = self.opts.elo
            await engine.configure({k: v for k, v in config.items() if k in engine.options})
        except Exception:
            await self._drop_engine(slot)
            raise
        return engine

    @staticmethod
    async def _drop_engine(slot: _Engine) -> None:
        engine, transport = slot.protocol, slot.transport
        slot.protocol = slot.transport = None
        if engine is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(engine.quit(), 2.0)
        if transport is not None:
            with contextlib.suppress(Exception):
                transport.close()

    def _limit(self, limit: DecisionLimit) -> chess.engine.Limit:
        cap = max(0.01, limit.share(0.5))
        o = self.opts
        nodes = o.nodes if (o.nodes or o.depth or o.movetime_ms) else DEFAULT_NODES
        time = min(o.movetime_ms / 1000, cap) if o.movetime_ms else cap
        return chess.engine.Limit(nodes=nodes, depth=o.depth, time=time)

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        return await self._play(turn, ctx)

    async def decide_compact(self, turn: CompactTurn, ctx: MatchContext) -> Decision:
        return await self._play(turn, ctx)

    async def _play(self, turn: Turn | CompactTurn, ctx: MatchContext) -> Decision:
        if turn.game.name != "chess" or turn.state is None:
            raise ValueError(f"stockfish plays chess only, not {turn.game.label()}")
        fen_param = turn.game.params.get("fen")
        board = self._board(turn.match_id, fen_param if isinstance(fen_param, str) else None, turn.state)
        slot = self._engine_for(turn.match_id)
        async with slot.lock:
            engine = await self._ensure_engine(slot)
            try:
                limit = ctx.limit(turn)
                # `asyncio.timeout`, not `wait_for`: no extra task (and loop pass) per move in Python 3.11.
                async with asyncio.timeout(limit.share(0.9)):
                    result = await engine.play(
                        board, self._limit(limit), game=turn.match_id, info=chess.engine.INFO_BASIC
                    )
            except (chess.engine.EngineError, TimeoutError, OSError) as exc:
                # The engine is in an unknown state: the next turn gets a new one.
                log.warning("stockfish failed (%s); it restarts on the next turn", exc)
                await self._drop_engine(slot)
                self.restarts += 1
                raise RuntimeError(f"stockfish engine failed: {type(exc).__name__}: {exc}") from exc
        if result.move is None:
            raise RuntimeError("stockfish returned no move")
        action = move_to_action(board, result.move)
        info = result.info or {}
        return Decision(
            action=action,
            stats=MoveStats(nodes=info.get("nodes"), depth=info.get("depth")),
            note=f"uci {result.move.uci()}" + (f" score {info['score'].white()}" if "score" in info else ""),
        )

    def _board(self, match_id: str, fen: str | None, actions: list[int]) -> chess.Board:
        """The board after `actions`, from the kept one when `actions` extends its history."""
        kept = self._boards.pop(match_id, None)
        if kept is not None and kept[0] == fen and actions[: len(kept[1])] == kept[1]:
            board = kept[2]
            for a in actions[len(kept[1]) :]:
                board.push(action_to_move(board, a))
        else:
            board = board_from_history(fen, actions)
        self._boards[match_id] = (fen, list(actions), board)
        while len(self._boards) > _MAX_BOARDS:
            del self._boards[next(iter(self._boards))]
        return board

    async def match_ended(self, msg: MatchEnded, ctx: MatchContext) -> None:
        self._boards.pop(msg.match_id, None)
        slot = self._bound_to(msg.match_id)
        if slot is None:
            return
        slot.match_id = None
        # A dead engine is replaced now, so the next match does not pay for it on its first move.
        if slot.protocol is not None and not slot.alive and not slot.lock.locked():
            await self._drop_engine(slot)

    async def close(self) -> None:
        for slot in self._engines:
            await self._drop_engine(slot)
        self._engines.clear()
