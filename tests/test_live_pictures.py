"""Board pictures, head-to-head matrix and rating chart of the live page, in the real headless
Chromium: real matches through the referee feed a `MatchFeed`, the page draws what it serves."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from agents.base import StrategyOptions
from agents.random_agent import FirstLegalStrategy, RandomStrategy
from bus.protocol import GameSpec, MatchEvent
from observability.web.app import make_app
from observability.web.feed import MatchFeed
from referee.match import MatchRunner
from tests.helpers import serving, spec, uid
from tests.test_live_page import CHROMIUM_ARGS, ROOT, _chromium

FEN = "r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 4 4"


@pytest.mark.slow
async def test_pictures_in_headless_chromium(nc, tmp_path: Path) -> None:
    chromium = _chromium()
    from playwright.async_api import async_playwright

    a, b = uid("pa"), uid("pb")
    feed = MatchFeed()
    partial: list[MatchEvent] = []

    async def sink(ev: MatchEvent) -> None:
        feed.apply(ev)

    async def poker_sink(ev: MatchEvent) -> None:
        feed.apply(ev)
        # The same match, frozen after the deal: what a spectator sees while it is played.
        if not any(e.type == "moved" and e.move and e.move.player >= 0 for e in partial):
            partial.append(ev.model_copy(update={"match_id": "kuhn-playing"}))

    games = {
        "chess": spec(GameSpec(name="chess", params={"fen": FEN}), [a, b], max_turns=6),
        "go": spec("go(board_size=5,komi=0.5)", [a, b], max_turns=12),
        "connect_four": spec("connect_four", [a, b]),
        "tic_tac_toe": spec("tic_tac_toe", [b, a]),
    }
    async with (
        serving(nc, RandomStrategy(StrategyOptions(seed=1)), a),
        serving(nc, FirstLegalStrategy(StrategyOptions()), b),
    ):
        records = {g: await MatchRunner(nc, s, publish_event=sink).run() for g, s in games.items()}
        kuhn = await MatchRunner(nc, spec("kuhn_poker", [a, b]), publish_event=poker_sink).run()
    for ev in partial:
        if ev.type != "ended":
            feed.apply(ev)
    server = TestServer(make_app(feed))
    await server.start_server()
    url = str(server.make_url("/"))
    try:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            page = await browser.new_page(viewport={"width": 1280, "height": 1000})

            async def show(match_id: str, game: str) -> str:
                # A fresh load each time: changing only the hash keeps the document, and the
                # previous match's picture (same game) would satisfy the wait below at once.
                await page.goto("about:blank")
                await page.goto(f"{url}#match={match_id}")
                await page.wait_for_selector(f"#picture svg[data-game={game}]", timeout=30_000)
                return match_id

            await show(games["chess"].match_id, "chess")
            fen = feed.matches[games["chess"].match_id].observation or ""
            pieces = sum(c.isalpha() for c in fen.split()[0])
            assert await page.locator("#picture text.piece").count() == pieces
            assert await page.get_attribute("#picture svg", "data-pieces") == str(pieces)
            await _shot(page, tmp_path, "live-chess.png")

            await show(games["go"].match_id, "go")
            board = feed.matches[games["go"].match_id].observation or ""
            rows = [
                ln.split()[1]
                for ln in board.splitlines()
                if ln.strip()[:1].isdigit() and len(ln.split()) == 2
            ]
            assert await page.locator("#picture circle.stone").count() == sum(
                r.count("X") + r.count("O") for r in rows
            )

            for g in ("connect_four", "tic_tac_toe"):
                await show(games[g].match_id, g)
                marks = len(records[g].moves)
                assert await page.locator("#picture .mark").count() == marks

            # A finished match, stepped through move by move, the board drawn at each step.
            marks = len(records["tic_tac_toe"].moves)
            await page.wait_for_selector("#stepper:not([hidden])", timeout=30_000)

            async def at(k: int) -> None:
                await page.wait_for_function(
                    f"document.querySelectorAll('#picture .mark').length === {k}", timeout=30_000
                )
                assert await page.locator("#step-label").inner_text() == f"move {k} of {marks}"

            await page.click("#step-first")
            await at(0)
            await page.click("#step-next")
            await at(1)
            await page.keyboard.press("ArrowRight")
            await at(2)
            assert await page.locator("#moves tr.current").count() == 1
            await page.locator("#moves tr.move").nth(marks - 2).click()  # a row jumps to its move
            await at(marks - 1)
            await page.click("#step-last")
            await at(marks)
            await _shot(page, tmp_path, "live-stepper.png")

            await show(kuhn.match_id, "kuhn_poker")
            assert await page.locator("#picture rect.card.up").count() == 2
            await show("kuhn-playing", "kuhn_poker")
            assert await page.locator("#picture rect.card.down").count() == 2
            assert await page.locator("#picture rect.card.up").count() == 0

            # Head to head: two agents, every finished match counted once per side.
            await page.wait_for_selector("#h2h tbody tr")
            assert await page.locator("#h2h tbody tr").count() == 2
            cells = await page.locator("#h2h tbody td:not(.self)").all_inner_texts()
            assert sum(int(c.split("/")[1]) for c in cells) == 2 * 5
            # The chart draws the tournament's Elo as the feed computes it (asked by the page).
            await page.wait_for_selector("#rating-chart circle.latest", timeout=30_000)
            assert await page.locator("#rating-chart polyline.series").count() == 2
            # Its latest values are the standings' Elo column: one ratings computation, not a
            # replay of its own (before issue 26 the page drew a K = 32 Elo of its own).
            await page.wait_for_selector("#standings tbody tr")
            rows = await page.locator("#standings tbody tr").evaluate_all(
                "rs => rs.map(r => [...r.children].map(c => c.textContent))"
            )
            elo = {r[0]: float(r[-1]) for r in rows}
            legend = await page.locator("#rating-chart .legend").all_inner_texts()
            assert len(legend) == len(elo) == 2
            for item in legend:
                _, agent, value = item.split()
                assert abs(elo[agent] - float(value)) <= 0.5 + 1e-9, (agent, elo, legend)
            await _shot(page, tmp_path, "live-h2h.png")
            await browser.close()
    finally:
        await server.close()


async def _shot(page, tmp_path: Path, name: str) -> None:
    shot = tmp_path / name
    await page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    if os.environ.get("SPIELBUS_DOC_SCREENSHOTS"):
        shutil.copy(shot, ROOT / "docs" / "img" / name)
