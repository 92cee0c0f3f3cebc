"""The LLM Coach: every kind of bad answer is counted by reason and never written (fed by a scripted
stand-in backend), and one real run against the embedded SmolLM2 server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import agents.policy_dataset as ds
from agents.llm.client import LLMClient
from agents.llm.config import LLMConfig
from research.coach.coach import answer_schema, coach_dataset, system_prompt, user_prompt, validate_answer
from research.coach.collect import collect
from tests.llm_fixtures import llm_config, llm_server  # noqa: F401  (fixture)
from tests.llm_standins import ScriptedBackend


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("coach") / "kuhn"
    collect("kuhn_poker", "random", out, nodes=8, rollouts=20, seed=5, sample=0.5, workers=1)
    return out


@pytest.fixture()
def data(source: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "d"
    shutil.copytree(source, folder)
    return folder


def entry(node: ds.Node, **changes: object) -> dict[str, object]:
    e: dict[str, object] = {
        "id": node.id,
        "class": "weak hand",
        "analysis": "fold more",
        "policy": node.reference,
    }
    e.update(changes)
    return {k: v for k, v in e.items() if v is not None}


def answer(*entries: dict[str, object]) -> str:
    return json.dumps({"diagnosis": "too passive", "nodes": list(entries)})


def test_every_bad_answer_kind_is_counted_and_dropped(source: Path) -> None:
    a, b, c = ds.read_nodes(source)[1][:3]
    cases = {
        "not_json": ("<think>hmm</think> [0.5, 0.5]", 3),
        "bad_shape": (json.dumps({"diagnosis": "x"}), 3),
    }
    for reason, (text, count) in cases.items():
        v = validate_answer(text, [a, b, c])
        assert v.valid == {} and v.reasons == {reason: count}
    texts = a.texts()
    checks = [
        (entry(a, policy=[0.5]), "wrong_length"),
        (entry(a, policy=[0.5, 0.3, 0.2]), "wrong_length"),
        (entry(a, policy=[1.2, -0.2]), "negative"),
        (entry(a, policy=[0.6, 0.6]), "bad_sum"),
        (entry(a, policy={texts[0]: 0.5, "Raise": 0.5}), "illegal_action"),
        (entry(a, policy={texts[0]: 1.0}), "wrong_length"),
        (entry(a, policy="fold"), "bad_policy"),
        (entry(a, policy=["a", "b"]), "bad_policy"),
        (entry(a, **{"class": ""}), "missing_class"),
        (entry(a, analysis=None), "missing_analysis"),
    ]
    for bad, reason in checks:
        v = validate_answer(answer(bad, entry(b)), [a, b])
        assert set(v.valid) == {b.id}, reason
        assert v.reasons == {reason: 1}, (reason, v.reasons)
    v = validate_answer(answer(entry(a), {"id": "0000-not-in-batch", "class": "x", "analysis": "y",
                                          "policy": [0.5, 0.5]}), [a, b])  # fmt: skip
    assert set(v.valid) == {a.id} and v.reasons == {"unknown_node": 1, "missing_node": 1}
    v = validate_answer(answer(entry(a), entry(a), {"no": "id"}), [a])
    assert v.valid == {} and v.reasons == {"duplicate_node": 1, "bad_entry": 1}
    # Policies given by action name in any order are accepted and put in the legal order.
    named = entry(a, policy={texts[1]: 0.3, texts[0]: 0.7})
    assert validate_answer(answer(named), [a]).valid[a.id][2] == pytest.approx([0.7, 0.3])


async def test_scripted_stand_in_run_writes_only_valid_answers(data: Path) -> None:
    _, nodes = ds.read_nodes(data)
    batches = [nodes[0:3], nodes[3:6], nodes[6:8]]
    script = [
        answer(*(entry(n) for n in batches[0])),  # all valid
        "I think you should bet more.",  # not JSON
        answer(entry(batches[2][0], policy=[0.9, 0.2]), entry(batches[2][1])),  # one bad sum
    ]
    stand_in = ScriptedBackend(script=script)  # a stand-in for the coach model
    client = LLMClient(LLMConfig(), backend=stand_in)
    report = await coach_dataset(data, client, batch_size=3)
    assert report.nodes == 8 and report.valid == 4
    assert dict(report.invalid) == {"not_json": 3, "bad_sum": 1}
    coached = ds.read_coached(data)
    assert [c.id for c in coached] == [n.id for n in batches[0]] + [batches[2][1].id]
    assert all(c.coach == pytest.approx(c.reference) for c in coached)
    assert report.to_json()["mean_abs_distance_cfvfp_coach"] == pytest.approx(0.0)
    assert report.usage["llm_calls"] == 3
    # The structured-output schema went with each request: the batch's ids in order, one number per action.
    schema = stand_in.requests[0].schema
    assert schema is not None
    entries = schema["properties"]["nodes"]["prefixItems"]
    assert [e["properties"]["id"]["const"] for e in entries] == [n.id for n in batches[0]]
    assert entries[0]["properties"]["policy"]["maxItems"] == len(batches[0][0].legal)
    # A rerun coaches only what is not there yet.
    again = ScriptedBackend(script=[answer(*(entry(n) for n in nodes[3:7])), answer(entry(nodes[7]))])
    report2 = await coach_dataset(data, LLMClient(LLMConfig(), backend=again), batch_size=4)
    assert report2.nodes == 4 and report2.valid == 4 and len(ds.read_coached(data)) == 8


async def test_a_down_server_counts_as_llm_error(data: Path) -> None:
    client = LLMClient(LLMConfig(retries=0), backend=ScriptedBackend(default="!down"))
    report = await coach_dataset(data, client, batch_size=5)
    assert report.valid == 0 and dict(report.invalid) == {"llm_error": 8}
    assert not (data / ds.COACHED).exists() or (data / ds.COACHED).read_text() == ""


def test_prompt_is_the_papers_with_the_games_background(source: Path) -> None:
    text = system_prompt("simplified_holdem")
    assert "professional Texas Hold'em coach" in text and "no more than 0.05" in text
    assert "Player 0 = Big Blind (BB), Player 1 = Small Blind (SB)" in text
    assert "50 chips (25BB)" in text
    kuhn = system_prompt("kuhn_poker")
    assert "Kuhn poker" in kuhn
    nodes = ds.read_nodes(source)[1]
    user = user_prompt(nodes[:2])
    assert nodes[0].id in user and "Simulation EV (95% CI)" in user and "Opponent clues" in user
    assert answer_schema(nodes[:1])["properties"]["nodes"]["maxItems"] == 1


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_embedded_smollm2_as_coach(data: Path, llm_server) -> None:  # noqa: F811
    # A generous timeout: the machine may be busy, and a batch's prompt is long for a 135M model.
    config = llm_config(llm_server, max_tokens=300, temperature=0.0).model_copy(update={"timeout_s": 900.0})
    client = LLMClient(config)
    try:
        report = await coach_dataset(data, client, batch_size=2, max_tokens=300, limit=2)
    finally:
        await client.aclose()
    out = report.to_json()
    assert report.nodes == 2 and report.batches == 1
    assert report.usage["llm_calls"] == 1
    invalid = sum(report.invalid.values())
    # Each node is either written or refused with a reason (unknown/duplicate entries may add more).
    assert report.valid + invalid >= 2 and report.valid <= 2
    coached = ds.read_coached(data) if (data / ds.COACHED).exists() else []
    assert len(coached) == report.valid
    assert out["valid_share"] == report.valid / 2
    print("SmolLM2 coach report:", json.dumps(out))


def test_coach_command_refuses_bad_input_before_any_server_starts(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from research.coach.cli import main as selfplay

    lines = (data / ds.NODES).read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace('"game":"kuhn_poker"', '"game":"simplified_holdem"')
    (data / ds.NODES).write_text("".join(lines))
    assert selfplay(["coach", str(data), "--llm", "embedded"]) == 2
    assert "nodes.jsonl:2: a node of game 'simplified_holdem'" in capsys.readouterr().err
    lines[1] = lines[1].replace('"game":"simplified_holdem"', '"game":"kuhn_poker"')
    (data / ds.NODES).write_text("".join(lines))
    assert selfplay(["coach", str(data), "--llm", '{"backend": "nope"}']) == 2
    assert "not a valid LLM config" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_collect_with_an_llm_policy_goes_through_the_llm_layer(tmp_path: Path, llm_server) -> None:  # noqa: F811
    llm = {
        "base_url": llm_server.base_url,
        "model": "smollm2",
        "options": {"max_tokens": 16, "seed": 7},
        "timeout_s": 600,
    }
    spec = "llm_policy:" + json.dumps({"llm": llm, "seed": 1})
    result = collect("kuhn_poker", spec, tmp_path / "llm", nodes=1, rollouts=2, seed=2, sample=1.0, workers=4)
    _, nodes = ds.read_nodes(tmp_path / "llm")
    assert len(nodes) == 1 and abs(sum(nodes[0].behaviour) - 1) < 1e-6
    # Every decision went through the LLM layer: answered by the server or by its response cache.
    assert result.llm["llm_calls"] >= 1 and result.llm["cache_hits"] >= 1
    assert result.llm["decisions"] <= result.llm["llm_calls"] + result.llm["cache_hits"]
