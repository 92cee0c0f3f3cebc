"""The live match page: its feed keeps private steps hidden until a match ends, its JSON API, and
the real page in a real headless Chromium (Debian's `chromium`, driven by Playwright) during a
running `spielbus run`, with a screenshot."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from agents.base import StrategyOptions
from agents.random_agent import RandomStrategy
from bus.protocol import MatchEvent
from bus.subjects import Subjects
from observability.web.app import make_app
from observability.web.feed import MatchFeed
from referee.match import MatchRunner
from referee.worker import EventPublisher
from tests.helpers import serving, spec, spielbus_process, uid

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


async def test_private_steps_stay_hidden_until_the_end(nc) -> None:
    a, b = uid("pa"), uid("pb")
    feed = MatchFeed()
    leaks: list[str] = []
    match = spec("phantom_ttt", [a, b])

    async def sink(ev: MatchEvent) -> None:
        feed.apply(ev)
        view = feed.matches[match.match_id]
        if view.status == "playing":
            for step in view.steps:
                if step.hidden and step.text != "(hidden)":
                    leaks.append(step.text)

    async with (
        serving(nc, RandomStrategy(StrategyOptions(seed=4)), a),
        serving(nc, RandomStrategy(StrategyOptions(seed=5)), b),
    ):
        rec = await MatchRunner(nc, match, publish_event=sink).run()
    assert not leaks
    view = feed.matches[match.match_id]
    assert view.status == "ended" and view.outcome == rec.outcome
    # After the end the record reveals every step.
    assert [s.text for s in view.steps] == [m.text for m in rec.moves]
    assert not any(s.hidden for s in view.steps)
    table = feed.table()
    assert table is not None and {s.agent for s in table.standings} == {a, b}


async def test_json_api_follows_the_stream(nc) -> None:
    """The feed replays `SPIELBUS_MATCHES` from the bus; the API serves what it holds."""
    a, b = uid("ja"), uid("jb")
    publisher = EventPublisher(nc, Subjects())
    feed = MatchFeed(ratings_every=0.05)
    await feed.follow(nc)  # creates the streams if this is the first user of the bus
    match = spec("tic_tac_toe", [a, b])
    async with (
        serving(nc, RandomStrategy(StrategyOptions(seed=6)), a),
        serving(nc, RandomStrategy(StrategyOptions(seed=7)), b),
    ):
        rec = await MatchRunner(nc, match, publish_event=publisher).run()
    client = TestClient(TestServer(make_app(feed)))
    await client.start_server()
    try:
        # The `ended` event is stored in the stream; the replay reaches it.
        for _ in range(200):
            if match.match_id in feed.matches and feed.matches[match.match_id].status == "ended":
                break
            await asyncio.sleep(0.05)
        listing = await (await client.get("/api/matches?tournament=test")).json()
        assert match.match_id in {m["match_id"] for m in listing["matches"]}
        one = await (await client.get(f"/api/matches/{match.match_id}")).json()
        assert one["status"] == "ended" and len(one["steps"]) == len(rec.moves)
        assert one["clocks"][0]["agent"] == a
        assert (await client.get("/api/matches/nope")).status == 404
        await feed.rate_now()
        table = await (await client.get("/api/standings?tournament=test")).json()
        assert {r["agent"] for r in table["ratings"]} >= {a, b}
        page = await (await client.get("/")).text()
        assert "Spielbus live" in page
    finally:
        await client.close()
        await feed.close()


LONG = """
name = "livepage"
games_per_pairing = 1
concurrency = 1
deadline_ms = 20000
seed = 9
[[games]]
name = "connect_four"
[agents.deep]
kind = "mcts"
options = {{ simulations = {sims}, rollouts = 4 }}
[agents.shallow]
kind = "mcts"
options = {{ simulations = {sims}, rollouts = 4 }}
"""


def _chromium() -> str:
    if not os.path.exists(CHROMIUM):
        if os.geteuid() != 0 or not shutil.which("apt-get"):
            pytest.skip("chromium is missing and `make system-deps` cannot install it here (not root/apt)")
        pytest.fail(f"{CHROMIUM} is missing: run `make system-deps` (installs Debian's chromium)")
    return CHROMIUM


@pytest.mark.slow
def test_live_page_in_headless_chromium(tmp_path: Path) -> None:
    chromium = _chromium()
    from playwright.sync_api import sync_playwright

    cfg = tmp_path / "live.toml"
    # Enough search per move (tens of milliseconds or more) that a match is still being played
    # while the browser opens the page and a new move arrives.
    cfg.write_text(LONG.format(sims=20_000))
    proc = spielbus_process(
        *("run", str(cfg), "--run-dir", str(tmp_path / "runs")),
        *("--web-port", "0", "--metrics-port", "off", "--quiet"),
    )
    try:
        assert proc.stdout is not None
        url = None
        for line in proc.stdout:
            m = re.search(r"Live match page: (http://\S+)", line)
            if m:
                url = m.group(1)
                break
        assert url, "spielbus run did not print where the live page is"
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(url)
                page.wait_for_selector("tr.match:has(td.playing)", timeout=120_000)
                page.locator("tr.match:has(td.playing)").first.click()
                page.wait_for_selector("#moves tr.move", timeout=60_000)
                last_row = (
                    "() => { const rows = document.querySelectorAll('#moves tr.move');"
                    " const cells = rows[rows.length - 1].querySelectorAll('td');"
                    " return [rows.length, Number(cells[0].innerText), cells[2].innerText,"
                    " document.querySelector('#last-move').innerText]; }"
                )
                n, turn_before, _, _ = page.evaluate(last_row)
                # A move played after the page was opened shows up without a reload.
                page.wait_for_function(
                    f"document.querySelectorAll('#moves tr.move').length > {n}", timeout=120_000
                )
                # One snapshot (the page may render another move between two reads). The same
                # move text can come again (connect four's centre column), so compare turn numbers.
                _, turn_after, move_text, last_move = page.evaluate(last_row)
                assert turn_after > turn_before
                assert last_move.endswith(": " + move_text)
                board = page.locator("#board").inner_text()
                assert board.strip() and board != "(no public board)"
                assert "connect_four" in page.locator("#match-title").inner_text()
                assert page.locator("#clocks tbody tr").count() == 2
                shot = tmp_path / "live-page.png"
                page.screenshot(path=str(shot), full_page=True)
                assert shot.stat().st_size > 10_000
                if os.environ.get("SPIELBUS_DOC_SCREENSHOTS"):
                    (ROOT / "docs" / "img").mkdir(parents=True, exist_ok=True)
                    shutil.copy(shot, ROOT / "docs" / "img" / "live-page.png")
            finally:
                browser.close()
    finally:
        # SIGINT: the run stops its agents and the embedded server on the way out.
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
