"""Territory scoring for MiniGo (games/go/score.py, spielbus/go_report.py): Tromp-Taylor area on
hand-made boards, and on random 5x5 games its sign (less komi) agrees with OpenSpiel's own winner."""

from __future__ import annotations

import random

import pyspiel
from rich.console import Console

from bus.protocol import GameSpec, MatchRecord, MoveRecord
from games.go.score import area, board_rows, tromp_taylor_score
from spielbus.go_report import go_rows, print_go_scores


def test_area_on_hand_made_boards() -> None:
    assert area(["+X+", "XX+", "+++"]) == (9, 0)
    assert area(["+XO+", "+XO+", "+XO+"]) == (6, 6)
    assert area(["+X+O"]) == (2, 1)  # the middle point touches both: nobody's
    assert board_rows("GoState(komi=9)\n\n 2 +X\n 1 O+\n   AB\n") == ["+X", "O+"]


def _random_record(rng: random.Random, komi: float) -> tuple[MatchRecord, list[float]]:
    spec = GameSpec(name="go", params={"board_size": 5, "komi": komi})
    game = pyspiel.load_game("go", dict(spec.params))
    state, moves = game.new_initial_state(), list[MoveRecord]()
    while not state.is_terminal():
        a = rng.choice(state.legal_actions())
        moves.append(MoveRecord(turn=len(moves), player=state.current_player(), action=a, text=str(a)))
        state.apply_action(a)
    returns = list(state.returns())
    rec = MatchRecord(
        match_id=f"m{rng.random()}",
        tournament="t",
        game=spec,
        seats=["b", "w"],
        seed=0,
        moves=moves,
        returns=returns,
        outcome="decisive" if returns[0] else "draw",
    )
    return rec, returns


def test_score_sign_agrees_with_openspiel() -> None:
    rng = random.Random(7)
    checked = 0
    records = []
    for _ in range(200):
        rec, returns = _random_record(rng, 0.5)
        records.append(rec)
        score = tromp_taylor_score(rec)
        assert score is not None
        if returns == [0.0, 0.0]:
            continue  # a positional-superko repetition: OpenSpiel calls it a draw
        assert (score - 0.5 > 0) == (returns[0] > 0), (score, returns)
        checked += 1
    assert checked > 150
    rows = go_rows(records)
    assert rows["b"]["games"] == 200 and rows["b"]["mean_score"] == -rows["w"]["mean_score"]
    console = Console(record=True, width=120)
    print_go_scores(console, records, use_gnugo=False)
    assert "Tromp-Taylor" in console.export_text()


def test_report_says_which_score_is_table_3s() -> None:
    """Without GNU Go the report must not let Tromp-Taylor pass for Table 3's territory."""
    rec, _ = _random_record(random.Random(3), 0.5)
    console = Console(record=True, width=300)
    print_go_scores(console, [rec], use_gnugo=False)
    text = " ".join(console.export_text().split())
    assert "Table 3's territory is the GNU Go columns" in text
    assert "not Table 3's territory" in text
