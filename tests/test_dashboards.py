"""Grafana dashboards: every metric and label they query is one the code exports, every panel uses
the provisioned datasource uid, and every query is valid PromQL (`promtool check rules`)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from agents.metrics import AgentMetrics
from bus.protocol import (
    FaultRecord,
    GameSpec,
    MatchEvent,
    MatchRecord,
    Move,
    MoveRecord,
    Turn,
    Usage,
)
from observability.metrics import RefereeMetrics
from referee.ratings import Rating

ROOT = Path(__file__).resolve().parents[1]
DASHBOARDS = sorted((ROOT / "deploy" / "grafana" / "dashboards").glob("*.json"))
DATASOURCES = ROOT / "deploy" / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "le", "bool", "offset"}


def _exported() -> dict[str, set[str]]:
    """Every sample name the code exports, with its label names, from populated registries."""
    ref = RefereeMetrics()
    game = GameSpec(name="g")
    rec = MatchRecord(
        match_id="m",
        tournament="t",
        game=game,
        seats=["a", "b"],
        seed=1,
        moves=[MoveRecord(turn=1, player=0, action=0, text="x", agent="a", latency_ms=5.0)],
        faults=[FaultRecord(turn=2, seat=1, agent="b", reason="timeout", latency_ms=100.0)],
        outcome="forfeit",
        returns=[1.0, -1.0],
        ranks=[1, 2],
    )
    base = {"match_id": "m", "tournament": "t", "game": game, "seats": ["a", "b"]}
    ref.on_event(MatchEvent(type="started", **base))
    ref.on_event(MatchEvent(type="ended", record=rec, **base))
    ref.on_event(MatchEvent(type="started", **{**base, "match_id": "m2"}))
    ref.set_ratings([Rating(agent="a", elo=1, bt=1, bt_low=1, bt_high=1)])
    agent = AgentMetrics("a", ["model"])
    turn = Turn(
        match_id="m", game=game, seat=0, seats=["a"], turn=1, deadline_ms=1, observation="", legal_actions=[]
    )
    usage = Usage(llm_calls=1, prompt_tokens=1, completion_tokens=1, cache_hits=1)
    agent.observe_turn(turn, Move(match_id="m", turn=1, action=0, usage=usage), 0.1)
    agent.llm_call(None, "model", 0.1, 1, 1, False, True)
    agent.llm_call(None, "model", 0.1, 1, 1, False, False)
    out: dict[str, set[str]] = {}
    for reg in (ref.registry, agent.registry):
        for fam in text_string_to_metric_families(generate_latest(reg).decode()):
            for s in fam.samples:
                out.setdefault(s.name, set()).update(s.labels)
    return out


def _targets(dash: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for panel in dash["panels"]:
        for t in panel.get("targets", []):
            out.append((panel["title"], t))
    return out


def _queries(dash: dict[str, Any]) -> list[str]:
    qs = [t["expr"] for _, t in _targets(dash)]
    for var in dash.get("templating", {}).get("list", []):
        q = var.get("query")
        qs.append(q["query"] if isinstance(q, dict) else q)
    return qs


def test_there_are_three_dashboards() -> None:
    titles = {json.loads(p.read_text())["title"] for p in DASHBOARDS}
    assert titles == {
        "Spielbus: tournament overview",
        "Spielbus: agent latency",
        "Spielbus: LLM cost",
    }


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_every_queried_metric_and_label_is_exported(path: Path) -> None:
    exported = _exported()
    dash = json.loads(path.read_text())
    for q in _queries(dash):
        names = set(re.findall(r"\bspielbus_[a-z_]+\b", q))
        assert names, f"{path.name}: query names no spielbus metric: {q}"
        unknown = names - set(exported)
        assert not unknown, f"{path.name}: {sorted(unknown)} are not exported; query: {q}"
        labels = set().union(*(exported[n] for n in names))
        used = set()
        for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", q):
            used |= {x.strip() for x in group.split(",") if x.strip()}
        used |= set(re.findall(r"[{,]\s*([a-z_]+)\s*=~?", q))
        used -= PROMQL_WORDS - {"le"}
        missing = used - labels - {"le"}
        assert not missing, f"{path.name}: labels {sorted(missing)} not on {sorted(names)}; query: {q}"
        if "histogram_quantile" in q:
            assert all(n.endswith("_bucket") for n in names), f"quantiles need the _bucket series: {q}"


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_panels_use_the_provisioned_datasource(path: Path) -> None:
    ds = yaml.safe_load(DATASOURCES.read_text())["datasources"]
    (uid,) = [d["uid"] for d in ds]
    dash = json.loads(path.read_text())
    assert dash["uid"].startswith("spielbus-")
    for title, t in _targets(dash):
        assert t["datasource"]["uid"] == uid, f"{path.name}: panel {title!r}"
    for panel in dash["panels"]:
        assert panel["datasource"]["uid"] == uid


def test_queries_are_valid_promql(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: `make system-deps` installs Debian's prometheus package"
    rules = []
    for path in DASHBOARDS:
        for i, q in enumerate(_queries(json.loads(path.read_text()))):
            if q.startswith("label_values("):
                continue
            # Grafana's variables, as Grafana would substitute them.
            expr = q.replace("$__rate_interval", "1m").replace("$__range", "1h").replace("$game", ".*")
            rules.append({"record": f"spielbus:check:{path.stem.replace('-', '_')}_{i}", "expr": expr})
    f = tmp_path / "rules.yml"
    f.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    out = subprocess.run([promtool, "check", "rules", str(f)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
