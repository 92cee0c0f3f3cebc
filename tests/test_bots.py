"""The example bots of examples/bots/ (plain nats-py, Node with the `nats` npm package, Go with
Debian's nats.go) play full tournaments as external agents, with and without auth."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from agents.random_agent import RandomStrategy
from bus.auth import config_path, load_auth, write_auth
from bus.connect import connect
from bus.server import EmbeddedNats
from games.loader import parse_spec
from referee.botcheck import first_turn
from referee.config import parse_config
from spielbus.run import RunOptions, run_tournament
from tests.example_bots import running_bot
from tests.helpers import serving, uid

TOURNAMENT = """
name = "{name}"
games_per_pairing = 2
concurrency = 4
deadline_ms = 5000
seed = 5
[[games]]
name = "tic_tac_toe"
[[games]]
name = "kuhn_poker"
[[games]]
name = "liars_dice"
[agents.{a}]
kind = "external"
external = true
[agents.{b}]
kind = "external"
external = true
"""


async def _tournament(url: str, a: str, b: str, tmp_path: Path, auth_dir: Path | None = None) -> list:
    config = parse_config(TOURNAMENT.format(name=uid("bots"), a=a, b=b))
    opts = RunOptions(
        nats=url,
        run_dir=str(tmp_path),
        quiet=True,
        agent_wait_s=20,
        auth_dir=str(auth_dir) if auth_dir else None,
    )
    result = await run_tournament(config, opts, Console(file=io.StringIO()))
    return result.records


def _all_clean(records: list, bots: set[str]) -> None:
    assert len(records) == 2 * 2 * 3  # both seat orders, 2 per order, 3 games
    for rec in records:
        assert rec.faults == [], rec.faults
        assert rec.outcome in ("decisive", "draw"), rec
        assert set(rec.seats) == bots
        assert all(m.agent in bots for m in rec.moves if m.player >= 0)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["python", "node", "go"])
async def test_example_bot_plays_a_full_tournament(nc, nats_url: str, kind: str, tmp_path: Path) -> None:
    bot, rand = uid(kind), uid("rand")
    async with (
        running_bot(kind, bot, nats_url, nc),
        serving(nc, RandomStrategy.from_options({"seed": 3}), rand),
    ):
        records = await _tournament(nats_url, bot, rand, tmp_path)
    _all_clean(records, {bot, rand})


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "other"), [("node", "nodebot"), ("go", "gobot")])
async def test_example_bots_play_each_other_with_auth(tmp_path: Path, kind: str, other: str) -> None:
    """External bots log in with the one login file `spielbus auth init` wrote for each (`--login`),
    and under accounts may subscribe to nothing but their own subjects (the Go bot answers its own
    `$SRV.*` requests there too)."""
    write_auth(["pybot", other], tmp_path / "auth")
    bundle = load_auth(tmp_path / "auth")
    logins = {n: str(tmp_path / "auth" / "agents" / f"{n}.env") for n in ("pybot", other)}
    with EmbeddedNats(config=config_path(tmp_path / "auth")) as srv:
        ref = bundle.referee()
        nc = await connect(srv.url, name="t", user=ref.user, password=ref.password)
        try:
            async with (
                running_bot("python", "pybot", srv.url, nc, "--login", logins["pybot"]),
                running_bot(kind, other, srv.url, nc, "--login", logins[other]),
            ):
                records = await _tournament(srv.url, "pybot", other, tmp_path / "runs", tmp_path / "auth")
        finally:
            await nc.close()
    _all_clean(records, {"pybot", other})


@pytest.mark.parametrize("kind", ["python", "node", "go"])
async def test_example_bot_refuses_a_version_it_does_not_speak(nc, nats_url: str, kind: str) -> None:
    """docs/protocol.md, versioning: a bot answers a turn of an unknown `v` with a service error."""
    bot = uid(kind)
    async with running_bot(kind, bot, nats_url, nc):
        turn = first_turn(parse_spec("tic_tac_toe"), uid("m"), [bot, bot], 5000)
        raw = turn.model_dump(mode="json", exclude_none=True)
        ok = await nc.request(f"spielbus.turn.{bot}", json.dumps(raw).encode(), timeout=5)
        assert not (ok.headers or {}).get("Nats-Service-Error") and json.loads(ok.data)["type"] == "move"
        raw["v"] = 2
        refused = await nc.request(f"spielbus.turn.{bot}", json.dumps(raw).encode(), timeout=5)
    assert "protocol version 2 not spoken" in (refused.headers or {}).get("Nats-Service-Error", "")
