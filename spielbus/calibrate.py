"""`spielbus calibrate GAME`: a reference ladder rated once, written as a calibration file.

The ladder is `random` and OpenSpiel's MCTS at several strengths (`--simulations`, default
10,100,1000), and for chess Stockfish at several `UCI_Elo` levels (`--elo`, default 1350,1700,2050).
They play a seeded round robin in both seat orders through the real referee (`spielbus run`'s
machinery, a run folder under `--run-dir`), and Bradley-Terry (profile-likelihood 95% intervals,
docs/referee.md) rates them on a fixed scale:

- chess: the Stockfish levels are held at their `UCI_Elo` (`[ratings] anchors`), which Stockfish
  calibrates against a public engine rating list (CCRL 40/4: docs/analysis.md "Calibrated ladders");
- every other game: `random` is held at 1000, a convention (no outside scale exists): differences
  are what the ratings say.

The calibration file (`--out`, default `examples/calibrations/GAME.json`) holds the game, each
agent's kind, options, rating and interval, the anchors, every pairing's wins, draws and losses, the
run folder, its seed and the command, and a TOML fragment to paste into a tournament file: its
`[agents.*]` tables and `[ratings] anchors` holding the calibrated agents at their ratings, so that
that run's ratings are on the calibration's scale.

Limits: an anchor is as good as its calibration run (its intervals are in the file); an MCTS level
that never loses (tic-tac-toe's perfect play) or never wins gets a rating only the Bradley-Terry
prior bounds, and its interval says so. Stockfish's `UCI_Elo` was calibrated at its own time
control; here the levels search a fixed number of nodes. Exit 2 for a game that does not load.

`--levels-only` (chess): no games are played; the file holds the Stockfish levels at their own
`UCI_Elo`, each an anchor whose interval is its value, with no pairings (`matches` 0, no run
folder). `examples/calibrations/chess.json` is that file for `--elo` 1350,1700,2050,2400,2850
(Debian's Stockfish 15.1 accepts 1350-2850).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from rich.console import Console
from rich.table import Table

from bus import loop as bus_loop
from bus.protocol import MatchRecord
from games.loader import GameSpecError, load_game, parse_spec
from referee.config import ConfigError, TournamentConfig
from referee.ratings import ratings
from spielbus.run import RunOptions, run_tournament

RANDOM_RATING = 1000.0
DEFAULT_SIMULATIONS = (10, 100, 1000)
DEFAULT_ELO = (1350, 1700, 2050)
STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class CalibratedAgent(BaseModel):
    model_config = STRICT
    name: str
    kind: str
    options: dict[str, Any]
    rating: float
    low: float
    high: float
    anchored: bool


class PairResult(BaseModel):
    model_config = STRICT
    a: str
    b: str
    wins: int
    draws: int
    losses: int


class Calibration(BaseModel):
    """A calibration file: the ladder's ratings and the run they come from."""

    model_config = STRICT
    game: str
    scale: str
    created: str
    command: str
    run_dir: str
    seed: int
    games_per_pairing: int
    matches: int
    agents: list[CalibratedAgent]
    pairs: list[PairResult]
    toml: str


def ladder(game: str, simulations: list[int], elos: list[int], seed: int) -> dict[str, dict[str, Any]]:
    """The agents of the ladder: name -> {kind, options}."""
    agents: dict[str, dict[str, Any]] = {"random": {"kind": "random", "options": {"seed": seed}}}
    for i, n in enumerate(simulations):
        agents[f"mcts{n}"] = {
            "kind": "mcts",
            "options": {"simulations": n, "rollouts": 1, "seed": seed + 1 + i},
        }
    if game == "chess":
        for e in elos:
            agents[f"stockfish_elo{e}"] = {"kind": "stockfish", "options": {"elo": e}}
    return agents


def anchors_of(game: str, agents: dict[str, dict[str, Any]]) -> tuple[dict[str, float], str]:
    """The ratings held fixed during the calibration, and what the scale is."""
    if game == "chess":
        held = {n: float(a["options"]["elo"]) for n, a in agents.items() if a["kind"] == "stockfish"}
        return held, "Stockfish UCI_Elo levels held at their Elo (Stockfish's calibration, CCRL 40/4)"
    return {"random": RANDOM_RATING}, f"random held at {RANDOM_RATING:g} by convention"


def config_of(
    spec: str, agents: dict[str, dict[str, Any]], anchors: dict[str, float], args: argparse.Namespace
) -> TournamentConfig:
    name = parse_spec(spec).name
    return TournamentConfig.model_validate(
        {
            "name": f"calibrate-{name}",
            "format": "round_robin",
            "games_per_pairing": args.games,
            "both_seat_orders": True,
            "concurrency": args.concurrency,
            "deadline_ms": args.deadline_ms,
            "seed": args.seed,
            "games": [parse_spec(spec).model_dump()],
            "agents": agents,
            "ratings": {"anchors": anchors},
        }
    )


def pair_results(records: list[MatchRecord]) -> list[PairResult]:
    """Wins, draws and losses of the first-named agent of each pair (by name), from the returns."""
    tally: dict[tuple[str, str], list[int]] = {}
    for rec in records:
        if len(rec.seats) != 2 or len(rec.returns) != 2:
            continue
        a, b = sorted(rec.seats)
        ra, rb = rec.returns[rec.seats.index(a)], rec.returns[rec.seats.index(b)]
        t = tally.setdefault((a, b), [0, 0, 0])
        t[0 if ra > rb else 1 if ra == rb else 2] += 1
    return [PairResult(a=a, b=b, wins=w, draws=d, losses=lo) for (a, b), (w, d, lo) in sorted(tally.items())]


def toml_fragment(agents: list[CalibratedAgent]) -> str:
    """`[agents.*]` tables and `[ratings] anchors` that put a tournament on this calibration's scale."""
    lines = []
    for a in agents:
        opts = ", ".join(f"{k} = {json.dumps(v)}" for k, v in a.options.items())  # JSON scalars are TOML
        lines += [f"[agents.{a.name}]", f'kind = "{a.kind}"', f"options = {{ {opts} }}", ""]
    held = ", ".join(f"{a.name} = {a.rating:.1f}" for a in agents)
    lines += ["[ratings]", f"anchors = {{ {held} }}"]
    return "\n".join(lines) + "\n"


def calibration(
    game: str, config: TournamentConfig, records: list[MatchRecord], run_dir: Path, scale: str, command: str
) -> Calibration:
    held = config.ratings.anchors
    agents = []
    for r in ratings(records, config.ratings):
        spec = config.agents[r.agent]
        agents.append(
            CalibratedAgent(
                name=r.agent,
                kind=spec.kind,
                options=dict(spec.options),
                rating=round(r.bt, 1),
                low=round(r.bt_low, 1),
                high=round(r.bt_high, 1),
                anchored=r.agent in held,
            )
        )
    agents.sort(key=lambda a: a.rating)
    return Calibration(
        game=game,
        scale=scale,
        created=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        command=command,
        run_dir=str(run_dir),
        seed=config.seed,
        games_per_pairing=config.games_per_pairing,
        matches=len(records),
        agents=agents,
        pairs=pair_results(records),
        toml=toml_fragment(agents),
    )


def levels_only(
    game: str, agents: dict[str, dict[str, Any]], scale: str, seed: int, command: str
) -> Calibration:
    """The chess ladder's Stockfish levels held at their `UCI_Elo`, without a run: the scale is
    Stockfish's own, so there is nothing to measure (and nothing measured: no pairings)."""
    held = [
        CalibratedAgent(
            name=n, kind="stockfish", options=dict(a["options"]), rating=e, low=e, high=e, anchored=True
        )
        for n, a in agents.items()
        if a["kind"] == "stockfish"
        for e in [float(a["options"]["elo"])]
    ]
    return Calibration(
        game=game,
        scale=scale,
        created=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        command=command,
        run_dir="",
        seed=seed,
        games_per_pairing=0,
        matches=0,
        agents=held,
        pairs=[],
        toml=toml_fragment(held),
    )


def _ints(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated whole numbers expected") from None
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: every value must be at least 1")
    return values


def _positive(text: str) -> int:
    value = _ints(text)
    if len(value) != 1:
        raise argparse.ArgumentTypeError(f"{text!r}: one whole number expected")
    return value[0]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="spielbus calibrate", description=__doc__.split("\n")[0])
    p.add_argument("game", metavar="GAME", help='a game spec, e.g. tic_tac_toe or "go(board_size=7)"')
    p.add_argument("--simulations", type=_ints, default=list(DEFAULT_SIMULATIONS), help="MCTS levels")
    p.add_argument("--elo", type=_ints, default=list(DEFAULT_ELO), help="chess: Stockfish UCI_Elo levels")
    p.add_argument("--games", type=_positive, default=10, help="games per pairing and seat order")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--concurrency", type=_positive, default=2)
    p.add_argument("--deadline-ms", type=_positive, default=60_000)
    p.add_argument("--run-dir", default="runs", help="where the run folder goes (default ./runs)")
    p.add_argument(
        "--out", default=None, help="the calibration file (default examples/calibrations/GAME.json)"
    )
    p.add_argument("--nats", default=None, help="an existing NATS server (default: an embedded one)")
    p.add_argument(
        "--levels-only",
        action="store_true",
        help="chess: write the Stockfish levels at their own UCI_Elo as anchors, play no games",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console()
    try:
        spec = parse_spec(args.game)
        load_game(spec)
        agents = ladder(spec.name, args.simulations, args.elo, args.seed)
        anchors, scale = anchors_of(spec.name, agents)
        config = config_of(args.game, agents, anchors, args)
        if args.levels_only and spec.name != "chess":
            raise ValueError("--levels-only is for chess (Stockfish's UCI_Elo is the only outside scale)")
    except (GameSpecError, ConfigError, ValueError) as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return 2
    command = "spielbus calibrate " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.levels_only:
        cal = levels_only(spec.label(), agents, scale, args.seed, command)
        where = "no games played"
    else:
        opts = RunOptions(nats=args.nats, run_dir=args.run_dir, quiet=True)
        result = bus_loop.run(run_tournament(config, opts, console))
        if result.failed:
            console.print(
                f"[red]{len(result.failed)} matches without a record[/red]: {sorted(result.failed)}"
            )
            return 1
        cal = calibration(spec.label(), config, result.records, result.path, scale, command)
        where = f"run folder {result.path}"
    out = Path(args.out or f"examples/calibrations/{spec.label()}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(cal.model_dump_json(indent=2) + "\n", encoding="utf-8")
    table = Table(title=f"{cal.game}: {scale}")
    for col in ("agent", "rating", "95% interval", "held"):
        table.add_column(col)
    for a in cal.agents:
        table.add_row(a.name, f"{a.rating:.1f}", f"{a.low:.1f} - {a.high:.1f}", "yes" if a.anchored else "")
    console.print(table)
    console.print(f"calibration: {out} ({where})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
