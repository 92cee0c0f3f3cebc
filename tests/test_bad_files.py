"""Bad tournament and ladder files, one per key: each is refused at load with exit 2, the key's
name and its line, and nothing is started (issue 40: numbers without upper bounds, unordered
ranges, `file://` LLM URLs, bad bucket names and run folders got through and failed later, or ran
for ever). The bounds are docs/referee.md's "Bounds" table.

Tournament files go through `spielbus run` in this process (no run folder may appear, and no server
is dialled: `--nats` names a port nothing listens on, so a file wrongly accepted fails with 1, not
2); agent options are checked by the agents' own `--check` processes and ladder files by `spielbus
ladder` as a process (marked slow: one interpreter each).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from spielbus.cli import main as spielbus_main

ROOT = Path(__file__).resolve().parents[1]
NOWHERE = "nats://127.0.0.1:1"

TOURNAMENT = """name = "bad"
{top}
[[games]]
name = "tic_tac_toe"
[agents.r1]
kind = "{kind}"
{agent}
[agents.r2]
kind = "random"
{tables}
"""

# (case id, the key the error must name, top-level lines, r1's extra lines, tables at the end)
TOURNAMENT_CASES: list[tuple[str, str, str, str, str]] = [
    ("deadline-zero", "deadline_ms", "deadline_ms = 0", "", ""),
    ("deadline-huge", "deadline_ms", "deadline_ms = 100_000_000_000", "", ""),
    ("deadline-float", "deadline_ms", "deadline_ms = 1e9", "", ""),
    ("max-turns-zero", "max_turns", "max_turns = 0", "", ""),
    ("max-turns-huge", "max_turns", "max_turns = 10_000_000", "", ""),
    ("gpp-zero", "games_per_pairing", "games_per_pairing = 0", "", ""),
    ("gpp-huge", "games_per_pairing", "games_per_pairing = 10_000_000_000", "", ""),
    ("max-matches-huge", "max_matches", "max_matches = 1_000_000_000", "", ""),
    ("concurrency-zero", "concurrency", "concurrency = 0", "", ""),
    ("concurrency-huge", "concurrency", "concurrency = 5000", "", ""),
    ("seed-past-64-bits", "seed", "seed = 18446744073709551616", "", ""),
    ("fallback-threshold", "fallback_threshold", "fallback_threshold = 1.5", "", ""),
    ("fallback-nan", "fallback_threshold", "fallback_threshold = nan", "", ""),
    ("run-dir-empty", "run_dir", 'run_dir = ""', "", ""),
    ("run-dir-a-file", "run_dir", 'run_dir = "{a_file}/runs"', "", ""),
    ("max-turns-float", "max_turns", "max_turns = 5.5", "", ""),
    ("retries-huge", "retries", "", "", '[policy]\nkind = "retry"\nretries = 1000'),
    ("retries-negative", "retries", "", "", '[policy]\nkind = "retry"\nretries = -1'),
    ("policy-kind", "kind", "", "", '[policy]\nkind = "maybe"'),
    ("budget-calls", "llm_calls", "", "", "[budget]\nper_move = { llm_calls = 10_000_000 }"),
    ("budget-tokens", "tokens", "", "", "[budget]\nper_match = { tokens = 100_000_000_000 }"),
    ("budget-negative", "tokens", "", "", "[budget]\nper_move = { tokens = -1 }"),
    ("elo-k", "elo_k", "", "", "[ratings]\nelo_k = 100_000"),
    ("stack", "stack", "", "", "[ratings]\nstack = 1e12"),
    ("bootstrap", "bootstrap", "", "", "[ratings]\nbootstrap = 1_000_000"),
    ("elo-initial", "elo_initial", "", "", "[ratings]\nelo_initial = 1e9"),
    ("invalid-adjustment", "invalid_adjustment", "", "", "[ratings]\ninvalid_adjustment = { x = 1e9 }"),
    ("sprt-max-pairs", "max_pairs", 'format = "sprt"', "", "[sprt]\nmax_pairs = 100_000_000"),
    ("sprt-elo1", "elo1", 'format = "sprt"', "", "[sprt]\nelo1 = 100_000"),
    ("sprt-in-flight", "in_flight", 'format = "sprt"', "", "[sprt]\nin_flight = 5000"),
    ("embedded-parallel", "parallel", "", "", '[embedded_llm]\nserver = "llama-server"\nparallel = 1000'),
    ("replicas", "replicas", "", "replicas = 1000", ""),
    ("max-concurrency", "max_concurrency", "", "max_concurrency = 100_000", ""),
    ("agent-budget", "llm_calls", "", "budget = { per_move = { llm_calls = 99_999_999 } }", ""),
]

# (case id, key, r1's kind, r1's extra lines, tables): checked by `python -m agents KIND --check`.
OPTION_CASES: list[tuple[str, str, str, str, str]] = [
    ("mcts-simulations", "simulations", "mcts", "options = { simulations = 100_000_000 }", ""),
    ("mcts-rollouts", "rollouts", "mcts", "options = { rollouts = 100_000 }", ""),
    ("mcts-uct", "uct_c", "mcts", "options = { uct_c = 1e6 }", ""),
    ("random-seed", "seed", "random", "options = { seed = 18446744073709551616 }", ""),
    (
        "llm-file-url",
        "base_url",
        "llm_policy",
        'options = { llm = { base_url = "file:///etc/passwd" } }',
        "",
    ),
    ("llm-k", "k", "llm_policy", 'options = { mode = "vote", k = 1000 }', ""),
    ("llm-timeout", "timeout_s", "llm_policy", "options = { llm = { timeout_s = 1e9 } }", ""),
    ("llm-retries", "retries", "llm_policy", "options = { llm = { retries = 100 } }", ""),
    ("llm-section-url", "base_url", "llm_policy", 'llm = "far"', '[llm.far]\nbase_url = "ftp://host/v1"'),
    ("minimax-depth", "depth", "minimax_tot", "options = { depth = 1000 }", ""),
    ("llm-mcts-simulations", "simulations", "llm_mcts", "options = { simulations = 10_000_000 }", ""),
    ("tot-depth", "depth", "tot", "options = { depth = 100 }", ""),
    ("human-move-s", "move_s", "human", "options = { move_s = 1e9 }", ""),
]

LADDER = """name = "lad"
{top}
[[games]]
name = "tic_tac_toe"
[agents.a]
{agent}
[agents.b]
{tables}
"""

# (case id, key, top-level lines, agent a's lines, tables)
LADDER_CASES: list[tuple[str, str, str, str, str]] = [
    ("probe-tiny", "probe_s", "probe_s = 1e-9", "", ""),
    ("probe-huge", "probe_s", "probe_s = 1e6", "", ""),
    ("rate-huge", "rate_per_minute", "rate_per_minute = 1e9", "", ""),
    ("rate-zero", "rate_per_minute", "rate_per_minute = 0.0", "", ""),
    ("pending-huge", "pending_timeout_s", "pending_timeout_s = 1e9", "", ""),
    ("ladder-concurrency", "concurrency", "concurrency = 100_000", "", ""),
    ("backoff-unordered", "max_backoff_s", "", "", "[quarantine]\nbackoff_s = 600.0\nmax_backoff_s = 60.0"),
    ("quarantine-limit", "limit", "", "", "[quarantine]\nlimit = 100_000"),
    ("max-backoff-huge", "max_backoff_s", "", "", "[quarantine]\nmax_backoff_s = 1e12"),
    ("bucket-dot", "bucket", 'bucket = "bad.bucket"', "", ""),
    ("bucket-space", "bucket", 'bucket = "has space"', "", ""),
    ("bucket-empty", "bucket", 'bucket = ""', "", ""),
    ("ladder-deadline", "deadline_ms", "deadline_ms = 10_000_000_000", "", ""),
    ("ladder-max-turns", "max_turns", "max_turns = 0", "", ""),
    ("ladder-retries", "retries", "", "", '[policy]\nkind = "retry"\nretries = 99'),
    ("ladder-agent-concurrency", "concurrency", "", "concurrency = 1000", ""),
    ("ladder-budget", "llm_calls", "", "", "[budget]\nper_move = { llm_calls = 10_000_000 }"),
]


def test_there_are_sixty_bad_files_or_more() -> None:
    assert len(TOURNAMENT_CASES) + len(OPTION_CASES) + len(LADDER_CASES) >= 60


def _names_key_and_line(out: str, path: Path, key: str) -> None:
    flat = " ".join(out.split())
    assert re.search(rf"(^|[^A-Za-z0-9_]){re.escape(key)}([^A-Za-z0-9_]|$)", flat), out
    assert re.search(re.escape(str(path)) + r":\d+:", flat), f"no line for {key}: {out}"
    assert "Traceback" not in out


def _run_in_process(path: Path, runs: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code = spielbus_main(["run", str(path), "--nats", NOWHERE, "--run-dir", str(runs)])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 2, text
    assert not runs.exists(), "a run folder was made: something started"
    return text


@pytest.mark.parametrize(("key", "top", "agent", "tables"), [c[1:] for c in TOURNAMENT_CASES],
                         ids=[c[0] for c in TOURNAMENT_CASES])  # fmt: skip
def test_a_bad_tournament_file_is_exit_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, top: str, agent: str, tables: str
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    text = TOURNAMENT.format(
        top=top.replace("{a_file}", str(a_file)), kind="random", agent=agent, tables=tables
    )
    path = tmp_path / "bad.toml"
    path.write_text(text)
    out = _run_in_process(path, tmp_path / "runs", capsys)
    _names_key_and_line(out, path, key)


@pytest.mark.slow
@pytest.mark.parametrize(("key", "kind", "agent", "tables"), [c[1:] for c in OPTION_CASES],
                         ids=[c[0] for c in OPTION_CASES])  # fmt: skip
def test_a_bad_agent_option_is_exit_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, kind: str, agent: str, tables: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(TOURNAMENT.format(top="", kind=kind, agent=agent, tables=tables))
    out = _run_in_process(path, tmp_path / "runs", capsys)
    _names_key_and_line(out, path, key)


@pytest.mark.slow
@pytest.mark.parametrize(("key", "top", "agent", "tables"), [c[1:] for c in LADDER_CASES],
                         ids=[c[0] for c in LADDER_CASES])  # fmt: skip
def test_a_bad_ladder_file_is_exit_2_naming_the_key(
    tmp_path: Path, key: str, top: str, agent: str, tables: str
) -> None:
    path = tmp_path / "bad-ladder.toml"
    path.write_text(LADDER.format(top=top, agent=agent, tables=tables))
    # A file wrongly accepted would wait for the bus for ever: the timeout is the failure then.
    out = subprocess.run(
        [sys.executable, "-m", "spielbus.cli", "ladder", str(path), "--nats", NOWHERE],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    _names_key_and_line(out.stdout + out.stderr, path, key)
