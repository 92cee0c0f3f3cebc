"""The human seat's page in the real headless Chromium: a person clicks the drawn board, the
referee records the move. Real nats-server, real referee, the `human` agent served by the runtime."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from nats.aio.client import Client as NATS

from agents.base import StrategyOptions
from agents.human import HumanOptions, HumanStrategy
from agents.random_agent import FirstLegalStrategy
from tests.helpers import play, serving, spec, uid
from tests.test_live_page import CHROMIUM_ARGS, ROOT, _chromium


@pytest.mark.slow
async def test_a_person_clicks_the_board(nc: NATS) -> None:
    chromium = _chromium()
    from playwright.async_api import async_playwright

    me, bot = uid("human"), uid("first")
    strategy = HumanStrategy(HumanOptions())
    async with (
        serving(nc, strategy, me),
        serving(nc, FirstLegalStrategy(StrategyOptions()), bot),
        async_playwright() as pw,
    ):
        assert strategy.server is not None
        browser = await pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 1000})
            # Without the token: the login form, nothing of the seat.
            await page.goto(strategy.server.url)
            await page.wait_for_selector("#login", state="visible", timeout=30_000)
            assert await page.locator("#play").is_hidden()

            await page.goto(strategy.server.private_url)

            async def clicked(game: Any, seats: list[str], cells: list[str]) -> Any:
                match = asyncio.create_task(play(nc, spec(game, seats, deadline_ms=60_000, max_turns=2)))
                for i, cell in enumerate(cells):
                    target = f'#picture [data-cell="{cell}"]'
                    if game == "chess" and i == 0:
                        # The seat's own pawns are drawn at the bottom, whichever its colour. The
                        # previous match's board (the other colour) may still be up: wait for this
                        # match's, and a page that never turns the board for Black times out here.
                        await page.wait_for_selector(f'{target}[y="240"]', timeout=30_000)
                        if os.environ.get("SPIELBUS_DOC_SCREENSHOTS") and seats[1] == me:
                            shot = ROOT / "docs" / "img" / "seat-page.png"
                            await page.screenshot(path=str(shot), full_page=True)
                    await page.click(target, timeout=30_000)
                await page.wait_for_selector("text=You played", timeout=30_000)
                return await match

            # Kuhn poker: the seat's own card face up, the other face down; the move typed, Enter.
            kuhn_task = asyncio.create_task(play(nc, spec("kuhn_poker", [me, bot], deadline_ms=60_000)))
            await page.wait_for_selector("#picture rect.card.up", timeout=30_000)
            assert await page.locator("#picture rect.card.up").count() == 1
            assert await page.locator("#picture rect.card.down").count() == 1
            await page.fill("#filter", "bet")
            await page.press("#filter", "Enter")
            kuhn = await kuhn_task

            # Tic-tac-toe: one click on the centre.
            ttt = await clicked("tic_tac_toe", [me, bot], ["1,1"])
            # Chess (OpenSpiel seats black first, so white is seat 1): from-square, then to-square.
            chess = await clicked("chess", [bot, me], ["e2", "e4"])
            black = await clicked("chess", [me, bot], ["e7", "e5"])  # `first` opens as White
        finally:
            await browser.close()
    mine = [m for m in kuhn.moves if m.agent == me]
    assert not kuhn.faults and mine[0].text == "Bet"
    assert not ttt.faults and ttt.moves[0].agent == me and ttt.moves[0].text == "x(1,1)"
    assert not chess.faults and chess.moves[0].agent == me and chess.moves[0].text == "e4"
    assert not black.faults and black.moves[1].agent == me and black.moves[1].text == "e5"
