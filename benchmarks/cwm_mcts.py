"""Search inside the sandbox against the same search without it, measured in one run.

(a) MCTS simulations per second of the `cwm` agent's search: one `search` request per move
    to a long-lived sandboxed worker (bubblewrap, seccomp, rlimits, a root of its own) that
    holds the model; the whole search runs in there, only the move's action texts go in and
    the chosen action comes out; the time counted is the request's round trip as the agent
    sees it;
(b) the same worker and interpreter without the sandbox (`Sandbox(sandboxed=False)`: no
    bubblewrap, no seccomp, no limits), same requests: the sandbox's own cost;
(c) the same search function (`agents.cwm.harness.mcts`) on the same model code called in this
    process (no process boundary at all), same positions, same seeds.

Prints (a)/(b) and (a)/(c) per game; the goals are (a)/(b) at least 0.9 and (a)/(c) at least
0.5. (This process is larger than a worker, so its garbage collector scans more, and the
sandbox runs the system's interpreter, not this one: (c) can come out slower than (a).) The
models are the hand-written reference models (`agents/cwm/reference/`), loaded as code exactly
as a synthesized one would be.

    .venv/bin/python benchmarks/cwm_mcts.py [--simulations 300] [--moves 6] [--games tic_tac_toe connect_four]
"""

from __future__ import annotations

import argparse
import random
import time

from agents.cwm import harness
from agents.cwm.reference import reference_code
from agents.cwm.sandbox import Sandbox
from games.loader import load_game
from research.cwm import trajectories as T


def positions(game: str, count: int, seed: int) -> list[list[str]]:
    """Action-text histories of positions along random games (the empty board first)."""
    rng = random.Random(seed)
    out: list[list[str]] = [[]]
    while len(out) < count:
        steps = T.random_trajectories(game, 1, rng.randrange(10**6))[0]
        k = rng.randrange(1, max(2, len(steps) - 2))
        out.append([s["action"] for s in steps[:k]])
    return out


def bench(game: str, simulations: int, moves: int, rollouts: int, rounds: int) -> tuple[float, float, float]:
    g = load_game(game)
    init = T.initial_state(g)
    code = reference_code(game)
    model = harness.load_module("model", code)
    pos = positions(game, moves, 7)
    sims_in = sims_out = sims_bare = 0
    t_in = t_out = t_bare = 0.0
    with Sandbox() as sb, Sandbox(sandboxed=False) as bare:
        assert sb.call("load", code=code, name="model")["ok"]
        assert bare.call("load", code=code, name="model")["ok"]
        for r in range(rounds):  # interleaved, so that machine noise hits both alike
            for i, actions in enumerate(pos):
                seed = 1000 * r + i
                args = dict(
                    initial_state=init, actions=actions, seat=len(actions) % 2, num_players=2,
                    simulations=simulations, rollouts=rollouts, uct_c=2.0, seed=seed,
                )  # fmt: skip
                t0 = time.perf_counter()
                reply = sb.call("search", timeout=600, **args)
                t_in += time.perf_counter() - t0
                sims_in += reply["result"]["simulations"]
                t0 = time.perf_counter()
                reply = bare.call("search", timeout=600, **args)
                t_bare += time.perf_counter() - t0
                sims_bare += reply["result"]["simulations"]
                t0 = time.perf_counter()
                root = harness.replay_texts(model, init, actions)
                out = harness.mcts(
                    model, [root], len(actions) % 2, 2, simulations, rollouts, 2.0, random.Random(seed)
                )
                max(out["visits"], key=lambda a: out["visits"][a])
                t_out += time.perf_counter() - t0
                sims_out += out["simulations"]
    return sims_in / t_in, sims_bare / t_bare, sims_out / t_out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--games", nargs="+", default=["tic_tac_toe", "connect_four"])
    ap.add_argument("--simulations", type=int, default=300)
    ap.add_argument("--rollouts", type=int, default=1)
    ap.add_argument("--moves", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    worst = worst_sandbox = float("inf")
    for game in args.games:
        inside, bare, here = bench(game, args.simulations, args.moves, args.rollouts, args.rounds)
        ratio = inside / bare
        worst, worst_sandbox = min(worst, inside / here), min(worst_sandbox, ratio)
        print(
            f"{game}: sandboxed {inside:,.0f} simulations/s; unsandboxed worker {bare:,.0f}, ratio "
            f"{ratio:.2f} (goal >= 0.9); in this process {here:,.0f}, ratio {inside / here:.2f} (goal >= 0.5)"
        )
    meets = worst_sandbox >= 0.9 and worst >= 0.5
    print(
        f"worst ratios {worst_sandbox:.2f} (sandbox's own cost) and {worst:.2f}: "
        f"{'meets' if meets else 'MISSES'} the goals"
    )


if __name__ == "__main__":
    main()
