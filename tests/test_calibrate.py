"""`spielbus calibrate GAME`: a real seeded round robin of random and two MCTS levels through the
referee, rated with random held at 1000; the file's numbers are the run folder's (every pairing's
results add up to its matches), and its TOML fragment is a valid tournament section that anchors a
later run on the same scale. The agreement of two runs that share anchors is
tests/test_rating_anchors.py's (seeded, a common agent rated alike within its intervals)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from bus.protocol import MatchRecord
from referee.config import load_config, parse_config
from referee.records import read_jsonl
from spielbus.calibrate import RANDOM_RATING, Calibration, main


@pytest.mark.usefixtures("nats_server")
def test_calibrate_rates_the_ladder_and_writes_its_run(nats_url: str, tmp_path: Path) -> None:
    out = tmp_path / "ttt.json"
    argv = ["tic_tac_toe", "--simulations", "5,200", "--games", "2", "--seed", "3"]
    argv += ["--run-dir", str(tmp_path / "runs"), "--out", str(out), "--nats", nats_url]
    assert main(argv) == 0
    cal = Calibration.model_validate(json.loads(out.read_text()))
    by = {a.name: a for a in cal.agents}
    assert set(by) == {"random", "mcts5", "mcts200"}
    assert by["random"].anchored and by["random"].rating == RANDOM_RATING
    assert by["random"].low == by["random"].high == RANDOM_RATING
    for a in ("mcts5", "mcts200"):
        assert not by[a].anchored and by[a].low <= by[a].rating <= by[a].high
    assert by["mcts200"].rating > RANDOM_RATING  # it beats random: above the anchor

    records = list(read_jsonl(Path(cal.run_dir) / "matches.jsonl", MatchRecord))
    assert cal.matches == len(records) == 3 * 2 * 2  # three pairings, both seat orders, 2 games each
    assert sum(p.wins + p.draws + p.losses for p in cal.pairs) == cal.matches

    # The fragment is a tournament file's sections: agents as calibrated, anchors at their ratings.
    fragment = tomllib.loads(cal.toml)
    assert fragment["ratings"]["anchors"] == {a.name: a.rating for a in cal.agents}
    assert fragment["agents"]["mcts200"] == {"kind": "mcts", "options": by["mcts200"].options}
    config = parse_config('name = "later"\n[[games]]\nname = "tic_tac_toe"\n' + cal.toml)
    assert config.ratings.anchors["mcts5"] == by["mcts5"].rating


def test_a_game_that_does_not_load_is_exit_2(tmp_path: Path) -> None:
    assert main(["no_such_game", "--out", str(tmp_path / "x.json")]) == 2
    assert not (tmp_path / "x.json").exists()


SHIPPED = Path(__file__).resolve().parent.parent / "examples" / "calibrations"


def test_shipped_chess_levels_load_as_anchors_on_stockfish_scale(tmp_path: Path) -> None:
    """examples/calibrations/chess.json needs no run: each Stockfish level held at its own UCI_Elo,
    within Debian's Stockfish 15.1 range, and its fragment loads as `[ratings] anchors` of a
    tournament that adds an agent of its own."""
    from agents.stockfish_agent import StockfishOptions

    cal = Calibration.model_validate(json.loads((SHIPPED / "chess.json").read_text()))
    assert cal.game == "chess" and cal.matches == 0 and cal.pairs == [] and len(cal.agents) >= 3
    for a in cal.agents:
        elo = StockfishOptions.model_validate(a.options).elo
        assert a.kind == "stockfish" and a.anchored and elo is not None and 1350 <= elo <= 2850
        assert a.rating == a.low == a.high == float(elo)
    f = tmp_path / "t.toml"
    f.write_text('name = "c"\n[[games]]\nname = "chess"\n[agents.mine]\nkind = "random"\n' + cal.toml)
    config = load_config(f)
    assert config.ratings.anchors == {a.name: float(a.options["elo"]) for a in cal.agents}
    assert config.agents["stockfish_elo1350"].options == {"elo": 1350}
    # The same file again from the command: only when it was written differs.
    out = tmp_path / "chess.json"
    elos = ",".join(str(a.options["elo"]) for a in cal.agents)
    assert main(["chess", "--levels-only", "--elo", elos, "--out", str(out)]) == 0
    again = Calibration.model_validate(json.loads(out.read_text()))
    assert again.model_dump(exclude={"created", "command"}) == cal.model_dump(exclude={"created", "command"})


def test_levels_only_is_for_chess(tmp_path: Path) -> None:
    assert main(["tic_tac_toe", "--levels-only", "--out", str(tmp_path / "x.json")]) == 2
    assert not (tmp_path / "x.json").exists()
