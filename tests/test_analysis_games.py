"""The references added for Ghost, Go and the simplified Hold'em, each against a check written here.

- Ghost: every action of every reachable live position of a small word list, judged by the shipped
  solver, against a plain negamax over the pyspiel states (tests/test_ghost_solver.py's).
- Go: each row of a short 7x7 match recomputed by talking GTP to GNU Go directly (a raw pipe, our
  GTP client and replay code not used): the score after the move played and after GNU Go's choice.
- Simplified Hold'em: a small-deck match scored against the project's CFVFP table (`spielbus
  selfplay solve`), the first decision's action values recomputed here by plain recursion over the
  deals; the full deck is named as not scored.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from pathlib import Path

import pyspiel
import pytest

from analysis.ghost import GhostJudge
from analysis.match import Judges, Settings, analyse_match
from analysis.verdict import NoReference
from bus.protocol import GameSpec, MatchRecord, MoveRecord
from games.loader import load_game
from games.word.ghost import CHALLENGE
from tests.test_ghost_solver import WORDS, live_positions, tree_value


def random_record(game_spec: GameSpec, plies: int, seed: int) -> MatchRecord:
    """A match of uniform random moves (chance sampled too), as the referee would record it."""
    game = load_game(game_spec)
    state = game.new_initial_state()
    rng = random.Random(seed)
    moves: list[MoveRecord] = []
    while not state.is_terminal() and len(moves) < plies:
        if state.is_chance_node():
            actions, probs = zip(*state.chance_outcomes(), strict=True)
            a = rng.choices(actions, probs)[0]
            moves.append(
                MoveRecord(turn=len(moves) + 1, player=-1, action=a, text=state.action_to_string(-1, a))
            )
        else:
            p = state.current_player()
            a = rng.choice(state.legal_actions())
            moves.append(
                MoveRecord(
                    turn=len(moves) + 1, player=p, action=a, text=state.action_to_string(p, a), agent="ab"[p]
                )
            )
        state.apply_action(a)
    return MatchRecord(
        match_id=f"m{seed}", tournament="t", game=game_spec, seats=["a", "b"], seed=seed, moves=moves
    )


def test_ghost_values_match_a_negamax_over_the_game_tree(tmp_path: Path) -> None:
    words = tmp_path / "ghost.txt"
    words.write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    game = load_game(GameSpec(name="ghost", params={"words": str(words), "min_word_length": 4}))
    judge = GhostJudge(game)
    memo: dict[str, float] = {}
    checked = blunders = 0
    for pos in live_positions(game.new_initial_state()):
        me = pos.current_player()
        for a in pos.legal_actions():
            child = pos.child(a)
            expected = child.returns()[me] if child.is_terminal() else -tree_value(child, memo)
            v = judge.judge(game, pos, [], a)
            assert v.value_played == expected, (pos.fragment, a)
            assert v.value_best == max(
                (c.returns()[me] if c.is_terminal() else -tree_value(c, memo))
                for c in (pos.child(b) for b in pos.legal_actions())
            )
            checked += 1
            blunders += v.value_best > v.value_played
    assert checked > 100 and blunders > 10
    assert judge.reference.exact and judge.reference.name == "exact"


def test_a_ghost_match_is_scored_exactly_not_estimated(tmp_path: Path) -> None:
    words = tmp_path / "ghost.txt"
    words.write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    spec = GameSpec(name="ghost", params={"words": str(words), "min_word_length": 4})
    rows = analyse_match(random_record(spec, 10, seed=2), Judges())
    assert rows and all(r.reference.exact for r in rows)
    # A challenge of a fragment no word starts with wins: never a loss.
    for r in rows:
        if r.action == CHALLENGE:
            assert r.value_played in (1.0, -1.0)


GNUGO = shutil.which("gnugo") or shutil.which("/usr/games/gnugo")


def gnugo_scores(path: str, moves: list[int], size: int, plies: int) -> list[tuple[str, float]]:
    """For each ply: (GNU Go's choice, the mover's score after the move played), straight over a pipe."""
    letters = "ABCDEFGHJKLMNOPQRST"

    def v(a: int) -> str:
        return "PASS" if a == size * size else f"{letters[a % size]}{a // size + 1}"

    lines = [f"boardsize {size}", "clear_board", "komi 7.5"]
    for i, a in enumerate(moves[:plies]):
        c = "BW"[i % 2]
        lines += [f"reg_genmove {c}", f"play {c} {v(a)}", "estimate_score", "undo", f"play {c} {v(a)}"]
    lines.append("quit")
    argv = [path, "--mode", "gtp", "--level", "1", "--seed", "0", "--chinese-rules", "--positional-superko"]
    out = subprocess.run(
        argv, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=600
    ).stdout
    answers = [a.strip()[1:].strip() for a in out.split("\n\n") if a.strip()]
    got = []
    for i in range(plies):
        genmove, estimate = answers[3 + 5 * i], answers[3 + 5 * i + 2]
        m = re.match(r"([BW])\+(\d+(?:\.\d+)?)", estimate)
        lead = 0.0 if m is None else float(m.group(2)) * (1 if m.group(1) == "B" else -1)
        got.append((genmove, lead if i % 2 == 0 else -lead))
    return got


@pytest.mark.skipif(GNUGO is None, reason="gnugo not installed (make system-deps)")
def test_go_rows_recomputed_with_gnugo_directly() -> None:
    spec = GameSpec(name="go", params={"board_size": 7})
    record = random_record(spec, 6, seed=5)
    judges = Judges(Settings(gnugo_level=1))
    try:
        rows = analyse_match(record, judges)
    finally:
        judges.close()
    assert GNUGO is not None
    direct = gnugo_scores(GNUGO, [m.action for m in record.moves], 7, len(rows))
    for row, (choice, played) in zip(rows, direct, strict=True):
        assert row.reference.name == "gnugo" and not row.reference.exact and row.reference.unit == "points"
        assert row.value_played == played, row
        assert row.value_best >= row.value_played and row.loss == row.value_best - row.value_played
        assert row.wc_loss == pytest.approx(row.loss / 49)
        if row.best_action != row.action:
            assert row.best_text.upper().endswith(choice.upper()), (row.best_text, choice)


SMALL_HOLDEM = GameSpec(
    name="simplified_holdem",
    params={"ranks": 3, "suits": 2, "hole_cards": 1, "flop": 1, "turn": 0, "stack": 10},
)


def expected_return(state: pyspiel.State, table: dict[str, dict[int, float]], player: int) -> float:
    """`player`'s expected return when both follow `table` from `state` (plain recursion)."""
    if state.is_terminal():
        return float(state.returns()[player])
    if state.is_chance_node():
        return sum(p * expected_return(state.child(a), table, player) for a, p in state.chance_outcomes())
    probs = table[state.information_state_string(state.current_player())]
    return sum(p * expected_return(state.child(a), table, player) for a, p in probs.items() if p > 0)


def test_simplified_holdem_is_scored_against_the_projects_cfvfp_table(tmp_path: Path) -> None:
    from research.coach.cfvfp import CFVFPSolver

    game = load_game(SMALL_HOLDEM)
    solver = CFVFPSolver(game)
    solver.iterate(200)
    table = solver.average_policy()
    path = tmp_path / "holdem.table.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "game": SMALL_HOLDEM.label(),
                    "infoset": key,
                    "legal": [{"id": a, "text": str(a)} for a in sorted(probs)],
                    "policy": [probs[a] for a in sorted(probs)],
                }
            )
            + "\n"
            for key, probs in table.items()
        )
    )
    # Without the table the Python game is named, not scored (OpenSpiel's CFR+ is too slow on it).
    with pytest.raises(NoReference, match="selfplay solve"):
        Judges().for_game(SMALL_HOLDEM, game)

    record = random_record(SMALL_HOLDEM, 40, seed=1)
    rows = analyse_match(record, Judges(Settings(equilibria=(str(path),))))
    assert rows and {r.reference.name for r in rows} == {"equilibrium"}
    assert all("CFVFP" in r.reference.detail and r.reference.unit == "chips" for r in rows)

    # The first decision, by hand: every deal the mover cannot tell apart, weighted by chance alone
    # (nobody has acted yet), each action's return with both sides on the table afterwards.
    first = rows[0]
    state = game.new_initial_state()
    for step in record.moves[: first.index]:
        state.apply_action(step.action)
    key = state.information_state_string(first.seat)
    deals: list[tuple[pyspiel.State, float]] = [(game.new_initial_state(), 1.0)]
    while deals[0][0].is_chance_node():
        deals = [(s.child(a), w * p) for s, w in deals for a, p in s.chance_outcomes()]
    mine = [(s, w) for s, w in deals if s.information_state_string(first.seat) == key]
    total = sum(w for _, w in mine)
    q = {
        a: sum(w * expected_return(s.child(a), table, first.seat) for s, w in mine) / total
        for a in state.legal_actions()
    }
    assert first.value_played == pytest.approx(q[first.action], abs=1e-9)
    assert first.value_best == pytest.approx(max(q.values()), abs=1e-9) or first.cls == "best"


def test_the_full_simplified_holdem_is_not_scored() -> None:
    spec = GameSpec(name="simplified_holdem")
    with pytest.raises(NoReference, match="simplified_holdem"):
        Judges().for_game(spec, load_game(spec))
