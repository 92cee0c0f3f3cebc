"""`spielbus analyse RUN_DIR` on run folders of tic-tac-toe, Kuhn poker and connect four matches:
one row per decision in analysis.jsonl, parallel processes, resumable after a torn write, games
without a reference listed, the per-agent figures with their intervals in summary.json."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest

from analysis.estimate import EstimateJudge
from analysis.scale import MoveAnalysis
from analysis.summary import agent_quality
from bus.protocol import MatchRecord, MoveRecord, MoveStats
from games.loader import load_game, parse_spec
from spielbus.analyse import main as analyse


def random_record(game: str, n: int, seats: list[str]) -> MatchRecord:
    """A match of uniformly random play, chance sampled, as the referee records it."""
    spec = parse_spec(game)
    state, rng = load_game(spec).new_initial_state(), random.Random(n)
    moves: list[MoveRecord] = []
    while not state.is_terminal():
        if state.is_chance_node():
            actions, probs = zip(*state.chance_outcomes(), strict=True)
            player, action, agent = -1, rng.choices(actions, probs)[0], None
        else:
            player = state.current_player()
            action, agent = rng.choice(state.legal_actions()), seats[player]
        moves.append(
            MoveRecord(
                turn=len(moves),
                player=player,
                action=action,
                text=state.action_to_string(player, action),
                agent=agent,
            )
        )
        state.apply_action(action)
    return MatchRecord(
        match_id=f"{spec.name}-{n}", tournament="t", game=spec, seats=seats, seed=n, moves=moves,
        returns=list(state.returns()), outcome="decisive",
    )  # fmt: skip


def write_run(run_dir: Path, records: list[MatchRecord]) -> None:
    run_dir.mkdir()
    (run_dir / "matches.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    (run_dir / "summary.json").write_text(json.dumps({"outcomes": {"decisive": len(records)}}))


def decisions(records: list[MatchRecord]) -> int:
    return sum(1 for r in records for m in r.moves if m.player >= 0)


def rows_of(run_dir: Path) -> list[MoveAnalysis]:
    text = (run_dir / "analysis.jsonl").read_text()
    return [MoveAnalysis.model_validate_json(line) for line in text.splitlines()]


def test_a_run_is_scored_in_parallel_and_resumed_after_a_torn_write(tmp_path: Path, capsys) -> None:
    scored = [random_record("tic_tac_toe", n, ["a", "b"]) for n in range(4)]
    scored += [random_record("kuhn_poker", n, ["b", "a"]) for n in range(4)]
    unscored = [random_record("goofspiel(num_cards=3)", 0, ["a", "b"])]  # simultaneous moves: no reference
    run = tmp_path / "run"
    write_run(run, scored + unscored)
    assert analyse([str(run), "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert "not scored: goofspiel-0" in out and "Move quality" in out
    first = rows_of(run)
    assert len(first) == decisions(scored)
    assert {r.match_id for r in first} == {r.match_id for r in scored}
    for rec in scored:  # every decision, in order, with its own agent
        mine = [r for r in first if r.match_id == rec.match_id]
        assert [(r.index, r.agent) for r in mine] == [
            (i, m.agent) for i, m in enumerate(rec.moves) if m.player >= 0
        ]

    summary = json.loads((run / "summary.json").read_text())
    assert summary["outcomes"] == {"decisive": 9}  # kept
    agents = summary["analysis"]["agents"]
    assert {(q["agent"], q["game"]) for q in agents} == {
        (a, g) for a in "ab" for g in ("tic_tac_toe", "kuhn_poker")
    }
    assert "goofspiel-0" in summary["analysis"]["not_scored"]
    cost = summary["analysis"]["cost"]
    assert cost["tic_tac_toe"]["moves"] + cost["kuhn_poker"]["moves"] == len(first)
    assert cost["tic_tac_toe"]["analysis_ms_per_move"] > 0
    # The printed time is the summary's, not rounded away (a tic-tac-toe move takes hundredths of a
    # millisecond: one decimal printed it as "0.0 ms").
    for game in ("tic_tac_toe", "kuhn_poker"):
        shown = re.search(rf"{game}: the reference took (\S+) ms per move", out)
        assert shown is not None, out
        assert float(shown.group(1)) == pytest.approx(cost[game]["analysis_ms_per_move"], rel=0.01)

    # A crash mid-write: the last match's final line is torn. The rerun drops that match and scores it
    # again; the rest is kept as it was.
    text = (run / "analysis.jsonl").read_text()
    (run / "analysis.jsonl").write_text(text[: len(text) - 40])
    assert analyse([str(run)]) == 0
    again = rows_of(run)
    key = lambda r: (r.match_id, r.index)  # noqa: E731
    strip = lambda rows: sorted((r.model_copy(update={"analysis_ms": 0.0}) for r in rows), key=key)  # noqa: E731
    assert strip(again) == strip(first)
    # Nothing left to do: a third run scores nothing and adds no line.
    assert analyse([str(run)]) == 0
    assert len(rows_of(run)) == len(first)


def test_a_folder_without_matches_is_bad_input(tmp_path: Path) -> None:
    assert analyse([str(tmp_path)]) == 2


def test_the_estimate_says_how_sure_it_is() -> None:
    game = load_game("connect_four")
    state = game.new_initial_state()
    for a in [3, 3, 3, 3, 2]:
        state.apply_action(a)
    judge = EstimateJudge(game, simulations=400)
    v = judge.judge(game, state, [], 0)
    assert not judge.reference.exact and judge.reference.name == "mcts"
    assert v.uncertainty is not None and 0 < v.uncertainty <= 1.96 * 1 / np.sqrt(30) + 1e-9
    assert v.value_best >= v.value_played


def test_per_agent_figures_and_their_intervals(tmp_path: Path) -> None:
    records = [random_record("tic_tac_toe", n, ["a", "b"]) for n in range(6)]
    # a's first move of the first match was a fallback for a failed LLM answer: scored, not counted.
    records[0].moves[0].stats = MoveStats.model_validate({"fallback": True})
    run = tmp_path / "run"
    write_run(run, records)
    assert analyse([str(run)]) == 0
    rows = rows_of(run)
    assert [r.fallback for r in rows if r.match_id == records[0].match_id][:2] == [True, False]
    table = {q.agent: q for q in agent_quality(rows)}
    for agent in "ab":
        mine = [r for r in rows if r.agent == agent and not r.fallback]
        q = table[agent]
        assert q.moves == len(mine) and q.matches == 6
        assert q.accuracy.value == np.mean([r.accuracy for r in mine])
        assert q.blunders_per_100.value == 100 * sum(r.cls == "blunder" for r in mine) / len(mine)
        for iv in (q.accuracy, q.mean_wc_loss, q.blunders_per_100):
            assert iv.lo <= iv.value <= iv.hi
    assert agent_quality(rows) == agent_quality(rows)  # seeded: the same intervals every time


def test_standings_show_a_scored_runs_move_quality(tmp_path: Path, capsys) -> None:
    from spielbus.standings import main as standings

    run = tmp_path / "run"
    write_run(run, [random_record("tic_tac_toe", n, ["a", "b"]) for n in range(2)])
    assert standings([str(run)]) == 0
    assert "Move quality" not in capsys.readouterr().out
    assert analyse([str(run)]) == 0
    capsys.readouterr()
    assert standings([str(run)]) == 0
    assert "Move quality" in capsys.readouterr().out
