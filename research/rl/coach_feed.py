"""The LLM Coaching loop fed from the bus: a `spielbus selfplay` dataset from matches played through
`spielbus.env`, for `spielbus selfplay coach` and `export` (docs/coach.md, docs/env.md).

"LLM Coaching LLM in Self-Play Training" (docs/papers.md) trains a policy LLM on information sets
of its own play, each with counterfactual Q-values from rollouts (eq. 8), a reference policy (eq. 10)
and a coach's correction; `spielbus selfplay collect` samples those nodes from in-process self-play.
This feeds the same loop from the bus instead: the learner plays real opponents (MCTS, LLM agents,
outside bots) through a `BusEnv`, and every decision it made becomes a node. The true history at a
decision, other seats' cards included (what the paper's coach prompt calls opponent clues), is
replayed from the match's record once the match has ended (its moves hold every action, chance
included), never seen during play. Each node gets rollout Q-values under `--rollout-policy`,
the behaviour distribution the learner played with, and the eq. 10 reference, through the collector's
own `evaluate`. Then:

    python -m research.rl.coach_feed --file examples/env_kuhn.toml --episodes 200 --out data/bus1
    spielbus selfplay coach data/bus1 --llm embedded     # the coach's corrections
    spielbus selfplay export data/bus1 --format trl      # prompt/reference pairs; research/coach/reward.py

The learner here plays uniformly at random over the legal actions (`behaviour`); a real loop puts
the policy being trained in that place (an LLM reading `info["text"]`, or `policy_table` from the
coached table) and repeats.

Limits: sequential games (a simultaneous node's joint action cannot be replayed move by move);
every decision of the learner becomes a node (no sampling); rollouts are in this process.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import numpy as np

import agents.policy_dataset as ds
from bus.protocol import MatchRecord
from games.loader import load_game
from referee.config import load_config
from research.coach.collect import Candidate, Dist, evaluate, node_id
from research.coach.policies import LocalPolicy, make_policy
from spielbus.env import BusEnv


def decisions(records: list[MatchRecord], learner: str, seed: int) -> Iterator[Candidate]:
    """Every decision the learner made, with the true history before it (from the record)."""
    for episode, rec in enumerate(records):
        history: list[int] = []
        for step, move in enumerate(rec.moves):
            if move.agent == learner and move.player >= 0 and not move.forced:
                yield Candidate(node_id(seed, episode, step), episode, step, move.player, list(history))
            history.append(move.action)


def play_uniform(env: BusEnv, episodes: int, seed: int) -> list[MatchRecord]:
    """`episodes` matches with the learner choosing uniformly among legal actions; their records."""
    rng = np.random.default_rng(seed)
    records = []
    for e in range(episodes):
        obs, _ = env.reset(seed=seed + e)
        while True:
            obs, _, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
            if term or trunc:
                break
        assert env.record is not None
        records.append(env.record)
    return records


def write_dataset(
    records: list[MatchRecord], learner: str, out: Path, *, rollouts: int, rollout_policy: str, seed: int
) -> int:
    """The learner's decisions in `records` as a `spielbus selfplay` folder. Returns the nodes written."""
    spec = records[0].game
    game = load_game(spec)
    if game.get_type().dynamics != game.get_type().dynamics.SEQUENTIAL:
        raise ValueError(
            f"{spec.label()} is not a sequential game: its records cannot be replayed move by move"
        )
    policy = make_policy(rollout_policy, game, spec)
    if not isinstance(policy, LocalPolicy):
        raise ValueError("rollouts run in this process: give a local --rollout-policy (random, cfvfp, ...)")
    dist: Dist = lambda s, p, r: policy.distribution(s, p)  # noqa: E731
    ds.write_meta(
        out,
        ds.Meta(
            game=spec.label(), policy=rollout_policy, rollouts=rollouts, alpha=0.1, seed=seed, sample=1.0
        ),
    )
    n = 0
    with (out / ds.NODES).open("w", encoding="utf-8") as fh:
        for cand in decisions(records, learner, seed):
            node = evaluate(game, spec, cand, dist, rollouts, seed, alpha=0.1)
            ds.append_row(fh, node)
            n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--file", required=True, help="tournament file: the game and the opponents")
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--rollouts", type=int, default=100, help="rollouts per legal action (eq. 8)")
    p.add_argument("--rollout-policy", default="random", help="as `spielbus selfplay collect --policy`")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="the dataset folder (meta.json, nodes.jsonl)")
    args = p.parse_args(argv)
    with BusEnv(load_config(args.file), seat=None) as env:
        records = play_uniform(env, args.episodes, args.seed)
        learner = env.session.learner
    n = write_dataset(
        records,
        learner,
        Path(args.out),
        rollouts=args.rollouts,
        rollout_policy=args.rollout_policy,
        seed=args.seed,
    )
    print(f"{n} nodes from {len(records)} matches through the bus written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
