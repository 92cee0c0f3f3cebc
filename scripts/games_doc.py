"""Write the generated parts of docs/games.md from real matches: for each game, a turn exactly as a
bot receives it, its action ids and texts, the rules text, and the `match_ended` message.

    PYTHONPATH=$PWD .venv/bin/python scripts/games_doc.py           # rewrite docs/games.md's blocks
    PYTHONPATH=$PWD .venv/bin/python scripts/games_doc.py --check   # exit 1 naming stale blocks

Each game's example is one real match: the real referee (`referee.match.MatchRunner`) over a real
nats-server (an embedded one, or `--nats URL`), against a scripted bot on the bus that records the
bytes of every turn and notification it gets. The bot plays the texts of the example's `script`
in order while each is legal ("*": any move) and otherwise a move drawn from a generator seeded
by the game and the turn's counter, so the same match comes out on every run: the chance secret,
match id and seed are fixed, and the one clock field, `sent_at`, is written as a fixed number.

Only the blocks between `<!-- games_doc: KEY -->` and `<!-- /games_doc -->` are written; the
prose around them (what the texts mean) is the page's own. tests/test_games_doc.py renders every
block again and fails when the page differs.

Limits: lists longer than `MAX_LIST` entries are cut in the rendered JSON (the cut is marked with
a string entry saying how many were left out); the action table is written only for games with at
most `MAX_TABLE` distinct actions, whose ids do not depend on the position.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspiel
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from bus.connect import connect, flush
from bus.protocol import FaultPolicy, MatchSpec
from bus.server import EmbeddedNats
from bus.subjects import Subjects
from games.loader import initial_state, load_game, parse_spec
from games.rules import rules_text
from referee.match import MatchRunner

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "games.md"
MAX_LIST = 12
MAX_TABLE = 30
SENT_AT = 1767225600.0  # `sent_at` as rendered: 2026-01-01T00:00:00Z (a real turn has the send time)
SEAT_NAMES = ("alice", "bob", "carol", "dave", "erin", "frank")
BLOCK = re.compile(r"<!-- games_doc: (\S+) -->\n.*?<!-- /games_doc -->", re.S)


@dataclass(frozen=True)
class Example:
    key: str  # the block's name in docs/games.md
    spec: str  # the game, as in a tournament file
    show: int  # which turn of the match to show: 1 is the first turn any seat got
    script: tuple[str, ...] = ()  # action texts played in this order while legal; "*": any
    max_turns: int = 300
    note: str = ""  # said above the turn


EXAMPLES: tuple[Example, ...] = (
    Example("tic_tac_toe", "tic_tac_toe", 4),
    Example("connect_four", "connect_four", 5),
    Example("chess", "chess", 3, script=("f3", "e5", "g4", "Qh4#"), note="a fool's mate"),
    Example(
        "go",
        "go(board_size=7,komi=9.0)",
        5,
        script=("B d4", "W c3", "B e5", "W c5", "B PASS", "W PASS"),
    ),
    Example("kuhn_poker", "kuhn_poker", 2),
    Example("leduc_poker", "leduc_poker", 3),
    Example(
        "simplified_holdem",
        "simplified_holdem(ranks=4,suits=2,hole_cards=1,flop=1,turn=0,stack=10)",
        3,
    ),
    Example("liars_dice", "liars_dice", 3),
    Example("goofspiel", "goofspiel(num_cards=5)", 3),
    Example("ghost", "ghost(words=scowl70,min_word_length=5)", 3, script=("g", "h", "o", "s", "t")),
    Example("word_chain", "word_chain(threshold=40,pos=adj)", 3),
    Example("wordnt", "wordnt(players=4,rounds=2,min_word_length=4,words=scowl70)", 6),
    Example("mnk", "mnk(m=6,n=6,k=4)", 4),
    Example("army5x5a", "army5x5a", 3),
    Example("quadranto", "quadranto", 3),
    Example("hand_of_war", "hand_of_war", 3),
)


@dataclass
class Capture:
    turns: list[dict[str, Any]] = field(default_factory=list)  # in the order they arrived
    ended: dict[int, dict[str, Any]] = field(default_factory=dict)  # match_ended by seat


def _choose(ex: Example, turn: dict[str, Any], script: list[str]) -> int:
    legal = turn["legal_actions"]
    if script:
        wanted = script[0]
        hit = [a["id"] for a in legal if a["text"].strip().casefold() == wanted.casefold()]
        if wanted == "*" or hit:
            script.pop(0)
            if hit:
                return int(hit[0])
    # A string seed is hashed with SHA-512 by `random`: the same on every run and machine.
    rng = random.Random(f"{ex.spec}:{turn['turn']}:{turn['seat']}")
    return int(rng.choice(legal)["id"])


async def capture(nc: NATS, ex: Example, subjects: Subjects | None = None) -> Capture:
    """Play `ex`'s match through the real referee; every turn and `match_ended` as the bot got them."""
    subjects = subjects or Subjects()
    spec = parse_spec(ex.spec)
    seats = list(SEAT_NAMES[: load_game(spec).num_players()])
    got = Capture()
    script = list(ex.script)

    async def on_turn(msg: Msg) -> None:
        turn = json.loads(msg.data)
        got.turns.append(turn)
        move = {"v": 1, "type": "move", "match_id": turn["match_id"], "turn": turn["turn"]}
        move["action"] = _choose(ex, turn, script)
        await msg.respond(json.dumps(move).encode())

    async def on_notify(msg: Msg) -> None:
        note = json.loads(msg.data)
        if note.get("type") == "match_ended":
            got.ended[int(note["seat"])] = note

    subs = []
    for name in dict.fromkeys(seats):
        subs.append(await nc.subscribe(subjects.turn(name), queue=name, cb=on_turn))
        subs.append(await nc.subscribe(subjects.notify(name), cb=on_notify))
    await flush(nc)
    try:
        match = MatchSpec(
            match_id=f"doc-{ex.key.replace('_', '-')}",
            tournament="games-doc",
            game=spec,
            seats=seats,
            seed=1,
            secret=f"games-doc-{ex.key}",
            deadline_ms=5000,
            policy=FaultPolicy(kind="forfeit"),
            max_turns=ex.max_turns,
        )
        record = await MatchRunner(nc, match, subjects=subjects).run()
        if record.faults or record.outcome == "error":
            raise RuntimeError(f"{ex.key}: the example match went wrong: {record.faults or record.error}")
        for _ in range(200):  # the notifications are published after the record is done
            if len(got.ended) == len(seats):
                break
            await asyncio.sleep(0.01)
    finally:
        for sub in subs:
            await sub.unsubscribe()
    return got


def _cut(value: Any) -> Any:
    if isinstance(value, list):
        if len(value) > MAX_LIST:
            shown = [_cut(v) for v in value[: MAX_LIST - 2]]
            return [*shown, f"... {len(value) - len(shown)} more entries, not shown here"]
        return [_cut(v) for v in value]
    if isinstance(value, dict):
        return {k: _cut(v) for k, v in value.items()}
    return value


def render_json(obj: dict[str, Any]) -> str:
    """One top-level field a line; a list of objects one entry a line; everything else compact."""

    def compact(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False, separators=(", ", ": "))

    lines = []
    items = list(_cut(obj).items())
    for i, (key, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if isinstance(value, list) and value and len(compact(value)) > 90:
            inner = ",\n".join(f"    {compact(v)}" for v in value)
            lines.append(f"  {compact(key)}: [\n{inner}\n  ]{comma}")
        else:
            lines.append(f"  {compact(key)}: {compact(value)}{comma}")
    return "{\n" + "\n".join(lines) + "\n}"


def shown_turn(ex: Example, got: Capture) -> dict[str, Any]:
    if len(got.turns) < ex.show:
        raise RuntimeError(
            f"{ex.key}: the match had {len(got.turns)} turns, the example shows turn {ex.show}"
        )
    # By counter and seat, not arrival: a simultaneous move asks every seat at once.
    turn = dict(sorted(got.turns, key=lambda t: (t["turn"], t["seat"]))[ex.show - 1])
    if "sent_at" in turn:
        turn["sent_at"] = SENT_AT
    if "rules" in turn:
        turn["rules"] = "(the rules text below)"
    return turn


def _first_mover_state(game: pyspiel.Game, player: int) -> pyspiel.State | None:
    """A state where `player` moves: the start, chance resolved by its first outcome, and one
    first legal move per other player until it is `player`'s turn."""
    state = initial_state(game)
    for _ in range(50):
        if state.is_terminal():
            return None
        if state.is_chance_node():
            state.apply_action(state.chance_outcomes()[0][0])
        elif state.current_player() == player:
            return state
        elif state.is_simultaneous_node():
            return None
        else:
            state.apply_action(state.legal_actions()[0])
    return None


def action_table(game: pyspiel.Game) -> str | None:
    """Every action id with its text per seat, for games with few distinct actions."""
    n = game.num_distinct_actions()
    if n > MAX_TABLE:
        return None
    players = range(game.num_players())
    states = [_first_mover_state(game, p) for p in players]
    if any(s is None for s in states):
        return None
    rows = []
    for a in range(n):
        texts = []
        for p, s in zip(players, states, strict=True):
            assert s is not None
            try:
                texts.append(s.action_to_string(p, a))
            except (pyspiel.SpielError, RuntimeError):
                texts.append("")
        rows.append((a, texts))
    if all(len(set(t)) == 1 for _, t in rows):
        head = "| id | text |\n|---|---|\n"
        return head + "\n".join(f"| {a} | `{t[0]}` |" for a, t in rows)
    head = "| id | " + " | ".join(f"text for seat {p}" for p in players) + " |\n"
    head += "|---|" + "---|" * len(players) + "\n"
    return head + "\n".join(f"| {a} | " + " | ".join(f"`{x}`" for x in t) + " |" for a, t in rows)


def render_block(ex: Example, got: Capture) -> str:
    spec = parse_spec(ex.spec)
    game = load_game(spec)
    turn = shown_turn(ex, got)
    seat = turn["seat"]
    out = [f"<!-- games_doc: {ex.key} -->"]
    what = f" ({ex.note})" if ex.note else ""
    out.append(
        f"Example: game `{ex.spec}`, a match{what} of {len(got.turns)} turns; "
        f"turn {turn['turn']}, as seat {seat} (`{turn['seats'][seat]}`) received it:"
    )
    out += ["", "```json", render_json(turn), "```", "", "Its `observation`, printed:", "", "```text"]
    out += [turn["observation"].rstrip("\n"), "```", ""]
    table = action_table(game)
    if table is not None:
        out += [f"Every action id ({game.num_distinct_actions()}) and its text:", "", table, ""]
    else:
        out += [f"{game.num_distinct_actions()} distinct action ids; the legal ones come with each turn.", ""]
    ended = got.ended.get(seat)
    if ended is None:
        raise RuntimeError(f"{ex.key}: seat {seat} got no match_ended")
    out += [f"The `match_ended` seat {seat} received at the end of that match:", ""]
    out += ["```json", render_json(ended), "```", ""]
    summary = "The rules text (a seat's first turn carries it as <code>rules</code>)"
    out += [f"<details><summary>{summary}</summary>", ""]
    out += ["```text", rules_text(game), "```", "", "</details>", "<!-- /games_doc -->"]
    return "\n".join(out)


async def render_all(nc: NATS) -> dict[str, str]:
    blocks = {}
    for ex in EXAMPLES:
        blocks[ex.key] = render_block(ex, await capture(nc, ex))
    return blocks


def splice(text: str, blocks: dict[str, str]) -> str:
    """`text` with each marked block replaced by the block of the same key."""
    missing = set(blocks) - set(BLOCK.findall(text))
    if missing:
        raise KeyError(f"docs/games.md has no block for {sorted(missing)}")
    return BLOCK.sub(lambda m: blocks.get(m.group(1), m.group(0)), text)


def stale(text: str, blocks: dict[str, str]) -> list[str]:
    """The keys whose block in `text` differs from `blocks` (or is missing)."""
    have = {m.group(1): m.group(0) for m in BLOCK.finditer(text)}
    return [k for k, b in blocks.items() if have.get(k) != b]


async def _main(args: argparse.Namespace) -> int:
    async def with_server(url: str) -> int:
        nc = await connect(url, name="games-doc")
        try:
            blocks = await render_all(nc)
        finally:
            await nc.close()
        text = DOC.read_text(encoding="utf-8")
        if args.check:
            bad = stale(text, blocks)
            if bad:
                print(f"docs/games.md is out of date for: {', '.join(bad)}; run scripts/games_doc.py")
                return 1
            return 0
        DOC.write_text(splice(text, blocks), encoding="utf-8")
        return 0

    if args.nats:
        return await with_server(args.nats)
    with EmbeddedNats() as srv:
        return await with_server(srv.url)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if docs/games.md is stale")
    ap.add_argument("--nats", default=None, help="a NATS server to play on (default: an embedded one)")
    return asyncio.run(_main(ap.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
