"""Tabular Q-learning through the bus: trained against `random`, then `mcts`, deployed back as a
`policy_table` agent and rated in a tournament (docs/env.md, "A worked example").

    python -m research.rl.q_learning [--file examples/env_tictactoe.toml] [--episodes 3000]
        [--mcts-episodes 600] [--eval 300] [--envs 8] [--out runs/q_tictactoe.jsonl]

The learner sees what any agent sees: the turn's text view (the table's key, for tic-tac-toe the
board) and the legal actions (the action mask); the opponents are agent processes on the bus and
every match is refereed and recorded (`training: true`). Steps: greedy evaluation against `random`
and `mcts`; epsilon-greedy training against `random` (a `BusVectorEnv`, `--envs` matches at once),
then against `mcts`; evaluation again; the greedy policy written as a solver table
(`agents.policy_dataset.TableRow`, one row per board seen); and a round robin of the deployed
`policy_table` agent (`source = "policy"`, uniform where the table has no row) against `random`
and `mcts` with `spielbus run`'s code, whose standings and ratings are printed.

Limits: a table, so only for games with few information states (tic-tac-toe, Kuhn poker); the
learner's seat is random per episode (the table is keyed by the text view, which for tic-tac-toe
tells whose move it is); one-step Q-learning with the opponent's reply folded into the transition.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from agents.policy_dataset import TableRow
from bus.protocol import LegalAction
from referee.config import AgentConfig, TournamentConfig, load_config
from spielbus.env import BusVectorEnv
from spielbus.run import RunOptions, run_tournament


@dataclass
class QTable:
    """Q-values per text view; the legal actions (with texts) of every view seen, for export."""

    alpha: float = 0.3
    gamma: float = 1.0
    epsilon: float = 0.2
    seed: int = 0
    q: dict[str, np.ndarray] = field(default_factory=dict)
    legal: dict[str, dict[int, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def values(self, key: str, size: int) -> np.ndarray:
        if key not in self.q:
            self.q[key] = np.zeros(size)
        return self.q[key]

    def act(self, key: str, mask: np.ndarray, explore: bool) -> int:
        legal = np.flatnonzero(mask)
        if explore and self.rng.random() < self.epsilon:
            return int(self.rng.choice(legal))
        q = self.values(key, len(mask))[legal]
        best = legal[q == q.max()]
        return int(self.rng.choice(best))

    def update(self, key: str, action: int, reward: float, nxt: tuple[str, np.ndarray] | None) -> None:
        q = self.q[key]
        target = reward
        if nxt is not None:
            legal = np.flatnonzero(nxt[1])
            target += self.gamma * float(self.values(nxt[0], len(nxt[1]))[legal].max())
        q[action] += self.alpha * (target - q[action])


def play(
    env: BusVectorEnv, table: QTable, episodes: int, opponents: list[str], learn: bool, seed: int
) -> list[float]:
    """Play `episodes` episodes (greedy unless `learn`), updating the table when learning; returns
    the learner's reward per finished episode."""
    obs, info = env.reset(seed=seed, options={"opponents": opponents})
    n = env.num_envs
    prev: list[tuple[str, int] | None] = [None] * n
    resetting = np.zeros(n, np.bool_)
    rewards: list[float] = []
    while len(rewards) < episodes:
        actions = np.zeros(n, np.int64)
        for i in range(n):
            if resetting[i]:
                continue
            key = str(info["text"][i])
            table.legal[key] = dict(info["legal"][i])
            actions[i] = table.act(key, obs["action_mask"][i], explore=learn)
            prev[i] = (key, int(actions[i]))
        obs, reward, term, trunc, info = env.step(actions)
        for i in range(n):
            if resetting[i]:
                continue
            done = bool(term[i] or trunc[i])
            last = prev[i]
            if learn and last is not None:
                nxt = None if done else (str(info["text"][i]), obs["action_mask"][i])
                table.update(last[0], last[1], float(reward[i]), nxt)
            if done:
                rewards.append(float(reward[i]))
        resetting = term | trunc
    return rewards[:episodes]


def summary(rewards: list[float]) -> dict[str, float]:
    r = np.asarray(rewards)
    return {"win": float(np.mean(r > 0)), "draw": float(np.mean(r == 0)), "mean": float(r.mean())}


def export_table(table: QTable, path: Path, game: str) -> int:
    """The greedy policy as a `policy_table` solver table (one row per view seen). Returns the rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = 0
    with path.open("w", encoding="utf-8") as fh:
        for key, legal in sorted(table.legal.items()):
            ids = sorted(legal)
            q = table.values(key, max(ids) + 1)
            best = max(ids, key=lambda a: q[a])
            row = TableRow(
                game=game,
                infoset=key,
                legal=[LegalAction(id=a, text=legal[a]) for a in ids],
                policy=[1.0 if a == best else 0.0 for a in ids],
            )
            fh.write(row.model_dump_json() + "\n")
            rows += 1
    return rows


def rate(config: TournamentConfig, table_path: Path, run_dir: str, games_per_pairing: int) -> Any:
    """A round robin of the deployed table (`policy_table`) against the file's agents."""
    agents = {
        "q_table": AgentConfig(
            kind="policy_table",
            options={
                "table": str(table_path.resolve()),
                "source": "policy",
                "fallback_policy": "uniform",
                "seed": 1,
            },
        ),
        **{n: a for n, a in config.agents.items() if not a.external},
    }
    tournament = config.model_copy(
        update={
            "name": f"{config.name}_rated",
            "agents": agents,
            "games_per_pairing": games_per_pairing,
            "deadline_ms": 10_000,
            "run_dir": run_dir,
        }
    )
    return asyncio.run(run_tournament(tournament, RunOptions(run_dir=run_dir, quiet=True), Console()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--file", default="examples/env_tictactoe.toml", help="tournament file: game and opponents"
    )
    p.add_argument("--episodes", type=int, default=3000, help="training episodes against `random`")
    p.add_argument("--mcts-episodes", type=int, default=600, help="training episodes against `mcts` then")
    p.add_argument("--eval", type=int, default=300, help="greedy evaluation episodes per opponent")
    p.add_argument("--envs", type=int, default=8, help="matches at once (BusVectorEnv)")
    p.add_argument("--out", default="runs/q_tictactoe.jsonl", help="the exported policy_table table")
    p.add_argument("--games-per-pairing", type=int, default=4)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    config = load_config(args.file)
    table = QTable()
    report: dict[str, Any] = {}
    env = BusVectorEnv(config, num_envs=args.envs, seat=None)
    try:

        def evaluation() -> dict[str, dict[str, float]]:
            return {
                o: summary(play(env, table, args.eval, [o], learn=False, seed=10)) for o in ("random", "mcts")
            }

        report["untrained (greedy on an empty table)"] = evaluation()
        play(env, table, args.episodes, ["random"], learn=True, seed=100)
        report[f"after {args.episodes} episodes against random"] = evaluation()
        play(env, table, args.mcts_episodes, ["mcts"], learn=True, seed=200)
        report[f"then {args.mcts_episodes} against mcts ({len(table.q)} boards)"] = evaluation()
        report["training run folder"] = str(env.session.folder.path)
    finally:
        env.close()
    print(json.dumps(report, indent=2))
    out = Path(args.out)
    print(f"{export_table(table, out, config.games[0].name)} rows written to {out}")
    result = rate(config, out, config.run_dir, args.games_per_pairing)
    print(f"rated in {result.path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
