"""Agent-side Prometheus metrics: `spielbus agent KIND --name N --metrics-port P` serves them.

Two sources feed them:

- the runtime's turn observer (`AgentMetrics.observe_turn`, passed as
  `AgentService(on_turn=...)`): one call per answered turn, with the `Move`
  whose `usage` the agent reports to the referee. Turn counts, decision time,
  LLM calls, prompt and completion tokens and cache hits come from there, so
  they are the same numbers the match record keeps;
- `agents.llm.hooks.record_llm_call(...)`, called by the LLM layer once per backend request
  (this module installs itself as its listener, so the LLM layer never imports the runtime):
  request latency, errors, tokens per request, and each call's cost (`record_llm_cost`, from the
  endpoint's price table). It does not count tokens
  into the totals above (that would count them twice).

Labels: `agent`, `model` (the strategy's models joined by `+`, `none` for
classical agents), `kind` (prompt/completion), `result` (ok/error). One agent
per process: `record_llm_call` without an agent name uses the one
`start_agent_metrics` registered. Metric names are in `AGENT_METRICS`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics

from agents.llm.hooks import set_listener
from agents.runtime import TurnObserver
from bus.observability import LATENCY_BUCKETS
from bus.protocol import CompactTurn, Move, Turn

log = logging.getLogger(__name__)

disable_created_metrics()

TOKEN_BUCKETS: tuple[float, ...] = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)

AGENT_METRICS: tuple[str, ...] = (
    "spielbus_agent_turns_total",
    "spielbus_agent_decision_seconds",
    "spielbus_llm_calls_total",
    "spielbus_llm_tokens_total",
    "spielbus_llm_cache_hits_total",
    "spielbus_llm_request_seconds",
    "spielbus_llm_requests_total",
    "spielbus_llm_errors_total",
    "spielbus_llm_request_tokens",
    "spielbus_llm_cost_dollars_total",
)


def model_label(models: Sequence[str]) -> str:
    return "+".join(models) if models else "none"


class AgentMetrics:
    def __init__(
        self, agent: str, models: Sequence[str] = (), registry: CollectorRegistry | None = None
    ) -> None:
        self.agent = agent
        self.model = model_label(models)
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.turns = Counter(
            "spielbus_agent_turns",
            "Turns answered, by result (ok: a move was sent; error: the strategy raised).",
            ["agent", "model", "result"],
            registry=r,
        )
        self.decision = Histogram(
            "spielbus_agent_decision_seconds",
            "Time the agent spent on a turn, from request received to reply sent.",
            ["agent", "model"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.llm_calls = Counter(
            "spielbus_llm_calls", "LLM calls reported in moves' usage.", ["agent", "model"], registry=r
        )
        self.tokens = Counter(
            "spielbus_llm_tokens",
            "LLM tokens reported in moves' usage, by kind (prompt, completion).",
            ["agent", "model", "kind"],
            registry=r,
        )
        self.cache_hits = Counter(
            "spielbus_llm_cache_hits",
            "LLM calls answered from the response cache.",
            ["agent", "model"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "spielbus_llm_request_seconds",
            "Latency of LLM backend requests (cache hits excluded).",
            ["agent", "model"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.requests = Counter(
            "spielbus_llm_requests",
            "LLM backend requests by result (ok, error, cached).",
            ["agent", "model", "result"],
            registry=r,
        )
        self.errors = Counter(
            "spielbus_llm_errors", "LLM backend requests that failed.", ["agent", "model"], registry=r
        )
        self.request_tokens = Histogram(
            "spielbus_llm_request_tokens",
            "Tokens per LLM backend request, by kind (prompt, completion).",
            ["agent", "model", "kind"],
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.cost = Counter(
            "spielbus_llm_cost_dollars",
            "Dollars spent on LLM calls, from the endpoint's price table ([llm.NAME] price).",
            ["agent", "model"],
            registry=r,
        )
        self._lock = threading.Lock()

    def observe_turn(self, turn: Turn | CompactTurn, move: Move | None, seconds: float) -> None:
        """The runtime's `on_turn` observer. Never raises: metrics must not cost a turn."""
        try:
            with self._lock:
                a, m = self.agent, self.model
                self.turns.labels(a, m, "ok" if move is not None else "error").inc()
                self.decision.labels(a, m).observe(max(seconds, 0.0))
                if move is None:
                    return
                u = move.usage
                if u.llm_calls:
                    self.llm_calls.labels(a, m).inc(u.llm_calls)
                if u.prompt_tokens:
                    self.tokens.labels(a, m, "prompt").inc(u.prompt_tokens)
                if u.completion_tokens:
                    self.tokens.labels(a, m, "completion").inc(u.completion_tokens)
                if u.cache_hits:
                    self.cache_hits.labels(a, m).inc(u.cache_hits)
        except Exception:
            log.warning("metrics: could not account for turn %s", turn.turn, exc_info=True)

    def llm_call(
        self,
        agent: str | None,
        model: str,
        seconds: float,
        prompt_tokens: int,
        completion_tokens: int,
        cached: bool,
        error: bool,
    ) -> None:
        a = agent or self.agent
        m = model or self.model
        with self._lock:
            result = "error" if error else "cached" if cached else "ok"
            self.requests.labels(a, m, result).inc()
            # The error series exists (at 0) from the model's first request on: a clean run's
            # error panels show zeros, not "no data".
            errors = self.errors.labels(a, m)
            if error:
                errors.inc()
            if cached:
                return
            self.request_seconds.labels(a, m).observe(max(seconds, 0.0))
            if not error:
                self.request_tokens.labels(a, m, "prompt").observe(prompt_tokens)
                self.request_tokens.labels(a, m, "completion").observe(completion_tokens)

    def llm_cost(self, agent: str | None, model: str, dollars: float) -> None:
        with self._lock:
            self.cost.labels(agent or self.agent, model or self.model).inc(max(dollars, 0.0))


_current: AgentMetrics | None = None


def current() -> AgentMetrics | None:
    """This process's agent metrics, if `start_agent_metrics` (or `install`) set them up."""
    return _current


def install(metrics: AgentMetrics | None) -> None:
    """Make `metrics` hear every LLM call of this process (`agents.llm.hooks`; None: stop)."""
    global _current
    _current = metrics
    set_listener(metrics)


def start_agent_metrics(
    port: int, name: str, kind: str, models: Sequence[str] = (), host: str = "127.0.0.1"
) -> TurnObserver:
    """Serve this agent's metrics on `port` (0: any free port; the chosen one is logged and
    printed) and return the turn observer to pass to the runtime. `kind` is logged only: it is
    constant per agent name, so it is no label."""
    from prometheus_client import start_http_server

    metrics = AgentMetrics(name, models)
    server, _thread = start_http_server(port, addr=host, registry=metrics.registry)
    install(metrics)
    actual = int(server.server_port)
    log.info("agent %s (%s): metrics on :%s/metrics", name, kind, actual)
    shown = f"[{host}]" if ":" in host else host
    print(f"agent {name} metrics on http://{shown}:{actual}/metrics", flush=True)
    return metrics.observe_turn
