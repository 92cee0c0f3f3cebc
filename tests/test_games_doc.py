"""docs/games.md's examples are what a bot really receives: each game's match is played again through
the real referee on the session's nats-server, and the page must hold exactly the blocks it renders
(scripts/games_doc.py)."""

from __future__ import annotations

import json

import pytest

from scripts.games_doc import DOC, EXAMPLES, Capture, capture, render_all, render_json, splice, stale


@pytest.mark.slow
async def test_every_example_in_docs_games_is_rendered_from_a_real_match(nc) -> None:
    blocks = await render_all(nc)
    assert set(blocks) == {ex.key for ex in EXAMPLES}
    bad = stale(DOC.read_text(encoding="utf-8"), blocks)
    assert not bad, f"docs/games.md is out of date for {bad}: run scripts/games_doc.py"


async def test_the_captured_turn_is_the_referees_own_bytes(nc) -> None:
    """The example bot records turns as they arrive on the bus: the chess example's third turn is
    white's second move after 1. f3 e5, with `state` the ids played and the FEN as observation."""
    ex = next(e for e in EXAMPLES if e.key == "chess")
    got: Capture = await capture(nc, ex)
    turn = got.turns[2]
    assert turn["seat"] == 1 and [h["text"] for h in turn["history"]] == ["f3", "e5"]
    assert turn["state"] == [h["action"] for h in turn["history"]]
    assert turn["observation"].startswith("rnbqkbnr/pppp1ppp/8/4p3/8/5P2/")
    assert {"id": 3594, "text": "g4"} in turn["legal_actions"]
    assert got.ended[0]["returns"] == [1.0, -1.0] and got.ended[0]["outcome"] == "decisive"


def test_a_changed_text_makes_the_page_stale() -> None:
    """The check compares whole blocks: one changed byte in a block is reported by its key."""
    text = DOC.read_text(encoding="utf-8")
    blocks = {"tic_tac_toe": "<!-- games_doc: tic_tac_toe -->\nchanged\n<!-- /games_doc -->"}
    assert stale(text, blocks) == ["tic_tac_toe"]
    fixed = splice(text, blocks)
    assert stale(fixed, blocks) == []
    assert fixed.count("<!-- games_doc: ") == text.count("<!-- games_doc: ")
    with pytest.raises(KeyError):
        splice(text, {"no_such_game": "x"})


def test_long_lists_are_cut_saying_how_many_were_left_out() -> None:
    shown = json.loads(render_json({"legal_actions": [{"id": i, "text": str(i)} for i in range(100)]}))
    cut = shown["legal_actions"]
    assert cut[:10] == [{"id": i, "text": str(i)} for i in range(10)]
    assert cut[-1] == "... 90 more entries, not shown here"
