"""GNU Go (Debian's `gnugo`) as a Go engine: where it is, how it is started, and its
dead-stone-aware score of a finished game.

`find_gnugo` looks for the binary (`gnugo` on PATH, then `/usr/games/gnugo`); `gnugo_argv` starts
it in GTP mode with Chinese (area) rules, as OpenSpiel scores, and positional superko, as
OpenSpiel judges; `go_setup` reads board size and komi from an OpenSpiel Go spec; `replay` sets
an engine (games/go/gtp.py) to the position after a match's moves; `final_score` asks GNU Go's
`final_score` after that replay: the score with dead stones removed (GNU Go's own status
analysis), komi added back so it compares with the Tromp-Taylor area (games/go/score.py). The
`gnugo` agent (agents/gnugo_agent.py) plays with these; spielbus/go_report.py scores with them.

Limits: handicap games (OpenSpiel's `handicap` parameter) are refused: OpenSpiel places the
stones itself and GTP replay cannot reproduce them.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence

from bus.protocol import GameSpec
from games.go.gtp import GtpEngine, GtpError, vertex
from games.loader import load_game

_CANDIDATES = ("gnugo", "/usr/games/gnugo")
_SCORE = re.compile(r"^(?:([BW])\+(\d+(?:\.\d+)?)|0)$")


def find_gnugo(path: str | None = None) -> str | None:
    for cand in (path,) if path else _CANDIDATES:
        found = shutil.which(cand)
        if found:
            return found
    return None


def gnugo_argv(path: str, level: int = 10, seed: int = 0) -> list[str]:
    return [
        path,
        "--mode",
        "gtp",
        "--level",
        str(level),
        "--seed",
        str(seed),
        "--chinese-rules",
        "--positional-superko",
    ]


def go_setup(game: GameSpec) -> tuple[int, float]:
    """(board size, komi) of an OpenSpiel Go spec, with OpenSpiel's defaults; ValueError for what
    GTP replay cannot reproduce (handicap stones)."""
    params = load_game(game).get_parameters()
    if int(params.get("handicap", 0)) > 0:
        raise ValueError("gnugo: handicap games are not supported (OpenSpiel places the stones itself)")
    return int(params["board_size"]), float(params["komi"])


def replay(engine: GtpEngine, size: int, komi: float, moves: Sequence[int]) -> None:
    """Set the engine to the position after `moves` (OpenSpiel action ids, black first)."""
    engine.command("boardsize", str(size))
    engine.command("clear_board")
    engine.command("komi", f"{komi:g}")
    for i, action in enumerate(moves):
        engine.command("play", "B" if i % 2 == 0 else "W", vertex(action, size))


def final_score(engine: GtpEngine, size: int, komi: float, moves: Sequence[int]) -> float:
    """Black's area minus white's after GNU Go removes the dead stones (Chinese rules), komi added
    back so that it compares with the Tromp-Taylor area difference."""
    replay(engine, size, komi, moves)
    text = engine.command("final_score", timeout_s=120)
    m = _SCORE.match(text)
    if m is None:
        raise GtpError(f"final_score: unexpected answer {text!r}")
    with_komi = 0.0 if m.group(1) is None else float(m.group(2)) * (1 if m.group(1) == "B" else -1)
    return with_komi + komi
