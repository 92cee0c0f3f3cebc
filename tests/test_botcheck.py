"""`spielbus bot-check`: both example bots pass; broken bots fail with their reason named."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from nats.aio.msg import Msg

from agents.random_agent import RandomStrategy
from bus.auth import config_path, load_auth, user_env, write_auth
from bus.connect import connect
from bus.protocol import Move, Turn
from bus.server import EmbeddedNats
from referee.botcheck import BotChecker, BotCheckOptions, CheckResult, check_bot, options_for, run_bot_check
from tests.example_bots import running_bot
from tests.helpers import raw_responder, serving, uid

ROOT = Path(__file__).resolve().parents[1]
FAST = BotCheckOptions(games=["tic_tac_toe", "kuhn_poker"], concurrency=10)


def _cli(
    name: str, url: str, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("NATS_")}
    base.update(env or {})
    cmd = [sys.executable, "-m", "spielbus.cli", "bot-check", name, "--nats", url, *extra]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=base, timeout=180)


def _env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {k: v for k, v in pairs}


def _by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.name: r for r in results}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["python", "node"])
async def test_example_bots_pass_every_check(nc, nats_url: str, kind: str) -> None:
    name = uid(kind)
    async with running_bot(kind, name, nats_url, nc):
        out = await asyncio.to_thread(_cli, name, nats_url)
    assert out.returncode == 0, out.stdout + out.stderr
    for check in (
        "discovery",
        "turn within deadline",
        "unknown fields ignored",
        "retry message",
        "match_started/match_ended",
        "full match: liars_dice",
        "10 concurrent matches",
    ):
        assert check in out.stdout
    assert "FAIL" not in out.stdout
    assert "10 of 10 checks passed" in out.stdout


async def test_a_bot_playing_illegal_moves_fails_with_the_reason(nc, nats_url: str) -> None:
    name = uid("broken")

    async def illegal(turn: Turn, msg: Msg) -> bytes:
        return Move(match_id=turn.match_id, turn=turn.turn, action=9999).model_dump_json().encode()

    async with raw_responder(nc, name, illegal):
        out = await asyncio.to_thread(_cli, name, nats_url, "--games", "tic_tac_toe", "--concurrency", "3")
    assert out.returncode == 1, out.stdout
    assert "illegal: id 9999 is not a legal action" in out.stdout
    assert "no micro service named" in out.stdout  # a bare subscription is not discoverable
    assert "0 of" in out.stdout and "checks passed; failed:" in out.stdout


async def test_a_strict_bot_that_rejects_unknown_fields_fails_that_check(nc) -> None:
    name = uid("strict")
    known = set(Turn.model_fields)

    async def strict(turn: Turn, msg: Msg) -> bytes:
        extra = set(json.loads(msg.data)) - known
        if extra:
            return b'{"error": "unknown fields"}'
        return (
            Move(match_id=turn.match_id, turn=turn.turn, action=turn.legal_actions[0].id)
            .model_dump_json()
            .encode()
        )

    async with raw_responder(nc, name, strict):
        results = _by_name(await BotChecker(nc, name, options=FAST).run())
    assert not results["unknown fields ignored"].ok
    assert results["unknown fields ignored"].detail.startswith("malformed:")
    assert results["turn within deadline"].ok and results["retry message"].ok
    assert results["full match: tic_tac_toe"].ok and results["10 concurrent matches"].ok


@pytest.mark.parametrize(
    ("bad", "expect"),
    [
        (b'"policy": {"0": NaN}', "finite number at policy.0"),
        (b'"policy": {"0": 1e400}', "finite number at policy.0"),
        (b'"usage": {"llm_calls": -3}', "greater than or equal to 0 at usage.llm_calls"),
        (b'"stats": {"score": Infinity}', "numbers must be finite"),
        (b'"action": "0"', "valid integer at action"),
    ],
)
async def test_a_bot_whose_replies_the_collector_would_refuse_fails(nc, bad: bytes, expect: str) -> None:
    """Before, a bot answering NaN policies passed 10/10 and then hung every tournament it played."""
    name = uid("nan")

    async def nan(turn: Turn, msg: Msg) -> bytes:
        head = {"v": 1, "type": "move", "match_id": turn.match_id, "turn": turn.turn}
        body = json.dumps(head).encode()[:-1]
        if not bad.startswith(b'"action"'):
            body += f', "action": {turn.legal_actions[0].id}'.encode()
        return body + b", " + bad + b"}"

    opts = BotCheckOptions(games=["tic_tac_toe"], concurrency=2)
    async with raw_responder(nc, name, nan):
        results = _by_name(await BotChecker(nc, name, options=opts).run())
    for check in ("turn within deadline", "full match: tic_tac_toe", "2 concurrent matches"):
        assert not results[check].ok, results[check]
        assert results[check].detail.startswith("malformed") or "malformed" in results[check].detail
        assert expect in results[check].detail, results[check].detail


async def test_a_slow_bot_fails_the_deadline_and_a_bot_that_forgets_retries_fails_retry(nc) -> None:
    name = uid("slow")

    async def slow_on_retry(turn: Turn, msg: Msg) -> bytes | None:
        if turn.retry:
            await asyncio.sleep(1.0)  # past the 200 ms deadline below
        return (
            Move(match_id=turn.match_id, turn=turn.turn, action=turn.legal_actions[0].id)
            .model_dump_json()
            .encode()
        )

    opts = BotCheckOptions(deadline_ms=200, games=["tic_tac_toe"], concurrency=2)
    async with raw_responder(nc, name, slow_on_retry):
        results = _by_name(await BotChecker(nc, name, options=opts).run())
    assert results["retry message"].detail == "timeout: no reply within 200 ms"
    assert results["turn within deadline"].ok


async def test_a_bot_that_dies_on_notifications_fails_that_check(nc) -> None:
    name = uid("fragile")
    dead = asyncio.Event()

    async def answer(turn: Turn, msg: Msg) -> bytes | None:
        if dead.is_set():
            return None
        return (
            Move(match_id=turn.match_id, turn=turn.turn, action=turn.legal_actions[0].id)
            .model_dump_json()
            .encode()
        )

    async def on_notify(msg: Msg) -> None:
        try:
            json.loads(msg.data)
        except ValueError:
            dead.set()  # what an unguarded json.loads does to a real bot

    sub = await nc.subscribe(f"spielbus.notify.{name}", cb=on_notify)
    opts = BotCheckOptions(deadline_ms=300, games=["tic_tac_toe"], concurrency=2)
    try:
        async with raw_responder(nc, name, answer):
            results = _by_name(await BotChecker(nc, name, options=opts).run())
    finally:
        await sub.unsubscribe()
    check = results["match_started/match_ended"]
    assert not check.ok and "timeout" in check.detail


@pytest.mark.slow
async def test_bot_check_under_auth_with_its_own_credentials(tmp_path: Path) -> None:
    """What a bot author does: `botcheck/<name>.env` (never the referee's login) and bot-check."""
    write_auth(["checked"], tmp_path)
    bundle = load_auth(tmp_path)
    with EmbeddedNats(config=config_path(tmp_path)) as srv:
        ref = bundle.referee()
        nc = await connect(srv.url, name="t", user=ref.user, password=ref.password)
        try:
            async with running_bot("python", "checked", srv.url, nc, env=user_env(bundle.agent("checked"))):
                env = _env_file(tmp_path / "botcheck" / "checked.env")
                assert env["NATS_USER"] == "botcheck-checked"
                out = await asyncio.to_thread(_cli, "checked", srv.url, "--games", "leduc_poker", env=env)
        finally:
            await nc.close()
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["python", "node"])
async def test_one_login_file_serves_the_bot_and_its_bot_check(tmp_path: Path, kind: str) -> None:
    """A bot author's one file, `agents/<name>.env`: the example bot logs in with `--login FILE` and
    `spielbus bot-check NAME --login FILE` with the same file (its bot-check login), nothing else
    in the environment."""
    name = f"one{kind}"
    write_auth([name], tmp_path)
    login = tmp_path / "agents" / f"{name}.env"
    assert {"NATS_USER", "SPIELBUS_BOTCHECK_USER"} <= set(_env_file(login))
    bundle = load_auth(tmp_path)
    with EmbeddedNats(config=config_path(tmp_path)) as srv:
        ref = bundle.referee()
        nc = await connect(srv.url, name="t", user=ref.user, password=ref.password)
        try:
            async with running_bot(kind, name, srv.url, nc, "--login", str(login)):
                out = await asyncio.to_thread(
                    _cli, name, srv.url, "--games", "kuhn_poker", "--login", str(login)
                )
        finally:
            await nc.close()
    assert out.returncode == 0, out.stdout + out.stderr


async def test_our_own_agent_runtime_passes_every_check(nc) -> None:
    """Regression: `game` once forbade unknown fields, so a turn from a newer referee was refused."""
    name = uid("runtime")
    async with serving(nc, RandomStrategy.from_options({"seed": 1}), name):
        results = await BotChecker(nc, name, options=FAST).run()
    assert [r for r in results if not r.ok] == []


async def test_bot_check_as_a_library_function_from_a_bot_authors_test(nc, nats_url: str) -> None:
    """`run_bot_check` (what docs/protocol.md shows a bot author calling from pytest) passes a
    conforming bot, and `assert_ok` fails a broken one naming the check and the referee's reason."""
    good, bad = uid("lib-good"), uid("lib-bad")

    async def illegal(turn: Turn, msg: Msg) -> bytes:
        return Move(match_id=turn.match_id, turn=turn.turn, action=9999).model_dump_json().encode()

    options = options_for(["tic_tac_toe"], concurrency=3)
    assert (options.turn_game, options.concurrent_game, options.games) == (
        "tic_tac_toe",
        "tic_tac_toe",
        ["tic_tac_toe"],
    )
    async with serving(nc, RandomStrategy.from_options({"seed": 1}), good):
        # Synchronous, as from a plain test: its own event loop, so from a thread here.
        report = await asyncio.to_thread(run_bot_check, good, nats_url, options=options)
    assert report.ok and len(report.results) == 7, report.results
    report.assert_ok()
    async with raw_responder(nc, bad, illegal):
        report = await check_bot(bad, nats_url, options=options)
    assert not report.ok and {r.name for r in report.failed} >= {"discovery", "turn within deadline"}
    with pytest.raises(AssertionError, match="illegal: id 9999 is not a legal action"):
        report.assert_ok()
    with pytest.raises(ValueError):
        options_for(["no_such_game"])
