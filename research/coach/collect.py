"""`spielbus selfplay collect`: self-play, sampled information sets, rollout Q-values, CFVFP references.

Self-play runs in-process on OpenSpiel states, every seat playing the behaviour policy
(`research.coach.policies`). Episode e is played with an RNG seeded by (seed, e); at each
decision node the node is sampled with probability `sample`. For a sampled node (history h
in information set I of player i) each legal action a is tried R times: apply a, then play
to the end with the behaviour policy (chance sampled), and record i's payoff. The mean is
the estimated counterfactual Q-value of eq. 8 of "LLM Coaching LLM in Self-Play Training"
(rollouts from the true history: the other seats' cards are those dealt, as the paper's
coach prompt says), with a 95% normal interval; the reference policy is eq. 10,
`(1 - alpha) * behaviour + alpha * argmax_a Q` (ties split), alpha = 0.1.

Local policies run in a process pool (one worker per core by default); LLM policies run in
this process through the LLM layer, whose cache answers repeated information sets, with the
usage printed at the end. Output: `DIR/meta.json` and `DIR/nodes.jsonl`, one node a line,
flushed as each completes. Node ids are derived from (seed, episode, step) and each node's
rollouts are seeded by its id, so running the same command again after an interruption
resumes: finished nodes are skipped, an incomplete last line is dropped, and the result is
the same set of nodes as an uninterrupted run (for local policies).

Limits: sequential games; the Q-values are those of one sampled history, not the whole
information set (as in the paper); an LLM policy is asked one request at a time.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import multiprocessing
import os
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspiel

import agents.policy_dataset as ds
from bus.protocol import GameSpec, LegalAction
from games.loader import load_game, parse_spec
from games.view import json_view
from referee.turns import TurnFrame, build_turn
from research.coach.policies import LLMPolicyAdapter, LocalPolicy, make_policy

Dist = Callable[[pyspiel.State, int, random.Random], list[float]]
Z95 = 1.959963984540054
MAX_EPISODES_PER_NODE = 1000


class CollectError(ValueError):
    pass


@dataclass
class Candidate:
    id: str
    episode: int
    step: int
    player: int
    history: list[int]


def node_id(seed: int, episode: int, step: int) -> str:
    digest = hashlib.sha256(f"spielbus-node:{seed}:{episode}:{step}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def sample_index(probs: list[float], rng: random.Random) -> int:
    x = rng.random() * sum(probs)
    acc = 0.0
    for i, p in enumerate(probs):
        acc += p
        if x < acc:
            return i
    return max(i for i, p in enumerate(probs) if p > 0)


def step_chance(state: pyspiel.State, rng: random.Random) -> None:
    outcomes = state.chance_outcomes()
    state.apply_action(outcomes[sample_index([p for _, p in outcomes], rng)][0])


def rollout(state: pyspiel.State, player: int, dist: Dist, rng: random.Random) -> float:
    """Play `state` (not modified) to the end with `dist` for every seat; `player`'s payoff."""
    s = state.clone()
    while not s.is_terminal():
        if s.is_chance_node():
            step_chance(s, rng)
            continue
        p = s.current_player()
        legal = s.legal_actions(p)
        s.apply_action(legal[sample_index(dist(s, p, rng), rng)])
    return float(s.returns()[player])


def estimate_q(
    state: pyspiel.State, player: int, dist: Dist, rollouts: int, rng: random.Random
) -> tuple[list[float], list[tuple[float, float]]]:
    qs, cis = [], []
    for action in state.legal_actions(player):
        child = state.child(action)
        values = [rollout(child, player, dist, rng) for _ in range(rollouts)]
        mean = sum(values) / rollouts
        var = sum((v - mean) ** 2 for v in values) / (rollouts - 1)
        half = Z95 * math.sqrt(var / rollouts)
        qs.append(mean)
        cis.append((mean - half, mean + half))
    return qs, cis


def reference_policy(behaviour: list[float], q: list[float], alpha: float) -> list[float]:
    """Eq. 10: (1 - alpha) * behaviour + alpha * best response (argmax of Q, ties split)."""
    top = max(q)
    best = [i for i, v in enumerate(q) if v >= top - 1e-12 * max(1.0, abs(top))]
    return [(1 - alpha) * b + (alpha / len(best) if i in best else 0.0) for i, b in enumerate(behaviour)]


def node_prompt(state: pyspiel.State, player: int, spec: GameSpec) -> str:
    """The decision prompt an LLM policy is trained on: the game's own (the paper's, for Hold'em)
    or the generic distribution prompt of `llm_policy`."""
    own = getattr(state, "decision_prompt", None)
    if callable(own):
        return str(own(player))
    from agents.llm.prompts import legal_texts, state_prompt, system_prompt
    from games.rules import rules_text

    game = state.get_game()
    turn = build_turn(
        TurnFrame("selfplay", spec, [f"p{i}" for i in range(game.num_players())], 1000),
        state,
        player,
        0,
        None,
    )
    names = ", ".join(f"'{t}'" for t in legal_texts(turn))
    return (
        f"{system_prompt(turn, rules_text(game))}\n\n{state_prompt(turn)}\n\n"
        f"Your answer must be a probability distribution over the legal actions [{names}], in this "
        f"order, with exactly {len(turn.legal_actions)} numbers that sum to 1, written as "
        "<action>[p1, p2, ...]</action>."
    )


def evaluate(
    game: pyspiel.Game, spec: GameSpec, cand: Candidate, dist: Dist, rollouts: int, seed: int, alpha: float
) -> ds.Node:
    state = game.new_initial_state()
    for a in cand.history:
        state.apply_action(a)
    rng = random.Random(f"{seed}:{cand.id}")
    player = cand.player
    behaviour = dist(state, player, rng)
    q, ci = estimate_q(state, player, dist, rollouts, rng)
    return ds.Node(
        id=cand.id,
        game=spec.label(),
        episode=cand.episode,
        step=cand.step,
        player=player,
        infoset=state.information_state_string(player),
        observation_json=json_view(state, player),
        prompt=node_prompt(state, player, spec),
        legal=[
            LegalAction(id=a, text=state.action_to_string(player, a)) for a in state.legal_actions(player)
        ],
        behaviour=behaviour,
        q=q,
        ci=ci,
        rollouts=rollouts,
        reference=reference_policy(behaviour, q, alpha),
        state=str(state),
        history=list(cand.history),
    )


def candidates(game: pyspiel.Game, dist: Dist, seed: int, sample: float) -> Iterator[Candidate]:
    """Sampled decision nodes of self-play episodes, in a fixed order for a given seed."""
    episode = 0
    while True:
        rng = random.Random(f"{seed}:episode:{episode}")
        state = game.new_initial_state()
        step = 0
        while not state.is_terminal():
            if state.is_chance_node():
                step_chance(state, rng)
                continue
            player = state.current_player()
            if rng.random() < sample:
                yield Candidate(node_id(seed, episode, step), episode, step, player, list(state.history()))
            probs = dist(state, player, rng)
            state.apply_action(state.legal_actions(player)[sample_index(probs, rng)])
            step += 1
        episode += 1


# --- worker processes (local policies) ---------------------------------------------------------
_worker: dict[str, Any] = {}


def _init_worker(game_label: str, policy: LocalPolicy) -> None:
    from bus.process import die_with_parent

    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and cancels the rest
    _worker["game"] = load_game(game_label)
    _worker["spec"] = parse_spec(game_label)
    _worker["policy"] = policy


def _evaluate_in_worker(cand: Candidate, rollouts: int, seed: int, alpha: float) -> str:
    policy: LocalPolicy = _worker["policy"]
    node = evaluate(
        _worker["game"],
        _worker["spec"],
        cand,
        lambda s, p, r: policy.distribution(s, p),
        rollouts,
        seed,
        alpha,
    )
    return node.model_dump_json()


# --- LLM policies: the async strategy driven from this thread ------------------------------------
class _LoopThread:
    """An event loop in a daemon thread, so the synchronous self-play can await LLM answers."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


@dataclass
class CollectResult:
    written: int
    skipped: int
    seconds: float
    llm: dict[str, int] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.written / self.seconds if self.seconds > 0 else 0.0


def collect(
    game_text: str,
    policy_text: str,
    out: Path,
    *,
    nodes: int,
    rollouts: int,
    seed: int = 0,
    alpha: float = 0.1,
    sample: float = 0.25,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> CollectResult:
    if nodes < 1 or rollouts < 2:
        raise CollectError("--nodes must be >= 1 and --rollouts >= 2 (an interval needs two rollouts)")
    spec = parse_spec(game_text)
    game = load_game(spec)
    if game.get_type().dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL:
        raise CollectError(f"{spec.label()}: self-play collection needs a sequential game")
    meta = ds.Meta(
        game=spec.label(), policy=policy_text, rollouts=rollouts, alpha=alpha, seed=seed, sample=sample
    )
    if (out / ds.META).exists():
        old = ds.read_meta(out)
        if old != meta:
            diff = {
                k: (getattr(old, k), getattr(meta, k))
                for k in ds.Meta.model_fields
                if getattr(old, k) != getattr(meta, k)
            }
            raise CollectError(f"{out} holds a dataset made with other settings (was, now): {diff}")
    policy = make_policy(policy_text, game, spec)  # a bad spec fails before anything is written
    ds.write_meta(out, meta)
    done = {n.id for n in ds.iter_rows(out / ds.NODES, ds.Node, meta.game, repair_tail=True)}
    started = time.monotonic()
    written = 0
    target = nodes - len(done)
    if progress:
        progress(len(done), nodes)
    if target <= 0:
        return CollectResult(0, len(done), 0.0)
    with open(out / ds.NODES, "a", encoding="utf-8") as fh:
        if isinstance(policy, LLMPolicyAdapter):
            written = _collect_llm(game, spec, policy, fh, done, target, meta, progress, nodes)
            llm = policy.usage.model_dump() | {"fallbacks": policy.fallbacks, "decisions": policy.decisions}
        else:
            written = _collect_local(game, spec, policy, fh, done, target, meta, progress, nodes, workers)
            llm = {}
    return CollectResult(written, len(done), time.monotonic() - started, llm)


def _todo(game: pyspiel.Game, dist: Dist, meta: ds.Meta, done: set[str], target: int) -> Iterator[Candidate]:
    produced = 0
    for cand in candidates(game, dist, meta.seed, meta.sample):
        if cand.episode > MAX_EPISODES_PER_NODE * (len(done) + target):
            raise CollectError(f"too few decision nodes sampled; raise --sample (now {meta.sample})")
        if cand.id in done:
            continue
        yield cand
        produced += 1
        if produced >= target:
            return


def _collect_local(
    game: pyspiel.Game,
    spec: GameSpec,
    policy: LocalPolicy,
    fh: Any,
    done: set[str],
    target: int,
    meta: ds.Meta,
    progress: Callable[[int, int], None] | None,
    total: int,
    workers: int | None,
) -> int:
    workers = max(1, workers or os.cpu_count() or 1)
    dist: Dist = lambda s, p, r: policy.distribution(s, p)  # noqa: E731
    todo = _todo(game, dist, meta, done, target)
    written = 0
    if workers == 1:  # no pool: the same nodes (each is seeded by its id), without starting a process
        for cand in todo:
            ds.append_row(fh, evaluate(game, spec, cand, dist, meta.rollouts, meta.seed, meta.alpha))
            written += 1
            if progress:
                progress(len(done) + written, total)
        return written
    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        workers, mp_context=ctx, initializer=_init_worker, initargs=(meta.game, policy)
    )
    inflight: set[Future[str]] = set()
    try:
        exhausted = False
        while True:
            while not exhausted and len(inflight) < 2 * workers:
                nxt = next(todo, None)
                if nxt is None:
                    exhausted = True
                    break
                inflight.add(pool.submit(_evaluate_in_worker, nxt, meta.rollouts, meta.seed, meta.alpha))
            if not inflight:
                break
            finished, inflight = wait(inflight, return_when=FIRST_COMPLETED)
            for fut in finished:
                fh.write(fut.result() + "\n")
                fh.flush()
                written += 1
                if progress:
                    progress(len(done) + written, total)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return written


def _collect_llm(
    game: pyspiel.Game,
    spec: GameSpec,
    policy: LLMPolicyAdapter,
    fh: Any,
    done: set[str],
    target: int,
    meta: ds.Meta,
    progress: Callable[[int, int], None] | None,
    total: int,
) -> int:
    runner = _LoopThread()

    def dist(state: pyspiel.State, player: int, rng: random.Random) -> list[float]:
        return runner.run(policy.adistribution(state, player, rng))

    written = 0
    try:
        for cand in _todo(game, dist, meta, done, target):
            node = evaluate(game, spec, cand, dist, meta.rollouts, meta.seed, meta.alpha)
            ds.append_row(fh, node)
            written += 1
            if progress:
                progress(len(done) + written, total)
    finally:
        try:
            runner.run(policy.aclose())
        finally:
            runner.stop()
    return written
