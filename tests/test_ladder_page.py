"""The ladder's leaderboard on the live page, in a real headless Chromium: `spielbus ladder FILE.toml
--web-port 0` as a process, two agents and a bot that answers garbage (benched after one faulted
match), a referee worker and `spielbus analyst`, whose `analysis.jsonl` the ladder reads
(`--analysis`); the page shows each entry's games, rating, interval, move quality (accuracy, mean
loss, blunders per 100 moves, each with its 95% interval) and the bench reason, and its Prometheus
endpoint the series per entry. The leaderboard is the page's focus: at 1024, 1280
and 1920 px every column's right edge is inside the viewport (measured, beside screenshots), the
live matches are beside it, it sorts by a column's heading and has a tab per game."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nats.micro import add_service
from nats.micro.service import ServiceConfig

from agents.random_agent import RandomStrategy
from bus.connect import connect
from bus.process import stop_process
from bus.server import EmbeddedNats
from referee.worker import RefereeWorker
from tests.helpers import raw_responder, serving, spielbus_process, uid
from tests.test_live_page import CHROMIUM_ARGS, _chromium


def _read_urls(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """The page's and the metrics' addresses, as the ladder prints them at start."""
    assert proc.stdout is not None
    page = metrics = None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if m := re.search(r"Live match page: (http://\S+)", line):
            page = m.group(1)
        if m := re.search(r"Prometheus metrics: (http://\S+)", line):
            metrics = m.group(1)
        if page and metrics:
            return page, metrics
    raise AssertionError("the ladder did not print its addresses:\n" + "".join(seen[-30:]))


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return str(resp.read().decode())


# Every leaderboard cell's right edge, the viewport's width, and whether the table or its section
# clip it: what a person at that width sees, not just that a screenshot was taken.
_MEASURE = """() => {
  const vw = document.documentElement.clientWidth;
  const box = document.getElementById("ladder-box").getBoundingClientRect();
  const cells = [...document.querySelectorAll("#ladder th, #ladder tr.ladder-entry td")]
    .filter(c => getComputedStyle(c).display !== "none");
  return { vw, box: box.right, scroll: document.documentElement.scrollWidth,
           right: Math.max(...cells.map(c => c.getBoundingClientRect().right)),
           heads: [...document.querySelectorAll("#ladder th")]
             .filter(c => getComputedStyle(c).display !== "none").map(c => c.innerText.trim()),
           live: document.getElementById("ladder-live-box").getBoundingClientRect().toJSON(),
           top: document.getElementById("ladder-top").getBoundingClientRect().top };
}"""

_ROWS = (
    "() => [...document.querySelectorAll('#ladder tr.ladder-entry')]"
    ".map(r => [...r.cells].filter(c => getComputedStyle(c).display !== 'none').map(c => c.innerText))"
)


def _browse(url: str, bad: str, tmp: Path) -> tuple[list[list[str]], dict[int, Any], list[str]]:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(url)
            page.wait_for_selector("#ladder-top:not([hidden]) tr.ladder-entry", timeout=120_000)
            # Both good entries rated with games, and the garbage bot benched with its reason.
            try:
                page.wait_for_function(
                    "() => [...document.querySelectorAll('#ladder tr.ladder-entry')]"
                    f".some(r => r.innerText.includes('{bad}') && r.innerText.includes('benched'))"
                    " && [...document.querySelectorAll('#ladder tr.ladder-entry')]"
                    ".filter(r => Number(r.cells[2].innerText) > 0 && r.cells[4].innerText.includes('..')"
                    " && /\\d\\n\\d/.test(r.cells[5].innerText))"
                    ".length >= 2",
                    timeout=120_000,
                )
            except PlaywrightTimeout:
                # Which part never came (a rating, an interval, the scores, the bench) is in the rows.
                raise AssertionError(f"the leaderboard never filled in: {page.evaluate(_ROWS)}") from None
            rows: list[list[str]] = page.evaluate(_ROWS)
            measured = {}
            for width in (1280, 1920, 1024):
                page.set_viewport_size({"width": width, "height": 900})
                page.wait_for_timeout(300)  # a refresh at the new width
                page.screenshot(path=str(tmp / f"ladder-{width}.png"), full_page=True)
                measured[width] = page.evaluate(_MEASURE)
            page.set_viewport_size({"width": 1280, "height": 900})
            # Sortable: games, most first; a second click reverses; entry, alphabetically.
            page.click("#ladder th[data-key=games]")
            games = [int(r[2]) for r in page.evaluate(_ROWS)]
            assert games == sorted(games, reverse=True), games
            page.click("#ladder th[data-key=games]")
            games = [int(r[2]) for r in page.evaluate(_ROWS)]
            assert games == sorted(games), games
            page.click("#ladder th[data-key=entry]")
            entries = [r[1] for r in page.evaluate(_ROWS)]
            assert entries == sorted(entries), entries
            # Per game: a tab per game of the ladder file, each its own table.
            tabs = page.eval_on_selector_all("#ladder-games button", "bs => bs.map(b => b.innerText)")
            page.click("#ladder-games button >> nth=1")
            page.wait_for_function(
                "() => document.querySelector('#ladder-games button[aria-selected=true]').innerText"
                f" === {tabs[1]!r}"
            )
            return rows, measured, tabs
        finally:
            browser.close()


@pytest.fixture
def own_nats_url() -> Iterator[str]:
    """A server of this test's own: on the session's shared one the ladder's live box showed the
    matches of tests running beside it (a worker's other files), whose rows widened the page."""
    with EmbeddedNats() as srv:
        yield srv.url


@pytest.mark.slow
async def test_leaderboard_in_headless_chromium(own_nats_url: str, tmp_path: Path) -> None:
    nats_url = own_nats_url
    _chromium()
    a, b, bad = uid("pa"), uid("pb"), uid("px")
    cfg = tmp_path / "ladder.toml"
    cfg.write_text(
        f'name = "{uid("lp")}"\nbucket = "{uid("LPAGE").replace("-", "_")}"\nprobe_s = 0.5\n'
        # One faulted match benches an entry for 600 s (the garbage bot's first); the clock is long
        # enough that a good bot on a loaded machine does not time out into the bench as well.
        "concurrency = 2\ndeadline_ms = 10000\n[quarantine]\nlimit = 1\nbackoff_s = 600\n"
        f'[[games]]\nname = "tic_tac_toe"\n[[games]]\nname = "kuhn_poker"\n'
        f"[agents.{a}]\n[agents.{b}]\n[agents.{bad}]\n"
    )
    nc = await connect(nats_url, name="ladder-page")
    scored = tmp_path / "analysis"
    proc = spielbus_process(
        "ladder",
        str(cfg),
        "--nats",
        nats_url,
        "--web-port",
        "0",
        "--metrics-port",
        "0",
        "--analysis",
        str(scored),
    )
    analyst = None

    async def garbage(turn: object, msg: object) -> bytes:
        return b"{not json"

    worker = RefereeWorker(nc, concurrency=4, absent_limit_s=2.0)
    wt = asyncio.create_task(worker.run())
    svc = await add_service(nc, ServiceConfig(name=bad, version="1.0.0", metadata={"kind": "garbage"}))
    try:
        async with (
            serving(nc, RandomStrategy.from_options({"seed": 1}), a),
            serving(nc, RandomStrategy.from_options({"seed": 2}), b),
            raw_responder(nc, bad, garbage),
        ):
            page, metrics = await asyncio.to_thread(_read_urls, proc)
            # Exact tic-tac-toe and CFR+ Kuhn: both references score a match in well under a second.
            analyst = spielbus_process("analyst", "--nats", nats_url, "--out", str(scored), "--no-live")
            threading.Thread(target=analyst.communicate, daemon=True).start()  # drain its output
            rows, measured, tabs = await asyncio.to_thread(_browse, page, bad, tmp_path)
            text = await asyncio.to_thread(_scrape, metrics)
        by_name = {r[1].split("@")[0]: r for r in rows}
        assert set(by_name) == {a, b, bad}
        assert "faulted matches in a row" in by_name[bad][9]
        assert tabs == ["kuhn_poker", "tic_tac_toe"] or tabs == ["tic_tac_toe", "kuhn_poker"]
        for name in (a, b):
            assert re.fullmatch(r"-?\d+ \.\. -?\d+", by_name[name][4])
            # Accuracy, mean loss, blunders per 100: the figure over its interval, lo <= it <= hi.
            for cell, digits in zip(by_name[name][5:8], (1, 3, 1), strict=True):
                m = re.fullmatch(rf"(\d+\.\d{{{digits}}})\n(\d+\.\d+)\u2013(\d+\.\d+)", cell)
                assert m and float(m[2]) <= float(m[1]) <= float(m[3]), (name, cell)
            assert f'spielbus_ladder_games{{entry="{by_name[name][1]}",game="tic_tac_toe"}}' in text
        heads = [
            "#",
            "entry",
            "games",
            "BT",
            "95% interval",
            "accuracy",
            "loss",
            "blunders",
            "budget",
            "status",
        ]
        for width, m in measured.items():
            # Every column, the interval, the move quality and the status included, within the
            # viewport and the section (issue 41: the table clipped its own status, budget and mu
            # columns at 1400 px).
            assert [h.rstrip(" \u25b2\u25bc") for h in m["heads"]] == heads, (width, m)
            assert m["right"] <= m["box"] <= m["vw"] == width and m["scroll"] <= width, (width, m)
            assert m["top"] < 100, m  # the leaderboard first, under the header
            if width >= 1280:  # the live matches beside it, not under it
                assert m["live"]["left"] >= m["right"] and m["live"]["right"] <= width, (width, m)
        assert all((tmp_path / f"ladder-{w}.png").stat().st_size > 10_000 for w in measured)
        assert "spielbus_ladder_rating_bt_low{" in text
        proc.send_signal(signal.SIGINT)
        out, _ = await asyncio.to_thread(proc.communicate, None, 60)
        assert proc.returncode == 0, out
    finally:
        await svc.stop()
        worker.stop()
        await asyncio.wait_for(wt, 60)
        stop_process(proc)
        stop_process(analyst)
        await nc.drain()
