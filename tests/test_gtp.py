"""The GTP client (games/go/gtp.py): real GNU Go answers and refuses commands; vertices map to
OpenSpiel's Go action ids exactly; an engine that breaks the protocol, exits or hangs is
killed with a clear error. The broken engines are stand-ins (a few lines of Python), since no
real engine misbehaves on demand."""

from __future__ import annotations

import sys

import pyspiel
import pytest

from games.go.gnugo import find_gnugo, gnugo_argv
from games.go.gtp import GtpEngine, GtpEngineDied, GtpError, action_of, vertex

needs_gnugo = pytest.mark.skipif(find_gnugo() is None, reason="gnugo not installed: make system-deps")


@pytest.mark.parametrize("size", [5, 7, 9, 19])
def test_vertices_match_openspiel_action_ids(size: int) -> None:
    state = pyspiel.load_game("go", {"board_size": size}).new_initial_state()
    for action in state.legal_actions():
        # OpenSpiel writes "B a1" (lowercase, also without i); GTP wants upper case.
        text = state.action_to_string(0, action).split()[1]
        assert vertex(action, size) == text.upper()
        assert action_of(vertex(action, size), size) == action
    assert action_of("resign", size) is None
    for bad in ("I3", f"A{size + 1}", "A0", "Z1", "", "A"):
        with pytest.raises(ValueError):
            action_of(bad, size)


@needs_gnugo
def test_gnugo_answers_and_refuses() -> None:
    path = find_gnugo()
    assert path is not None
    with GtpEngine(gnugo_argv(path, level=1)) as go:
        assert go.command("protocol_version") == "2"
        go.command("boardsize", "7")
        go.command("clear_board")
        assert action_of(go.command("genmove", "B"), 7) is not None
        with pytest.raises(GtpError, match="play"):
            go.command("play", "B", "Z9")
        assert go.command("name") == "GNU Go"  # still usable after a refusal
        with pytest.raises(ValueError):
            go.command("play", "B", "C3\nquit")  # no smuggled second command
        pid = go.pid
    assert not go.alive and pid


def _stand_in(body: str) -> list[str]:
    """A stand-in engine: reads GTP lines, answers as `body` says (Python, `cid` and `cmd` set)."""
    script = (
        "import sys, time\n"
        "for line in sys.stdin:\n"
        "    cid, cmd = line.split()[0], line.split()[1]\n"
        + "".join(f"    {x}\n" for x in body.splitlines())
        + "    sys.stdout.flush()\n"
    )
    return [sys.executable, "-c", script]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("print(f'={int(cid) + 1} ok\\n')", "out of protocol"),
        ("print('hello\\n')", "out of protocol"),
        ("sys.exit(3)", "exited"),
        ("time.sleep(30)", "no answer within"),
    ],
)
def test_a_broken_engine_is_killed_with_a_reason(body: str, words: str) -> None:
    engine = GtpEngine(_stand_in(body), timeout_s=1.0)
    with pytest.raises(GtpEngineDied, match=words):
        engine.command("name")
    assert not engine.alive


def test_multiline_answers_and_cleaning() -> None:
    engine = GtpEngine(_stand_in("print(f'={cid} line one\\r\\n\\tline two\\n')"))
    try:
        assert engine.command("showboard") == "line one\n line two"
        assert engine.command("showboard") == "line one\n line two"  # the next answer, in step
    finally:
        engine.close()
