"""Provider limits shared by every agent of a run: requests in flight, requests and tokens per minute.

`[llm.NAME]` may set `max_in_flight`, `requests_per_minute` and `tokens_per_minute`. Every agent that
names an endpoint with limits asks, before each attempt it sends, for a slot of that endpoint: the
key is the endpoint's base URL and model, so agents in other processes (and on other machines) that
name the same endpoint share one budget. The slots are kept by a small limiter service on the bus
(`LimiterService`): `spielbus run` starts one in its own process when any `[llm.NAME]` has limits;
on a cluster run one per bus with `python -m agents.llm.limits --nats URL [--prefix P]`.

The wire (JSON, internal to Spielbus, validated strictly; `<agent>` is the asking agent's name):
- `<prefix>.llm.limits.acquire.<agent>`, request/reply: `{key, limits, tokens, wait_s, hold_s}`; the
  reply comes when a slot is granted, or after `wait_s`: `{granted, lease, waited_s}`;
- `<prefix>.llm.limits.release.<agent>`, publish: `{key, lease, tokens, used}` once the attempt is over.

A lease belongs to the agent of the subject it was granted on: a release on another agent's subject
is ignored, and lease ids are random, so no agent can free (and so spend) another's slots.

Under accounts (`spielbus auth init`, bus/auth.py) the limiter serves in the `referee` account (the
`spielbus run` process's login) and each agent account imports only its own two subjects, so the
`<agent>` token is the server's word, not the client's. There `spielbus run` also gives the limiter
its table (`Entitlement`): for each endpoint key, the limits of the tournament file and the agents
that name it. A request for a key outside the table, or from an agent not entitled to the key, is
refused at once, and an agent's own `limits` are ignored: a hostile bot login can neither hold an
LLM endpoint's slots, nor rewrite its limits, nor queue in front of the agents that use it.
Without accounts everything on the bus is trusted (any client can answer any turn there too), and
the limiter serves every key with the limits the latest agent sent.

The rules, per key: at most `max_in_flight` leases at once; grants spaced by 60/`requests_per_minute`
seconds (no burst: a per-minute limit read at its strictest), counted from the grant, or from the end
of the latest attempt when it ended before the next grant was due (a provider counts arrivals, and a
client's send can lag its grant: a cold HTTP client took 0.6 s to send its first request here, so
spacing grants alone let two arrivals come closer than the limit); a token bucket of `tokens_per_minute`,
refilled continuously, charged each attempt's estimate (prompt estimate plus `max_tokens`) at grant
and corrected to the tokens it used at release. Waiters are served first come, first served. A
lease not released within its `hold_s` (a crashed agent) is dropped.

The wait is bounded by the turn's time: a turn that gets no slot before its time runs out fails
with `LLMUnavailable` (a provider fault: the endpoint's capacity, not the model's play), and the
time waited is recorded in the call's `waited_s`. Without a limiter service on the bus (or outside
an agent service), the same rules hold in the process only, and a warning says so once. The one
exception is the process serving the limiter: `spielbus run` sends its pre-flight request (one per
endpoint, before any match) through its own service (`serve_this_process`), so it counts too.

Limits: the service keeps its state in memory: restarting it forgets leases in flight (new grants
may then exceed `max_in_flight` until those attempts end). Without a table, the limits of a key are
the latest an agent sent; agents naming one endpoint with different limits overwrite each other's.
`python -m agents.llm.limits` (a limiter alone, for a cluster) serves without a table: under
accounts, only agent accounts reach it and none can touch another's leases, but an agent of the
run could still hold slots of an endpoint it does not name.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import itertools
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import nats.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents.llm.base import LLMUnavailable
from agents.llm.calls import estimate_tokens

if TYPE_CHECKING:
    from agents.llm.base import BackendRequest
    from agents.llm.config import LLMConfig

log = logging.getLogger(__name__)

STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
# Room kept after a slot for the request itself: a slot granted later than this is no use.
MIN_REQUEST_S = 0.5


class Limits(BaseModel):
    model_config = STRICT
    max_in_flight: int | None = Field(default=None, ge=1)
    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: int | None = Field(default=None, ge=1)

    def any(self) -> bool:
        return any(v is not None for v in self.model_dump().values())


class Acquire(BaseModel):
    model_config = STRICT
    key: str = Field(max_length=1000)
    limits: Limits
    tokens: int = Field(default=0, ge=0)
    wait_s: float = Field(ge=0, le=3600)
    hold_s: float = Field(gt=0, le=3600)


class Granted(BaseModel):
    model_config = STRICT
    granted: bool
    lease: str = ""
    waited_s: float = Field(default=0.0, ge=0)


class Release(BaseModel):
    model_config = STRICT
    key: str = Field(max_length=1000)
    lease: str = Field(max_length=100)
    tokens: int = Field(default=0, ge=0)
    used: int | None = Field(default=None, ge=0)


def subjects(prefix: str, agent: str = "*") -> tuple[str, str]:
    """The acquire and release subjects of one agent (the default `*`: every agent's, to serve them)."""
    return f"{prefix}.llm.limits.acquire.{agent}", f"{prefix}.llm.limits.release.{agent}"


@dataclass(frozen=True)
class Entitlement:
    """One endpoint key in the limiter's table: its limits, and the agents that may ask for it."""

    limits: Limits
    agents: frozenset[str]


@dataclass
class _Waiter:
    fut: asyncio.Future[Granted]
    tokens: int
    hold_s: float
    t0: float
    owner: str


@dataclass
class _Key:
    limits: Limits
    leases: dict[str, float] = field(default_factory=dict)  # lease -> when it expires
    owners: dict[str, str] = field(default_factory=dict)  # lease -> the agent it was granted to
    next_at: float = 0.0
    tokens: float = 0.0
    refilled: float | None = None
    queue: collections.deque[_Waiter] = field(default_factory=collections.deque)
    timer: asyncio.TimerHandle | None = None
    last_lease: str = ""


class Limiter:
    """The rules of the module docstring for any number of keys, in one event loop."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.keys: dict[str, _Key] = {}
        self._ids = itertools.count(1)

    async def acquire(self, req: Acquire, owner: str = "") -> Granted:
        """A slot for `owner` (the asking agent), or a refusal once `req.wait_s` has passed."""
        k = self.keys.get(req.key)
        if k is None:
            k = self.keys[req.key] = _Key(req.limits)
        k.limits = req.limits
        fut: asyncio.Future[Granted] = asyncio.get_running_loop().create_future()
        waiter = _Waiter(fut, req.tokens, req.hold_s, self.clock(), owner)
        k.queue.append(waiter)
        self._pump(k)
        try:
            async with asyncio.timeout(req.wait_s):
                return await asyncio.shield(fut)
        except TimeoutError:
            if fut.done():
                return fut.result()
            fut.cancel()
            self._pump(k)  # the head of the queue may have changed
            return Granted(granted=False, waited_s=round(self.clock() - waiter.t0, 3))

    def release(self, rel: Release, owner: str = "") -> None:
        """End a lease; ignored unless `owner` is the agent it was granted to."""
        k = self.keys.get(rel.key)
        if k is None or k.owners.get(rel.lease) != owner:
            return
        del k.owners[rel.lease]
        if k.leases.pop(rel.lease, None) is None:
            return
        rpm = k.limits.requests_per_minute
        if rpm is not None and rel.lease == k.last_lease:
            # The latest attempt ended before the next grant was due: space the next from its end,
            # which is after its arrival at the provider (a cold client's send can lag its grant).
            k.next_at = max(k.next_at, self.clock() + 60 / rpm)
        tpm = k.limits.tokens_per_minute
        if tpm is not None and rel.used is not None:
            # Charged the estimate at grant: give back what was not used (or take the excess).
            k.tokens = min(float(tpm), k.tokens + rel.tokens - rel.used)
        self._pump(k)

    def _refill(self, k: _Key, now: float) -> None:
        tpm = k.limits.tokens_per_minute
        if tpm is None:
            return
        if k.refilled is None:
            k.tokens = float(tpm)
        else:
            k.tokens = min(float(tpm), k.tokens + (now - k.refilled) * tpm / 60)
        k.refilled = now

    def _pump(self, k: _Key) -> None:
        now = self.clock()
        for lease, expires in list(k.leases.items()):
            if expires <= now:
                del k.leases[lease]
                k.owners.pop(lease, None)
        self._refill(k, now)
        if k.timer is not None:
            k.timer.cancel()
            k.timer = None
        limits = k.limits
        while k.queue:
            w = k.queue[0]
            if w.fut.done():
                k.queue.popleft()
                continue
            if limits.max_in_flight is not None and len(k.leases) >= limits.max_in_flight:
                wake = min(k.leases.values())  # a release wakes it sooner
                break
            ready = k.next_at
            need = float(min(w.tokens, limits.tokens_per_minute or 0))
            if limits.tokens_per_minute is not None and k.tokens < need:
                ready = max(ready, now + (need - k.tokens) * 60 / limits.tokens_per_minute)
            if ready > now:
                wake = ready
                break
            k.queue.popleft()
            # Ordered (the counter) and unguessable (the token): a lease is not another agent's to free.
            lease = f"{next(self._ids)}.{secrets.token_urlsafe(12)}"
            k.leases[lease] = now + w.hold_s
            k.owners[lease] = w.owner
            k.last_lease = lease
            if limits.requests_per_minute is not None:
                k.next_at = now + 60 / limits.requests_per_minute
            k.tokens -= need
            w.fut.set_result(Granted(granted=True, lease=lease, waited_s=round(now - w.t0, 3)))
        else:
            return
        k.timer = asyncio.get_running_loop().call_later(max(0.0, wake - now), self._pump, k)


class LimiterService:
    """The limiter on the bus: one per run (or per bus), see the module docstring."""

    def __init__(
        self, nc: NATS, prefix: str = "spielbus", table: dict[str, Entitlement] | None = None
    ) -> None:
        """`table`: the keys served and who may ask for each (module docstring); None: any, as asked."""
        self.nc = nc
        self.prefix = prefix
        self.table = table
        self.limiter = Limiter()
        self._subs: list[Any] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> LimiterService:
        acquire, release = subjects(self.prefix)
        self._subs = [
            await self.nc.subscribe(acquire, queue="spielbus-llm-limits", cb=self._on_acquire),
            await self.nc.subscribe(release, cb=self._on_release),
        ]
        await self.nc.flush()
        return self

    async def _on_acquire(self, msg: Msg) -> None:
        # One task per request: a waiting request must not hold up the others (callbacks run in turn).
        task = asyncio.create_task(self._answer(msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, msg: Msg) -> None:
        agent = _agent_of(msg.subject)
        try:
            req = Acquire.model_validate_json(msg.data)
        except ValidationError:
            log.warning("llm limits: ignoring a malformed acquire request from %s", agent)
            return
        if self.table is not None:
            entry = self.table.get(req.key)
            if entry is None or agent not in entry.agents:
                log.warning("llm limits: refused %s a slot of %s (not its endpoint)", agent, req.key[:200])
                with contextlib.suppress(Exception):
                    await msg.respond(Granted(granted=False).model_dump_json().encode())
                return
        granted = await self._grant(req, agent)
        try:
            await msg.respond(granted.model_dump_json().encode())
        except Exception:
            log.info("llm limits: could not answer an acquire request", exc_info=True)
            if granted.granted:
                self.limiter.release(Release(key=req.key, lease=granted.lease), agent)

    async def acquire_here(self, req: Acquire) -> Granted:
        """A slot for a request this process sends itself (the run's pre-flight): trusted, so no
        entitlement check, but the table's limits for a key it has."""
        return await self._grant(req, HERE)

    async def _grant(self, req: Acquire, owner: str) -> Granted:
        """A slot for `owner` under the table's limits of `req.key` when the table has them (an
        agent's own limits are ignored there), else under the limits it sent."""
        entry = self.table.get(req.key) if self.table is not None else None
        if entry is not None:
            req = req.model_copy(update={"limits": entry.limits})
        return await self.limiter.acquire(req, owner)

    async def _on_release(self, msg: Msg) -> None:
        try:
            self.limiter.release(Release.model_validate_json(msg.data), _agent_of(msg.subject))
        except ValidationError:
            log.warning("llm limits: ignoring a malformed release")

    async def stop(self) -> None:
        for sub in self._subs:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        for task in list(self._tasks):
            task.cancel()


def _agent_of(subject: str) -> str:
    """The agent an acquire or release came from: its subject's last token (the server's word under
    accounts, where each agent account imports only its own subjects)."""
    return subject.rsplit(".", 1)[-1]


# The owner of slots taken by the limiter's own process: no subject token is empty.
HERE = ""
_local = Limiter()
_here: LimiterService | None = None
_warned = False


def serve_this_process(service: LimiterService | None) -> None:
    """Make the requests this process sends outside any agent (`spielbus run`'s pre-flight) take
    their slots from `service`, the run's limiter, so they count against the limits the agents
    share: the pre-flight's request and an agent's first came under a second apart against a
    limit of one every 3 s. None: back to the process's own limiter."""
    global _here
    _here = service


@dataclass
class Slot:
    """One attempt's slot: `release` it once the attempt is over (with the tokens it used, if known)."""

    key: str = ""
    lease: str = ""
    tokens: int = 0
    waited_s: float = 0.0
    bus: tuple[NATS, str, str] | None = None
    here: Limiter | None = None  # the limiter of this process that granted it, when not the bus's
    _released: bool = False

    async def release(self, used: int | None = None) -> None:
        if self._released or not self.lease:
            return
        self._released = True
        rel = Release(key=self.key, lease=self.lease, tokens=self.tokens, used=used)
        if self.bus is None:
            (self.here or _local).release(rel, HERE)
            return
        nc, prefix, agent = self.bus
        with contextlib.suppress(Exception):
            await nc.publish(subjects(prefix, agent)[1], rel.model_dump_json().encode())


def limits_of(config: LLMConfig) -> Limits:
    return Limits(
        max_in_flight=config.max_in_flight,
        requests_per_minute=config.requests_per_minute,
        tokens_per_minute=config.tokens_per_minute,
    )


def endpoint_key(config: LLMConfig) -> str:
    """The key an endpoint's limits are shared under: its base URL and model."""
    return f"{config.resolved_base_url()}|{config.model}"


def entitlements(llm_options: dict[str, dict[str, Any]]) -> dict[str, Entitlement]:
    """The limiter's table from each agent's `llm` options (agent name -> options): every endpoint
    key with limits, its limits, and the agents naming it. Agents naming one key with different
    limits: the strictest of each."""
    from agents.llm.config import LLMConfig

    table: dict[str, Entitlement] = {}
    for agent, options in llm_options.items():
        try:
            config = LLMConfig.model_validate(options)
        except ValidationError:
            continue  # the agent refuses it itself, and takes no slot
        limits = limits_of(config)
        if not limits.any():
            continue
        key = endpoint_key(config)
        old = table.get(key)
        if old is not None:
            limits = Limits(
                **{f: _strictest(getattr(old.limits, f), getattr(limits, f)) for f in Limits.model_fields}
            )
        table[key] = Entitlement(limits, (old.agents if old else frozenset()) | {agent})
    return table


def _strictest(a: float | None, b: float | None) -> Any:
    return b if a is None else a if b is None else min(a, b)


class ProviderLimits:
    """An LLM client's side of its endpoint's shared limits (inactive when `[llm.NAME]` sets none)."""

    def __init__(self, config: LLMConfig) -> None:
        self.limits = limits_of(config)
        self.active = self.limits.any()
        self.key = endpoint_key(config)

    async def acquire(self, req: BackendRequest, timeout_s: float) -> Slot:
        """A slot for one attempt within `timeout_s`, or `LLMUnavailable`."""
        if not self.active:
            return Slot()
        tokens = estimate_tokens(c for _, c in req.messages) + int(req.max_tokens or 0)
        wait_s = max(0.0, timeout_s - MIN_REQUEST_S)
        ask = Acquire(key=self.key, limits=self.limits, tokens=tokens, wait_s=wait_s, hold_s=timeout_s + 5)
        t0 = time.monotonic()
        bus = _bus()
        granted = await self._remote(bus, ask) if bus is not None else None
        here = None
        if granted is None:
            bus = None
            if _here is not None:
                here = _here.limiter
                granted = await _here.acquire_here(ask)
            else:
                granted = await _local.acquire(ask, HERE)
        if not granted.granted:
            raise LLMUnavailable(
                f"no slot under the shared limits of {self.key} within the turn's time ({wait_s:.1f}s)"
            )
        return Slot(self.key, granted.lease, tokens, round(time.monotonic() - t0, 3), bus, here)

    async def _remote(self, bus: tuple[NATS, str, str], ask: Acquire) -> Granted | None:
        """The service's answer; None when no service listens (the process's own limiter then)."""
        global _warned
        nc, prefix, agent = bus
        try:
            msg = await nc.request(
                subjects(prefix, agent)[0], ask.model_dump_json().encode(), timeout=ask.wait_s + 2
            )
            return Granted.model_validate_json(msg.data)
        except nats.errors.NoRespondersError:
            if not _warned:
                _warned = True
                log.warning(
                    "no LLM limiter service on the bus (%s): provider limits hold per process only",
                    subjects(prefix, agent)[0],
                )
            return None
        except (nats.errors.TimeoutError, TimeoutError):
            return Granted(granted=False, waited_s=ask.wait_s)
        except (nats.errors.Error, ValidationError):
            log.warning(
                "llm limits: the limiter service failed; this process's own limits apply", exc_info=True
            )
            return None


def _bus() -> tuple[NATS, str, str] | None:
    """The agent service's bus connection, prefix and name, when this process serves an agent."""
    from agents.runtime import current_bus

    return current_bus()


def needs_limiter(sections: dict[str, dict[str, Any]]) -> bool:
    """Whether any `[llm.NAME]` section of a tournament file sets a provider limit."""
    names = set(Limits.model_fields)
    return any(names & set(section) for section in sections.values())


def main(argv: list[str] | None = None) -> int:
    """`python -m agents.llm.limits`: the limiter service alone, for a bus without `spielbus run`."""
    from bus import loop as bus_loop
    from bus.connect import connect

    p = argparse.ArgumentParser(prog="python -m agents.llm.limits", description=__doc__.split("\n")[0])
    p.add_argument("--nats", default=None, help="NATS URL (default: $NATS_URL)")
    p.add_argument("--prefix", default="spielbus", help="subject prefix")
    args = p.parse_args(argv)

    async def run() -> None:
        nc = await connect(args.nats, name="spielbus-llm-limits")
        service = await LimiterService(nc, args.prefix).start()
        log.info("llm limiter serving %s", subjects(args.prefix)[0])
        try:
            await asyncio.Event().wait()
        finally:
            await service.stop()
            await nc.close()

    logging.basicConfig(level=logging.INFO)
    with contextlib.suppress(KeyboardInterrupt):
        bus_loop.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
