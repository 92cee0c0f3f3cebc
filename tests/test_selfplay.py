"""`spielbus selfplay`: node collection (Q-values, eq. 10, resume after an interruption), bad datasets,
export and the eq. 15 reward, policy specs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyspiel
import pytest

import agents.policy_dataset as ds
from research.coach.cli import main as selfplay
from research.coach.collect import collect, reference_policy
from research.coach.policies import PolicySpecError, parse_policy_spec
from research.coach.reward import compute_score, invalid_reward, parse_policy, reward, trl_reward, weights

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def kuhn_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kuhn") / "data"
    collect("kuhn_poker", "random", out, nodes=12, rollouts=400, seed=3, sample=0.5, workers=2)
    return out


def test_collected_nodes_hold_q_intervals_and_the_eq10_reference(kuhn_data: Path) -> None:
    meta, nodes = ds.read_nodes(kuhn_data)
    assert meta.game == "kuhn_poker" and meta.alpha == 0.1 and len(nodes) == 12
    assert len({n.id for n in nodes}) == 12
    for n in nodes:
        assert n.texts() in (["Pass", "Bet"],)
        assert n.behaviour == [0.5, 0.5]
        assert n.reference == pytest.approx(reference_policy(n.behaviour, n.q, 0.1))
        assert max(n.reference) == pytest.approx(0.55)
        for q, (lo, hi) in zip(n.q, n.ci, strict=True):
            assert lo <= q <= hi
    # Player 0 holding the jack, first to act, against uniform play: Pass -1.25, Bet -0.5 exactly.
    jack = [n for n in nodes if n.infoset == "0" and n.player == 0]
    assert jack, "the sample should hold the jack's opening node"
    for n in jack:
        assert n.q[0] == pytest.approx(-1.25, abs=0.25) and n.q[1] == pytest.approx(-0.5, abs=0.25)
        assert n.reference == pytest.approx([0.45, 0.55])


def _exact_uniform_value(state: pyspiel.State, player: int) -> float:
    """`player`'s expected payoff from `state` when every seat plays uniformly (full recursion)."""
    if state.is_terminal():
        return float(state.returns()[player])
    if state.is_chance_node():
        return sum(p * _exact_uniform_value(state.child(a), player) for a, p in state.chance_outcomes())
    legal = state.legal_actions()
    return sum(_exact_uniform_value(state.child(a), player) for a in legal) / len(legal)


def test_rollout_q_intervals_cover_the_exact_values_95_percent(tmp_path: Path) -> None:
    # Eq. 8's rollout Q-values with their 95% intervals: over many Kuhn nodes the exact value of
    # each action (the expectation the rollouts sample, at the node's true history, uniform play)
    # falls inside the interval about 95% of the time. A half-width off by a factor (e.g. the
    # standard deviation instead of the standard error) puts coverage near 100% or far below 95%.
    out = tmp_path / "cover"
    collect("kuhn_poker", "random", out, nodes=150, rollouts=200, seed=11, sample=0.5, workers=1)
    _, nodes = ds.read_nodes(out)
    game = pyspiel.load_game("kuhn_poker")
    inside = total = 0
    for n in nodes:
        state = game.new_initial_state()
        for a in n.history:
            state.apply_action(a)
        for act, (lo, hi) in zip(state.legal_actions(n.player), n.ci, strict=True):
            total += 1
            inside += lo <= _exact_uniform_value(state.child(act), n.player) <= hi
    # 300 intervals: a binomial(300, 0.95) count lies in [272, 294] with probability > 0.999.
    assert total == 300
    assert 272 <= inside <= 294, f"{inside}/{total} intervals hold the exact value"


def _collect_cmd(out: Path, nodes: int) -> list[str]:
    return [
        sys.executable, "-m", "research.coach", "collect", "leduc_poker", "--policy", "random",
        "--nodes", str(nodes), "--rollouts", "300", "--out", str(out), "--workers", "1", "--quiet",
    ]  # fmt: skip


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


NODES = 80


@pytest.mark.slow
def test_interrupted_collect_resumes_without_duplicates(tmp_path: Path) -> None:
    # Enough nodes that the interruption (within 0.1 s of the third) comes well before the end.
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    subprocess.run(_collect_cmd(whole, NODES), check=True, env=_env(), timeout=300)
    proc = subprocess.Popen(_collect_cmd(broken, NODES), env=_env())
    nodes_file = broken / ds.NODES
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if nodes_file.exists() and nodes_file.read_text().count("\n") >= 3:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    lines = nodes_file.read_text().count("\n")
    assert 3 <= lines < NODES
    with open(nodes_file, "a") as fh:  # an interrupted write leaves half a line
        fh.write('{"id": "half-writ')
    subprocess.run(_collect_cmd(broken, NODES), check=True, env=_env(), timeout=300)
    _, got = ds.read_nodes(broken)
    _, want = ds.read_nodes(whole)
    assert len(got) == NODES and len({n.id for n in got}) == NODES
    assert {n.id: n.q for n in got} == {n.id: n.q for n in want}


def test_resuming_with_other_settings_is_refused(kuhn_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = selfplay(["collect", "kuhn_poker", "--policy", "random", "--nodes", "3", "--rollouts", "50",
                     "--out", str(kuhn_data), "--seed", "3", "--sample", "0.5"])  # fmt: skip
    assert code == 2
    assert "other settings" in capsys.readouterr().err


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in (ds.META, ds.NODES):
        (dst / f).write_bytes((src / f).read_bytes())
    return dst


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("middle", "nodes.jsonl:3: not JSON"),
        ("tail", "nodes.jsonl:12: truncated"),
        ("game", "nodes.jsonl:2: a node of game 'leduc_poker', but this dataset is 'kuhn_poker'"),
        ("length", "nodes.jsonl:5: "),
        ("sum", "nodes.jsonl:4: reference"),
    ],
)
def test_bad_datasets_name_the_line(
    kuhn_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, message: str
) -> None:
    folder = _copy(kuhn_data, tmp_path / "d")
    lines = (folder / ds.NODES).read_text().splitlines(keepends=True)
    if damage == "middle":
        lines[2] = lines[2][: len(lines[2]) // 2] + "\n"
    elif damage == "tail":
        lines[-1] = lines[-1][:40]
    elif damage == "game":
        lines[1] = lines[1].replace('"game":"kuhn_poker"', '"game":"leduc_poker"')
    elif damage == "length":
        row = json.loads(lines[4])
        row["q"] = row["q"][:1]
        lines[4] = json.dumps(row) + "\n"
    elif damage == "sum":
        row = json.loads(lines[3])
        row["reference"] = [0.9, 0.9]
        lines[3] = json.dumps(row) + "\n"
    (folder / ds.NODES).write_text("".join(lines))
    assert selfplay(["export", str(folder), "--source", "reference"]) == 2
    err = capsys.readouterr().err
    assert message in err, err


def test_export_formats_and_the_reward(kuhn_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "trl.jsonl"
    assert (
        selfplay(["export", str(kuhn_data), "--source", "reference", "--format", "trl", "--out", str(out)])
        == 0
    )
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 12
    row = rows[0]
    assert row["prompt"][0]["role"] == "user" and "probability distribution" in row["prompt"][0]["content"]
    perfect = f"<action>[{', '.join(str(p) for p in row['reference'])}]</action>"
    scores = trl_reward([perfect, "I fold", "[0.7, 0.7]"], [row["reference"]] * 3, [row["legal_actions"]] * 3)
    assert scores[0] == pytest.approx(0.0)
    assert scores[1] == scores[2] == invalid_reward(row["legal_actions"])
    verl = tmp_path / "verl.jsonl"
    assert (
        selfplay(["export", str(kuhn_data), "--source", "reference", "--format", "verl", "--out", str(verl)])
        == 0
    )
    vrow = json.loads(verl.read_text().splitlines()[0])
    truth = vrow["reward_model"]["ground_truth"]
    assert compute_score(vrow["data_source"], "[1, 0]", truth, vrow["extra_info"]) == pytest.approx(
        -sum(abs(a - b) for a, b in zip([1, 0], truth["reference"], strict=True))
    )


def test_reward_weights_follow_appendix_c() -> None:
    assert weights(["Fold", "Call", "Raise", "Allin"]) == [3, 3, 5, 10]
    assert weights(["Call", "Raise", "Allin"]) == [3, 5, 7]
    assert weights(["Fold", "Call"]) == [7, 7]
    assert weights(["Fold", "Call", "Allin"]) == [3, 3, 10]
    assert weights(["Pass", "Bet"]) == [1, 1]
    assert reward([0.2, 0.8], [0.5, 0.5], ["Fold", "Call"]) == pytest.approx(-7 * 0.6)
    assert parse_policy("<think>...</think><action>[0.25, 0.75]</action>", 2) == [0.25, 0.75]
    for bad in ("[0.5]", "[0.5, 0.6]", "[-0.5, 1.5]", "[nan, 1]", "no numbers"):
        assert parse_policy(bad, 2) is None


@pytest.mark.parametrize("bad", ["nosuch", "random(x=1)", "llm_policy:{not json", "cfvfp(iterations=0)"])
def test_bad_policy_specs_are_refused(kuhn_data: Path, bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    if ":" in bad:
        with pytest.raises(PolicySpecError):
            parse_policy_spec(bad)
        return
    code = selfplay(["collect", "kuhn_poker", "--policy", bad, "--nodes", "1", "--rollouts", "2",
                     "--out", str(kuhn_data.parent / f"x-{bad}")])  # fmt: skip
    assert code == 2
    assert "policy" in capsys.readouterr().err


def test_cfvfp_and_table_policies_collect(tmp_path: Path) -> None:
    table = tmp_path / "kuhn.table.jsonl"
    assert selfplay(["solve", "kuhn_poker", "--iterations", "300", "--out", str(table)]) == 0
    spec = f"policy_table(table={table},source=policy,fallback_policy=uniform)"
    out = tmp_path / "t"
    collect("kuhn_poker", spec, out, nodes=4, rollouts=20, seed=1, sample=0.5, workers=1)
    _, nodes = ds.read_nodes(out)
    assert len(nodes) == 4
    from agents.policy_table import load_table

    solved = load_table(table, "policy")
    for n in nodes:  # the behaviour policy is the solver's table, not uniform play
        assert n.behaviour == pytest.approx([solved[n.infoset][a.id] for a in n.legal])


def test_spielbus_selfplay_hands_over_to_the_coach_package(kuhn_data: Path, tmp_path: Path) -> None:
    folder = _copy(kuhn_data, tmp_path / "d")
    with open(folder / ds.NODES, "a") as fh:
        fh.write('{"id": "cut')
    proc = subprocess.run(
        [sys.executable, "-m", "spielbus.cli", "selfplay", "export", str(folder), "--source", "reference"],
        env=_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "nodes.jsonl:13: truncated" in proc.stderr
