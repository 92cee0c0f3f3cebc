"""LLM calls and tokens per `minimax_tot` decision on fixed Ghost positions, response cache on vs off.

    .venv/bin/python benchmarks/llm_calls.py [--depth 2 --n 2 --rollouts 2] [--base-url URL]

Counted, not timed. The positions are the successive fragments of a few Ghost
games ("", "s", "st", "sta", …), decided in order by one agent, as in a match:
the cache (the Minimax-ToT paper section 3.3) is shared by all decisions of the agent, so a
later decision reuses the subtrees of earlier ones. Both runs use the same
seeded requests, so with a deterministic server they search the same trees; the
cache-off run makes every call. The ratio printed is calls (and tokens) without
the cache over calls with it.

Limits: starts the embedded llama.cpp server (SmolLM2-135M) unless --base-url
is given; the defaults are smaller than the paper's (D=3, 3 rollouts) to keep the
cache-off run short on 2 cores: pass --depth 3 --rollouts 3 for the paper's.
"""

from __future__ import annotations

import argparse
import asyncio
import string
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.base import MatchContext
from agents.llm.config import LLMConfig
from agents.llm.server import EmbeddedServer
from agents.minimax_tot import MinimaxTotOptions, MinimaxTotStrategy
from bus.protocol import GameSpec, Usage
from games.loader import load_game, replay
from referee.turns import TurnFrame, build_turn

GAMES = ["stamp", "candle", "brick"]


def positions() -> list[list[int]]:
    out: list[list[int]] = []
    for word in GAMES:
        for i in range(len(word) - 1):
            out.append([string.ascii_lowercase.index(c) for c in word[:i]])
    return out


async def run(base_url: str, cache: bool, args: argparse.Namespace) -> list[Usage]:
    cfg = LLMConfig(base_url=base_url, cache=cache, timeout_s=120)
    opts = MinimaxTotOptions(
        seed=1, llm=cfg, depth=args.depth, n=args.n, rollouts=args.rollouts, rollout_max_steps=4, margin_ms=0
    )
    strat = MinimaxTotStrategy(opts)
    spec = GameSpec(name="ghost")
    game = load_game(spec)
    usages: list[Usage] = []
    try:
        for k, actions in enumerate(positions()):
            state = replay(game, actions)
            turn = build_turn(
                TurnFrame("bench", spec, ["a", "b"], 3_600_000), state, state.current_player(), k, None
            )
            d = await strat.decide(turn, MatchContext("bench"))
            usages.append(d.usage)
            frag = "".join(string.ascii_lowercase[a] for a in actions) or "(empty)"
            u = d.usage
            print(
                f"  cache={'on ' if cache else 'off'} {frag:8s} "
                f"calls={u.llm_calls:4d} hits={u.cache_hits:4d} "
                f"tokens={u.prompt_tokens + u.completion_tokens:6d}",
                flush=True,
            )
    finally:
        await strat.close()
    return usages


def total(us: list[Usage]) -> Usage:
    t = Usage()
    for u in us:
        t = t + u
    return t


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--n", type=int, default=2)
    ap.add_argument("--rollouts", type=int, default=2)
    ap.add_argument("--base-url", default=None)
    args = ap.parse_args()
    server = None
    base_url = args.base_url
    if base_url is None:
        server = EmbeddedServer()
        server.start()
        base_url = server.base_url
    try:
        on = await run(base_url, True, args)
        off = await run(base_url, False, args)
    finally:
        if server is not None:
            server.stop()
    t_on, t_off = total(on), total(off)
    n = len(on)
    tok_on = t_on.prompt_tokens + t_on.completion_tokens
    tok_off = t_off.prompt_tokens + t_off.completion_tokens
    print(f"\nminimax_tot on {n} Ghost positions (D={args.depth}, n={args.n}, rollouts={args.rollouts})")
    print(f"cache off: {t_off.llm_calls / n:7.1f} LLM calls/decision, {tok_off / n:8.0f} tokens/decision")
    print(
        f"cache on : {t_on.llm_calls / n:7.1f} LLM calls/decision, {tok_on / n:8.0f} tokens/decision, "
        f"{t_on.cache_hits / n:.1f} cache hits/decision "
        f"(hit rate {t_on.cache_hits / max(1, t_on.cache_hits + t_on.llm_calls):.0%})"
    )
    print(
        f"saving ratio (off/on): calls {t_off.llm_calls / max(1, t_on.llm_calls):.2f}x, "
        f"tokens {tok_off / max(1, tok_on):.2f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
