"""Every shipped tournament (and ladder: `examples/ladder*.toml`) file loads under the strict config
rules (a renamed table or a mistyped key in an example is a user's first error message, so it must
never ship)."""

from __future__ import annotations

from pathlib import Path

import pytest

from referee.config import load_config

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.toml"))


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 10


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_loads(path: Path) -> None:
    if path.name.startswith("ladder"):
        from referee.ladder.config import load_ladder
        from referee.ladder.service import check_ladder_games

        ladder = load_ladder(path)
        check_ladder_games(ladder)
        assert len(ladder.agents) >= 2
        return
    config = load_config(path)
    assert config.agents, f"{path.name} names no agents"
