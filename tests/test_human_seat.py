"""The human seat: a person plays through the referee from a web page, like any agent.

Real nats-server, real referee (`MatchRunner`), the `human` agent kind served by the runtime
with its seat page on a real port; the browser is an aiohttp client speaking the page's HTTP
API (a headless Chromium test that clicks the board is in tests/test_human_browser.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import aiohttp
import pytest
from nats.aio.client import Client as NATS

from agents.base import StrategyOptions
from agents.human import TOKEN_ENV, HumanOptions, HumanStrategy
from agents.human.clicks import click_cells
from agents.human.seat import TOKEN_HEADER, Seat
from agents.random_agent import RandomStrategy
from bus.protocol import FaultPolicy, GameSpec, LegalAction, Turn
from tests.helpers import play, serving, spec, uid


class Browser:
    """What the seat page does over HTTP: poll the seat, post a move (a stand-in for the page's
    JavaScript, speaking the same API)."""

    def __init__(self, session: aiohttp.ClientSession, url: str, token: str | None) -> None:
        self.session, self.url, self.token = session, url, token
        self.played: list[str] = []

    def headers(self) -> dict[str, str]:
        return {TOKEN_HEADER: self.token} if self.token is not None else {}

    async def seat(self) -> tuple[int, Any]:
        async with self.session.get(self.url + "api/seat", headers=self.headers()) as r:
            return r.status, await r.json()

    async def move(self, body: Any) -> tuple[int, Any]:
        async with self.session.post(self.url + "api/move", json=body, headers=self.headers()) as r:
            return r.status, await r.json()

    async def first_turn(self) -> Any:
        """Poll like the page until a turn waits."""
        for _ in range(400):
            _, view = await self.seat()
            if view["turns"]:
                return view["turns"][0]
            await asyncio.sleep(0.05)
        raise AssertionError("no turn reached the seat")

    async def play_until(self, done: asyncio.Event, choose: Any) -> None:
        """Poll like the page; answer every waiting turn with `choose(turn_view)`."""
        while not done.is_set():
            try:
                status, view = await self.seat()
            except aiohttp.ClientConnectionError:  # the page retries too: the seat may be restarting
                await asyncio.sleep(0.2)
                continue
            assert status == 200, view
            for t in view["turns"]:
                action = choose(t)
                body = {"match_id": t["match_id"], "turn": t["turn"], "action": action}
                status, out = await self.move(body)
                assert status == 200, out
                self.played.append(out["text"])
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def human_seat(nc: Any, name: str) -> AsyncIterator[tuple[HumanStrategy, str]]:
    strategy = HumanStrategy(HumanOptions())
    async with serving(nc, strategy, name):
        assert strategy.server is not None
        yield strategy, strategy.server.url


async def test_browser_plays_tic_tac_toe_against_random(nc: NATS) -> None:
    me, bot = uid("human"), uid("rand")
    done = asyncio.Event()
    async with (
        human_seat(nc, me) as (strategy, url),
        serving(nc, RandomStrategy(StrategyOptions(seed=3)), bot),
        aiohttp.ClientSession() as session,
    ):
        token = strategy.seat.token
        # A spectator (no token, or a wrong one) sees nothing of the seat and cannot move for it.
        for wrong in (None, "x" * 32):
            stranger = Browser(session, url, wrong)
            assert (await stranger.seat())[0] == 401
            assert (await stranger.move({"match_id": "m", "turn": 1, "action": 0}))[0] == 401
        async with session.get(url) as r:
            assert r.status == 200 and "Spielbus seat" in await r.text()
            assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]

        browser = Browser(session, url, token)
        seen: list[dict[str, Any]] = []

        def choose(t: dict[str, Any]) -> int:
            seen.append(t)
            # The player's own view, with the board clicks of each legal move.
            assert t["seats"][t["seat"]] == me
            assert all(a["cells"] == [a["text"][2:-1]] for a in t["legal"])
            return int(t["legal"][-1]["id"])  # the last legal cell: not what `first` would play

        player = asyncio.create_task(browser.play_until(done, choose))
        try:
            rec = await play(nc, spec("tic_tac_toe", [me, bot], deadline_ms=20_000))
        finally:
            done.set()
            await player
        _, view = await browser.seat()
    assert rec.outcome in ("decisive", "draw") and not rec.faults
    mine = [m for m in rec.moves if m.agent == me]
    assert mine and [m.text for m in mine] == browser.played
    assert [m.action for m in mine] == [int(t["legal"][-1]["id"]) for t in seen]
    # The seat heard the end of its match.
    assert view["results"][0]["match_id"] == rec.match_id and view["results"][0]["returns"] == rec.returns


async def test_bad_moves_are_refused_and_the_turn_keeps_waiting(nc: NATS) -> None:
    me, bot = uid("human"), uid("rand")
    async with (
        human_seat(nc, me) as (strategy, url),
        serving(nc, RandomStrategy(StrategyOptions(seed=1)), bot),
        aiohttp.ClientSession() as session,
    ):
        browser = Browser(session, url, strategy.seat.token)
        match = asyncio.create_task(
            play(nc, spec("connect_four", [me, bot], deadline_ms=20_000, max_turns=2))
        )
        t = await browser.first_turn()
        assert [a["cells"] for a in t["legal"]] == [[str(c)] for c in range(7)]
        for body, status in [
            ({"match_id": t["match_id"], "turn": t["turn"], "action": 99}, 400),  # not legal
            ({"match_id": t["match_id"], "turn": t["turn"], "action": "3"}, 400),  # strict: no coercion
            ({"match_id": t["match_id"], "turn": t["turn"], "action": 3, "x": 1}, 400),
            ({"match_id": t["match_id"], "turn": t["turn"] + 7, "action": 3}, 404),  # no such turn
            ({"match_id": "other", "turn": t["turn"], "action": 3}, 404),
        ]:
            assert (await browser.move(body))[0] == status, body
        async with session.post(
            url + "api/move", data=b"{" * 10_000, headers=browser.headers()
        ) as r:  # over the body limit
            assert r.status == 413
        assert (await browser.move({"match_id": t["match_id"], "turn": t["turn"], "action": 3}))[0] == 200
        assert (await browser.move({"match_id": t["match_id"], "turn": t["turn"], "action": 3}))[0] == 404
        rec = await match
    assert not rec.faults
    assert rec.moves[0].agent == me and rec.moves[0].action == 3


@pytest.mark.parametrize("policy", ["forfeit", "random"])
async def test_a_closed_page_runs_out_the_seats_clock(nc: NATS, policy: Literal["forfeit", "random"]) -> None:
    """Nobody answers the page: the seat's turn ends at its deadline, like any agent's, and the
    tournament's fault policy applies."""
    me, bot = uid("human"), uid("rand")
    async with (
        human_seat(nc, me) as (strategy, _url),
        serving(nc, RandomStrategy(StrategyOptions(seed=1)), bot),
    ):
        rec = await play(
            nc,
            spec("tic_tac_toe", [me, bot], deadline_ms=1000, policy=FaultPolicy(kind=policy)),
        )
        assert not strategy.seat.waiting  # nothing left on the page
    faults = [f for f in rec.faults if f.agent == me]
    # The runtime refuses the turn at the end of its clock (service error 504), or the refusal
    # arrives after the referee's deadline on a loaded machine: a `timeout` either way.
    assert faults and all(f.reason == "timeout" for f in faults), faults
    if policy == "forfeit":
        assert rec.outcome == "forfeit" and rec.forfeited == [0] and len(faults) == 1
        assert rec.returns[0] < rec.returns[1]
    else:
        # Every one of the seat's turns was played for it at random and recorded as forced.
        assert rec.outcome != "forfeit"
        assert all(m.forced for m in rec.moves if m.player == 0)
        assert len(faults) == sum(1 for m in rec.moves if m.player == 0)


def _turn(game: str, observation: str, legal: list[tuple[int, str]]) -> Turn:
    return Turn(
        match_id="m",
        game=GameSpec(name=game),
        seat=0,
        seats=["a", "b"],
        turn=1,
        deadline_ms=1000,
        observation=observation,
        legal_actions=[LegalAction(id=i, text=t) for i, t in legal],
    )


def test_board_clicks_per_game() -> None:
    from games.loader import initial_state, load_game
    from games.view import legal_actions, observation_text

    def cells(game: str, moves: list[int]) -> tuple[Any, dict[int, list[str]]]:  # Any: pyspiel.State
        g = load_game(game)
        s = initial_state(g)
        for a in moves:
            s.apply_action(a)
        p = s.current_player()
        legal = [(la.id, la.text) for la in legal_actions(s, p)]
        return s, click_cells(_turn(g.get_type().short_name, observation_text(s, p), legal))

    _, ttt = cells("tic_tac_toe", [4])
    assert ttt[0] == ["0,0"] and ttt[8] == ["2,2"] and 4 not in ttt
    _, go = cells("go(board_size=5)", [])
    assert go[0] == ["a1"] and go[24] == ["e5"] and 25 not in go  # 25: pass, from the list only
    # Chess: from-square then to-square; castling is the king's two squares; promotions share theirs.
    s, ch = cells("chess(fen=r3k2r/1P6/8/8/8/8/8/R3K2R w KQkq - 0 1)", [])
    by_text = {s.action_to_string(s.current_player(), a): c for a, c in ch.items()}
    assert by_text["O-O"] == ["e1", "g1"] and by_text["O-O-O"] == ["e1", "c1"]
    promos = [c for t, c in by_text.items() if t.startswith("b8=")]
    assert len(promos) == 4 and all(c == ["b7", "b8"] for c in promos)
    assert len(ch) == len(s.legal_actions())
    # Games without a picture, or views that do not parse: the list only.
    assert click_cells(_turn("kuhn_poker", "0", [(0, "Pass"), (1, "Bet")])) == {}
    assert click_cells(_turn("chess", "not a fen", [(0, "a3")])) == {}


async def test_seat_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="16 to 128"):
        Seat(token="short")
    with pytest.raises(ValueError):
        Seat(token="has spaces and is long enough")
    monkeypatch.setenv(TOKEN_ENV, "given-token-of-the-run-0123")
    given = HumanStrategy(HumanOptions())
    await given.start("you")
    try:
        assert given.seat.token == "given-token-of-the-run-0123" and given.server is not None
        assert given.server.private_url.endswith("#token=given-token-of-the-run-0123")
        # A fixed port already in use, a bad token: errors that name the problem (exit 2).
        busy = HumanStrategy(HumanOptions(seat_port=given.server.port))
        with pytest.raises(ValueError, match="cannot serve the seat page"):
            await busy.start("you2")
    finally:
        await given.close()
    monkeypatch.setenv(TOKEN_ENV, "bad token")
    with pytest.raises(ValueError, match=TOKEN_ENV):
        await HumanStrategy(HumanOptions()).start("you")
    monkeypatch.delenv(TOKEN_ENV)
    a, b = HumanStrategy(HumanOptions()).seat.token, HumanStrategy(HumanOptions()).seat.token
    assert a != b and len(a) >= 32
    seat = Seat(token=a)
    assert seat.authorized(a) and not seat.authorized(b) and not seat.authorized(None)


@pytest.mark.slow
async def test_spielbus_run_seats_a_person(nats_url: str, tmp_path: Path) -> None:
    """examples/human_vs_mcts.toml through `spielbus run`'s own code: the human agent is a child
    process, the console (not a terminal) prints the seat address and a private file holds it with
    its token, the live page links to the seat
    without it, the browser plays, and the run folder records the person's moves."""
    import io
    import json
    import re

    from rich.console import Console

    from referee.config import load_config
    from spielbus.run import RunOptions, run_tournament

    root = Path(__file__).resolve().parents[1]
    config = load_config(root / "examples" / "human_vs_mcts.toml")
    config = config.model_copy(
        update={
            "name": uid("human"),
            "deadline_ms": 30_000,  # a broken test fails in minutes, not hours
            "games": config.games[:1],  # tic-tac-toe, both seat orders: 2 matches
            "agents": {
                "you": config.agents["you"],
                "mcts": config.agents["mcts"].model_copy(update={"options": {"simulations": 50, "seed": 2}}),
            },
        }
    )
    out = io.StringIO()
    opts = RunOptions(nats=nats_url, run_dir=str(tmp_path), quiet=True, agent_wait_s=60, web_port=0)
    run = asyncio.create_task(run_tournament(config, opts, Console(file=out, width=200)))
    done = asyncio.Event()
    async with aiohttp.ClientSession() as session:
        # The console is not a terminal: the token is in a private file, never on the console.
        pattern = r"Seat of you \(human\): (\S+) \(with its token in (\S+), readable by you only\)"
        while not (m := re.search(pattern, out.getvalue())):
            assert not run.done(), out.getvalue()
            await asyncio.sleep(0.1)
        seat_url, private = m.group(1), Path(m.group(2))
        assert private.stat().st_mode & 0o777 == 0o600
        whole = private.read_text().strip()
        assert whole.startswith(seat_url + "#token=")
        token = whole.partition("#token=")[2]
        assert token not in out.getvalue()
        page = re.search(r"Live match page: (\S+)", out.getvalue())
        assert page is not None
        async with session.get(page.group(1) + "api/seats") as r:
            body = await r.text()
        assert json.loads(body)["seats"] == [{"agent": "you", "url": seat_url}] and token not in body
        browser = Browser(session, seat_url, token)
        player = asyncio.create_task(browser.play_until(done, lambda t: int(t["legal"][0]["id"])))
        try:
            result = await run
        finally:
            done.set()
            await player
    assert len(result.records) == 2 and not result.failed
    kept = [json.loads(line) for line in (result.path / "matches.jsonl").read_text().splitlines()]
    mine = [m["text"] for rec in kept for m in rec["moves"] if m.get("agent") == "you"]
    assert mine and sorted(mine) == sorted(browser.played)
    assert all(not rec["faults"] for rec in kept)
    assert any(p["agent"] == "you" and p["kind"] == "human" for rec in kept for p in rec["provenance"])


def test_run_plans_one_seat_per_human_agent() -> None:
    from referee.config import ConfigError, parse_config
    from spielbus.seats import plan_seats

    text = """
name = "seats"
[[games]]
name = "tic_tac_toe"
[agents.you]
kind = "human"
[agents.far]
kind = "human"
external = true
[agents.bot]
kind = "random"
"""
    config = parse_config(text)
    options = {n: config.agent_options(n) for n, a in config.agents.items() if not a.external}
    plans = plan_seats(config, options)
    assert list(plans) == ["you"]  # an external seat prints its own address
    you = plans["you"]
    assert options["you"]["seat_port"] == you.port > 0 and "seat_port" not in options["bot"]
    assert you.env() == {TOKEN_ENV: you.token} and you.token not in you.url
    assert you.private_url == f"http://127.0.0.1:{you.port}/#token={you.token}"
    two = parse_config(text.replace("[agents.far]", "replicas = 2\n[agents.far]", 1))
    with pytest.raises(ConfigError, match=r"agents\.you\.replicas"):
        plan_seats(two, {n: two.agent_options(n) for n in two.agents})


def test_the_human_agent_loads_no_referee_code() -> None:
    import subprocess
    import sys

    code = "import sys, agents.human; print(sorted(m for m in sys.modules if m.startswith('referee')))"
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert out.stdout.strip() == "[]"


async def test_the_persons_clock_starts_when_their_page_first_loads() -> None:
    """A turn sent before anyone opened the seat's page keeps waiting past `move_s` (only the
    referee's deadline, the cap, runs); once the page loads, the person has `move_s` from then.
    Before, the clock ran from the turn's arrival: a person who opened the page late had lost it."""
    from agents.human.seat import start_seat

    seat = Seat(token="t" * 24, agent="p")
    server = await start_seat(seat, 0)
    turn = _turn("tic_tac_toe", "...", [(0, "x(0,0)"), (1, "x(0,1)")])
    cap = asyncio.get_running_loop().time() + 120.0  # monotonic, like the runtime's deadline
    waiting = asyncio.ensure_future(seat.wait(turn, cap, move_s=0.3))
    try:
        await asyncio.sleep(1.0)  # three times move_s, nobody has looked
        assert not waiting.done() and seat.waiting
        async with aiohttp.ClientSession() as session:
            browser = Browser(session, server.url, seat.token)
            status, view = await browser.seat()  # the page loads: the clock starts
            assert status == 200 and 0 < view["turns"][0]["left_ms"] <= 300
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(waiting, 60)  # ... and runs out, long before the cap
        assert not seat.waiting
    finally:
        waiting.cancel()
        await server.stop()


@pytest.mark.slow
@pytest.mark.parametrize("given", [True, False], ids=["token-from-launcher", "token-of-its-own"])
def test_the_seat_token_never_reaches_the_agents_log(
    nats_url: str, tmp_path: Path, given: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40: the `human` agent, started as `spielbus run` starts it (stdout to
    logs/<seat>-0.log), wrote its token there for any local user to read. Its log holds the address
    only; a token of its own goes to a private file (0600) whose path the log names."""
    import re
    import time

    from referee.config import AgentConfig
    from spielbus.launch import AgentProcess, stop_all

    token = "launcher-token-0123456789abc"
    env = {TOKEN_ENV: token} if given else {}
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    log_path = tmp_path / "logs" / "you-0.log"
    proc = AgentProcess(
        uid("you"), AgentConfig(kind="human"), nats_url, "spielbus", log_path, 0, extra_env=env
    )
    try:
        end = time.monotonic() + 120
        while not re.search(r"seat \S+: http://", text := log_path.read_text(errors="replace")):
            assert proc.alive() and time.monotonic() < end, text
            time.sleep(0.1)
    finally:
        stop_all([proc])
    text = log_path.read_text(errors="replace")
    assert "#token=" not in text and token not in text
    if not given:
        m = re.search(r"with its token in (\S+), readable by you only", text)
        assert m is not None, text
        private = Path(m.group(1))
        assert private.stat().st_mode & 0o777 == 0o600
        assert "#token=" in private.read_text()
        private.unlink()
        private.parent.rmdir()
