"""The synthesis pipeline with a SCRIPTED STAND-IN LLM (not a model: `ScriptedBackend` replays
replies written for each test): the real sandbox, the real unit tests from real trajectories,
the real refinement loops; the end-to-end test goes through the `spielbus cwm` command, the
real referee (trajectories) and the real LLM layer against an Ollama-API stand-in server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest

from agents.cwm.reference import reference_code
from agents.cwm.sandbox import SandboxUnavailable, check_available
from agents.llm import LLMClient, LLMConfig
from games.loader import load_game
from games.rules import rules_text
from research.cwm import trajectories as T
from research.cwm.synthesize import Outcome, Synthesizer, Task
from tests.llm_fixtures import llm_config, llm_server
from tests.llm_standins import OllamaStandIn, ScriptedBackend

try:
    check_available()
except SandboxUnavailable as exc:  # pragma: no cover
    pytest.skip(str(exc), allow_module_level=True)

__all__ = ["llm_server"]

GOOD = reference_code("tic_tac_toe")
# The planted bug: occupied cells stay legal.
BUGGY = GOOD.replace('if c == "."]', "]")
REPO = Path(__file__).resolve().parents[1]


def fenced(code: str) -> str:
    return f"Let me reason about the game first.\n```python\n{code}\n```\n"


def task(
    refine: Literal["conversation", "tree"], budget: int = 5, game: str = "tic_tac_toe", closed: bool = False
) -> Task:
    g = load_game(game)
    tests = T.build_tests(g, T.random_trajectories(game, 3, 11), closed)
    return Task(
        game=game,
        rules=rules_text(g),
        imperfect=game != "tic_tac_toe",
        closed_deck=closed,
        tests=tests,
        refine=refine,
        budget=budget,
    )


def synthesize(t: Task, script: list[str]) -> tuple[Outcome, ScriptedBackend]:
    backend = ScriptedBackend(script=list(script))  # the scripted stand-in
    out = asyncio.run(Synthesizer(LLMClient(LLMConfig(), backend=backend), t).run())
    return out, backend


def test_buggy_tic_tac_toe_fixed_by_conversation():
    assert BUGGY != GOOD
    out, backend = synthesize(task("conversation"), [fenced(BUGGY), fenced(GOOD), fenced("unused")])
    assert out.llm_calls == 2 and len(backend.requests) == 2
    first, second = out.attempts
    assert first.reason is None and 0 < first.passed < first.total
    assert first.failing_test and "illegal actions" in first.error
    assert second.passed == second.total and out.run is not None and out.run.accuracy("transition") == 1.0
    # The failing test and its error went back to the LLM, after the previous reply.
    msgs = backend.requests[1].messages
    assert [r for r, _ in msgs] == ["user", "assistant", "user"]
    assert "illegal actions" in msgs[-1][1] and "# TODO: this test fails with:" in msgs[-1][1]
    assert out.code is not None and out.code.strip() == GOOD.strip()


def test_tree_search_refines_the_failing_candidate_with_its_code():
    out, backend = synthesize(task("tree"), [fenced(BUGGY), fenced(GOOD)])
    assert out.llm_calls == 2
    prompt = backend.requests[1].messages[-1][1]
    assert "The original implementation is as follow" in prompt
    assert 'if c == "."' not in prompt.split("# START CODE BLOCK")[1].split("# END CODE BLOCK")[0]
    assert "illegal actions" in prompt
    assert out.attempts[1].parent == 0 and out.attempts[1].passed == out.attempts[1].total


def test_faulty_candidates_are_failed_attempts_and_synthesis_goes_on():
    script = [
        "I cannot write code today.",
        fenced("def apply_action(state, action)\n    return state"),
        fenced("import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)\n" + GOOD),
        fenced("raise SystemExit(3)\n"),
        fenced(GOOD),
    ]
    out, _ = synthesize(task("tree", budget=8), script)
    reasons = [a.reason for a in out.attempts]
    assert reasons == ["no_code", "syntax", "import", "import", None]
    assert out.attempts[-1].passed == out.attempts[-1].total and out.llm_calls == 5


def test_budget_is_respected_when_nothing_passes():
    out, backend = synthesize(task("conversation", budget=3), [fenced(BUGGY)] * 5)
    assert out.llm_calls == 3 and len(backend.requests) == 3
    assert all(a.passed < a.total for a in out.attempts)


def test_kuhn_closed_deck_autoencoder_tests():
    t = task("tree", game="kuhn_poker", closed=True)
    kinds = {x["kind"] for x in t.tests}
    assert kinds == {"inference", "random_play"}  # closed deck: no hidden-state transition tests
    # The planted bug: the deals in the wrong order, so player 0 is dealt the opponent's card.
    broken = reference_code("kuhn_poker").replace(
        "[mine, other] if player_id == 0", "[other, mine] if player_id == 0"
    )
    assert broken != reference_code("kuhn_poker")
    out, backend = synthesize(t, [fenced(broken), fenced(reference_code("kuhn_poker"))])
    assert out.attempts[0].inference_accuracy is not None and out.attempts[0].inference_accuracy < 1.0
    assert out.attempts[1].inference_accuracy == 1.0
    assert "last_is_terminal" in backend.requests[0].messages[-1][1]


@pytest.mark.slow
async def test_cli_synthesize_and_eval_end_to_end(tmp_path):
    """`spielbus cwm synthesize` with trajectories recorded through the real referee, an LLM
    reached through the real LLM layer (an Ollama-API stand-in server replaying a planted bug,
    its fix, a value function and a reply with no code), then `spielbus cwm eval`."""
    standin = OllamaStandIn()
    value = fenced("def value_function(state, player_id):\n    return float(get_rewards(state)[player_id])")
    standin.replies += [fenced(BUGGY), fenced(GOOD), value, "no code"]
    await standin.start()
    out = tmp_path / "ttt"
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    try:
        proc = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "spielbus.cli", "cwm", "synthesize", "tic_tac_toe",
             "--llm", f"ollama:{standin.url}", "--trajectories", "2", "--budget", "4",
             "--values", "2", "--refine", "conversation", "--out", str(out)],
            capture_output=True, text=True, env=env, timeout=400,
        )  # fmt: skip
    finally:
        await standin.stop()
    assert proc.returncode == 0, proc.stderr + proc.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["llm_calls"] == 4 and report["train_transition_accuracy"] == 1.0
    assert report["trajectories"] == 2 and report["attempts"][0]["failing_test"]
    assert [v["ok"] for v in report["value_functions"]] == [True]
    # "No value function" is an entrant: the candidate is chosen only if it beat it.
    beat = report["value_functions"][0]["tournament_score"] > report["no_value_function_score"]
    assert report["value_function"] == ("value_0" if beat else None)
    assert (out / "model.py").read_text().strip() == GOOD.strip()
    ev = subprocess.run(
        [sys.executable, "-m", "spielbus.cli", "cwm", "eval", str(out), "--games", "10",
         "--transitions", "40", "--json"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert ev.returncode == 0, ev.stderr
    row = json.loads(ev.stdout.strip().splitlines()[-1])
    assert row["test_transition_accuracy"] == 1.0 and row["test_transitions"] == 40
    bad = subprocess.run(
        [sys.executable, "-m", "spielbus.cli", "cwm", "eval", str(tmp_path / "none")],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "no such folder" in bad.stdout + bad.stderr


@pytest.mark.slow
@pytest.mark.timeout(900)  # one real LLM call; on a loaded 2-core machine it can take minutes
def test_embedded_smollm2_runs_through_the_pipeline(llm_server):
    """The real embedded model (SmolLM2-135M) cannot write a game model; what is tested is that
    its reply goes through extraction, the sandbox and the tests, and lands in the attempts."""
    t = task("conversation", budget=1)
    t.tests_on_init, t.max_tokens, t.temperature = 1, 160, 0.2
    # A loaded machine answers slowly: a generous per-request timeout (no wall-clock assertion).
    config = llm_config(llm_server, max_tokens=160).model_copy(update={"timeout_s": 600.0})
    out = asyncio.run(Synthesizer(LLMClient(config), t).run())
    assert out.llm_calls == 1 and not out.llm_errors
    assert out.prompt_tokens > 200 and out.completion_tokens > 0
    (att,) = out.attempts
    assert att.total == len(t.tests)
    assert att.reason is not None or att.passed < att.total  # honest: it does not pass


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no_such_game", "--llm", "http://127.0.0.1:9/v1"], "unknown game 'no_such_game'"),
        (["tic_tac_toe", "--llm", "http://127.0.0.1:9/v1", "--budget", "0"], "--budget must be at least 1"),
        (["tic_tac_toe", "--llm", "http://127.0.0.1:9/v1", "--from-run", "/nonexistent"], "matches.jsonl"),
        (["tic_tac_toe", "--llm", "mybox", "--from-run", "RUN"], "a NAME needs --config"),
    ],
)
def test_synthesize_bad_input_exit_2(tmp_path, args, message):
    run = tmp_path / "run"
    run.mkdir()
    # One finished tic-tac-toe match record, so that --from-run gets past the trajectories.
    from bus.protocol import GameSpec, MatchRecord, MoveRecord

    moves = [MoveRecord(turn=i, player=i % 2, action=a, text="") for i, a in enumerate([4, 0, 8])]
    rec = MatchRecord(
        match_id="m", tournament="t", game=GameSpec(name="tic_tac_toe"), seats=["a", "b"], seed=1,
        moves=moves, outcome="draw",
    )  # fmt: skip
    (run / "matches.jsonl").write_text(rec.model_dump_json() + "\n")
    args = [str(run) if a == "RUN" else a for a in args]
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "spielbus.cli", "cwm", "synthesize", *args, "--out", str(tmp_path / "o")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert not (tmp_path / "o").exists()


def test_deck_flags_default_to_open_deck():
    from research.cwm.cli import _parser

    def deck(*flags: str) -> bool:
        args = ["synthesize", "kuhn_poker", "--llm", "x", "--out", "o", *flags]
        return _parser().parse_args(args).closed_deck

    assert deck() is False and deck("--open-deck") is False and deck("--closed-deck") is True
