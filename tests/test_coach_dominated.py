"""Dominated moves against the CFVFP table (research.coach.dominated), on Kuhn poker where the
values can be worked out by hand: what a move gives up against the best legal action, when both
players follow the table elsewhere, replayed from match records; and `selfplay table1 --rescore`
reporting them from a finished tournament's records."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pyspiel
import pytest

import agents.policy_dataset as ds
from bus.protocol import GameSpec, LegalAction, MatchRecord, MoveRecord
from games.loader import load_game
from research.coach.dominated import move_losses, table_values
from research.coach.table1 import rescore

J, Q, K = 0, 1, 2
PASS, BET = 0, 1  # Kuhn: pass is also fold/check, bet is also call


def _key(game: pyspiel.Game, actions: list[int]) -> str:
    state = game.new_initial_state()
    for a in actions:
        state.apply_action(a)
    return str(state.information_state_string(state.current_player()))


def _record(actions: list[tuple[int, int, str | None]]) -> MatchRecord:
    return MatchRecord(
        match_id="m",
        tournament="t",
        game=GameSpec(name="kuhn_poker"),
        seats=["a", "b"],
        seed=0,
        moves=[
            MoveRecord(turn=i, player=p, action=a, text=str(a), agent=ag)
            for i, (p, a, ag) in enumerate(actions)
        ],
    )


def test_values_are_conditional_on_reaching_the_set() -> None:
    game = load_game("kuhn_poker")
    # Player 1 bets after a pass always with the King, with the Jack half the time, never with the Queen.
    table = {
        _key(game, [Q, K, PASS]): {PASS: 0.0, BET: 1.0},
        _key(game, [Q, J, PASS]): {PASS: 0.5, BET: 0.5},
    }
    values = table_values(game, table)
    # Player 0 holds the Queen, passed, faces a bet: the bettor holds the King with weight 1 and the
    # Jack with weight 0.5, so calling wins 2 a third of the time and loses 2 otherwise: -2/3; folding -1.
    v = values[_key(game, [Q, K, PASS, BET])]
    assert v[BET] == pytest.approx(-2 / 3) and v[PASS] == pytest.approx(-1.0)
    # Whatever the table: the King calling wins 2, folding loses 1; the Jack calling loses 2.
    assert values[_key(game, [J, K, BET])] == pytest.approx({PASS: -1.0, BET: 2.0})
    assert values[_key(game, [K, J, BET])] == pytest.approx({PASS: -1.0, BET: -2.0})


def test_a_fold_with_the_king_is_dominated_and_a_fold_with_the_jack_is_not() -> None:
    game = load_game("kuhn_poker")
    values = table_values(game, {})  # the uniform table: these values do not depend on it
    records = [
        # a (Jack) bets, b (King) folds: gives up 3 chips.
        _record([(-1, J, None), (-1, K, None), (0, BET, "a"), (1, PASS, "b")]),
        # a (King) bets, b (Jack) folds: the best move, gives up nothing.
        _record([(-1, K, None), (-1, J, None), (0, BET, "a"), (1, PASS, "b")]),
        # a (King) bets, b (Jack) calls: gives up 1 chip (calling loses 2, folding 1).
        _record([(-1, K, None), (-1, J, None), (0, BET, "a"), (1, BET, "b")]),
    ]
    losses = move_losses(records, game, values)
    assert losses.gaps["b"] == pytest.approx([3.0, 0.0, 1.0])
    summary = losses.summary(margin=0.5)["b"]
    assert summary["dominated_rate"] == pytest.approx(2 / 3)
    assert summary["mean_loss_vs_best"] == pytest.approx(4 / 3)
    assert summary["rated_moves"] == 3 and summary["unrated_moves"] == 0
    # The first mover's bets are rated too (against the uniform table), never as chance moves.
    assert len(losses.gaps["a"]) == 3 and "None" not in losses.gaps


def test_a_record_that_stops_replaying_leaves_its_moves_unrated() -> None:
    game = load_game("kuhn_poker")
    # Both players dealt the Jack: the game refuses the second deal, so neither move is rated.
    bad = _record([(-1, J, None), (-1, J, None), (0, BET, "a"), (1, PASS, "b")])
    summary = move_losses([bad], game, table_values(game, {})).summary()
    assert summary["a"]["unrated_moves"] == 1 and summary["b"]["unrated_moves"] == 1
    assert math.isnan(summary["b"]["dominated_rate"])


def test_table1_rescore_reports_the_dominated_moves_of_a_finished_tournament(tmp_path: Path) -> None:
    """`table1 --rescore` rebuilds Table 1 from a finished tournament's records: no training, no play."""
    game = load_game("kuhn_poker")
    data, out = tmp_path / "data", tmp_path / "out"
    ds.write_meta(
        data, ds.Meta(game="kuhn_poker", policy="random", rollouts=2, alpha=0.1, seed=0, sample=1.0)
    )
    out.mkdir()
    with open(out / "cfvfp-table.jsonl", "w", encoding="utf-8") as fh:
        fh.write(
            ds.TableRow(
                game="kuhn_poker",
                infoset=_key(game, [J, K, BET]),
                legal=[LegalAction(id=PASS, text="Pass"), LegalAction(id=BET, text="Bet")],
                policy=[0.0, 1.0],
            ).model_dump_json()
            + "\n"
        )
    for name in ("cfvfp_distilled", "coach_distilled"):
        (out / name).mkdir()
        (out / name / "train.json").write_text(json.dumps({"settings": {"steps": 1}, "rewards": [-1.0]}))
    run = out / "runs" / "table1-x"
    run.mkdir(parents=True)
    (run / "ratings.json").write_text(
        json.dumps(
            [{"agent": a, "elo": 1500.0, "bt": 1500.0, "bt_low": 1400.0, "bt_high": 1600.0} for a in "ab"]
        )
    )
    folds = [_record([(-1, J, None), (-1, K, None), (0, BET, "a"), (1, PASS, "b")])] * 3
    calls = [_record([(-1, J, None), (-1, K, None), (0, BET, "a"), (1, BET, "b")])]
    (run / "matches.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in folds + calls))

    result = rescore(data, out)
    assert result["stats"]["b"]["dominated_rate"] == pytest.approx(0.75)  # 3 folds with the King of 4
    assert result["stats"]["b"]["mean_loss_vs_best"] == pytest.approx(9 / 4)
    # The Elo with its 95% bootstrap interval over the matches (table1.elo_intervals).
    row = r"\| b \| 1500 \((\d+)-(\d+)\) \| 1500 \(1400-1600\) \| - \| - \| "
    row += r"0.0% \| 0.0% \| 0.0% \| 75.0% \| 2.250 \|"
    found = re.search(row, (out / "table1.md").read_text())
    assert found is not None and int(found.group(1)) <= int(found.group(2))
    low, high = result["ratings"][1]["elo_low"], result["ratings"][1]["elo_high"]
    assert result["ratings"][1]["agent"] == "b" and low <= high
