"""The live page and the metrics listen on 127.0.0.1 unless `--host` says otherwise, and the
printed URLs name the address actually bound (they used to bind 0.0.0.0 and print 127.0.0.1,
exposing ended matches' full records, private cards included, to the network)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bus.subjects import Subjects
from observability.web.serve import start_observability

ROOT = Path(__file__).resolve().parents[1]


def _lan_address() -> str | None:
    """This machine's address on its default route, if it has one besides loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # no packet is sent: UDP connect only picks a route
            addr = s.getsockname()[0]
        except OSError:
            return None
    return None if addr.startswith("127.") else addr


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


async def test_page_and_metrics_listen_on_loopback_by_default(nc) -> None:
    obs = await start_observability(nc, Subjects(), metrics_port=0, web_port=0)
    try:
        assert obs.web is not None and obs.metrics_server is not None
        assert obs.web.url.startswith("http://127.0.0.1:")
        assert obs.metrics_server.url.startswith("http://127.0.0.1:")
        assert _reachable("127.0.0.1", obs.web.port) and _reachable("127.0.0.1", obs.metrics_server.port)
        lan = _lan_address()
        if lan is not None:
            assert not _reachable(lan, obs.web.port), f"the page answers on {lan}"
            assert not _reachable(lan, obs.metrics_server.port), f"the metrics answer on {lan}"
    finally:
        await obs.stop()


async def test_host_opts_in_to_every_interface_and_the_url_says_so(nc) -> None:
    obs = await start_observability(nc, Subjects(), metrics_port=0, web_port=0, host="0.0.0.0")
    try:
        assert obs.web is not None and obs.metrics_server is not None
        assert obs.web.url == f"http://0.0.0.0:{obs.web.port}/"
        assert obs.metrics_server.url == f"http://0.0.0.0:{obs.metrics_server.port}/metrics"
        lan = _lan_address()
        if lan is None:
            pytest.skip("no non-loopback address to reach")
        assert _reachable(lan, obs.web.port)
    finally:
        await obs.stop()


@pytest.mark.parametrize("command", [["run", "x.toml"], ["referee"], ["agent", "random", "--name", "a"]])
def test_every_serving_command_has_host_defaulting_to_loopback(command: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "spielbus.cli", *command, "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "--host" in out.stdout and "127.0.0.1" in out.stdout
