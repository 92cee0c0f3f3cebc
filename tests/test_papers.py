"""`spielbus paper`: each paper's quick report at its smallest sizes, through the real referee.

Minimax Tree of Thoughts is run with an Ollama-API stand-in server (named so: not a model) in place of
the embedded model, which needs minutes per game on two cores; the referee, NATS and the agents are real.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from agents.gnugo_agent import find_gnugo
from bus.protocol import (
    MAX_MOVE_CALLS,
    FaultRecord,
    GameSpec,
    LLMCall,
    MatchRecord,
    MoveRecord,
    MoveStats,
    Provenance,
    Usage,
    VoidedAttempt,
)
from games.loader import initial_state, load_game
from referee.config import TournamentConfig
from research.papers import cli, coaching, llm_mcts, wordnt
from research.papers.cells import Cell, played_title, score_of, share_cell, wilson
from research.papers.decided import failed_calls, move_origin, seat_shares
from research.papers.llm_spec import llm_section
from research.papers.minimax_tot import config
from research.papers.registry import PAPERS
from research.papers.report import write_markdown
from tests.llm_standins import OllamaStandIn

REPO = Path(__file__).resolve().parents[1]


def _paper(tmp_path: Path, *args: str, url: str = "") -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-m", "spielbus.cli", "paper", *args, *(["--llm", f"ollama:{url}"] if url else [])],
        capture_output=True, text=True, env=env, timeout=800,
    )  # fmt: skip


def test_paper_scale_has_the_papers_sizes() -> None:
    llm = llm_section(None, "smollm2")
    ghost, chain = config("ghost", "paper", llm), config("word_chain", "paper", llm)
    assert ghost.games_per_pairing == 50 and ghost.both_seat_orders  # 100 games
    assert len(chain.games) == 26 and chain.games_per_pairing == 1 and chain.both_seat_orders  # 52 games
    opts = ghost.agents["minimax_tot"].options
    assert opts["depth"] == 3 and opts["rollouts"] == 3 and opts["temperature"] == 0.5


def test_wilson_interval_and_bad_llm_spec() -> None:
    low, high = wilson(81, 100)
    assert 0.72 < low < 0.81 < high < 0.88
    assert wilson(0, 0) == (0.0, 1.0)
    assert llm_section("ollama:http://h:1", "m")["backend"] == "ollama"
    with pytest.raises(Exception, match="--llm"):
        llm_section("nonsense", "m")
    assert score_of([], "a") == (0, 0, 0)


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_minimax_tot_quick_report_every_cell_has_a_run(tmp_path: Path) -> None:
    standin = OllamaStandIn()
    await standin.start()
    out = tmp_path / "report"
    try:
        proc = await asyncio.to_thread(
            _paper, tmp_path, "minimax_tot", "--games", "1", "--out", str(out), url=standin.url
        )
        assert proc.returncode == 0, proc.stderr + proc.stdout
        assert standin.requests  # the agents asked the stand-in: the LLM path ran
        again = await asyncio.to_thread(
            _paper, tmp_path, "minimax_tot", "--games", "1", "--out", str(out), "--resume", url=standin.url
        )
    finally:
        await standin.stop()
    assert again.returncode == 0, again.stderr
    cells = [Cell.model_validate(c) for c in json.loads((out / "cells.json").read_text())]
    assert [c.name for c in cells] == ["ghost", "word_chain"]
    for c in cells:
        assert c.score is not None and c.games == 2, c
        records = (out / c.run / "matches.jsonl").read_text().splitlines()
        assert len(records) == c.games  # the number comes from the run folder's matches
        assert c.model == "smollm2" and c.policy == "forfeit"  # the paper's rule
        assert {x.agent for x in c.seats} == {"minimax_tot", "tot"}  # both seats' shares
    # --resume kept the finished cells: still one run folder each.
    assert all(len(list((out / "runs" / c.name).iterdir())) == 1 for c in cells)
    report = (out / "report.md").read_text()
    assert "81%" in report and "71%" in report and "Table 1" in report
    assert (out / "win_rates.png").stat().st_size > 0 and (out / "win_rates.svg").exists()
    assert "report:" in proc.stdout


def test_llm_mcts_paper_scale_has_the_papers_sizes() -> None:
    assert list(PAPERS) == ["minimax_tot", "llm_mcts", "cwm", "wordnt", "coaching"]  # docs/papers.md
    llm = llm_section(None, "smollm2")
    puzzles = llm_mcts.table2_config("llm_mcts", 3, llm_mcts.FULL, llm, 100)
    assert len(puzzles.games) == 100 and puzzles.max_turns == 5  # mate in 3: 2N - 1 plies
    assert puzzles.agents["llm_mcts"].options["k"] == 20 and puzzles.agents["llm_mcts"].options["depth"] == 5
    go = llm_mcts.table3_config("llm_vote", llm_mcts.FULL, llm, 20)
    assert go.games[0].params == {"board_size": 7, "komi": 9.0} and go.games_per_pairing == 20
    assert go.agents["mcts1000"].options["simulations"] == 1000 and go.champions == ["mcts1000"]
    chess = llm_mcts.table5_config("llm_mcts", 3, llm_mcts.FULL, llm, 20)
    assert chess.champions == ["llm_mcts"] and chess.agents["stockfish3"].options["skill_level"] == 3
    assert chess.agents["llm_mcts"].options["critic"] == "both"
    assert len(llm_mcts.TABLES["table2"]) == 24 and len(llm_mcts.TABLES["table5"]) == 9


def test_a_quick_cell_title_says_the_sizes_it_played() -> None:
    paper = llm_mcts.run_title("t2-d3-llm_vote", "llm_vote", llm_mcts.FULL)
    quick = llm_mcts.run_title("t2-d3-llm_vote", "llm_vote", llm_mcts.QUICK)
    assert "majority vote of 20 samples" in paper and "this run" not in paper
    assert quick.startswith(paper) and "this run: a vote of 5 samples" in quick
    assert "4 simulations and 3 samples" in llm_mcts.run_title("t2-d3-llm_mcts", "llm_mcts", llm_mcts.QUICK)
    assert "MCTS with 50 simulations" in llm_mcts.run_title("t5-l1-mcts", "mcts", llm_mcts.QUICK)


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_llm_mcts_quick_report_every_cell_has_a_run(tmp_path: Path) -> None:
    """One cell of each kind (a puzzle, a skipped MCTS (10,000), a depth quick does not play, a Go game,
    a chess game against Stockfish) with the Ollama-API stand-in behind both LLM methods."""
    standin = OllamaStandIn()
    await standin.start()
    out = tmp_path / "report"
    cells_arg = "t2-d3-llm_mcts,t2-d3-mcts10000,t2-d8-mcts50,t3-llm_vote,t5-l1-mcts"
    try:
        proc = await asyncio.to_thread(
            _paper, tmp_path, "llm_mcts", "--games", "1", "--cells", cells_arg, "--out", str(out),
            url=standin.url,
        )  # fmt: skip
    finally:
        await standin.stop()
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert standin.requests  # the LLM agents asked the stand-in
    cells = {c["name"]: Cell.model_validate(c) for c in json.loads((out / "cells.json").read_text())}
    assert sorted(cells) == sorted(cells_arg.split(","))
    for name in ("t2-d3-llm_mcts", "t3-llm_vote", "t5-l1-mcts"):
        c = cells[name]
        assert c.score is not None and c.games == 1 and c.seed and c.policy == "forfeit", c
        assert len((out / c.run / "matches.jsonl").read_text().splitlines()) == 1  # from the run folder
    assert cells["t2-d3-llm_mcts"].model == "smollm2" and cells["t5-l1-mcts"].model == "-"
    go = cells["t3-llm_vote"]
    assert go.unit == "points" and ("GNU Go's final_score" in go.note) == (find_gnugo() is not None)
    assert "quick scale" in cells["t2-d3-mcts10000"].why and "depths 3 to 5" in cells["t2-d8-mcts50"].why
    report = (out / "report.md").read_text()
    assert "Table 2: mate-in-N puzzles solved" in report and "| level 1 | level 2 | level 3 |" in report
    assert "74% / " in report and "+11.9 / " in report and "0.78" not in report and "78% / " in report
    assert "Score used: Territory" in report
    assert (out / "table2_solve_rate.png").stat().st_size > 0 and (out / "table5_scores.svg").exists()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_wordnt_quick_report_every_cell_has_a_run(tmp_path: Path) -> None:
    """The BWR bot among naive and the AVG NIR bot among careful opponents (no LLM), 2 rounds each."""
    out = tmp_path / "report"
    cells_arg = "naive-bwr,careful-nir"  # both bots, both opponent models
    args = ["--games", "1", "--rounds", "2", "--cells", cells_arg, "--out", str(out)]
    proc = _paper(tmp_path, "wordnt", *args)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    cells = [Cell.model_validate(c) for c in json.loads((out / "cells.json").read_text())]
    assert [c.name for c in cells] == cells_arg.split(",")
    for c in cells:
        records = [json.loads(x) for x in (out / c.run / "matches.jsonl").read_text().splitlines()]
        assert len(records) == 1 and c.games == 2 and c.score is not None and c.unit == "rounds", c
        lost = -records[0]["returns"][records[0]["seats"].index("bot")]
        assert c.wins == 2 - lost  # rounds not lost, from the run folder's record
        assert c.policy == "forfeit" and c.seed == 11 and "opponents kept" in c.note
    report = (out / "report.md").read_text()
    assert "| naive | " in report and "| careful | " in report and "reports no measurements" in report
    assert (out / "advantage.png").stat().st_size > 0


def test_wordnt_cell_leaves_out_forfeited_matches() -> None:
    """A forfeit's returns are the referee's (all rounds lost by one player), not the rounds played: a
    first measurement counted them and showed the bot at 0% or 100%."""
    cfg = wordnt.config("careful-nir", "quick")
    seats = ["bot", "careful1", "careful2", "careful3"]
    game = cfg.games[0]

    def rec(outcome: str, returns: list[float]) -> MatchRecord:
        return MatchRecord(
            match_id=outcome, tournament="t", game=game, seats=seats, seed=1, returns=returns, outcome=outcome
        )

    played = rec("decisive", [-5.0, -10.0, -12.0, -13.0])
    forfeit = rec("forfeit", [-40.0, 0.0, 0.0, 0.0])
    cell = wordnt.rounds_cell("careful-nir", [played, forfeit], "runs/x", cfg)
    assert (cell.wins, cell.games, cell.score) == (35, 40, 35 / 40)
    assert "1 match(es) left out" in cell.note and "opponents kept 71%" in cell.note
    empty = wordnt.rounds_cell("careful-nir", [forfeit], "runs/x", cfg)
    assert empty.score is None and "no match played to its end" in empty.why


async def test_a_run_that_fails_to_start_is_a_cell_that_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded LLM server not starting on a loaded machine crashed the whole report before; now
    that cell says why and --resume retries it."""

    async def fails(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the embedded LLM server did not answer within 180s")

    monkeypatch.setattr(llm_mcts, "play", fails)
    args = cli._parser().parse_args(["llm_mcts", "table3", "--cells", "t3-llm_vote", "--out", str(tmp_path)])
    [cell] = await llm_mcts.run(args, tmp_path, Console())
    assert cell.score is None and "did not answer within 180s" in cell.why and "--resume" in cell.why
    assert json.loads((tmp_path / "cells.json").read_text())[0]["why"] == cell.why


def test_minimax_tot_cells_play_by_the_papers_rule() -> None:
    """ "A player who fails to respond or responds incorrectly loses": the `forfeit` policy and no
    agent fallback, at both scales. Before, the `random` policy turned ToT's empty answer into a
    random legal word and Minimax-ToT's failed LLM answers into its own random fallbacks."""
    llm = llm_section(None, "smollm2")
    for scale in ("quick", "paper"):
        for cell in ("ghost", "word_chain"):
            cfg = config(cell, scale, llm)
            assert cfg.policy.kind == "forfeit", (scale, cell)
            assert all(a.options["fallback"] == "clock" for a in cfg.agents.values()), (scale, cell)


def _move(
    turn: int, player: int, agent: str, *, forced: bool = False, calls: int = 0, **stats: int
) -> MoveRecord:
    return MoveRecord(
        turn=turn, player=player, action=0, text="a", agent=agent, forced=forced,
        usage=Usage(llm_calls=calls), stats=MoveStats(**stats) if stats else None,
    )  # fmt: skip


def test_every_seat_share_and_the_model_that_played_are_in_the_cell(tmp_path: Path) -> None:
    """Each seat's turns not decided by its own method (its fallbacks, the referee's moves, failed
    LLM calls inside a decision, answers refused) are in the cell and the report, and the title
    names the model that played, not the paper's. Before, only the first agent's fallbacks were
    reported, LLM-MCTS showed 0% with most of its inner calls failed, and an LLM-as-policy row
    said Gemini 2.5 Pro whatever played."""
    game = GameSpec(name="tic_tac_toe")
    prov = [Provenance(agent="cwm", kind="cwm"), Provenance(agent="llm_policy", models=["openai:smollm2"])]
    moves = [
        _move(0, 0, "cwm", calls=0),
        _move(1, 1, "llm_policy", fallback=1, llm_failures=1),
        _move(2, 0, "cwm", llm_failures=3, calls=1),  # the method ran, some inner calls failed
        _move(3, 1, "llm_policy", forced=True),  # the referee played it (random policy)
        _move(4, 0, "cwm", calls=2, bad_outputs=1),  # an unusable answer is the model's own play
    ]
    faults = [
        FaultRecord(turn=3, seat=1, agent="llm_policy", reason="illegal"),  # replaced by the forced move
        FaultRecord(turn=5, seat=1, agent="llm_policy", reason="timeout"),  # no move: the match ended
    ]
    rec = MatchRecord(
        match_id="m-1", tournament="t", game=game, seats=["cwm", "llm_policy"], seed=1, moves=moves,
        faults=faults, returns=[1.0, -1.0], outcome="forfeit", provenance=prov,
    )  # fmt: skip
    assert [move_origin(m) for m in moves] == ["own", "fallback", "failed_calls", "forced", "own"]
    cfg = TournamentConfig.model_validate(
        {"name": "x", "games": [{"name": "tic_tac_toe"}], "agents": {"cwm": {"kind": "random"}}}
    )
    title = "Tic-tac-toe: CWM-MCTS against LLM-as-policy (Gemini 2.5 Pro), score share"
    cell = share_cell("tic_tac_toe-vs-llm_policy", title, [rec], "runs/x", cfg, "cwm", "llm_policy", "m")
    by = {s.agent: s for s in cell.seats}
    assert (by["cwm"].turns, by["cwm"].failed_calls, by["cwm"].not_own, by["cwm"].bad_outputs) == (3, 1, 1, 1)
    assert (by["cwm"].llm_calls, by["cwm"].llm_failures) == (3, 3)
    pol = by["llm_policy"]
    assert (pol.turns, pol.fallback, pol.forced, pol.no_move, pol.share) == (3, 1, 1, 1, 1.0)
    assert pol.models == ["openai:smollm2"]
    assert "Gemini" not in cell.title and "LLM-as-policy (openai:smollm2)" in cell.title
    assert played_title("Ghost: Minimax-ToT against ToT", cell.seats).endswith(
        "(llm_policy on openai:smollm2)"
    )
    text = write_markdown(tmp_path, "x", [cell], {}, "quick").read_text()
    assert "llm_policy (openai:smollm2): 100% of 3 turns not its method's" in text
    assert (
        "cwm: 33% of 3 turns not its method's (1 with failed LLM calls inside); 3 of 6 LLM calls failed"
        in text
    )


def test_go_cell_scores_every_game_one_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Table 3 cell's mean territory and black's wins come from one score (here Tromp-Taylor area
    less the difference of stones placed, as if GNU Go were not installed), not the mean from one
    scorer and the wins from the referee's record: those disagreed in 3 of 10 games."""
    monkeypatch.setattr(llm_mcts, "gnugo_scores", lambda records: None)
    spec = GameSpec(name="go", params={"board_size": 5, "komi": 0.5})
    game = load_game(spec)
    state = initial_state(game)
    # Black places two stones, white one, then white and black pass: nobody's territory, so the
    # territory difference is 0 and white wins by komi; Tromp-Taylor area (2 - 1) gives it black.
    actions = [12, 0, 6, 25, 25]
    moves = []
    for i, a in enumerate(actions):
        moves.append(MoveRecord(turn=i, player=i % 2, action=a, text=state.action_to_string(a)))
        state.apply_action(a)
    assert state.is_terminal() and state.returns()[0] > 0  # OpenSpiel's (the referee's) winner: black
    rec = MatchRecord(
        match_id="g-1", tournament="t", game=spec, seats=["llm_vote", "mcts1000"], seed=1, moves=moves,
        returns=list(state.returns()), outcome="decisive",
    )  # fmt: skip
    assert llm_mcts.tromp_taylor_score(rec) == 1.0
    cfg = llm_mcts.table3_config("llm_vote", llm_mcts.QUICK, llm_section(None, "smollm2"), 1)
    cell = llm_mcts.go_cell("t3-llm_vote", "Go", [rec], "runs/x", cfg, "llm_vote", "smollm2")
    assert cell.score == 0.0 and (cell.wins, cell.draws, cell.games) == (0, 0, 1)
    assert "the referee's record, Tromp-Taylor area, says black won 1" in cell.note
    assert "less the difference of stones placed" in cell.note


def test_the_install_hint_keeps_its_brackets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rich read `[train]` in `pip install -e '.[train]'` as markup and dropped it from the terminal."""
    monkeypatch.setattr(coaching, "TRAIN_MODULES", ("no_such_module_for_this_test",))
    monkeypatch.setenv("COLUMNS", "400")
    assert cli.main(["coaching", "--out", str(tmp_path)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "pip install -e '.[train]'" in said


def test_a_match_the_llm_provider_left_unplayed_counts_in_no_cell_number() -> None:
    """A match every play of which a provider fault voided ends `void` with returns 0 for all: the
    cells read it as a draw (a share of 0.5 against Stockfish) or an unsolved puzzle, where the
    referee's standings leave it out. Now it is left out and said; the seat's voided plays are counted."""
    spec = GameSpec(name="chess")
    seats = ["llm_vote", "defender"]
    won = MatchRecord(
        match_id="p-1", tournament="t", game=spec, seats=seats, seed=1, returns=[1.0, -1.0],
        ranks=[1, 2], outcome="decisive", moves=[_move(0, 0, "llm_vote", calls=1)],
    )  # fmt: skip
    void = MatchRecord(
        match_id="p-2", tournament="t", game=spec, seats=seats, seed=1, returns=[0.0, 0.0], ranks=[1, 1],
        outcome="void", faults=[FaultRecord(turn=1, seat=0, agent="llm_vote", reason="provider")],
        voided=[VoidedAttempt(agent="llm_vote", turn=1, cause="LLMTimeout")] * 7,
    )  # fmt: skip
    cfg = llm_mcts.table2_config("llm_vote", 3, llm_mcts.QUICK, llm_section(None, "smollm2"), 1)
    cell = share_cell("t5-l1-llm_vote", "LLM (vote) against level 1", [won, void], "runs/x", cfg,
                      "llm_vote", "stockfish1", "m")  # fmt: skip
    assert (cell.games, cell.wins, cell.draws, cell.score) == (1, 1, 0, 1.0)
    assert "1 match(es) left out" in cell.note and "1 unplayed" in cell.note
    vote = next(s for s in cell.seats if s.agent == "llm_vote")
    assert (vote.turns, vote.no_move, vote.voided) == (2, 1, 7)
    assert "7 plays voided by its LLM provider's failure" in vote.text()
    puzzle = llm_mcts.puzzle_cell("t2-d3-llm_vote", "d3", [won, void], "runs/x", cfg, "llm_vote", 3, "m")
    assert (puzzle.games, puzzle.wins, puzzle.score) == (1, 1, 1.0) and "left out" in puzzle.note


def test_a_call_answered_on_its_retry_is_no_failed_call() -> None:
    """`stats.llm_failures` counts failed attempts: LLM-MCTS's quick Table 2 rerun read "2 with failed
    LLM calls inside; 2 of 26 LLM calls failed" where each of those calls was answered on its retry
    (every call of the move `answered`). A failed call is one that brought no answer."""
    retried = [LLMCall(id="a/1/0", outcome="answered", attempts=2), LLMCall(id="a/2/0", outcome="answered")]
    own = _move(0, 0, "llm_mcts", calls=2, llm_failures=1).model_copy(update={"calls": retried})
    lost = [LLMCall(id="a/3/0", outcome="provider", attempts=2), LLMCall(id="a/4/0", outcome="answered")]
    failed = _move(2, 0, "llm_mcts", calls=1, llm_failures=2).model_copy(update={"calls": lost})
    assert [move_origin(own), move_origin(failed)] == ["own", "failed_calls"]
    rec = MatchRecord(
        match_id="m-1", tournament="t", game=GameSpec(name="chess"), seats=["llm_mcts", "defender"],
        seed=1, moves=[own, _move(1, 1, "defender"), failed], returns=[0.0, 0.0], outcome="max_turns",
    )  # fmt: skip
    [mcts, _] = seat_shares([rec])
    assert (mcts.turns, mcts.failed_calls, mcts.llm_calls, mcts.llm_failures) == (2, 1, 3, 1)
    assert "50% of 2 turns not its method's (1 with failed LLM calls inside); 1 of 4 LLM calls failed" in (
        mcts.text()
    )
    # Past the kept calls (the last MAX_MOVE_CALLS), unaccounted failed attempts count as failed calls.
    many = [LLMCall(id=f"a/{i}/0", outcome="answered") for i in range(MAX_MOVE_CALLS)]
    cut = _move(4, 0, "llm_mcts", calls=40, llm_failures=3).model_copy(update={"calls": many})
    assert failed_calls(cut) == 3 and failed_calls(_move(5, 0, "x", llm_failures=2)) == 2
