"""The ladder's move-quality columns: the analyst's scored rows of the ladder's own matches.

`spielbus analyst --out DIR` appends one line per scored move to `DIR/analysis.jsonl`
(`analysis.scale.MoveAnalysis`, a match's lines in one write). `spielbus ladder FILE.toml
--analysis DIR` reads that file (`QualityFile`), keeps the rows of matches the ladder counted (by
match id: the analyst may follow other tournaments on the same bus), names each row's agent by the
ladder entry it played as (`name@provenance`, from the result's seats) and its game by the result's
game label, and rates them with `analysis.summary.agent_quality` (accuracy, mean winning-chances
loss, blunders per 100 moves, bootstrap 95% intervals over matches). The figures go on the board
rows (`referee.ladder.board.with_quality`), so the page and `/api/ladder` show them.

Limits: the file is read whole again whenever its size or time changes (a torn last match is left
out, as `spielbus analyse` leaves it; the file is never rewritten here) and the figures are
recomputed off the event loop: seconds for hundreds of thousands of moves. An entry with rows of
more than one reference in a game shows the reference with the most moves. A match the analyst has
not scored yet (it scores after the match ends) counts once it has.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from analysis.scale import MoveAnalysis
from analysis.summary import AgentQuality, agent_quality
from referee.ladder.board import Quality
from referee.ladder.store import LadderResult
from spielbus.analyse import ANALYSIS_FILE, read_analysis

Key = tuple[str, str]


def _quality(q: AgentQuality) -> Quality:
    return Quality(
        reference=q.reference,
        moves=q.moves,
        matches=q.matches,
        accuracy=q.accuracy.value,
        accuracy_low=q.accuracy.lo,
        accuracy_high=q.accuracy.hi,
        mean_loss=q.mean_wc_loss.value,
        mean_loss_low=q.mean_wc_loss.lo,
        mean_loss_high=q.mean_wc_loss.hi,
        blunders=q.blunders_per_100.value,
        blunders_low=q.blunders_per_100.lo,
        blunders_high=q.blunders_per_100.hi,
    )


def ladder_quality(results: Iterable[LadderResult], rows: Iterable[MoveAnalysis]) -> dict[Key, Quality]:
    """Per (game label, entry): the move quality of the ladder's matches among `rows`."""
    entries: dict[str, tuple[str, dict[str, str]]] = {}
    for r in results:
        seats = r.seats or [r.first, r.second]
        entries[r.match_id] = (r.game, {e.split("@", 1)[0]: e for e in seats})
    ours = []
    for row in rows:
        if (match := entries.get(row.match_id)) is None or row.agent not in match[1]:
            continue
        ours.append(row.model_copy(update={"game": match[0], "agent": match[1][row.agent]}))
    out: dict[Key, Quality] = {}
    for q in sorted(agent_quality(ours), key=lambda q: q.moves):  # the most moves last, kept
        out[(q.game, q.agent)] = _quality(q)
    return out


class QualityFile:
    """The analyst's `analysis.jsonl` (a folder is taken as the analyst's `--out`), read again
    when it changes."""

    def __init__(self, path: str | Path) -> None:
        p = Path(path)
        self.path = p / ANALYSIS_FILE if p.is_dir() or not p.suffix else p
        self._stamp: tuple[int, int] | None = None
        self._rows: list[MoveAnalysis] = []
        self._matches = -1
        self.figures: dict[Key, Quality] = {}

    def refresh(self, results: list[LadderResult]) -> bool:
        """Re-read the file if it changed and re-rate if it or the results did; True if re-rated."""
        try:
            st = os.stat(self.path)
            stamp = (st.st_size, st.st_mtime_ns)
        except OSError:  # not written yet (the analyst has scored nothing)
            stamp = None
        if stamp == self._stamp and len(results) == self._matches:
            return False
        if stamp != self._stamp:
            self._rows = read_analysis(self.path, repair=False) if stamp else []
            self._stamp = stamp
        self._matches = len(results)
        self.figures = ladder_quality(results, self._rows)
        return True
