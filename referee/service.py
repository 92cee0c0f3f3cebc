"""The referee worker as a `nats.micro` service: found by `$SRV.PING`, described by `$SRV.INFO`,
its matches counted in `$SRV.STATS` (`nats micro ping|info|stats spielbus-referee`).

Each worker registers one service instance (its own id) named `REFEREE_SERVICE`, with metadata
naming the subject prefix, the concurrency and the protocol version, and one endpoint, `matches`.
A worker's work does not arrive as requests (it pulls specs from the `SPIELBUS_SCHEDULE` work
queue), so `MatchEndpoint` subscribes to nothing: each attempt the worker plays is counted with
nats.micro's own fields, as its `_handle_request` counts a request (one request per attempt,
its time from start to `ended` stored, an error per attempt aborted or failed, the last error's
repr), and the stats' `data` carries the live numbers (matches in flight, played, aborted).

Limits: builds on nats-py's `Endpoint` counters and `_start`/`_stop` (nats-py 2.16.0, which
`pyproject.toml` pins; tests/test_referee_service.py fails if an upgrade changes them). The name
is shared by every worker on the bus: an agent named `spielbus-referee` would be confused with it
in provenance lookups (`$SRV.INFO.<agent>`). Under accounts the referee user may subscribe to the
discovery subjects of this name and answer them (bus/auth.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from nats.aio.client import Client as NATS
from nats.micro import add_service
from nats.micro.request import Request
from nats.micro.service import Endpoint, EndpointConfig, EndpointStats, Service, ServiceConfig

from bus.protocol import PROTOCOL_VERSION
from bus.subjects import REFEREE_SERVICE as REFEREE_SERVICE  # re-exported: the name is the referee's
from bus.subjects import Subjects


async def _never_called(request: Request) -> None:
    raise RuntimeError("the matches endpoint takes no requests")


class MatchEndpoint(Endpoint):
    """nats.micro's endpoint for work that arrives from a work queue, not as requests: `counting()`
    around each attempt does the accounting `_handle_request` does around a request."""

    async def _start(self) -> None:
        """Nothing to subscribe to: the specs come from JetStream."""

    async def _stop(self) -> None:
        """Nothing to unsubscribe."""

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        start = time.perf_counter_ns()
        self._num_requests += 1
        try:
            yield
        except Exception as error:
            self._num_errors += 1
            self._last_error = repr(error)  # type: ignore[assignment]  # nats-py annotates it None
            raise
        finally:
            self._processing_time += time.perf_counter_ns() - start
            self._average_processing_time = int(self._processing_time / self._num_requests)


class RefereeService:
    """One worker's `nats.micro` registration: `start`, count attempts with `counting()`, `stop`."""

    def __init__(self, service: Service, endpoint: MatchEndpoint) -> None:
        self.service = service
        self.endpoint = endpoint

    @classmethod
    async def start(
        cls, nc: NATS, subjects: Subjects, concurrency: int, live: Callable[[], dict[str, Any]]
    ) -> RefereeService:
        """Register on `nc`; `live()` gives the numbers reported as the endpoint's stats `data`."""

        def data(_: EndpointStats) -> dict[str, Any]:
            return live()

        service = await add_service(
            nc,
            ServiceConfig(
                name=REFEREE_SERVICE,
                version="1.0.0",
                description=f"spielbus referee worker (subjects {subjects.prefix}.*)",
                metadata={
                    "prefix": subjects.prefix,
                    "concurrency": str(concurrency),
                    "protocol": str(PROTOCOL_VERSION),
                },
                stats_handler=data,
            ),
        )
        endpoint = MatchEndpoint(
            service,
            EndpointConfig(
                name="matches",
                subject=subjects.schedule,  # where the specs come from (pulled, not requested)
                handler=_never_called,
                metadata={"source": f"JetStream work queue {subjects.schedule_stream}"},
            ),
        )
        service._endpoints.append(endpoint)
        return cls(service, endpoint)

    def counting(self) -> contextlib.AbstractContextManager[None]:
        return self.endpoint.counting()

    async def stop(self) -> None:
        with contextlib.suppress(Exception):  # the connection may be gone already
            await self.service.stop()
