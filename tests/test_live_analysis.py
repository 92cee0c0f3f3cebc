"""Live verdicts while a match runs: the analyst judges each `moved` event of a tic-tac-toe match that
has not ended, publishes a `move_verdict` per move on the bus, the live page's feed keeps them, and
the real page in headless Chromium shows the evaluation bar and each move's class.

The match's events are published here as the referee publishes them (`started` into the stream,
`moved` as plain publishes) and no `ended` follows, so every verdict seen was made while the match
was in progress. The values are the exact solver's: x in the centre draws (seat 0 at 50%), o on an
edge loses by force (a blunder; x's winning chances 100%), x's corner keeps the win."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from analysis.match import Settings
from bus.protocol import GameSpec, MatchEvent, MoveRecord
from bus.streams import ensure_streams
from bus.subjects import Subjects
from games.loader import load_game
from observability.web.app import start_web
from observability.web.feed import MatchFeed
from spielbus.analyst import serve
from tests.helpers import uid, until
from tests.test_live_page import CHROMIUM, CHROMIUM_ARGS, _chromium

S = Subjects(prefix=f"la{uid('')[-6:]}")
GAME = GameSpec(name="tic_tac_toe")


async def play_without_end(nc, match_id: str, actions: list[int], seats: list[str]) -> None:
    """`started`, then one `moved` event per action, waiting a little between moves."""
    base = {"match_id": match_id, "tournament": "live", "game": GAME, "seats": seats}
    await nc.publish(
        S.match(match_id, "started"), MatchEvent(type="started", **base).model_dump_json().encode()
    )
    state = load_game(GAME).new_initial_state()
    for i, a in enumerate(actions):
        p = state.current_player()
        move = MoveRecord(turn=i + 1, player=p, action=a, text=state.action_to_string(p, a), agent=seats[p])
        state.apply_action(a)
        event = MatchEvent(type="moved", move=move, observation=str(state), **base)
        await nc.publish(S.match(match_id, "moved"), event.model_dump_json().encode())
        await asyncio.sleep(0.2)


async def test_verdicts_arrive_while_the_match_runs(nc, tmp_path: Path) -> None:
    await ensure_streams(nc.jetstream(), S)
    feed = MatchFeed(S, replay_events=0)
    await feed.follow(nc)
    stop = asyncio.Event()
    analyst = asyncio.create_task(serve(nc, S, tmp_path / "an", Settings(), stop))
    try:
        await asyncio.sleep(0.5)  # the analyst's subscriptions are in place
        match_id = uid("m")
        await play_without_end(nc, match_id, [4, 1, 0], ["x", "o"])
        await until(lambda: len(feed.matches[match_id].verdicts) == 3, "three live verdicts", timeout_s=120)
        view = feed.matches[match_id]
        assert view.status == "playing"  # no `ended`: every verdict came while the match ran
        v = [view.verdicts[t] for t in (1, 2, 3)]
        assert [x.cls for x in v] == ["best", "blunder", "best"]
        assert [x.eval for x in v] == [0.0, 1.0, 1.0]  # seat 0's winning chances: draw, then won
        assert (
            v[1].agent == "o"
            and v[1].wc_loss == 1.0
            and v[1].best_text
            in {"x(0,0)", "x(0,2)"} | {f"o({r},{c})" for r, c in ((0, 0), (0, 2), (2, 0), (2, 2))}
        )
        assert all(x.reference == "exact" and x.exact for x in v)
        assert not (tmp_path / "an" / "analysis.jsonl").read_text()  # nothing ended, nothing stored
    finally:
        stop.set()
        await analyst
        await feed.close()


@pytest.mark.slow
async def test_live_page_shows_the_evaluation_bar_and_move_classes(nc, tmp_path: Path) -> None:
    chromium = _chromium()
    assert chromium == CHROMIUM
    from playwright.async_api import async_playwright

    await ensure_streams(nc.jetstream(), S)
    feed = MatchFeed(S, replay_events=0)
    await feed.follow(nc)
    web = await start_web(feed, 0)
    stop = asyncio.Event()
    analyst = asyncio.create_task(serve(nc, S, tmp_path / "an", Settings(), stop))
    try:
        await asyncio.sleep(0.5)
        match_id = uid("m")
        await play_without_end(nc, match_id, [4, 1, 0], ["x", "o"])
        await until(lambda: len(feed.matches[match_id].verdicts) == 3, "three live verdicts", timeout_s=120)
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            try:
                page = await browser.new_page(viewport={"width": 1280, "height": 900})
                await page.goto(f"{web.url}#match={match_id}")
                await page.wait_for_selector("#eval:not([hidden])", timeout=60_000)
                await page.wait_for_selector("#moves td.q-blunder", timeout=60_000)
                label = await page.locator("#eval-label").inner_text()
                assert label.startswith("x: 100%") and "exact" in label
                width = await page.evaluate("document.getElementById('evalfill').style.width")
                assert width == "100%"
                classes = await page.eval_on_selector_all(
                    "#moves td.quality", "tds => tds.map(t => t.innerText)"
                )
                assert classes == ["best", "blunder", "best"]
                assert "in progress" in await page.locator("#match-meta").inner_text()
            finally:
                await browser.close()
    finally:
        stop.set()
        await analyst
        await web.stop()
        await feed.close()
