"""Synthesis of a code world model: LLM writes, sandbox runs the unit tests, refinement repeats.

The method of "Code World Models for General Game Playing" (Lehrach, Hennes,
Lázaro-Gredilla et al., section 4, appendix H):

- The first prompt (H.1 with the H.2 signature; H.3 open deck / H.5 closed deck add the
  inference function `resample_history` for imperfect-information games) holds the rules,
  the API and `num_tests_on_init` tests of each kind.
- Every candidate runs in a fresh sandbox (`research.cwm.candidate`) against all unit tests.
  A candidate that does not parse, raises, loops, allocates or prints without bound is a
  failed attempt with its reason; synthesis goes on.
- Refinement `conversation`: the failing test with its error is appended to the chat and a
  fixed module asked for. `tree`: REx-style tree search (Tang et al., "Code repair with LLMs
  gives an exploration-exploitation tradeoff"): every candidate is a node; Thompson sampling
  draws Beta(1 + C*h, 1 + C*(1-h) + N) per node (h: pass rate, N: times refined, C =
  `heuristic_weight` = 5) and refines the best draw with a fresh prompt holding its code and
  `num_tests_on_error` failing tests.
- It stops when every test passes or the budget of LLM calls is spent; the best candidate
  (most tests passed, then fewest refinements) is kept.
- Value functions (section 4.3, H.7): `values` candidates are asked for, each checked in the
  sandbox, and the best chosen by a round-robin tournament of MCTS with each value function
  on the synthesized model (`research.cwm.values`).

Limits: one code block is taken per reply (`num_targets` = 1); chance outcomes are uniform
in the model API; the prompts carry at most a few tests each, the sandbox runs all.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from agents.llm import LLMClient, LLMError, UsageMeter
from research.cwm import prompts as P
from research.cwm.candidate import Run, Verdict, run_candidate

HEURISTIC_WEIGHT = 5.0
NUM_TESTS_ON_INIT = 5
NUM_TESTS_ON_ERROR = 1


@dataclass
class Attempt:
    call: int
    parent: int | None
    passed: int
    total: int
    reason: str | None
    failing_test: str | None
    error: str
    transition_accuracy: float | None
    inference_accuracy: float | None


@dataclass
class Task:
    game: str
    rules: str
    imperfect: bool
    closed_deck: bool
    tests: list[dict[str, Any]]
    refine: Literal["conversation", "tree"] = "tree"
    budget: int = 10
    max_tokens: int = 2048
    temperature: float = 0.7
    seed: int = 0
    tests_on_init: int = NUM_TESTS_ON_INIT  # per kind, in the first prompt (small-context models: fewer)
    inference: Literal["history", "state"] = "history"  # "state": H.4's resample_state


@dataclass
class Outcome:
    code: str | None
    run: Run | None
    attempts: list[Attempt] = field(default_factory=list)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_errors: list[str] = field(default_factory=list)


def _failing(run: Run) -> tuple[str | None, str]:
    v = run.verdict
    if v.reason:
        return None, f"{v.reason}: {v.detail}"
    if v.failures:
        return v.failures[0]["id"], v.failures[0].get("message", "")
    return None, ""


def _feedback(task: Task, run: Run) -> str:
    """The failing tests (with their errors) that go back to the LLM."""
    v = run.verdict
    if v.reason:
        shown = P.pick_tests(task.tests, 1, None)
        return P.render_tests(shown, {shown[0]["id"]: f"{v.reason}: {v.detail}"} if shown else {})
    shown = P.pick_tests(task.tests, NUM_TESTS_ON_ERROR, v.failures)
    errors = {f["id"]: f.get("message", "") for f in v.failures}
    return P.render_tests(shown, errors)


class Synthesizer:
    def __init__(
        self, client: LLMClient, task: Task, progress: Callable[[int, Attempt | None], None] | None = None
    ) -> None:
        self.client = client
        self.task = task
        self.progress = progress or (lambda _n, _a: None)
        self.out = Outcome(code=None, run=None)
        self.rng = random.Random(task.seed)
        self.meter = UsageMeter()

    # ---- LLM ----------------------------------------------------------------------------
    async def _ask(self, messages: list[tuple[str, str]]) -> str | None:
        t = self.task
        self.out.llm_calls += 1
        try:
            res = await self.client.chat(
                messages,
                max_tokens=t.max_tokens,
                temperature=t.temperature,
                seed=t.seed + self.out.llm_calls,
                use_cache=False,
                meter=self.meter,
            )
        except LLMError as exc:
            self.out.llm_errors.append(str(exc))
            return None
        self.out.prompt_tokens += res.prompt_tokens
        self.out.completion_tokens += res.completion_tokens
        return res.text

    def _evaluate(self, code: str | None, parent: int | None) -> tuple[Run, Attempt]:
        t = self.task
        if code is None:
            run = Run(_no_code(len(t.tests)), kinds=frozenset(x["kind"] for x in t.tests))
        else:
            run = run_candidate(code, t.tests, imperfect=t.imperfect, inference=t.inference)
        failing, err = _failing(run)
        att = Attempt(
            call=self.out.llm_calls,
            parent=parent,
            passed=run.verdict.passed,
            total=run.verdict.total,
            reason=run.verdict.reason,
            failing_test=failing,
            error=err[:1500],
            transition_accuracy=run.accuracy("transition"),
            inference_accuracy=run.accuracy("inference"),
        )
        self.out.attempts.append(att)
        if code is not None and (self.out.run is None or run.verdict.passed > self.out.run.verdict.passed):
            self.out.code, self.out.run = code, run
        self.progress(self.out.llm_calls, att)
        return run, att

    def _first_prompt(self) -> str:
        t = self.task
        shown = P.pick_tests(t.tests, t.tests_on_init, None)
        return P.tree_prompt(
            t.game, t.rules, P.signature(t.imperfect, t.closed_deck, t.inference), P.render_tests(shown), None
        )

    def _done(self, run: Run) -> bool:
        return run.verdict.reason is None and run.verdict.passed == run.verdict.total

    # ---- refinement -----------------------------------------------------------------------
    async def conversation(self) -> Outcome:
        messages: list[tuple[str, str]] = [("user", self._first_prompt())]
        while self.out.llm_calls < self.task.budget:
            reply = await self._ask(messages)
            if reply is None:
                self.progress(self.out.llm_calls, None)
                continue
            run, _ = self._evaluate(P.extract_code(reply), None)
            if self._done(run):
                break
            summary = f"{run.verdict.passed} of {run.verdict.total} unit tests pass."
            messages += [
                ("assistant", reply),
                (
                    "user",
                    P.template("conversation_fix").format(
                        test_code=_feedback(self.task, run), summary=summary
                    ),
                ),
            ]
        return self.out

    async def tree(self) -> Outcome:
        t = self.task
        nodes: list[dict[str, Any]] = []  # code, h, refined, run, attempt index
        while self.out.llm_calls < t.budget:
            parent = self._thompson(nodes)
            if parent is None:
                prompt = self._first_prompt()
            else:
                node = nodes[parent]
                node["refined"] += 1
                prompt = P.tree_prompt(
                    t.game,
                    t.rules,
                    P.signature(t.imperfect, t.closed_deck, t.inference),
                    _feedback(t, node["run"]),
                    node["code"],
                )
            reply = await self._ask([("user", prompt)])
            if reply is None:
                self.progress(self.out.llm_calls, None)
                continue
            code = P.extract_code(reply)
            run, _ = self._evaluate(code, parent)
            if code is not None:
                nodes.append({"code": code, "h": run.verdict.accuracy, "refined": 0, "run": run})
            if self._done(run):
                break
        return self.out

    def _thompson(self, nodes: list[dict[str, Any]]) -> int | None:
        """REx: sample Beta(1 + C*h, 1 + C*(1-h) + N) per node; refine the highest draw. With no node
        (or only nodes that did not even load) a fresh first prompt is sent."""
        usable = [i for i, n in enumerate(nodes) if n["run"].verdict.reason is None]
        if not usable:
            return None
        c = HEURISTIC_WEIGHT
        draws = {
            i: self.rng.betavariate(1 + c * nodes[i]["h"], 1 + c * (1 - nodes[i]["h"]) + nodes[i]["refined"])
            for i in usable
        }
        return max(draws, key=lambda i: draws[i])

    async def run(self) -> Outcome:
        if self.task.refine == "conversation":
            return await self.conversation()
        return await self.tree()


def _no_code(total: int) -> Verdict:
    return Verdict(total=total, reason="no_code", detail="the reply holds no ```python code block")


def _train_accuracy(task: Task, run: Run | None, kind: str) -> float | None:
    """A kind's train accuracy; 0 when no candidate ran (the synthesis wrote no code) although the
    task has tests of that kind, None when it has none."""
    if run is not None:
        return run.accuracy(kind)
    return 0.0 if any(t.get("kind") == kind for t in task.tests) else None


def report(task: Task, out: Outcome, extra: dict[str, Any]) -> dict[str, Any]:
    run = out.run
    return {
        "game": task.game,
        "deck": "closed" if task.closed_deck else "open",
        "refine": task.refine,
        "budget": task.budget,
        "train_transition_accuracy": _train_accuracy(task, run, "transition"),
        "train_inference_accuracy": _train_accuracy(task, run, "inference"),
        "train_tests_passed": run.verdict.passed if run else 0,
        "train_tests": len(task.tests),
        "llm_calls": out.llm_calls,
        "prompt_tokens": out.prompt_tokens,
        "completion_tokens": out.completion_tokens,
        "llm_errors": out.llm_errors[:20],
        "attempts": [asdict(a) for a in out.attempts],
        **extra,
    }
