"""Go moves judged by GNU Go's score estimate: an estimate, labelled so.

The engine (Debian's `gnugo`, started as the `gnugo` agent starts it: GTP, Chinese rules,
positional superko; games/go/gnugo.py) follows the match move by move. For a move of colour c:
GNU Go's own choice `b` (`reg_genmove c`, which does not play it) is its best move; the move played
and `b` are each played, scored with `estimate_score` (GNU Go's dead-stone and territory estimate,
komi included) and taken back (`undo`). A move's value is that score from c's side, in points;
the value before is the value of the best move (GNU Go's estimate with c still to move would not
compare: its static estimate credits the side that just moved). The loss is `score(b) -
score(played)`, never below 0 (when the played move scores higher, it is the best). `uncertainty` is
half the spread of the upper and lower bounds GNU Go prints with the estimate (0 when it is sure of
the status of every group).

Scale: points are put on the winning-chances scale linearly over the board's area
(`wc = points / size**2`, clamped to [-1, 1]): a blunder (0.3) is a loss of 0.3 * 81 = 24 points on
9x9, 15 on 7x7. This is a choice, documented in docs/analysis.md: GNU Go gives no win probability.

Limits: a static estimate after one move, not a search of the reply; early in the game GNU Go's
estimate swings by several points between neighbouring moves, so the figures are coarse.
Handicap games are refused (as `games.go.gnugo.go_setup` refuses them). Needs `gnugo` on PATH or
`/usr/games/gnugo`.
"""

from __future__ import annotations

import re

import pyspiel

from analysis.scale import Reference
from analysis.verdict import NoReference, Verdict
from bus.protocol import GameSpec
from games.go.gnugo import find_gnugo, gnugo_argv, go_setup, replay
from games.go.gtp import GtpEngine, GtpEngineDied, GtpError, action_of, vertex

DEFAULT_LEVEL = 10
_NUMBER = r"(-?\d+(?:\.\d+)?)"
_ESTIMATE = re.compile(rf"^(?:([BW])\+{_NUMBER}|0)\s*(?:\(upper bound:\s*{_NUMBER},\s*lower:\s*{_NUMBER}\))?")


def parse_estimate(text: str) -> tuple[float, float]:
    """(black's lead in points, half the spread of GNU Go's bounds) from an `estimate_score` answer."""
    m = _ESTIMATE.match(text.strip())
    if m is None:
        raise GtpError(f"estimate_score: unexpected answer {text!r}")
    lead = 0.0 if m.group(1) is None else float(m.group(2)) * (1 if m.group(1) == "B" else -1)
    spread = 0.0 if m.group(3) is None else abs(float(m.group(3)) - float(m.group(4))) / 2
    return lead, spread


class GnuGoJudge:
    def __init__(self, spec: GameSpec, level: int = DEFAULT_LEVEL, path: str | None = None) -> None:
        found = find_gnugo(path)
        if found is None:
            raise NoReference(f"no GNU Go binary ({path or 'gnugo on PATH or /usr/games/gnugo'})")
        try:
            self.size, self.komi = go_setup(spec)
        except ValueError as exc:
            raise NoReference(str(exc)) from None
        self.area = float(self.size * self.size)
        self.engine = GtpEngine(gnugo_argv(found, level=level))
        self.moves: list[int] = []  # the engine's position, as OpenSpiel actions
        replay(self.engine, self.size, self.komi, self.moves)
        version = self.engine.command("version")
        self.reference = Reference(
            name="gnugo",
            detail=f"GNU Go {version}, level {level}, estimate_score after the move and after its own choice",
            exact=False,
            unit="points",
            limits="an estimate: GNU Go's static score after one move (no search of the reply); "
            f"winning chances are points / {int(self.area)}",
        )

    def close(self) -> None:
        self.engine.close()

    def _sync(self, history: list[int]) -> None:
        if history[: len(self.moves)] != self.moves or len(history) < len(self.moves):
            replay(self.engine, self.size, self.komi, history)
            self.moves = list(history)
            return
        for i in range(len(self.moves), len(history)):
            self.engine.command("play", "B" if i % 2 == 0 else "W", vertex(history[i], self.size))
        self.moves = list(history)

    def _score_after(self, colour: str, action: int, sign: float) -> tuple[float, float]:
        self.engine.command("play", colour, vertex(action, self.size))
        try:
            lead, spread = parse_estimate(self.engine.command("estimate_score", timeout_s=120))
        finally:
            self.engine.command("undo")
        return sign * lead, spread

    def judge(self, game: pyspiel.Game, state: pyspiel.State, history: list[int], action: int) -> Verdict:
        try:
            return self._judge(state, history, action)
        except GtpEngineDied:
            self.engine = GtpEngine(self.engine.argv)  # the next move replays its match on it
            self.moves = []
            replay(self.engine, self.size, self.komi, self.moves)
            raise

    def _judge(self, state: pyspiel.State, history: list[int], action: int) -> Verdict:
        self._sync(history)
        mover = state.current_player()
        colour, sign = ("B", 1.0) if mover == 0 else ("W", -1.0)
        choice = action_of(self.engine.command("reg_genmove", colour, timeout_s=120), self.size)
        if choice is None or choice not in state.legal_actions():
            choice = action  # GNU Go resigns (or names a move OpenSpiel refuses): no better move
        played, played_hw = self._score_after(colour, action, sign)
        best, best_hw = (played, played_hw) if choice == action else self._score_after(colour, choice, sign)
        if played >= best:
            best, best_hw, choice = played, played_hw, action
        return Verdict(
            value_before=best,  # after a move, as the moves are scored (the docstring says why)
            value_played=played,
            value_best=best,
            best_action=choice,
            wc_played=self._wc(played),
            wc_best=self._wc(best),
            uncertainty=max(played_hw, best_hw),
        )

    def _wc(self, points: float) -> float:
        return max(-1.0, min(1.0, points / self.area))
