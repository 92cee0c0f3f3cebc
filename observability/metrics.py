"""Referee-side Prometheus metrics, fed by the referee's own match events.

`RefereeMetrics.on_event` is an `EventPublisher` listener: it sees every event
this process's referee workers publish, before spectators do. What it exports
(prefix `spielbus_`, base units, labels bounded by agents, games and fixed
enums; never a match id):

- `spielbus_turn_latency_seconds{game,agent}` histogram: request to reply as the
  referee's clock measured it, for legal moves and faulty answers alike (a
  timeout counts as the full deadline; `no_responder` is not a turn and is left out).
- `spielbus_moves_total{game,agent}`: legal moves agents chose (forced random
  moves of the `random` fault policy are faults, not moves).
- `spielbus_fallback_moves_total{game,agent}`: moves an agent marked as fallbacks (its LLM
  failed and it played a random legal move); `spielbus_move_llm_calls_total{game,agent}` and
  `spielbus_move_tokens_total{game,agent}`: LLM calls and tokens (prompt and completion) its
  moves reported. Divided by `spielbus_moves_total`: fallbacks, calls and tokens per move, the
  same columns as the standings.
- `spielbus_faults_total{game,agent,reason}`, reason one of timeout, illegal,
  malformed, no_responder, error, budget.
- `spielbus_matches_total{game,outcome}`, `spielbus_matches_in_flight{game}`.
- `spielbus_agent_results_total{game,agent,result}`, result win (sole first place),
  loss, draw (a shared first place); matches the referee could not finish
  (outcome `error`) count for no one. The standings in Grafana come from this.
- `spielbus_rating_elo{agent}`, `spielbus_rating_bt{agent}`: the current ratings
  of the most recently updated tournament (set by whoever holds the records:
  `spielbus run`, or the live feed of `spielbus referee`).
- `spielbus_ladder_rating_bt{game,entry}` with `_low` / `_high` (its 95% interval) and
  `spielbus_ladder_games{game,entry}`: the ladder's leaderboard (`spielbus ladder FILE.toml`),
  one series per entry (name@provenance), set as results are counted; an entry idle or departed
  for the ladder file's `[limits] idle_s`, or past its account's `entries_per_account`, has its
  series removed (referee/ladder/bounds.py), so bots cannot grow the label sets.

Limits: hidden steps of imperfect-information matches carry no latency in their
public `moved` event, so their latency and move counts are observed when the
match ends, from the full record; so are the faults that did not end the match
(under the `retry` and `random` policies no event reports them before the end).
Forfeits are reported at once. Game labels are `GameSpec.label()` (name plus
parameters), bounded by the tournament files in use.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    start_http_server,
)
from prometheus_client.core import Metric

from bus.observability import LATENCY_BUCKETS
from bus.protocol import FAULT_REASONS, FaultRecord, MatchEvent, MatchRecord, MoveRecord
from referee.ladder.board import BoardRow
from referee.ratings import Rating

log = logging.getLogger(__name__)

# `_created` series double the series count and no dashboard uses them.
disable_created_metrics()


# Names of every metric family the referee exports (tests check dashboards against these).
REFEREE_METRICS: tuple[str, ...] = (
    "spielbus_turn_latency_seconds",
    "spielbus_moves_total",
    "spielbus_fallback_moves_total",
    "spielbus_move_llm_calls_total",
    "spielbus_move_tokens_total",
    "spielbus_faults_total",
    "spielbus_matches_total",
    "spielbus_agent_results_total",
    "spielbus_matches_in_flight",
    "spielbus_rating_elo",
    "spielbus_rating_bt",
    "spielbus_ladder_rating_bt",
    "spielbus_ladder_rating_bt_low",
    "spielbus_ladder_rating_bt_high",
    "spielbus_ladder_games",
)


@dataclass
class _Live:
    """What this process remembers of a match in flight: which agent turns it already counted."""

    game: str
    counted_turns: set[int] = field(default_factory=set)
    counted_faults: int = 0


class _ScrapeHook:
    """A collector with no families: runs `RefereeMetrics.before_scrape` at each scrape."""

    def __init__(self, metrics: RefereeMetrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        hook = self.metrics.before_scrape
        if hook is not None:
            try:
                hook()
            except Exception:
                log.warning("metrics: the scrape hook failed", exc_info=True)
        return []


class RefereeMetrics:
    """The referee's metric families on one registry (a fresh one unless given)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        # Called at each scrape before any family is read (registered first: the registry
        # collects in registration order). Never raises into the scrape.
        self.before_scrape: Callable[[], None] | None = None
        r.register(_ScrapeHook(self))
        self.turn_latency = Histogram(
            "spielbus_turn_latency_seconds",
            "Turn latency as the referee measures it: request sent to reply received.",
            ["game", "agent"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.moves = Counter("spielbus_moves", "Legal moves chosen by agents.", ["game", "agent"], registry=r)
        self.fallback_moves = Counter(
            "spielbus_fallback_moves",
            "Moves agents marked as fallbacks (their LLM failed).",
            ["game", "agent"],
            registry=r,
        )
        self.move_llm_calls = Counter(
            "spielbus_move_llm_calls", "LLM calls reported in moves' usage.", ["game", "agent"], registry=r
        )
        self.move_tokens = Counter(
            "spielbus_move_tokens",
            "LLM tokens (prompt and completion) reported in moves' usage.",
            ["game", "agent"],
            registry=r,
        )
        self.faults = Counter(
            "spielbus_faults", "Bad answers by reason.", ["game", "agent", "reason"], registry=r
        )
        self.matches = Counter(
            "spielbus_matches", "Finished matches by game and outcome.", ["game", "outcome"], registry=r
        )
        self.agent_results = Counter(
            "spielbus_agent_results",
            "Finished matches per agent by result (win, loss, draw).",
            ["game", "agent", "result"],
            registry=r,
        )
        self.in_flight = Gauge(
            "spielbus_matches_in_flight", "Matches being played by this process.", ["game"], registry=r
        )
        self.elo = Gauge(
            "spielbus_rating_elo", "Current Elo rating (LLM Coaching paper, B.2).", ["agent"], registry=r
        )
        self.bt = Gauge(
            "spielbus_rating_bt", "Current Bradley-Terry rating on the Elo scale.", ["agent"], registry=r
        )
        ladder = ["game", "entry"]
        self.ladder_bt = Gauge(
            "spielbus_ladder_rating_bt", "Ladder Bradley-Terry rating (Elo scale).", ladder, registry=r
        )
        self.ladder_low = Gauge(
            "spielbus_ladder_rating_bt_low", "Lower end of its 95% interval.", ladder, registry=r
        )
        self.ladder_high = Gauge(
            "spielbus_ladder_rating_bt_high", "Upper end of its 95% interval.", ladder, registry=r
        )
        self.ladder_games = Gauge("spielbus_ladder_games", "Ladder games counted.", ladder, registry=r)
        self._ladder_series: set[tuple[str, str]] = set()
        self._live: dict[str, _Live] = {}
        self._lock = threading.Lock()

    # -- events -------------------------------------------------------------------------------

    def on_event(self, event: MatchEvent) -> None:
        """`EventPublisher` listener. Never raises: metrics must not cost a match."""
        try:
            self._on_event(event)
        except Exception:
            log.warning("metrics: could not account for a %s event", event.type, exc_info=True)

    def _on_event(self, event: MatchEvent) -> None:
        # A chess start position (`fen`: puzzles, opening sets) would make the label set unbounded.
        game = (
            event.game.model_copy(update={"params": {**event.game.params, "fen": "*"}}).label()
            if ("fen" in event.game.params)
            else event.game.label()
        )
        with self._lock:
            if event.type == "started":
                if event.match_id not in self._live:
                    self._live[event.match_id] = _Live(game)
                    self.in_flight.labels(game).inc()
                    # Every (game, agent, reason) fault series exists from the first match on, at 0:
                    # a clean run's fault panels show zeros, not "no data" (and rate() has a start).
                    for agent in dict.fromkeys(event.seats):
                        for reason in FAULT_REASONS:
                            self.faults.labels(game, agent, reason)
            elif event.type == "moved":
                live = self._live.get(event.match_id)
                if live is not None and event.move is not None and not event.hidden:
                    if self._count_move(game, event.move):
                        live.counted_turns.add(event.move.turn)
            elif event.type == "forfeit":
                live = self._live.get(event.match_id)
                if live is not None and event.fault is not None:
                    self._count_fault(game, event.fault)
                    live.counted_faults += 1
            elif event.type == "ended":
                self._ended(event.match_id, game, event.record)

    def _count_move(self, game: str, move: MoveRecord) -> bool:
        """Count one agent move; False for chance steps and forced moves (not agent choices)."""
        if move.agent is None or move.player < 0 or move.forced:
            return False
        self.moves.labels(game, move.agent).inc()
        # Created at 0 with the first move, so per-move ratios have a series for every agent.
        fallbacks = self.fallback_moves.labels(game, move.agent)
        calls = self.move_llm_calls.labels(game, move.agent)
        tokens = self.move_tokens.labels(game, move.agent)
        if move.stats is not None and (move.stats.model_extra or {}).get("fallback"):
            fallbacks.inc()
        if move.usage is not None:
            calls.inc(move.usage.llm_calls)
            tokens.inc(move.usage.prompt_tokens + move.usage.completion_tokens)
        if move.latency_ms is not None:
            self.turn_latency.labels(game, move.agent).observe(move.latency_ms / 1000)
        return True

    def _count_fault(self, game: str, fault: FaultRecord) -> None:
        self.faults.labels(game, fault.agent, fault.reason).inc()
        if fault.reason != "no_responder" and fault.latency_ms:
            self.turn_latency.labels(game, fault.agent).observe(fault.latency_ms / 1000)

    def _ended(self, match_id: str, game: str, record: MatchRecord | None) -> None:
        live = self._live.pop(match_id, None)
        if live is not None:
            self.in_flight.labels(game).dec()
        if record is None:
            return
        counted = live.counted_turns if live else set()
        for move in record.moves:
            if move.turn not in counted:
                self._count_move(game, move)
        # A forfeit's fault is the record's last one and its event already counted it.
        skip = live.counted_faults if live else 0
        for fault in record.faults[: len(record.faults) - skip]:
            self._count_fault(game, fault)
        self.matches.labels(game, record.outcome).inc()
        if record.outcome != "error" and len(record.ranks) == len(record.seats):
            firsts = record.ranks.count(1)
            for agent, rank in zip(record.seats, record.ranks, strict=True):
                result = "loss" if rank != 1 else "win" if firsts == 1 else "draw"
                self.agent_results.labels(game, agent, result).inc()

    # -- ratings ------------------------------------------------------------------------------

    def set_ratings(self, rates: Iterable[Rating]) -> None:
        for r in rates:
            self.elo.labels(r.agent).set(r.elo)
            self.bt.labels(r.agent).set(r.bt)

    def set_ladder(self, rows: Iterable[BoardRow]) -> None:
        """The ladder's leaderboard as it is now: series of entries no longer in `rows` (idle,
        departed, or past their account's cap: referee/ladder/bounds.py) are removed."""
        gauges = (self.ladder_bt, self.ladder_low, self.ladder_high, self.ladder_games)
        now = set()
        for row in rows:
            now.add((row.game, row.entry))
            for gauge, value in zip(gauges, (row.bt, row.bt_low, row.bt_high, row.games), strict=True):
                gauge.labels(row.game, row.entry).set(value)
        for labels in self._ladder_series - now:
            for gauge in gauges:
                with contextlib.suppress(KeyError):
                    gauge.remove(*labels)
        self._ladder_series = now


# -- serving ----------------------------------------------------------------------------------


def url_host(host: str) -> str:
    """The host part of a URL for a listening address, as bound: `0.0.0.0` stays (every interface)."""
    host = host or "0.0.0.0"
    return f"[{host}]" if ":" in host else host


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


@dataclass
class MetricsServer:
    """A running `/metrics` endpoint; `stop()` closes it."""

    port: int
    server: WSGIServer
    thread: threading.Thread
    host: str = "127.0.0.1"
    busy: int | None = None  # the port asked for, when it was busy and a free one was taken

    @property
    def url(self) -> str:
        return f"http://{url_host(self.host)}:{self.port}/metrics"

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.server.shutdown()
            self.server.server_close()


def serve_metrics(
    registry: CollectorRegistry, port: int, *, host: str = "127.0.0.1", fallback: bool = False
) -> MetricsServer:
    """Serve `registry` on `port` (0: any free port). With `fallback`, a busy port falls back to a
    free one instead of failing (what `spielbus run` does; a service keeps its fixed port)."""
    busy = None
    if fallback and port and not port_free(port, host):
        log.info("metrics port %s is busy; using a free one", port)
        busy, port = port, 0
    server, thread = start_http_server(port, addr=host, registry=registry)
    return MetricsServer(port=int(server.server_port), server=server, thread=thread, host=host, busy=busy)


class MergedCollector:
    """Re-exports other processes' `/metrics` (the agents `spielbus run` starts) as part of this
    registry, so the embedded stack as a whole has one scrape target.

    Families of the same name from several sources are merged (their label sets differ by
    `agent`). A source that does not answer within `timeout` is left out of that scrape.
    """

    def __init__(self, urls: Callable[[], list[str]], timeout: float = 2.0) -> None:
        self._urls = urls
        self.timeout = timeout

    def describe(self) -> list[Metric]:
        # Nothing to reserve: the merged names are only known at scrape time.
        return []

    def collect(self) -> Iterable[Metric]:
        import urllib.request

        from prometheus_client.parser import text_string_to_metric_families

        merged: dict[str, Metric] = {}
        for url in self._urls():
            try:
                with urllib.request.urlopen(url, timeout=self.timeout) as resp:
                    text = resp.read().decode("utf-8", "replace")
            except OSError:
                continue
            for fam in text_string_to_metric_families(text):
                have = merged.get(fam.name)
                if have is None:
                    merged[fam.name] = fam
                else:
                    have.samples.extend(fam.samples)
        yield from merged.values()
