"""`spielbus run --workers 2` plays the tournament with two `spielbus referee` processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_cli import SMALL, _records, _run


@pytest.mark.slow
def test_two_referee_processes_play_every_match(tmp_path: Path) -> None:
    cfg = tmp_path / "small.toml"
    cfg.write_text(
        SMALL.format(name="workers2", ext="").replace("games_per_pairing = 1", "games_per_pairing = 2")
    )
    runs = tmp_path / "runs"
    out = _run(["run", str(cfg), "--workers", "2", "--run-dir", str(runs), "--quiet"])
    assert out.returncode == 0, out.stdout + out.stderr
    records = _records(runs)
    assert len(records) == 4 and all(r["outcome"] in ("decisive", "draw") for r in records)
    (folder,) = [p for p in runs.iterdir() if p.is_dir()]
    logs = sorted((folder / "logs").glob("referee-*.log"))
    assert [p.name for p in logs] == ["referee-0.log", "referee-1.log"]
    for log in logs:  # each child started as a referee worker and stopped without a traceback
        text = log.read_text()
        assert "referee worker on" in text and "Traceback" not in text, text
