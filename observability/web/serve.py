"""Starting the watchers of a referee process together: the live feed, the page, the metrics.

`spielbus run` and `spielbus referee` both call `start_observability`. The feed
follows `SPIELBUS_MATCHES` whenever the page or the metrics are on (the metrics
need it for the live ratings). Ports: an int (0: any free port) or None (off);
with `fallback` a busy port is replaced by a free one. They listen on 127.0.0.1 unless
`host` says otherwise (the page serves ended matches' full records without a login).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from nats.aio.client import Client as NATS

from bus.subjects import Subjects
from observability.metrics import MergedCollector, MetricsServer, RefereeMetrics, serve_metrics
from observability.web.app import WebServer, start_web
from observability.web.feed import MatchFeed
from referee.config import RatingsConfig


@dataclass
class Observability:
    feed: MatchFeed | None = None
    web: WebServer | None = None
    metrics: RefereeMetrics | None = None
    metrics_server: MetricsServer | None = None
    child_urls: list[str] = field(default_factory=list)

    def where(self, closes: bool = False) -> list[str]:
        """Human lines saying where to look; a busy port's replacement is said. `closes`: add that
        they close when the run ends (`spielbus run` without `--keep-serving`)."""
        out = []
        servers = [("Live match page", self.web), ("Prometheus metrics", self.metrics_server)]
        for what, server in servers:
            if server is not None:
                busy = f" (port {server.busy} was busy: a free port instead)" if server.busy else ""
                out.append(f"{what}: {server.url}{busy}")
        if out and closes:
            out.append("These close when the run ends; `--keep-serving` keeps them up after the report.")
        return out

    async def stop(self) -> None:
        if self.web is not None:
            await self.web.stop()
        if self.feed is not None:
            await self.feed.close()
        if self.metrics_server is not None:
            with contextlib.suppress(Exception):
                self.metrics_server.stop()


async def start_observability(
    nc: NATS,
    subjects: Subjects,
    *,
    metrics_port: int | None,
    web_port: int | None,
    host: str = "127.0.0.1",
    fallback: bool = False,
    ratings_config: RatingsConfig | None = None,
    fallback_threshold: float = 0.05,
    child_metrics: Callable[[], list[str]] | None = None,
    ladder: Callable[[], dict[str, object]] | None = None,
) -> Observability:
    obs = Observability()
    if metrics_port is None and web_port is None:
        return obs
    if metrics_port is not None:
        obs.metrics = RefereeMetrics()
        if child_metrics is not None:
            obs.metrics.registry.register(MergedCollector(child_metrics))
        obs.metrics_server = serve_metrics(obs.metrics.registry, metrics_port, host=host, fallback=fallback)
    metrics = obs.metrics
    obs.feed = MatchFeed(
        subjects,
        ratings_config=ratings_config,
        fallback_threshold=fallback_threshold,
        on_ratings=(lambda _tid, rates: metrics.set_ratings(rates)) if metrics is not None else None,
    )
    if metrics is not None:
        metrics.before_scrape = obs.feed.refresh_latest  # live ratings on demand, in the scrape thread
    await obs.feed.follow(nc)
    if web_port is not None:
        obs.web = await start_web(obs.feed, web_port, host=host, fallback=fallback, ladder=ladder)
    return obs
