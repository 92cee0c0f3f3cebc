"""Starting the example bots of examples/bots/ as real processes, for the bot and bot-check tests.

The bots import nothing of ours: they are started exactly as a user would start them. Kinds:
`python` (python_bot.py), `node` (node_bot.js), `node_chess` (chess_bot.js, with Debian's
stockfish), `node_connect_four` (connect_four_bot.js), `go` (go_bot/, built once per test session
with Debian's Go and nats.go packages, GOPATH mode: nothing downloaded).
The Node bots need `npm ci` in examples/bots (`make node-deps`); their tests skip
with that instruction when node or its `nats` package is missing, the chess bot's when no
stockfish is installed, the Go bot's when `go` or Debian's nats.go is missing.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from nats.aio.client import Client as NATS

from spielbus.launch import agent_present

BOTS = Path(__file__).resolve().parents[1] / "examples" / "bots"
NODE_SCRIPTS = {
    "node": "node_bot.js",
    "node_chess": "chess_bot.js",
    "node_connect_four": "connect_four_bot.js",
}
STOCKFISH = ("/usr/games/stockfish", "/usr/bin/stockfish")
GOPATH = Path("/usr/share/gocode")  # where Debian's golang-*-dev packages put their sources


@functools.cache
def go_bot_binary() -> Path:
    """examples/bots/go_bot built once (a few seconds; Go's build cache in a temporary folder)."""
    go = shutil.which("go")
    if go is None or not (GOPATH / "src/github.com/nats-io/nats.go").is_dir():
        pytest.skip(
            "Go or its NATS client is missing: apt-get install golang-go golang-github-nats-io-go-nats-dev"
        )
    out = Path(tempfile.mkdtemp(prefix="go_bot-"))
    atexit.register(shutil.rmtree, out, True)
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(GOPATH), "GOCACHE": str(out / "cache")}
    build = subprocess.run(
        [go, "build", "-o", str(out / "go_bot"), "./go_bot"],
        cwd=BOTS,
        env=env,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    return out / "go_bot"


def bot_command(kind: str, name: str, *extra: str) -> list[str]:
    if kind == "python":
        return [sys.executable, str(BOTS / "python_bot.py"), "--name", name, *extra]
    if kind == "go":
        return [str(go_bot_binary()), "--name", name, *extra]
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the Node example bot cannot run")
    if not (BOTS / "node_modules" / "nats").is_dir():
        pytest.skip("examples/bots/node_modules is missing: run `make node-deps` (npm ci in examples/bots)")
    if kind == "node_chess" and not any(Path(p).is_file() for p in STOCKFISH):
        pytest.skip("stockfish is not installed (apt-get install stockfish): the chess bot has no engine")
    return [node, str(BOTS / NODE_SCRIPTS[kind]), "--name", name, *extra]


@contextlib.asynccontextmanager
async def running_bot(
    kind: str, name: str, url: str, nc: NATS, *extra: str, env: dict[str, str] | None = None
) -> AsyncIterator[subprocess.Popen[bytes]]:
    """Start an example bot and wait until it answers `$SRV.PING.<name>`; stop it afterwards."""
    cmd = bot_command(kind, name, *extra)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("NATS_")}
    full_env.update({"NATS_URL": url, **(env or {})})
    # A file, not a pipe: a chatty bot must never block on a full pipe.
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, env=full_env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        for _ in range(300):
            if proc.poll() is not None:
                log.seek(0)
                err = log.read().decode(errors="replace")
                raise AssertionError(f"{kind} bot exited with {proc.returncode}: {err[-2000:]}")
            if await agent_present(nc, name, wait_s=0.2):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"{kind} bot {name} never joined the bus")
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
