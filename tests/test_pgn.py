"""PGN of real chess matches: written per match by the run folder, exported per tournament,
read back by python-chess with names, result, termination reason and per-move comments."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import chess.pgn
import pytest

from agents.random_agent import FirstLegalStrategy
from bus.protocol import GameSpec, Move, Turn, Usage
from games.chess.openings import opening_params
from referee.run_folder import RunFolder
from spielbus.export import main as export_main
from tests.helpers import play, raw_responder, serving, spec, uid

SCHOLAR = "r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 4 4"


def _read_all(path: Path) -> list[chess.pgn.Game]:
    games = []
    with path.open() as fh:
        while (g := chess.pgn.read_game(fh)) is not None:
            games.append(g)
    return games


async def test_pgn_per_match_and_export(nc, tmp_path: Path, capsys) -> None:
    first, cheat = uid("first"), uid("cheat")

    async def illegal(turn: Turn, _msg: object) -> bytes:
        return Move(match_id=turn.match_id, turn=turn.turn, action=0).model_dump_json().encode()

    fs = FirstLegalStrategy(FirstLegalStrategy.Options())
    async with serving(nc, fs, first), raw_responder(nc, cheat, illegal):
        capped = await play(nc, spec("chess", [first, first], max_turns=6))
        forfeit = await play(nc, spec("chess", [first, cheat]))
        # A match from a FEN; its first move gets LLM usage below (no LLM here) for the token comment.
        from_fen = GameSpec(name="chess", params={"fen": SCHOLAR})
        mate = await play(nc, spec(from_fen, [first, first], max_turns=2))
        # A match from an opening line (as a tournament's `openings` schedules it).
        opened_spec = GameSpec(name="chess", params=opening_params("1. e4 e5 2. Nf3 Nc6"))
        opened = await play(nc, spec(opened_spec, [first, first], max_turns=4))
    mate.moves[0].usage = Usage(llm_calls=2, prompt_tokens=120, completion_tokens=7)
    folder = RunFolder(tmp_path, "t")
    for rec in (capped, forfeit, mate, opened):
        folder.append(rec)
    folder.close()

    (g_capped,) = _read_all(tmp_path / "t" / "pgn" / f"{capped.match_id}.pgn")
    assert (g_capped.headers["White"], g_capped.headers["Black"]) == (first, first)
    assert g_capped.headers["Result"] == "1/2-1/2" and g_capped.headers["Termination"] == "adjudication"
    assert len(list(g_capped.mainline_moves())) == 6
    assert all("[%emt " in n.comment for n in g_capped.mainline())
    assert "move limit" in g_capped.end().comment

    (g_forfeit,) = _read_all(tmp_path / "t" / "pgn" / f"{forfeit.match_id}.pgn")
    # OpenSpiel's seat 1 is white: the cheat forfeits on its first move.
    assert g_forfeit.headers["White"] == cheat and g_forfeit.headers["Result"] == "0-1"
    assert g_forfeit.headers["Termination"] == "rules infraction"
    assert f"{cheat} forfeits (illegal" in g_forfeit.end().comment

    (g_mate,) = _read_all(tmp_path / "t" / "pgn" / f"{mate.match_id}.pgn")
    assert g_mate.headers["FEN"] == SCHOLAR and g_mate.headers["SetUp"] == "1"
    first_node = g_mate.next()
    assert first_node is not None and "tokens 120+7, llm calls 2" in first_node.comment

    # From the start position with the opening's moves, not from a set-up FEN.
    (g_opened,) = _read_all(tmp_path / "t" / "pgn" / f"{opened.match_id}.pgn")
    assert "FEN" not in g_opened.headers and "SetUp" not in g_opened.headers
    moves = [m.uci() for m in g_opened.mainline_moves()]
    assert moves[:4] == ["e2e4", "e7e5", "g1f3", "b8c6"] and len(moves) == 8
    assert "opening" in list(g_opened.mainline())[3].comment

    assert export_main(["pgn", str(tmp_path / "t")]) == 0
    games = _read_all(tmp_path / "t" / "tournament.pgn")
    ids = [capped.match_id, forfeit.match_id, mate.match_id, opened.match_id]
    assert [g.headers["Round"] for g in games] == ids
    assert "4 chess games" in capsys.readouterr().out
    assert export_main(["pgn", str(tmp_path)]) == 2
    # A run folder without chess games: said, nothing written, exit 1 (it wrote an empty file).
    (tmp_path / "ttt").mkdir()
    (tmp_path / "ttt" / "matches.jsonl").write_text("")
    assert export_main(["pgn", str(tmp_path / "ttt")]) == 1
    assert not (tmp_path / "ttt" / "tournament.pgn").exists()
    assert "no chess games" in capsys.readouterr().err
    _pgn_extract_agrees(tmp_path / "t" / "tournament.pgn", games)


PGN_EXTRACT = shutil.which("pgn-extract") or shutil.which("/usr/games/pgn-extract")


def _pgn_extract_agrees(path: Path, games: list[chess.pgn.Game]) -> None:
    """pgn-extract (a reader nobody here wrote) reads every game, replays every move and gives the
    same moves in UCI as python-chess."""
    if PGN_EXTRACT is None:
        pytest.skip("pgn-extract not installed (make system-deps)")
    out = path.with_suffix(".uci")
    run = subprocess.run(
        [PGN_EXTRACT, "-Wuci", "-C", "-N", "-V", "--notags", "-o", str(out), str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert f"{len(games)} games matched out of {len(games)}." in run.stderr, run.stderr
    theirs = [" ".join(game.split()[:-1]) for game in out.read_text().split("\n\n") if game.strip()]
    ours = [" ".join(m.uci() for m in g.mainline_moves()) for g in games]
    assert theirs == ours
