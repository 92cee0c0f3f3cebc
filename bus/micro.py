"""A `nats.micro` endpoint that serves its requests concurrently, with the framework's accounting.

nats.micro counts requests and errors, replies to a `ServiceError` with its code and description,
and times each request around its handler, which is what `$SRV.STATS` (`nats micro stats`)
reports. But its endpoint is a plain subscription callback, and nats-py awaits a subscription's
callback before it reads the next message: a handler that awaits a whole agent turn serves one
turn at a time, and more endpoints in one queue group do not help (the server picks a member at
random, busy or not). `add_concurrent_endpoint` keeps nats.micro's own per-request code (the
counting, the timing, the error replies) and only runs it in a task per request, so the handler
may raise `ServiceError` and take as long as the turn takes while other requests proceed.

Limits: it builds on nats-py's `Endpoint` internals (`_start`, `_handle_request`, the service's
`_endpoints` list), as of nats-py 2.16.0, which `pyproject.toml` pins; `tests/test_micro_stats.py`
fails if a nats-py upgrade changes them. Concurrency is not bounded here: the handler bounds it
(the agent runtime's slots and backlog).
"""

from __future__ import annotations

import asyncio
import time
from contextvars import ContextVar
from dataclasses import dataclass, replace

from nats.aio.msg import Msg
from nats.micro.service import Endpoint, EndpointConfig, Service


@dataclass(frozen=True)
class Arrival:
    """When a request was read off the connection, and how many of the endpoint's requests were
    in flight then (not counting it): a handler's admission check must not count requests that
    arrived in the same burst after it."""

    at: float  # time.monotonic()
    in_flight: int


_arrival: ContextVar[Arrival] = ContextVar("spielbus_request_arrival")


def request_arrival() -> Arrival:
    """The current request's `Arrival` (inside a `ConcurrentEndpoint` handler)."""
    return _arrival.get()


class ConcurrentEndpoint(Endpoint):
    """nats.micro's endpoint, each request handled in its own task (`tasks` holds those running)."""

    def __init__(self, service: Service, config: EndpointConfig) -> None:
        super().__init__(service, config)
        self.tasks: set[asyncio.Task[None]] = set()

    async def _start(self) -> None:
        assert not self._subscription
        self._subscription = await self._service._client.subscribe(
            subject=self._subject, queue=self._queue_group, cb=self._spawn
        )

    async def _spawn(self, msg: Msg) -> None:
        # The task copies this context, so its handler reads this request's arrival.
        _arrival.set(Arrival(at=time.monotonic(), in_flight=len(self.tasks)))
        task = asyncio.create_task(self._handle_request(msg))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _stop(self) -> None:
        if self._subscription is not None:  # not already drained
            await super()._stop()

    async def drain(self) -> None:
        """Stop taking requests, hand those already delivered to the handler, then wait for all.
        (nats.micro's own stop unsubscribes, dropping requests already delivered to this client.)"""
        if self._subscription is not None:
            await self._subscription.drain()
            self._subscription = None
        if self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)


async def add_concurrent_endpoint(service: Service, config: EndpointConfig) -> ConcurrentEndpoint:
    """`service.add_endpoint(config)`, but concurrent; the endpoint shows in `$SRV.INFO`/`STATS`."""
    config = replace(config, queue_group=config.queue_group or service._queue_group)
    endpoint = ConcurrentEndpoint(service, config)
    await endpoint._start()
    service._endpoints.append(endpoint)
    return endpoint
