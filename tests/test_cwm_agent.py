"""The `cwm` agent through the real referee and bus: search inside the sandbox on a model
folder; a broken model still answers legally and counts its failures; bad folders exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agents.base import Strategy
from agents.cwm.agent import CwmStrategy
from agents.cwm.sandbox import SandboxUnavailable, check_available
from agents.random_agent import RandomStrategy
from bus.protocol import MatchRecord, MoveRecord
from games.loader import load_game
from research.cwm.model_files import write_reference_dir
from tests.helpers import play, serving, spec, uid, until

try:
    check_available()
except SandboxUnavailable as exc:  # pragma: no cover
    pytest.skip(str(exc), allow_module_level=True)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ttt_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cwm_ttt")
    write_reference_dir(d, "tic_tac_toe")
    return d


def _cwm(opts: dict[str, Any]) -> CwmStrategy:
    return CwmStrategy(CwmStrategy.Options.model_validate(opts))


def _mine(rec: MatchRecord, me: str) -> tuple[list[MoveRecord], dict[str, Any]]:
    """The agent's moves in a finished, fault-free match, and the stats of its last move."""
    assert rec.outcome != "pending" and not rec.faults
    mine = [m for m in rec.moves if m.agent == me]
    assert mine and mine[-1].stats is not None
    return mine, mine[-1].stats.model_dump()


async def test_cwm_beats_or_draws_random_and_reports_online_accuracy(nc, ttt_dir):
    cwm = _cwm({"model": str(ttt_dir), "simulations": 200, "rollouts": 2, "seed": 1})
    me, rnd = uid("cwm"), uid("rnd")
    try:
        async with serving(nc, cwm, me), serving(nc, RandomStrategy.from_options({"seed": 3}), rnd):
            # A deadline no search reaches: the search stops at a share of it, and a loaded
            # machine could otherwise cut it short of its simulations (checked below).
            records = [await play(nc, spec("tic_tac_toe", [me, rnd] if i % 2 == 0 else [rnd, me], seed=i,
                                           deadline_ms=60_000))
                       for i in range(4)]  # fmt: skip
            # Every match's final step comes with `match_ended` and is checked too: turns + 4 steps.
            turns = sum(len(_mine(rec, me)[0]) for rec in records)
            await until(lambda: cwm.online["steps"] == turns + 4, "the final steps checked", 120)
    finally:
        await cwm.close()
    for i, rec in enumerate(records):
        seat = 0 if i % 2 == 0 else 1
        mine, last = _mine(rec, me)
        assert rec.returns[seat] >= 0  # MCTS on a correct model never loses to random here
        assert all(m.stats is not None for m in mine)
        assert last["online_transition_accuracy"] == 1.0 and last["model_failures"] == 0
        assert {m.stats.model_dump()["simulations"] for m in mine if m.stats is not None} == {200}
    assert cwm.online_accuracy()["online_transition_accuracy"] == 1.0


# The reference tic-tac-toe without its two diagonal lines: right at every turn, wrong only where
# a diagonal ends the game, the step after the last turn (issue 27).
NO_DIAGONALS = "\nLINES = LINES[:6]\n"


def _diagonal_end(rec: MatchRecord) -> bool:
    """The match ended with three in a row on a diagonal (replayed on the true game)."""
    state = load_game("tic_tac_toe").new_initial_state()
    for m in rec.moves:
        state.apply_action(m.action)
    cells = str(state).split()
    board = "".join(cells)
    return state.is_terminal() and any(
        board[a] != "." and board[a] == board[b] == board[c] for a, b, c in ((0, 4, 8), (2, 4, 6))
    )


async def test_online_accuracy_catches_a_model_without_diagonal_wins(nc, tmp_path):
    """Online accuracy covers the final step, which the agent learns from `match_ended`: the model
    without diagonals agrees at every turn, so only that step can catch it."""
    write_reference_dir(tmp_path, "tic_tac_toe")
    model = tmp_path / "model.py"
    model.write_text(model.read_text() + NO_DIAGONALS)
    cwm = _cwm({"model": str(tmp_path), "simulations": 30, "rollouts": 1, "seed": 1})
    # Fixed names: a seeded agent's decisions depend on the seats' names (agents.base.decision_rng),
    # so with random names the matches differed every run and the diagonal end (the case to catch)
    # came before the last match in only about half of the runs.
    me, rnd = "cwm-online-accuracy", "rnd-online-accuracy"
    try:
        async with serving(nc, cwm, me), serving(nc, RandomStrategy.from_options({"seed": 3}), rnd):
            records = [await play(nc, spec("tic_tac_toe", [rnd, me], seed=i, deadline_ms=20000))
                       for i in range(6)]  # fmt: skip
            turns = sum(len(_mine(rec, me)[0]) for rec in records)
            await until(lambda: cwm.online["steps"] == turns + len(records), "the final steps checked", 120)
    finally:
        await cwm.close()
    diagonal = [i for i, rec in enumerate(records) if _diagonal_end(rec)]
    # The case to catch happened, before the last match (seeded: the same matches every run).
    assert diagonal and diagonal[0] < len(records) - 1
    # Every turn agreed; every diagonal end did not.
    assert cwm.online["agree"] == cwm.online["steps"] - len(diagonal)
    assert cwm.online_accuracy()["online_transition_accuracy"] < 1.0
    # And the agent says so in its moves: the last match's stats count the earlier final steps.
    assert _mine(records[-1], me)[1]["online_transition_accuracy"] < 1.0


async def test_final_step_check_without_a_referee(tmp_path):
    """The check itself on a hand-made `match_ended`: x wins on the diagonal; the right model agrees,
    the model without diagonals does not (it says the game goes on)."""
    from agents.base import MatchContext
    from bus.protocol import HistoryItem, MatchEnded

    moves = ["x(0,0)", "o(0,1)", "x(1,1)", "o(0,2)", "x(2,2)"]
    ended = MatchEnded(
        match_id="m", seat=1, returns=[1.0, -1.0], outcome="decisive",
        history=[HistoryItem(player=i % 2, action=0, text=t) for i, t in enumerate(moves)],
        observation="xoo\n.x.\n..x",
    )  # fmt: skip
    for wrong in (False, True):
        write_reference_dir(tmp_path, "tic_tac_toe")
        if wrong:
            (tmp_path / "model.py").write_text((tmp_path / "model.py").read_text() + NO_DIAGONALS)
        cwm = _cwm({"model": str(tmp_path), "simulations": 5, "rollouts": 1})
        try:
            await cwm.match_ended(ended, MatchContext("m"))
        finally:
            await cwm.close()
        assert cwm.online == {"steps": 1, "agree": 0 if wrong else 1, "inferred": 0}
        # An end that is not the game's (a forfeit) carries no final view and is not a step.
        forfeit = MatchEnded(match_id="f", seat=0, returns=[-1.0, 1.0], outcome="forfeit")
        await cwm.match_ended(forfeit, MatchContext("f"))
        assert cwm.online["steps"] == 1


@pytest.mark.parametrize("game", ["kuhn_poker", "leduc_poker"])
async def test_cwm_ismcts_resamples_with_the_inference_function(nc, tmp_path, game):
    write_reference_dir(tmp_path, game)
    cwm = CwmStrategy.from_options({"model": str(tmp_path), "simulations": 100, "rollouts": 2, "seed": 1})
    me, rnd = uid("cwm"), uid("rnd")
    try:
        async with serving(nc, cwm, me), serving(nc, RandomStrategy.from_options({"seed": 3}), rnd):
            records = [await play(nc, spec(game, [me, rnd] if i % 2 == 0 else [rnd, me], seed=i))
                       for i in range(2)]  # fmt: skip
    finally:
        await cwm.close()
    for rec in records:
        _, last = _mine(rec, me)
        assert last["model_failures"] == 0 and last["simulations"] > 0
        assert last["online_inference_accuracy"] == 1.0 and last["online_transition_accuracy"] == 1.0


async def _against_random(nc: Any, cwm: Strategy, deadline_ms: int) -> tuple[str, MatchRecord]:
    """One tic-tac-toe match, `cwm` in seat 0 against `random`; the cwm agent is closed after."""
    me, rnd = uid("cwm"), uid("rnd")
    try:
        async with serving(nc, cwm, me), serving(nc, RandomStrategy.from_options({"seed": 4}), rnd):
            return me, await play(nc, spec("tic_tac_toe", [me, rnd], seed=5, deadline_ms=deadline_ms))
    finally:
        await cwm.close()


async def test_broken_model_still_answers_legally(nc, tmp_path):
    write_reference_dir(tmp_path, "tic_tac_toe")
    model = tmp_path / "model.py"
    # Runs at load, then loops forever in every step: each search times out inside the sandbox.
    model.write_text(
        model.read_text() + "\ndef apply_action(state, action):\n    while True:\n        pass\n"
    )
    cwm = CwmStrategy.from_options({"model": str(tmp_path), "simulations": 50, "rollouts": 1, "seed": 2})
    me, rec = await _against_random(nc, cwm, 1500)
    mine, stats = _mine(rec, me)
    assert stats["model_failures"] == len(mine)
    assert stats["online_transition_accuracy"] == 0.0
    assert "model failed" in (mine[0].note or "")


async def test_forfeit_on_model_error(nc, tmp_path):
    """The paper's player forfeits when it gives no valid action: with `forfeit_on_model_error`
    a failing model answers no action and the referee's forfeit policy ends the match."""
    write_reference_dir(tmp_path, "tic_tac_toe")
    model = tmp_path / "model.py"
    model.write_text(model.read_text() + "\ndef get_legal_actions(state):\n    raise RuntimeError('lost')\n")
    opts = {
        "model": str(tmp_path),
        "simulations": 20,
        "rollouts": 1,
        "seed": 2,
        "forfeit_on_model_error": True,
    }
    _, rec = await _against_random(nc, CwmStrategy.from_options(opts), 3000)
    assert rec.forfeited == [0] and rec.moves == []
    assert rec.returns[0] < rec.returns[1]


def _agent(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "agents", "cwm", "--name", "x", "--check", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_missing_or_corrupt_model_dir_exit_2(tmp_path):
    missing = _agent("--model", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "nope: no such folder" in missing.stderr
    empty = _agent("--model", str(tmp_path))
    assert empty.returncode == 2 and "meta.json: missing" in empty.stderr
    (tmp_path / "meta.json").write_text("{not json")
    bad = _agent("--model", str(tmp_path))
    assert bad.returncode == 2 and "meta.json: not valid JSON" in bad.stderr
    write_reference_dir(tmp_path, "tic_tac_toe")
    (tmp_path / "model.py").unlink()
    nomodel = _agent("--model", str(tmp_path))
    assert nomodel.returncode == 2 and "model.py: missing" in nomodel.stderr
    meta = json.loads((tmp_path / "meta.json").read_text())
    meta["num_players"] = "two"
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    wrong = _agent("--model", str(tmp_path))
    assert wrong.returncode == 2 and "'num_players' is missing or invalid" in wrong.stderr
    write_reference_dir(tmp_path, "tic_tac_toe")
    assert _agent("--model", str(tmp_path)).returncode == 0
    assert _agent("--model", str(tmp_path), "--games", "tic_tac_toe").returncode == 0
    other = _agent("--model", str(tmp_path), "--games", "tic_tac_toe,connect_four")
    assert other.returncode == 2 and "plays only tic_tac_toe, not connect_four" in other.stderr


def test_example_tournament_names_the_missing_model_folder(tmp_path):
    """`spielbus run examples/cwm.toml` before the model folder exists: exit 2, nothing started."""
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "spielbus.cli", "run", str(REPO / "examples" / "cwm.toml")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "runs/cwm/tic_tac_toe: no such folder" in proc.stdout + proc.stderr


async def test_value_function_on_and_off(tmp_path):
    """With `value_function` on, leaves are valued by the folder's chosen value function (here one
    that prefers one corner), so a one-simulation-per-move search still plays it; off, rollouts."""
    from agents.base import MatchContext
    from bus.protocol import GameSpec, LegalAction, Turn

    write_reference_dir(tmp_path, "tic_tac_toe")
    (tmp_path / "value_0.py").write_text(
        "def value_function(state, player_id):\n"
        "    mine = 'x' if player_id == 0 else 'o'\n"
        "    return 1.0 if mine + '(2,0)' in state['history'] else -1.0\n"
    )
    meta = json.loads((tmp_path / "meta.json").read_text())
    meta["value_function"] = "value_0"
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    legal = [LegalAction(id=3 * r + c, text=f"x({r},{c})") for r in range(3) for c in range(3)]
    turn = Turn(match_id="m", game=GameSpec(name="tic_tac_toe"), seat=0, seats=["a", "b"], turn=0,
                deadline_ms=20000, observation="...\n...\n...", legal_actions=legal, state=[])  # fmt: skip
    for on in (True, False):
        cwm = CwmStrategy.from_options(
            {"model": str(tmp_path), "simulations": 30, "rollouts": 1, "seed": 5, "value_function": on}
        )
        try:
            d = await cwm.decide(turn, MatchContext("m"))
        finally:
            await cwm.close()
        assert d.stats is not None
        stats = d.stats.model_dump()
        assert stats["model_failures"] == 0 and stats["online_transition_accuracy"] == 1.0
        if on:
            assert d.action == 6  # x(2,0): the only move the value function rates


@pytest.mark.parametrize("example", ["cwm.toml", "cwm_leduc.toml"])
def test_paper_examples_search_alike_and_forfeit(example: str):
    """GT-MCTS and CWM-MCTS run the same search in the paper's examples (the same simulations,
    rollouts and UCT constant; no solver on either), and the cwm agent forfeits on a model error."""
    import tomllib

    from agents.mcts_agent import MctsOptions

    agents = tomllib.loads((REPO / "examples" / example).read_text())["agents"]
    cwm, gt = agents["cwm"]["options"], agents["gt_mcts"]["options"]
    cwm_opts = CwmStrategy.Options.model_fields
    gt_opts = MctsOptions.model_validate(gt)
    for key in ("simulations", "rollouts", "uct_c"):
        assert cwm.get(key, cwm_opts[key].default) == getattr(gt_opts, key)
    assert gt_opts.solve is False
    assert cwm["forfeit_on_model_error"] is True
