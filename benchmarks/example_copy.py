"""How often the LLM answers the example its prompt shows: the example-copy effect (issue 26).

    .venv/bin/python benchmarks/example_copy.py [--positions 50] [--seed 1] [--no-constrain] [--base-url URL]

On `--positions` seeded random positions of tic-tac-toe, connect four and othello (in turn), asks
the model once per prompt, as `llm_policy`'s direct mode does (system prompt, then the choice
prompt; temperature 0; answers constrained to the legal moves unless `--no-constrain`):

- `example=first`, `example=last`, `example=random`: the old prompt, `{"action": <a legal
  move>}` shown as its JSON example, the example the first, the last or a seeded random legal
  move. The row counts answers equal to the example.
- `placeholder`: today's prompt (`agents.llm.prompts.choose_prompt`: a placeholder where the
  move goes), legal moves in OpenSpiel's order. The row counts answers equal to the seeded random
  move the `example=random` row showed (not shown here), and prints how often the answer is the
  first legal move.
- `shuffled`: today's default prompt: the placeholder, legal moves listed in an order shuffled by a
  seeded RNG (`agents.llm.prompts.shown_order`, as `llm_policy`'s `shuffle_legal`). Prints how
  often the answer is the first listed move (the model's position bias) and how often it is
  OpenSpiel's first legal move (the bias a row would inherit from the action order).

`chance` is the mean of 1/(number of legal moves): the rate of a model that ignores the
example. A copy rate far above it means the row measures the prompt, not the model.

Measured (defaults: 50 positions, seed 1, constrained, SmolLM2-135M, 2 shared cores, 0 unusable
answers of 200): chance 17.1%; the answer equals the example 92% (46/50) with the first legal
move as the example, 100% (50/50) with the last, 98% (49/50) with a random one; with today's
placeholder the answer equals that random move 14% (7/50), chance level, but is the first legal
move 68% of the time: without an example to copy, the small model still leans on the list order.
With the list shuffled (`--conditions placeholder,shuffled`, seed 1, 50 positions) it still answers
the first listed move 72% of the time, but that is now a random move: OpenSpiel's first legal move
12% (chance 17%); docs/referee.md, "The order of the legal moves in LLM prompts", has both seeds.

Limits: starts the embedded llama.cpp server (SmolLM2-135M) unless `--base-url` is given; 5 requests
a position, sequential (about 250 requests at the defaults: minutes on 2 shared cores). Counted,
not timed. A model's bias toward the first listed move shows in `placeholder`'s first-move rate.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.llm.client import LLMClient
from agents.llm.config import LLMConfig
from agents.llm.prompts import choose_prompt, example_prompt, legal_texts, shown_order, system_prompt
from agents.llm.server import EmbeddedServer
from bus.protocol import GameSpec, Turn
from games.loader import load_game
from games.view import SeatHistory
from referee.turns import TurnFrame, build_turn

GAMES = ("tic_tac_toe", "connect_four", "othello")
CONDITIONS = ("example=first", "example=last", "example=random", "placeholder", "shuffled")


def positions(n: int, seed: int) -> list[Turn]:
    """`n` non-terminal positions with at least two legal moves, reached by seeded random play."""
    rng = random.Random(seed)
    out: list[Turn] = []
    while len(out) < n:
        spec = GameSpec(name=GAMES[len(out) % len(GAMES)])
        game = load_game(spec)
        state = game.new_initial_state()
        hist = SeatHistory(game.num_players())
        for _ in range(rng.randrange(0, 12)):
            if state.is_terminal():
                break
            action = rng.choice(state.legal_actions())
            hist.record(state, state.current_player(), action)
            state.apply_action(action)
        if state.is_terminal() or len(state.legal_actions()) < 2:
            continue
        seat = state.current_player()
        turn = build_turn(TurnFrame("bench", spec, ["a", "b"], 3_600_000), state, seat, len(out) + 1, hist)
        out.append(turn)
    return out


async def ask(llm: LLMClient, turn: Turn, user: str, choices: list[str], constrain: bool) -> str | None:
    messages = [("system", system_prompt(turn, None)), ("user", user)]
    result = await llm.chat(messages, choices=choices, constrain=constrain, temperature=0.0)
    return result.choice


async def run(base_url: str, args: argparse.Namespace) -> int:
    llm = LLMClient(LLMConfig(base_url=base_url, cache=False, timeout_s=300))
    rng = random.Random(args.seed + 1)
    hits = dict.fromkeys(CONDITIONS, 0)
    first_when_placeholder = 0
    shuffled_first_shown = 0
    shuffled_first_legal = 0
    order_rng = random.Random(args.seed + 2)
    unusable = 0
    chance = 0.0
    turns = positions(args.positions, args.seed)
    try:
        for i, turn in enumerate(turns):
            texts = legal_texts(turn)
            chance += 1 / len(texts)
            hidden = rng.choice(texts)
            examples = {"example=first": texts[0], "example=last": texts[-1], "example=random": hidden}
            shown = shown_order(texts, order_rng)
            for cond in args.conditions:
                example = examples.get(cond, hidden)
                choices = shown if cond == "shuffled" else texts
                if cond in ("placeholder", "shuffled"):
                    user = choose_prompt(turn, choices)
                else:
                    user = example_prompt(turn, example)
                answer = await ask(llm, turn, user, choices, args.constrain)
                unusable += answer is None
                hits[cond] += answer == example
                if cond == "placeholder":
                    first_when_placeholder += answer == texts[0]
                if cond == "shuffled":
                    shuffled_first_shown += answer == shown[0]
                    shuffled_first_legal += answer == texts[0]
            # Running totals: a run cut short still says what it measured.
            so_far = " ".join(f"{c}={hits[c]}" for c in args.conditions)
            print(
                f"  {i + 1:3d}/{len(turns)} {turn.game.name:13s} legal={len(texts):2d}  {so_far} "
                f"placeholder=first:{first_when_placeholder} shuffled=listed-first:{shuffled_first_shown},"
                f"first:{shuffled_first_legal} chance={chance:.2f}",
                flush=True,
            )
    finally:
        await llm.aclose()
    n = len(turns)
    games = ", ".join(GAMES)
    print(f"\nexample copy on {n} positions of {games} (constrain={args.constrain}, seed={args.seed})")
    print(f"chance (mean 1/legal moves): {chance / n:6.1%}")
    for cond in args.conditions:
        what = "answer = hidden random move" if cond in ("placeholder", "shuffled") else "answer = example"
        print(f"{cond:15s} {what:28s} {hits[cond] / n:6.1%}  ({hits[cond]}/{n})")
    if "placeholder" in args.conditions:
        print(f"{'placeholder':15s} {'answer = first legal move':28s} {first_when_placeholder / n:6.1%}")
    if "shuffled" in args.conditions:
        print(f"{'shuffled':15s} {'answer = first listed move':28s} {shuffled_first_shown / n:6.1%}")
        print(f"{'shuffled':15s} {'answer = first legal move':28s} {shuffled_first_legal / n:6.1%}")
    print(f"unusable answers: {unusable} of {n * len(args.conditions)}")
    return 0


async def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--positions", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-constrain", dest="constrain", action="store_false")
    ap.add_argument("--base-url", default=None)
    ap.add_argument(
        "--conditions",
        default=",".join(CONDITIONS),
        help="comma-separated subset of " + ", ".join(CONDITIONS) + " (default: all)",
    )
    args = ap.parse_args()
    args.conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    unknown = sorted(set(args.conditions) - set(CONDITIONS))
    if unknown:
        ap.error(f"--conditions: unknown {', '.join(unknown)}")
    server = None
    base_url = args.base_url
    if base_url is None:
        server = EmbeddedServer()
        server.start()
        base_url = server.base_url
    try:
        return await run(base_url, args)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
