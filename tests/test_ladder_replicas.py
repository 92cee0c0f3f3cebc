"""The ladder's bucket is replicated like the match streams: on a three-server cluster with
`--stream-replicas 3` it is created with three copies (with one, losing its server would stop the
ladder's records). Three real nats-servers routed on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from bus.connect import connect
from bus.process import free_port
from bus.server import EmbeddedNats
from bus.streams import set_stream_replicas
from referee.ladder.store import BUCKET, LadderStore


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[EmbeddedNats]]:
    routes = [free_port() for _ in range(3)]
    servers = []
    for i, port in enumerate(routes):
        conf = tmp_path / f"n{i}.conf"
        others = ", ".join(f'"nats://127.0.0.1:{r}"' for r in routes if r != port)
        conf.write_text(
            f'server_name: "n{i}"\ncluster {{\n  name: "c"\n  listen: "127.0.0.1:{port}"\n'
            f"  routes: [{others}]\n}}\n"
        )
        servers.append(EmbeddedNats(config=conf))
    try:
        for s in servers:
            s.start()
        yield servers
    finally:
        for s in servers:
            s.stop()


async def test_the_ladder_bucket_has_the_streams_replicas(cluster: list[EmbeddedNats]) -> None:
    nc = await connect(cluster[0].url, name="ladder-replicas-test")
    set_stream_replicas(3)
    try:
        js = nc.jetstream()
        for _ in range(120):  # until the cluster has elected its JetStream meta leader
            try:
                await LadderStore.open(js)
                break
            except Exception:
                await asyncio.sleep(0.5)
        info = await js.stream_info(f"KV_{BUCKET}")
        assert info.config.num_replicas == 3
    finally:
        set_stream_replicas(None)
        await nc.close()
