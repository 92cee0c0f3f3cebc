"""PGN for chess matches (python-chess): one file per match in the run folder, and `export`, one
file for a whole tournament (the command `spielbus export pgn RUN_DIR [-o FILE]`: spielbus/export.py).

Each match becomes a game with the seats' names (OpenSpiel's seat 0 is black,
seat 1 white), the start: from the standard position with the opening's moves
first when the match started from an opening line (the `opening` game parameter,
games/chess/openings.py; a comment marks where the match's own moves begin), else
`SetUp`/`FEN` when it started from a bare `fen`; the result, a standard
`Termination` tag (normal, rules infraction, adjudication, abandoned) and a
comment saying exactly why: checkmate, stalemate, a forfeit with its fault
reason and detail, a move-limit adjudication, a referee error. Every move carries its think time as `[%emt]`
(the clock-comment GUIs read) and the agent's tokens and LLM calls when it used
any; faults are comments on the move that followed them.

`observe(run_dir, record)` is the run folder's record observer: it writes
`pgn/<match id>.pgn` and never raises (a PGN problem must not cost the record,
which is already in matches.jsonl). Other games are ignored.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
from pathlib import Path
from typing import TextIO

import chess
import chess.pgn
from pydantic import ValidationError

from bus.protocol import MatchRecord
from games.chess.position import replay_opening
from games.chess.uci import ActionError, action_to_move

log = logging.getLogger(__name__)


def _emt(ms: float) -> str:
    s = ms / 1000
    return f"[%emt {int(s // 3600)}:{int(s % 3600 // 60):02d}:{s % 60:06.3f}]"


def _result(record: MatchRecord) -> str:
    if record.outcome in ("decisive", "forfeit") and len(record.returns) == 2:
        black, white = record.returns
        return "1-0" if white > black else "0-1" if black > white else "1/2-1/2"
    if record.outcome in ("draw", "max_turns"):
        return "1/2-1/2"
    return "*"


def record_to_pgn(record: MatchRecord) -> chess.pgn.Game | None:
    """The PGN game of a chess match record; None for other games."""
    if record.game.name != "chess" or len(record.seats) != 2:
        return None
    game, node = _start(record)
    h = game.headers
    h["Event"] = record.tournament
    h["Site"] = "Spielbus"
    h["Round"] = record.match_id
    if record.started_at:
        h["Date"] = dt.datetime.fromtimestamp(record.started_at, dt.UTC).strftime("%Y.%m.%d")
    h["White"], h["Black"] = record.seats[1], record.seats[0]
    for prov in record.provenance:
        side = (
            "White" if prov.agent == record.seats[1] else "Black" if prov.agent == record.seats[0] else None
        )
        if side and prov.kind:
            h[f"{side}Type"] = "program"
            h[f"{side}Kind"] = prov.kind + (f" ({', '.join(prov.models)})" if prov.models else "")
    faults_by_turn: dict[int, list[str]] = {}
    for f in record.faults:
        faults_by_turn.setdefault(f.turn, []).append(f"{f.agent}: {f.reason} ({f.detail})")
    pending: list[str] = []
    broken = None
    # One board carried along: `node.board()` replays from the root on every call (O(n^2) per game).
    board = node.board()
    for m in record.moves:
        for t in sorted(k for k in faults_by_turn if k <= m.turn):
            pending += [f"fault {x}" for x in faults_by_turn.pop(t)]
        try:
            move = action_to_move(board, m.action)
        except ActionError as exc:
            broken = f"record move {m.turn} ({m.text}) does not replay: {exc}"
            break
        node = node.add_variation(move)
        board.push(move)
        parts = [_emt(m.latency_ms)] if m.latency_ms is not None else []
        if m.usage and (m.usage.llm_calls or m.usage.prompt_tokens or m.usage.completion_tokens):
            parts.append(
                f"tokens {m.usage.prompt_tokens}+{m.usage.completion_tokens}, llm calls {m.usage.llm_calls}"
            )
        if m.forced:
            parts.append(f"played by the referee: {m.note or 'fault policy'}")
        node.comment = " ".join(pending + parts)
        pending = []
    why, termination = _termination(record, board, broken)
    leftover = [f"fault {x}" for t in sorted(faults_by_turn) for x in faults_by_turn[t]]
    node.comment = " ".join(x for x in (node.comment, *leftover, why) if x)
    h["Result"] = _result(record)
    h["Termination"] = termination
    return game


def _start(record: MatchRecord) -> tuple[chess.pgn.Game, chess.pgn.GameNode]:
    """The game and the node the match's first move follows: the opening's moves from the standard
    position when they reach the match's `fen` (they do: the loader refuses them otherwise), else the
    `fen` as a set-up position."""
    params = record.game.params
    fen, opening = params.get("fen"), params.get("opening")
    if isinstance(opening, str) and isinstance(fen, str):
        try:
            reached = replay_opening(opening)
        except ValueError:
            reached = None
        if reached is not None and reached.fen() == chess.Board(fen).fen():
            game = chess.pgn.Game()
            node: chess.pgn.GameNode = game
            for move in reached.move_stack:
                node = node.add_variation(move)
            if node is not game:
                node.comment = "opening: the match starts here"
            return game, node
    board = chess.Board(fen) if isinstance(fen, str) else chess.Board()
    game = chess.pgn.Game.from_board(board)
    return game, game


def _termination(record: MatchRecord, board: chess.Board, broken: str | None) -> tuple[str, str]:
    if broken:
        return broken, "abandoned"
    if record.outcome == "forfeit":
        seat = record.forfeited[0] if record.forfeited else None
        fault = record.faults[-1] if record.faults else None
        who = record.seats[seat] if seat is not None else "?"
        what = f"{fault.reason}: {fault.detail}" if fault else "a fault"
        return f"{who} forfeits ({what})", "rules infraction"
    if record.outcome == "max_turns":
        return (
            f"adjudicated a draw: the match reached its move limit ({len(record.moves)} moves)",
            "adjudication",
        )
    if record.outcome == "error":
        return f"referee error: {record.error}", "abandoned"
    outcome = board.outcome(claim_draw=True)
    if outcome is not None:
        return outcome.termination.name.lower().replace("_", " "), "normal"
    return record.outcome, "normal" if record.outcome in ("decisive", "draw") else "unterminated"


def pgn_text(record: MatchRecord) -> str | None:
    game = record_to_pgn(record)
    if game is None:
        return None
    return game.accept(chess.pgn.StringExporter(headers=True, variations=False, comments=True)) + "\n"


def observe(run_dir: Path, record: MatchRecord) -> None:
    """Write `pgn/<match id>.pgn` for a chess match; never raises."""
    try:
        text = pgn_text(record)
        if text is None:
            return
        folder = Path(run_dir) / "pgn"
        folder.mkdir(exist_ok=True)
        (folder / f"{record.match_id}.pgn").write_text(text, encoding="utf-8")
    except Exception:
        log.warning("could not write the PGN of %s", record.match_id, exc_info=True)


def export(run_dir: Path, out: Path | None = None, err: TextIO | None = None) -> tuple[Path, int]:
    """All chess matches of `run_dir/matches.jsonl` in one PGN file; returns (path, games)."""
    err = err or sys.stderr
    matches = run_dir / "matches.jsonl"
    target = out or run_dir / "tournament.pgn"
    n = 0
    with matches.open(encoding="utf-8") as src, target.open("w", encoding="utf-8") as dst:
        for lineno, line in enumerate(src, 1):
            if not line.strip():
                continue
            try:
                record = MatchRecord.model_validate_json(line)
            except ValidationError as exc:
                print(
                    f"warning: {matches}:{lineno}: not a match record ({exc.error_count()} errors); skipped",
                    file=err,
                )
                continue
            text = pgn_text(record)
            if text is not None:
                dst.write(text + "\n")
                n += 1
    return target, n
