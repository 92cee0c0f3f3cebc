"""Provider limits shared across processes (issue 38, point 4): `[llm.NAME]`'s `max_in_flight`,
`requests_per_minute` and `tokens_per_minute` hold for every agent naming the endpoint, through the
limiter service on the bus (agents/llm/limits.py); a turn's wait for a slot stays within its clock
and is recorded in its call's `waited_s`.

The figure of the issue against real processes: an OpenAI-compatible stand-in allowing one request
every 3 s (faster ones get 429; here those under 2 s, see `_limited_provider`), two `spielbus agent
llm_policy` processes naming it with `requests_per_minute = 20`, 4 turns in flight with 20 s
deadlines: every turn is answered by the model, and the stand-in never had to refuse a request.
The same under accounts (`spielbus auth init`): each agent process logs in as its own agent user
and reaches the limiter served in the referee account, while a hostile bot login (an agent of the
run that names no LLM endpoint) floods the limiter with requests for the endpoint's slots, with
limits of its own making."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NATS

from agents.llm.config import LLMConfig
from agents.llm.limits import (
    Acquire,
    Granted,
    Limiter,
    LimiterService,
    Limits,
    Release,
    endpoint_key,
    entitlements,
    serve_this_process,
    subjects,
)
from agents.llm.preflight import preflight
from bus.auth import load_auth, write_auth
from bus.connect import connect
from bus.process import stop_process
from bus.protocol import MatchRecord, Move, Turn
from bus.server import EmbeddedNats
from bus.subjects import Subjects
from tests.helpers import spielbus_process, uid, until
from tests.llm_standins import ROOT, OpenAIStandIn, Scene, answer_for


def _ask(limits: Limits, tokens: int = 0, wait_s: float = 30.0) -> Acquire:
    return Acquire(key="k", limits=limits, tokens=tokens, wait_s=wait_s, hold_s=60.0)


async def test_max_in_flight_holds_a_waiter_until_a_release() -> None:
    lim = Limiter()
    first = await lim.acquire(_ask(Limits(max_in_flight=1)))
    second = asyncio.create_task(lim.acquire(_ask(Limits(max_in_flight=1))))
    for _ in range(20):
        await asyncio.sleep(0)
    assert first.granted and not second.done()
    lim.release(Release(key="k", lease=first.lease))
    got = await second
    assert got.granted and got.lease != first.lease


async def test_waiters_are_served_in_order_and_refused_when_their_time_runs_out() -> None:
    lim = Limiter()
    limits = Limits(requests_per_minute=60_000)  # one grant per millisecond
    grants = await asyncio.gather(*(lim.acquire(_ask(limits)) for _ in range(5)))
    assert [g.granted for g in grants] == [True] * 5
    order = [int(g.lease.split(".")[0]) for g in grants]
    assert order == sorted(order)
    slow = Limits(requests_per_minute=1)  # the next grant is a minute away
    assert (await lim.acquire(Acquire(key="s", limits=slow, wait_s=5, hold_s=9))).granted
    refused = await lim.acquire(Acquire(key="s", limits=slow, wait_s=0.05, hold_s=9))
    assert not refused.granted and refused.lease == ""


async def test_tokens_per_minute_charges_the_estimate_and_gives_back_what_was_not_used() -> None:
    lim = Limiter()
    limits = Limits(tokens_per_minute=100)
    first = await lim.acquire(_ask(limits, tokens=80))
    assert first.granted
    assert not (await lim.acquire(_ask(limits, tokens=80, wait_s=0.01))).granted  # 20 left
    lim.release(Release(key="k", lease=first.lease, tokens=80, used=10))  # 70 given back: 90
    assert (await lim.acquire(_ask(limits, tokens=80, wait_s=0.01))).granted


async def test_a_lease_is_freed_only_by_the_agent_it_was_granted_to() -> None:
    lim = Limiter()
    limits = Limits(max_in_flight=1)
    held = await lim.acquire(_ask(limits), "victim")
    lim.release(Release(key="k", lease=held.lease), "mallory")  # a forged release: ignored
    assert not (await lim.acquire(_ask(limits, wait_s=0.05), "mallory")).granted
    lim.release(Release(key="k", lease=held.lease), "victim")
    assert (await lim.acquire(_ask(limits, wait_s=0.05), "mallory")).granted


def test_the_table_names_each_endpoint_its_strictest_limits_and_the_agents_naming_it() -> None:
    url = "http://127.0.0.1:9/v1"
    table = entitlements(
        {
            "a": {"base_url": url, "model": "m", "requests_per_minute": 20, "max_in_flight": 4},
            "b": {"base_url": url, "model": "m", "requests_per_minute": 10},
            "c": {"base_url": url, "model": "other"},  # no limits: asks for no slot
            "d": {"base_url": url, "model": "m", "timeout_s": -1},  # refused by its own check
        }
    )
    (key,) = table
    assert key == f"{url}|m" and table[key].agents == {"a", "b"}
    assert table[key].limits == Limits(requests_per_minute=10, max_in_flight=4)


def _turn(name: str, i: int) -> Turn:
    # Distinct prompts (each turn its own position), so no answer comes from a response cache.
    legal = [{"id": c, "text": f"x({c // 3},{c % 3})"} for c in range(9) if c != i]
    board = ["..."] * 3
    row, col = divmod(i, 3)
    board[row] = board[row][:col] + "o" + board[row][col + 1 :]
    return Turn(
        match_id=f"limits-{i}",
        game={"name": "tic_tac_toe"},
        seat=0,
        seats=[name, "other"],
        turn=1,
        deadline_ms=20_000,
        observation="\n".join(board),
        legal_actions=legal,
    )


def _llm(url: str) -> dict[str, object]:
    return {"base_url": url, "model": "standin", "requests_per_minute": 20, "cache": False}


async def _four_turns(
    nc: NATS, nats_url: str, prefix: str, names: list[str], api: OpenAIStandIn, *login: str
) -> list[tuple[Move, Turn]]:
    """Two `spielbus agent llm_policy` processes naming the stand-in, 4 turns at once through `nc`."""
    llm = json.dumps(_llm(api.url))
    procs = [
        spielbus_process(
            "agent",
            "llm_policy",
            "--name",
            n,
            "--nats",
            nats_url,
            "--prefix",
            prefix,
            "--llm",
            llm,
            "--seed",
            "1",
            *login,
        )
        for n in names
    ]
    try:

        async def ready() -> bool:
            try:
                for n in names:
                    await nc.request(f"$SRV.INFO.{n}", b"", timeout=0.5)
            except Exception:
                return False
            return True

        await until(ready, "both agent processes serve", timeout_s=120)
        subjects = Subjects(prefix)
        turns = [(names[i % 2], _turn(names[i % 2], i)) for i in range(4)]
        replies = await asyncio.gather(
            *(nc.request(subjects.turn(n), t.model_dump_json().encode(), timeout=25) for n, t in turns)
        )
    finally:
        for p in procs:
            stop_process(p)
    return [(Move.model_validate_json(r.data), t) for r, (_, t) in zip(replies, turns, strict=True)]


def _limited_provider() -> OpenAIStandIn:
    """The provider of these tests: one request every 2 s, where the limits they set allow one every
    3 s (20 a minute). Grants are spaced from the end of the latest attempt when it ended in time,
    and its end follows its arrival, so arrivals keep the limit's 3 s unless an attempt takes over
    3 s from grant to reply; the stand-in's second is for such an attempt on a busy machine (with
    the stand-in at 3 s, this file passed under a full run's load once the run's pre-flight took its
    slot too). Unshared limiters would not come near it: each grants its own agent's first request
    at once, milliseconds after the other agent's."""
    return OpenAIStandIn(min_interval_s=2.0)


def _check_all_answered(played: list[tuple[Move, Turn]], api: OpenAIStandIn) -> None:
    for move, turn in played:
        assert move.failure is None and move.action in {a.id for a in turn.legal_actions}, move
        assert not (move.stats and (move.stats.model_extra or {}).get("fallback")), move
        assert move.calls and move.calls[0].outcome == "answered"
    assert api.limited == 0, f"the stand-in refused {api.limited} requests: the limits were not shared"
    assert api.answered == 4
    # Waiting for a slot is recorded: three of the four turns waited for theirs.
    assert sum(1 for m, _ in played if m.calls and m.calls[0].waited_s > 0) >= 3


@pytest.mark.slow
async def test_four_turns_in_flight_share_one_request_every_3_s(nats_url: str, nc) -> None:
    api = _limited_provider()
    api.default = Scene(content=answer_for)  # a legal move, varied over the positions
    await api.start()
    prefix = uid("lim").replace("-", "_")
    limiter = await LimiterService(nc, prefix).start()
    try:
        played = await _four_turns(nc, nats_url, prefix, [uid("llm-a"), uid("llm-b")], api)
    finally:
        await limiter.stop()
        await api.stop()
    _check_all_answered(played, api)


@pytest.mark.parametrize("with_table", [False, True], ids=["open", "accounts"])
async def test_the_run_s_preflight_takes_a_slot_of_the_run_s_limiter(nc, with_table: bool) -> None:
    """`spielbus run` sends one pre-flight request per endpoint from its own process, before any
    match: it counts against the limits the agents share, or an agent's first request follows it
    at once (a 429 from a provider at the limit: seen in full runs)."""
    api = OpenAIStandIn()
    await api.start()
    prefix = uid("pre").replace("-", "_")
    llm = {**_llm(api.url), "requests_per_minute": 1}  # after a grant, the next is a minute away
    table = entitlements({"a": llm}) if with_table else None
    limiter = await LimiterService(nc, prefix, table).start()
    serve_this_process(limiter)
    try:
        config = LLMConfig.model_validate(llm)
        assert await preflight({"a": config}) == []
        assert api.answered == 1
        ask = Acquire(key=endpoint_key(config), limits=Limits(requests_per_minute=1), wait_s=0.5, hold_s=60)
        msg = await nc.request(subjects(prefix, "a")[0], ask.model_dump_json().encode(), timeout=10)
        assert not Granted.model_validate_json(msg.data).granted  # the pre-flight had this minute's
    finally:
        serve_this_process(None)
        await limiter.stop()
        await api.stop()


# Under accounts (tests/conftest.py's auth_dir and auth_server): two LLM agents and a hostile bot.
AUTH_AGENTS = ["llm-a", "llm-b", "mallory"]


async def _login(srv: EmbeddedNats, auth_dir: Path, role: str, agent: str | None = None) -> NATS:
    bundle = load_auth(auth_dir)
    user = bundle.referee() if role == "referee" else bundle.agent(agent or "")

    async def quiet(exc: Exception) -> None:
        pass  # the hostile login's refused publishes are expected

    return await nats.connect(
        srv.url, user=user.user, password=user.password, error_cb=quiet, allow_reconnect=False
    )


@pytest.mark.slow
async def test_limits_are_shared_under_accounts_and_a_bot_login_cannot_starve_them(
    auth_server: EmbeddedNats, auth_dir: Path
) -> None:
    api = _limited_provider()
    api.default = Scene(content=answer_for)  # a legal move, varied over the positions
    await api.start()
    names = ["llm-a", "llm-b"]
    ref = load_auth(auth_dir).referee()
    referee = await connect(auth_server.url, name="test-referee", user=ref.user, password=ref.password)
    table = entitlements({n: _llm(api.url) for n in names})
    limiter = await LimiterService(referee, "spielbus", table).start()
    (key,) = table
    mallory = await _login(auth_server, auth_dir, "agent", "mallory")
    # The hostile bot asks for the endpoint's slots, held for an hour, at one request a century,
    # under its own name and (refused by the server) under an LLM agent's name.
    greedy = (
        Acquire(
            key=key,
            limits=Limits(max_in_flight=1, requests_per_minute=0.00001),
            wait_s=60,
            hold_s=3600,
        )
        .model_dump_json()
        .encode()
    )
    floods = [
        asyncio.create_task(mallory.request(subjects("spielbus", "mallory")[0], greedy, timeout=70))
        for _ in range(8)
    ]
    await mallory.publish(subjects("spielbus", "llm-a")[0], greedy)
    await mallory.flush()
    try:
        played = await _four_turns(referee, auth_server.url, "spielbus", names, api, "--auth", str(auth_dir))
        answers = [Granted.model_validate_json(m.data) for m in await asyncio.gather(*floods)]
    finally:
        for t in floods:
            t.cancel()
        await limiter.stop()
        await mallory.close()
        await referee.close()
        await api.stop()
    _check_all_answered(played, api)
    assert not any(a.granted for a in answers), "a bot login that names no endpoint got its slots"


@pytest.mark.slow
async def test_spielbus_run_under_accounts_shares_the_limits_of_its_tournament_file(tmp_path: Path) -> None:
    """`spielbus run --auth`: the limiter's table comes from the file, and its keys are the ones the
    agent processes ask under (a mismatch would refuse every slot and void every match)."""
    api = _limited_provider()
    api.default = Scene(content=answer_for)
    url = await api.start()
    auth = tmp_path / "auth"
    write_auth(["la", "lb"], auth)
    cfg = tmp_path / "t.toml"
    cfg.write_text(
        'name = "limits"\ngames_per_pairing = 1\nseed = 3\ndeadline_ms = 20000\nconcurrency = 2\n'
        '[[games]]\nname = "tic_tac_toe"\n'
        f'[llm.api]\nbase_url = "{url}"\nmodel = "standin"\ncache = false\nrequests_per_minute = 20\n'
        '[agents.la]\nkind = "llm_policy"\nllm = "api"\n'
        '[agents.lb]\nkind = "llm_policy"\nllm = "api"\n'
    )
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "spielbus.cli", "run", str(cfg), "--run-dir", str(tmp_path / "runs"),
            "--auth", str(auth), "--quiet", "--metrics-port", "off", "--web-port", "off",
            cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(proc.communicate(), 600)
    finally:
        await api.stop()
    text = out.decode(errors="replace")
    assert proc.returncode == 0, text[-3000:]
    (matches,) = (tmp_path / "runs").glob("limits-*/matches.jsonl")
    records = [MatchRecord.model_validate_json(line) for line in matches.read_text().splitlines()]
    assert len(records) == 2 and not [r.voided for r in records if r.voided]
    assert not [f for r in records for f in r.faults], [r.faults for r in records]
    assert api.answered > 4 and api.limited == 0, f"{api.limited} requests refused: limits not shared"
