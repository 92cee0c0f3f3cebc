"""The ladder bounded by the operator, not by bots (referee/ladder/bounds.py, issue 41): a bot that
rotates its options (a new `name@hash` entry each time) adds page rows and Prometheus series only
up to its account's `entries_per_account`; idle entries leave the page and the metrics; the
page's rows are capped."""

from __future__ import annotations

from typing import cast

from nats.aio.client import Client as NATS
from prometheus_client import generate_latest

from bus.identity import entry_name
from observability.metrics import RefereeMetrics
from referee.ladder.board import BoardRow
from referee.ladder.bounds import visible_rows
from referee.ladder.config import LimitsConfig
from referee.ladder.service import Ladder
from tests.test_ladder_service import _config


def _row(entry: str, games: int = 5, game: str = "g") -> BoardRow:
    return BoardRow(game=game, entry=entry, name=entry_name(entry), games=games, bt=0, bt_low=-1, bt_high=1)


def test_recent_entries_per_account_and_a_row_cap() -> None:
    rows = [_row(f"rot@{i}") for i in range(10)] + [_row("old@1"), _row("good@1")]
    seen = {f"rot@{i}": 100.0 + i for i in range(10)} | {"old@1": 10.0, "good@1": 105.0}
    limits = LimitsConfig(entries_per_account=2, idle_s=50, rows=100)
    shown = visible_rows(rows, seen, entry_name, limits, now=110.0)
    assert [r.entry for r in shown] == ["rot@8", "rot@9", "good@1"]  # old@1 idle; rot's two newest
    assert len(visible_rows(rows, seen, entry_name, limits.model_copy(update={"rows": 2}), 110.0)) == 2
    # Accounts, not names: two names of one login share the cap.
    one = visible_rows(rows, seen, lambda e: "acct", limits, now=110.0)
    assert [r.entry for r in one] == ["rot@8", "rot@9"]


def _series(metrics: RefereeMetrics) -> list[str]:
    text = generate_latest(metrics.registry).decode()
    return [line for line in text.splitlines() if line.startswith("spielbus_ladder_games{")]


def test_rotated_entries_do_not_grow_the_series_or_the_page() -> None:
    now = [1000.0]
    cfg = _config(["rot", "good"], limits={"entries_per_account": 3, "idle_s": 600, "rows": 50})
    ladder = Ladder(cast(NATS, None), cfg, clock=lambda: now[0])
    metrics = RefereeMetrics()
    ladder.on_board.append(metrics.set_ladder)
    # 40 rotations, one every 2 s, each rated: before issue 41, 41 rows and 41 series each.
    ladder.rows = [_row(f"rot@{i:02d}") for i in range(40)] + [_row("good@1")]
    ladder.seen = {f"rot@{i:02d}": 900.0 + 2 * i for i in range(40)} | {"good@1": 1000.0}
    ladder._publish_board()
    assert len(_series(metrics)) == 4  # three of rot's, one of good's
    board = ladder.leaderboard()
    assert [r["entry"] for r in board["rows"]] == ["rot@37", "rot@38", "rot@39", "good@1"]
    assert board["hidden"] == 37
    # An hour on, nobody seen since: every series is removed, the page is empty.
    now[0] += 3600
    ladder._publish_board()
    assert _series(metrics) == [] and ladder.leaderboard()["rows"] == []
