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
from referee.config import parse_config
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
