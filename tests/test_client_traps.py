"""The client traps of docs/protocol.md ("Client traps"): the services APIs of nats.py and nats.js put
endpoints in queue group "q" unless told, which bot-check refuses and which makes two replicas both
answer; the line the docs give (and the example bots use) fixes it."""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import pytest
from nats.aio.client import Client as NATS
from nats.micro import add_service
from nats.micro.request import Request
from nats.micro.service import EndpointConfig, Service, ServiceConfig

from bus.connect import flush
from referee.botcheck import BotChecker
from spielbus.launch import agent_present
from tests.example_bots import BOTS
from tests.helpers import uid, until


async def _service(nc: NATS, name: str, hits: list[str], tag: str, **queue: str) -> Service:
    """A nats.py micro service with one `turn` endpoint; `queue`: `service=` / `endpoint=` groups."""

    async def handler(req: Request) -> None:
        hits.append(tag)
        await req.respond(b"{}")

    svc = await add_service(nc, ServiceConfig(name=name, version="1.0.0", queue_group=queue.get("service")))
    await svc.add_endpoint(
        EndpointConfig(
            name="turn",
            subject=f"spielbus.turn.{name}",
            queue_group=queue.get("endpoint"),
            handler=handler,
        )
    )
    return svc


async def test_nats_py_services_default_to_queue_group_q_which_bot_check_refuses(nc: NATS) -> None:
    name = uid("py")
    svc = await _service(nc, name, [], "a")
    try:
        await flush(nc)
        found = await BotChecker(nc, name).discovery()
    finally:
        await svc.stop()
    assert not found.ok and "queue group is 'q'" in found.detail


@pytest.mark.parametrize("where", ["service", "endpoint"])
async def test_the_documented_line_sets_the_queue_group(nc: NATS, where: str) -> None:
    name = uid("py")
    svc = await _service(nc, name, [], "a", **{where: name})
    try:
        await flush(nc)
        found = await BotChecker(nc, name).discovery()
    finally:
        await svc.stop()
    assert found.ok, found.detail


@pytest.mark.parametrize(("fixed", "answers"), [(False, 2), (True, 1)])
async def test_a_replica_left_in_group_q_answers_every_turn_too(nc: NATS, fixed: bool, answers: int) -> None:
    """Two replicas of one bot: one in group `<name>`, the other on the services API's default
    ("q") or set right. Each request reaches one member of each group."""
    name = uid("py")
    hits: list[str] = []
    right = await _service(nc, name, hits, "right", service=name)
    other = await _service(nc, name, hits, "other", **({"service": name} if fixed else {}))
    try:
        await flush(nc)
        for _ in range(6):
            await nc.request(f"spielbus.turn.{name}", b"{}", timeout=5)
        await until(lambda: len(hits) >= 6 * answers, "every copy of the requests answered")
        await asyncio.sleep(0.2)  # a copy that should not exist would arrive now
    finally:
        await right.stop()
        await other.stop()
    assert len(hits) == 6 * answers


NODE_DEFAULT = """
const { connect } = require("nats");
(async () => {
  const nc = await connect({ servers: process.env.NATS_URL });
  const svc = await nc.services.add({ name: process.env.BOT, version: "1.0.0" });
  const subject = `spielbus.turn.${process.env.BOT}`;
  svc.addEndpoint("turn", { subject, handler: (e, m) => m.respond("{}") });
  await nc.flush();
  console.log("ready");
})();
"""


async def test_nats_js_services_default_to_queue_group_q(nc: NATS, nats_url: str) -> None:
    node = shutil.which("node")
    if node is None or not (BOTS / "node_modules" / "nats").is_dir():
        pytest.skip("node or examples/bots/node_modules missing: run `make node-deps`")
    name = uid("js")
    proc = subprocess.Popen(
        [node, "-e", NODE_DEFAULT],
        cwd=BOTS,
        env={"NATS_URL": nats_url, "BOT": name, "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
    )
    try:
        await until(lambda: agent_present(nc, name, wait_s=0.2), "the nats.js service on the bus", 30)
        found = await BotChecker(nc, name).discovery()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert not found.ok and "queue group is 'q'" in found.detail
