"""The ladder's leaderboard on the live page, in a real headless Chromium: `spielbus ladder FILE.toml
--web-port 0` as a process, two agents and a bot that answers garbage (benched after one faulted
match), a referee worker; the page shows each entry's games, rating, interval and the bench reason,
and its Prometheus endpoint the series per entry."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest
from nats.micro import add_service
from nats.micro.service import ServiceConfig

from agents.random_agent import RandomStrategy
from bus.connect import connect
from bus.process import stop_process
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


def _browse(url: str, bad: str, tmp: Path) -> list[list[str]]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(url)
            page.wait_for_selector("#ladder-box:not([hidden]) tr.ladder-entry", timeout=120_000)
            # Both good entries rated with games, and the garbage bot benched with its reason.
            page.wait_for_function(
                "() => [...document.querySelectorAll('#ladder tr.ladder-entry')]"
                f".some(r => r.innerText.includes('{bad}') && r.innerText.includes('benched'))"
                " && [...document.querySelectorAll('#ladder tr.ladder-entry')]"
                ".filter(r => Number(r.cells[2].innerText) > 0 && r.cells[4].innerText.includes('..'))"
                ".length >= 2",
                timeout=120_000,
            )
            page.screenshot(path=str(tmp / "ladder-page.png"), full_page=True)
            rows: list[list[str]] = page.evaluate(
                "() => [...document.querySelectorAll('#ladder tr.ladder-entry')]"
                ".map(r => [...r.cells].map(c => c.innerText))"
            )
            return rows
        finally:
            browser.close()


@pytest.mark.slow
async def test_leaderboard_in_headless_chromium(nats_url: str, tmp_path: Path) -> None:
    _chromium()
    a, b, bad = uid("pa"), uid("pb"), uid("px")
    cfg = tmp_path / "ladder.toml"
    cfg.write_text(
        f'name = "{uid("lp")}"\nbucket = "{uid("LPAGE").replace("-", "_")}"\nprobe_s = 0.5\n'
        "concurrency = 2\ndeadline_ms = 500\n[quarantine]\nlimit = 1\nbackoff_s = 600\n"
        f'[[games]]\nname = "tic_tac_toe"\n[agents.{a}]\n[agents.{b}]\n[agents.{bad}]\n'
    )
    nc = await connect(nats_url, name="ladder-page")
    proc = spielbus_process("ladder", str(cfg), "--nats", nats_url, "--web-port", "0", "--metrics-port", "0")

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
            rows = await asyncio.to_thread(_browse, page, bad, tmp_path)
            text = await asyncio.to_thread(_scrape, metrics)
        by_name = {r[1].split("@")[0]: r for r in rows}
        assert set(by_name) == {a, b, bad}
        assert "faulted matches in a row" in by_name[bad][6]
        for name in (a, b):
            assert re.fullmatch(r"-?\d+ \.\. -?\d+", by_name[name][4])
            assert f'spielbus_ladder_games{{entry="{by_name[name][1]}",game="tic_tac_toe"}}' in text
        assert "spielbus_ladder_rating_bt_low{" in text
        proc.send_signal(signal.SIGINT)
        out, _ = await asyncio.to_thread(proc.communicate, None, 60)
        assert proc.returncode == 0, out
    finally:
        await svc.stop()
        worker.stop()
        await asyncio.wait_for(wt, 60)
        stop_process(proc)
        await nc.drain()
