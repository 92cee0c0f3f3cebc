"""TLS end to end on a real nats-server (bus/tls.py, bus/connect.py, `auth init --tls-*`), issue 41.

`auth init --tls-generate` writes a private CA, a server certificate and the server's `tls {}`
block, and names the CA in every login file (NATS_TLS_CA); bots, `bot-check` and agents connect
with it (`--login FILE`, `--tls-ca FILE` or the environment). Without it the certificate cannot be
verified, and the client fails at once saying so (bot-check used to retry for 150 s). A registry
folder over TLS hands the CA to bots with their registration.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import subprocess
import sys
import urllib.error
from pathlib import Path

import pytest

from agents.random_agent import RandomStrategy
from bus.auth import load_auth, read_login_file
from bus.connect import CertificateError, connect
from bus.process import free_port
from bus.registry import Registrar, RegistrationPolicy, init_registry
from bus.server import EmbeddedNats
from bus.tls import generate
from referee.botcheck import BotCheckOptions, check_bot, login_from_file
from spielbus.register import register
from tests.helpers import serving, uid

ROOT = Path(__file__).resolve().parents[1]
HOSTS = "localhost,127.0.0.1"


def _cli(
    *argv: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("NATS_")}
    full.update({"PYTHONPATH": str(ROOT), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "spielbus.cli", *argv],
        capture_output=True,
        text=True,
        env=full,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def tls_auth(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    out = tmp_path_factory.mktemp("tlsauth")
    port = free_port()
    done = _cli(
        "auth", "init", "--agents", "alice,bob", "--out", str(out),
        "--tls-generate", HOSTS, "--nats", f"tls://127.0.0.1:{port}",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return out, port


@pytest.fixture(scope="module")
def tls_server(tls_auth: tuple[Path, int]) -> object:
    out, port = tls_auth
    with EmbeddedNats(port=port, config=out / "nats-server.conf") as srv:
        yield srv


def test_auth_init_writes_the_tls_block_and_the_ca_into_every_login(tls_auth: tuple[Path, int]) -> None:
    out, port = tls_auth
    conf = json.loads((out / "nats-server.conf").read_text().split("\n", 5)[-1])
    assert conf["tls"]["cert_file"] == str((out / "tls" / "server.pem").resolve())
    ca = str((out / "tls" / "ca.pem").resolve())
    for login in ("agents/alice.env", "referee.env", "spectator.env", "botcheck/bob.env"):
        values = read_login_file(out / login)
        assert values["NATS_TLS_CA"] == ca and values["NATS_URL"] == f"tls://127.0.0.1:{port}"
    assert oct((out / "tls" / "ca-key.pem").stat().st_mode & 0o777) == "0o600"


async def test_bot_and_bot_check_over_tls(tls_auth: tuple[Path, int], tls_server: EmbeddedNats) -> None:
    out, port = tls_auth
    bundle = load_auth(out)
    ca = str(out / "tls" / "ca.pem")
    bot = await connect(
        f"tls://127.0.0.1:{port}",
        name="alice",
        user="agent-alice",
        password=bundle.agent("alice").password,
        tls_ca=ca,
    )
    try:
        async with serving(bot, RandomStrategy.from_options({"seed": 1}), "alice"):
            login, url = login_from_file(out / "agents" / "alice.env")
            assert login.get("tls_ca") == str((out / "tls" / "ca.pem").resolve())
            report = await check_bot(
                "alice", url, options=BotCheckOptions(games=["tic_tac_toe"]), login=login
            )
            assert all(r.ok for r in report.results), [r for r in report.results if not r.ok]
    finally:
        await bot.close()


async def test_an_unverifiable_certificate_fails_at_once_saying_so(
    tls_auth: tuple[Path, int], tls_server: EmbeddedNats
) -> None:
    out, port = tls_auth
    bundle = load_auth(out)
    with pytest.raises(CertificateError, match="--tls-ca"):
        await connect(f"tls://127.0.0.1:{port}", name="x", user="referee", password=bundle.referee().password)
    # A plain nats:// URL to the same server: upgraded to TLS, and the same error (a service too).
    with pytest.raises(CertificateError, match="certificate"):
        await connect(f"nats://127.0.0.1:{port}", name="x", service=True, tls_ca=None)


def test_bot_check_without_the_ca_fails_fast(tls_auth: tuple[Path, int], tls_server: EmbeddedNats) -> None:
    """Issue 41: bot-check against a certificate it could not verify was still retrying at 150 s."""
    out, _ = tls_auth
    values = read_login_file(out / "agents" / "alice.env")
    plain = out / "alice-no-ca.env"
    plain.write_text("".join(f"{k}={v}\n" for k, v in values.items() if k != "NATS_TLS_CA"))
    done = _cli("bot-check", "alice", "--login", str(plain), timeout=60)
    assert done.returncode != 0
    assert "certificate" in done.stderr + done.stdout and "--tls-ca" in done.stderr + done.stdout


def test_agent_takes_a_ca_file(tls_auth: tuple[Path, int], tls_server: EmbeddedNats) -> None:
    """`spielbus agent --tls-ca FILE` joins a TLS bus; bot-check `--tls-ca FILE` checks it."""
    out, port = tls_auth
    bundle = load_auth(out)
    ca = str(out / "tls" / "ca.pem")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NATS_")}
    env.update(PYTHONPATH=str(ROOT), NATS_USER="agent-bob", NATS_PASSWORD=bundle.agent("bob").password)
    url = f"tls://127.0.0.1:{port}"
    agent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "spielbus.cli",
            "agent",
            "random",
            "--name",
            "bob",
            "--nats",
            url,
            "--tls-ca",
            ca,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert agent.stdout is not None
        for line in agent.stdout:
            if "ready" in line:
                break
        check = bundle.botcheck("bob")
        done = _cli(
            "bot-check", "bob", "--nats", url, "--tls-ca", ca, "--games", "tic_tac_toe",
            env={"SPIELBUS_BOTCHECK_USER": check.user, "SPIELBUS_BOTCHECK_PASSWORD": check.password,
                 "SPIELBUS_BOTCHECK_INBOX": check.inbox_prefix() or ""},
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        agent.terminate()
        agent.wait(30)


async def test_registered_bots_get_the_ca_with_their_login(tmp_path: Path) -> None:
    """A registry over TLS: `register` (over HTTPS, `--tls-ca`) hands the bot the bus's CA."""
    folder, bots = tmp_path / "registry", tmp_path / "bots"
    port = free_port()
    init_registry(folder, url=f"tls://127.0.0.1:{port}", tls=generate(folder, HOSTS.split(",")))
    with EmbeddedNats(port=port, config=folder / "nats-server.conf") as srv:
        ca = str(folder / "tls" / "ca.pem")
        system = await connect(srv.url, name="system", creds=str(folder / "system.creds"), tls_ca=ca)
        from aiohttp import web

        from spielbus.register import _registrar_app

        runner = web.AppRunner(_registrar_app(Registrar(folder, RegistrationPolicy(policy="open"), system)))
        await runner.setup()
        # The registrar over HTTPS with the same certificate; `register --tls-ca` verifies it.
        https = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        https.load_cert_chain(folder / "tls" / "server.pem", folder / "tls" / "server-key.pem")
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=https).start()
        name = uid("tina")
        try:
            where = f"https://127.0.0.1:{runner.addresses[0][1]}"
            with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
                await asyncio.to_thread(register, uid("nobody"), where, bots)
            code = await asyncio.to_thread(register, name, where, bots, None, ca)
            assert code == 0
        finally:
            await runner.cleanup()
            await system.close()
        values = read_login_file(bots / f"{name}.env")
        assert Path(values["NATS_TLS_CA"]).read_text() == Path(ca).read_text()
        nc = await connect(
            values["NATS_URL"], name=name, creds=values["NATS_CREDS"], tls_ca=values["NATS_TLS_CA"]
        )
        await nc.close()
