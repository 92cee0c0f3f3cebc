"""Make the mate-in-N puzzle suite offline from Stockfish self-play (games/data/mate_in_n.jsonl.gz).

    python scripts/make_puzzles.py [--per-depth 100] [--depths 3-8] [--out FILE] [--minutes M]
                                   [--first-game N]
    python scripts/make_puzzles.py --check FILE [--nodes N] [--sample K] [--results R]
                                   [--structure-only]   # exit 2 naming every puzzle not exactly mate in N
    python scripts/make_puzzles.py --check FILE --mate-search [--nodes N]   # the deep mate search
    python scripts/make_puzzles.py --relabel FILE --results R --out NEW   # mislabelled puzzles relabelled
    python scripts/make_puzzles.py --derive FILE --out NEW --depths 3-7   # short depths from the next one
    python scripts/make_puzzles.py --reverify        # re-check every puzzle with Stockfish (resumable)

How a puzzle is made: self-play games from the standard position (a few random
opening plies, then a strong side against a weak one, the colours chosen per game,
so that mates happen). Once the strong side's search sees a forced mate, the weak
side defends at full strength, so the rest of the game walks down the mate
distances one move at a time (a mate in 9 passes through 8, 7 and 6) instead of
jumping over them with a blunder: one game then yields a puzzle of each deep
depth. At each of the strong side's moves its own search (depth 14,
150k nodes) looks for a `mate N` score with N in the wanted depths. A candidate is then
verified from its FEN alone (no move history, hash cleared): a mate search (UCI
`go mate N`, within 5M nodes) must find mate in exactly N, and `shorter_mate` must
find none in N-1 or fewer: an exhaustive proof where N-1 <= 3, else Stockfish's
`go mate N-1` with 2M nodes (a search cut short by the wall-clock cap refuses the
candidate). An earlier version stopped that search at 2N+8 plies, which let through
puzzles with shorter mates; `--check` runs the same test over a whole file, and
`--relabel` turns what it finds into puzzles of the depth they are.
(A plain search's mate distance proved unreliable: Stockfish reports the
first mate it sees, which may be longer than the shortest, or miss a shorter one.) When a mate is
found, the same side's earlier positions of the game are searched deeper too,
since the quick search misses long mates. The solution line is the engine's
principal variation,
extended by new searches where the PV is cut short, and must end in checkmate
after exactly 2N-1 plies; games/chess/puzzles.py then checks the line again
(legality, length, checkmate, no mate in one) before it is written.

At most one puzzle per depth per game, so the suite is not one game's mating
sequence many times. Resumable: puzzles are appended as they are found (a gzip
member each; gzip reads the members as one file), and a rerun continues with the
next game number and stops when every depth has its count. To use more cores, run more
processes, each on its own copy of the file with its own `--first-game` (e.g. 50000, 100000:
game numbers, hence ids and games, then never meet), and append each copy's new puzzles to
the suite when they are done (`--check` the result). Deterministic for a
seed (every search is bounded by nodes or depth, Threads=1), unless a wall-clock cap
cuts a search short on a very busy machine.

What `--check` proves: a shorter mate it finds is a mate (the label is wrong); "no mate in N-1"
is a proof only where N-1 <= 3 (the exhaustive search). Beyond, it says that Stockfish's
`go mate N-1` found none within the node budget, nothing more: at the default 2,000,000 nodes the
search of m7-00677-048 (shipped as a mate in 7) still reported mate in 7, while `go mate 6` run on
finds the mate in 6 after 0.9 to 2.3 million nodes (it was relabelled). `--mate-search` is the
check for deep puzzles: the same `go mate N-1`, which stops as soon as it finds a mate in N-1 or
fewer, left to run to 50,000,000 nodes (`--nodes` sets it; minutes a puzzle on one core), its
verdicts recorded as "stockfish mate search N nodes". It too is bounded, so "none" is still no
proof; it raises the budget 25-fold where shorter mates hide.

Limits: "forced" means Stockfish's search says so, and so does "no shorter mate" for
N-1 > 3 (a node-bounded search, not a proof; exhaustive proofs for mates in 4 or more
are out of reach in Python here).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chess
import chess.engine

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.stockfish_agent import INSTALL_HINT, find_stockfish
from games.chess.mate_search import Unknown, shortest_mate
from games.chess.puzzles import DEFAULT_PATH, DEPTHS, Puzzle, PuzzleError, check_puzzle, load_puzzles, select

# Node counts, not times: a busy machine then changes how long generation takes, not what the
# searches see (and a seed gives the same suite). The wall caps only guard against a stuck engine.
FIND_NODES = 5_000_000
# The wall cap is a guard against a stuck engine, so it is far above a search's usual time: at
# 120 s, on this 2-core machine at load 30 to 35 (about 17,000 nodes a second for a nice-10
# process), 2,000,000-node checks were cut short ("unknown") and 5,000,000-node mate searches
# missed mates, so the generator threw away most of its candidates.
WALL_CAP_SECONDS = 900.0
ENGINE_START_SECONDS = 120.0
STRONG = chess.engine.Limit(depth=14, nodes=150_000)
WEAK = chess.engine.Limit(nodes=5_000)
WALK_BACK = chess.engine.Limit(depth=16, nodes=300_000)
# The no-shorter-mate check: Stockfish's `go mate N-1` gets this many nodes (3 to 25 s of one
# core here, by load); a mate in N-1 or fewer is searched exhaustively where N-1 is at most
# EXHAUSTIVE_MAX (a mate in 3: seconds to a minute in Python), within EXHAUSTIVE_BUDGET positions.
CHECK_NODES = 2_000_000
MATE_SEARCH_NODES = 50_000_000  # --mate-search: the deep check's budget
EXHAUSTIVE_MAX = 3
EXHAUSTIVE_BUDGET = 300_000


def open_engine(path: str) -> chess.engine.SimpleEngine:
    """Stockfish with one thread and a small hash (the searches are then deterministic). Its start
    may take up to ENGINE_START_SECONDS: on a loaded machine it took longer than python-chess's
    default 10 s to answer `uci`, and a generator run died before its first game."""
    engine = chess.engine.SimpleEngine.popen_uci(path, timeout=ENGINE_START_SECONDS)
    engine.configure({"Threads": 1, "Hash": 32})
    return engine


def _mate_for_mover(info: chess.engine.InfoDict, board: chess.Board) -> int | None:
    score = info.get("score")
    if score is None:
        return None
    return score.pov(board.turn).mate()


@dataclass(frozen=True)
class Shorter:
    """What the no-shorter-mate check saw: `mate` M < N if it found a mate in M (with `line`, the
    engine's PV or the exhaustive search's line), else None; `how` says which check decided
    ("exhaustive" is a proof; "stockfish N nodes" is a search that found none within its budget;
    "unknown" when the search was cut short and proves nothing)."""

    mate: int | None
    line: tuple[str, ...]
    how: str


def shorter_mate(
    engine: chess.engine.SimpleEngine,
    position: chess.Board,
    n: int,
    nodes: int = CHECK_NODES,
    exhaustive_max: int = EXHAUSTIVE_MAX,
    label: str = "stockfish",
) -> Shorter:
    """Is there a mate in fewer than n moves from `position` (its FEN alone)?

    Where n-1 <= `exhaustive_max`, an exhaustive search (games/chess/mate_search.py) decides:
    a proof either way. Otherwise, or if that search runs past its budget, Stockfish's mate search
    (UCI `go mate n-1`, hash cleared, `nodes` nodes) looks for one: it stops at the first mate in
    n-1 or fewer, so "none" means none within the budget. `label` names that search in `how`
    ("stockfish mate search" for `--mate-search`)."""
    board = chess.Board(position.fen())
    if n <= 1:
        return Shorter(None, (), "exhaustive")
    if n - 1 <= exhaustive_max:
        try:
            found = shortest_mate(board, n - 1, budget=EXHAUSTIVE_BUDGET)
        except Unknown:
            pass
        else:
            if found is None:
                return Shorter(None, (), "exhaustive")
            return Shorter(found[0], tuple(m.uci() for m in found[1]), "exhaustive")
    engine.configure({"Clear Hash": None})
    info = engine.analyse(board, chess.engine.Limit(mate=n - 1, nodes=nodes, time=WALL_CAP_SECONDS))
    found_mate = _mate_for_mover(info, board)
    if found_mate is not None and 0 < found_mate < n:
        return Shorter(found_mate, tuple(m.uci() for m in info.get("pv", [])), f"{label} {nodes} nodes")
    # Stopped by the wall cap before the node budget (and not at the engine's depth limit): no proof.
    if (
        info.get("nodes", 0) < nodes
        and info.get("depth", 0) < 200
        and info.get("time", 0.0) >= WALL_CAP_SECONDS * 0.9
    ):
        return Shorter(None, (), "unknown")
    return Shorter(None, (), f"{label} {nodes} nodes")


def verify(
    engine: chess.engine.SimpleEngine, position: chess.Board, n: int, nodes: int = CHECK_NODES
) -> list[str] | None:
    """The 2n-1 ply solution if Stockfish shows mate in exactly n for the side to move, else None.

    From the FEN alone (no move history: the puzzle is played from its FEN), hash cleared: a mate
    search (UCI `go mate n`) must find mate in n (a mate found is a mate), and `shorter_mate` must
    find none in n-1 or fewer (a proof for small n, else a deep node-bounded mate search)."""
    line = mate_line(engine, position, n)
    if line is None:
        return None
    shorter = shorter_mate(engine, position, n, nodes)
    if shorter.mate is not None or shorter.how == "unknown":
        return None
    return line


def mate_line(engine: chess.engine.SimpleEngine, position: chess.Board, n: int) -> list[str] | None:
    """A 2n-1 ply mating line if Stockfish's `go mate n` finds mate in n (no shorter-mate check)."""
    board = chess.Board(position.fen())
    engine.configure({"Clear Hash": None})
    last = engine.analyse(board, chess.engine.Limit(mate=n, nodes=FIND_NODES, time=WALL_CAP_SECONDS))
    if _mate_for_mover(last, board) != n:
        return None
    want_depth = max(2 * n + 8, 18)
    line = list(last.get("pv", []))
    work = board.copy()
    for move in line[: 2 * n - 1]:
        work.push(move)
    line = line[: 2 * n - 1]
    while len(line) < 2 * n - 1 and not work.is_game_over():
        # The PV was cut short: search on from where it ends.
        limit = chess.engine.Limit(depth=want_depth, nodes=FIND_NODES, time=WALL_CAP_SECONDS)
        info = engine.analyse(work, limit)
        pv = info.get("pv", [])
        if not pv:
            return None
        work.push(pv[0])
        line.append(pv[0])
    if len(line) != 2 * n - 1 or not work.is_checkmate():
        return None
    return [m.uci() for m in line]


def _read_results(path: Path | None, nodes: int) -> dict[str, dict[str, Any]]:
    """The verdicts of earlier `--check` runs that stand at this node budget, by puzzle id."""
    done: dict[str, dict[str, Any]] = {}
    if path is not None and path.exists():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            # A mate found is found at any budget; "none" stands only from at least this budget;
            # "unknown" (the wall cap cut the search short) proves nothing and is searched again.
            if row["how"] == "unknown":
                continue
            if row["mate"] is not None or row["how"] == "exhaustive" or row["nodes"] >= nodes:
                done[row["id"]] = row
    return done


def relabel(args: argparse.Namespace) -> int:
    """`--relabel FILE --results R --out NEW`: the suite with every puzzle that `--check` found
    mislabelled (in R) relabelled as the mate it is. Its exact distance M is found by repeating
    the no-shorter-mate check from the shorter mate found, then a 2M-1 ply line by `mate_line`;
    its id becomes `mM-<game>-<ply>` and its source says so. Puzzles with no verdict in R are
    kept and counted as unchecked. At most `--per-depth` per depth (the original puzzles first);
    NEW is then topped up by running the generator on it. Resumable: each outcome is appended to
    `NEW.relabel.jsonl` as it comes, and a rerun takes it from there."""
    path = find_stockfish(args.stockfish)
    if path is None:
        print(f"make_puzzles: Stockfish not found: {INSTALL_HINT}", file=sys.stderr)
        return 2
    puzzles = load_puzzles(args.relabel)
    done = _read_results(Path(args.results), args.nodes)
    out = Path(args.out)
    cache = out.with_name(out.name + ".relabel.jsonl")
    earlier: dict[str, Puzzle | None] = {}
    if cache.exists():
        for text in cache.read_text().splitlines():
            row = json.loads(text)
            earlier[row["id"]] = None if row["puzzle"] is None else Puzzle.model_validate(row["puzzle"])
    keep: list[Puzzle] = []
    moved: list[Puzzle] = []
    unchecked = dropped = 0
    engine = open_engine(path)
    try:
        for p in puzzles:
            row = done.get(p.id)
            if row is None or row["how"] == "unknown":
                unchecked += 1
                keep.append(p)
                continue
            if row["mate"] is None:
                keep.append(p)
                continue
            if p.id in earlier:
                before = earlier[p.id]
                if before is None:
                    dropped += 1
                else:
                    moved.append(before)
                continue
            board = chess.Board(p.fen)
            m = int(row["mate"])
            while m > 1 and (found := shorter_mate(engine, board, m, args.nodes)).mate is not None:
                m = found.mate
            line = mate_line(engine, board, m)
            new_id = f"m{m}-" + p.id.split("-", 1)[1]
            if m < min(DEPTHS) or line is None or new_id in {q.id for q in puzzles}:
                dropped += 1
                print(f"{p.id}: a mate in {m}: dropped", flush=True)
                with cache.open("a") as fh:
                    fh.write(json.dumps({"id": p.id, "puzzle": None}) + "\n")
                continue
            fresh = Puzzle(
                id=new_id,
                depth=m,
                fen=p.fen,
                solution=line,
                source=f"{p.source}; relabelled from mate in {p.depth}",
            )
            check_puzzle(fresh)
            moved.append(fresh)
            with cache.open("a") as fh:
                fh.write(json.dumps({"id": p.id, "puzzle": fresh.model_dump()}) + "\n")
            print(f"{p.id}: relabelled {fresh.id}", flush=True)
    finally:
        engine.quit()
    counts: dict[int, int] = {}
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        for p in keep + moved:
            if counts.get(p.depth, 0) >= args.per_depth:
                continue
            counts[p.depth] = counts.get(p.depth, 0) + 1
            fh.write(p.model_dump_json() + "\n")
    print(
        f"make_puzzles: {out}: {dict(sorted(counts.items()))} ({len(moved)} relabelled, {dropped} dropped, "
        f"{unchecked} without a verdict)"
    )
    return 0


def _game_of(p: Puzzle) -> str:
    return p.source.split("game ")[1].split()[0] if "game " in p.source else p.id


def derive(args: argparse.Namespace) -> int:
    """`--derive FILE --out NEW`: top up the depths (`--depths`) short of `--per-depth` from the
    next depth's puzzles, as the generator's own games do. After the first two plies of a mate in
    d+1 (the attacker's move and the defender's reply of the line), the attacker still has a
    forced mate within d (it had one against every defence); the candidate is kept if
    `shorter_mate` finds none in d-1 or fewer, with the rest of the line as its solution. At most
    one puzzle per depth per game, as in generation: a game with a puzzle of depth d already
    gives none. NEW is FILE plus the new puzzles."""
    path = find_stockfish(args.stockfish)
    if path is None:
        print(f"make_puzzles: Stockfish not found: {INSTALL_HINT}", file=sys.stderr)
        return 2
    puzzles = load_puzzles(args.derive)
    fens = {p.fen for p in puzzles}
    ids = {p.id for p in puzzles}
    added: list[Puzzle] = []
    engine = open_engine(path)
    try:
        for d in range(args.depths[1], args.depths[0] - 1, -1):
            have = [p for p in puzzles + added if p.depth == d]
            games = {_game_of(p) for p in have}
            for parent in [p for p in puzzles + added if p.depth == d + 1]:
                if len(have) >= args.per_depth:
                    break
                if _game_of(parent) in games:
                    continue
                board = chess.Board(parent.fen)
                for uci in parent.solution[:2]:
                    board.push_uci(uci)
                ply = int(parent.id.rsplit("-", 1)[1]) + 2
                new_id = f"m{d}-{parent.id.split('-')[1]}-{ply:03d}"
                if board.fen() in fens or new_id in ids:
                    continue
                seen = shorter_mate(engine, board, d, args.nodes, label=_label(args))
                if seen.mate is not None or seen.how == "unknown":
                    print(f"{new_id}: not exact ({seen.mate}, {seen.how}); skipped", flush=True)
                    continue
                child = Puzzle(
                    id=new_id,
                    depth=d,
                    fen=board.fen(),
                    solution=parent.solution[2:],
                    source=f"{parent.source}; derived from {parent.id} after its first two plies",
                )
                check_puzzle(child)
                added.append(child)
                have.append(child)
                games.add(_game_of(parent))
                fens.add(child.fen)
                ids.add(child.id)
                print(f"{child.id}: derived from {parent.id} ({seen.how})", flush=True)
    finally:
        engine.quit()
    out = Path(args.out)
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        for p in puzzles + added:
            fh.write(p.model_dump_json() + "\n")
    counts = {
        d: sum(p.depth == d for p in puzzles + added) for d in sorted({p.depth for p in puzzles + added})
    }
    print(f"make_puzzles: {out}: {counts} ({len(added)} derived)")
    return 0


def reverify(args: argparse.Namespace, path: str) -> int:
    """Check every puzzle of `--out` again with `verify`; keep those that pass (with the new line).

    Resumable: passing puzzles go to `<out>.reverify.gz` as they are checked, and a rerun skips the
    ids already there (and those that failed, listed in `<out>.reverify.failed`); when all are
    done the file replaces `--out`."""
    out = Path(args.out)
    tmp = out.with_name(out.name.removesuffix(".gz") + ".reverify.gz")  # gzip, like `out`
    failed_path = out.with_name(out.name + ".reverify.failed")
    puzzles = load_puzzles(out)
    done = {p.id for p in load_puzzles(tmp)} if tmp.exists() else set()
    failed = set(failed_path.read_text().split()) if failed_path.exists() else set()
    engine = open_engine(path)
    try:
        for p in puzzles:
            if p.id in done or p.id in failed:
                continue
            solution = verify(engine, chess.Board(p.fen), p.depth)
            if solution is None:
                failed.add(p.id)
                with failed_path.open("a") as fh:
                    fh.write(p.id + "\n")
                print(f"{p.id}: not confirmed, dropped", flush=True)
                continue
            fresh = p.model_copy(update={"solution": solution})
            check_puzzle(fresh)
            _append(tmp, fresh)
            done.add(p.id)
    finally:
        engine.quit()
    tmp.replace(out)
    failed_path.unlink(missing_ok=True)
    print(f"make_puzzles: {len(done)} confirmed, {len(failed)} dropped")
    return 0


def _label(args: argparse.Namespace) -> str:
    return "stockfish mate search" if args.mate_search else "stockfish"


def check(args: argparse.Namespace) -> int:
    """`--check FILE`: the file loads (games/chess/puzzles.py's checks), and unless
    `--structure-only`, no puzzle has a mate shorter than its label (`shorter_mate`). Each verdict
    prints as it comes and is appended to `--results` when given (a rerun skips the ids there), so
    a long check over the whole suite can run in the background and resume. Exit 2 naming every
    mislabelled puzzle (and every one left unknown)."""
    try:
        puzzles = load_puzzles(args.check)
    except PuzzleError as exc:
        print(f"make_puzzles: {exc}", file=sys.stderr)
        return 2
    by = {d: sum(p.depth == d for p in puzzles) for d in sorted({p.depth for p in puzzles})}
    print(f"{args.check}: {len(puzzles)} puzzles, by depth {by}", flush=True)
    if args.structure_only:
        return 0
    path = find_stockfish(args.stockfish)
    if path is None:
        print(f"make_puzzles: Stockfish not found: {INSTALL_HINT}", file=sys.stderr)
        return 2
    puzzles = [p for p in puzzles if args.depths[0] <= p.depth <= args.depths[1]]  # --depths
    if args.sample is not None:
        puzzles = select(puzzles, sorted(by), args.sample)
    results = Path(args.results) if args.results else None
    done = _read_results(results, args.nodes)
    # Deepest first: that is where shorter mates hide, so a run cut short has checked those.
    puzzles = sorted(puzzles, key=lambda p: -p.depth)
    bad: list[str] = []
    engine = open_engine(path)
    started = time.monotonic()
    try:
        for p in puzzles:
            row = done.get(p.id)
            if row is None:
                t0 = time.monotonic()
                seen = shorter_mate(
                    engine, chess.Board(p.fen), p.depth, args.nodes, args.exhaustive_max, _label(args)
                )
                row = {
                    "id": p.id, "depth": p.depth, "nodes": args.nodes, "mate": seen.mate,
                    "line": list(seen.line), "how": seen.how, "seconds": round(time.monotonic() - t0, 2),
                }  # fmt: skip
                if results is not None:
                    with results.open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
            if row["mate"] is not None:
                bad.append(p.id)
                print(f"{p.id}: MATE IN {row['mate']} ({row['how']}: {' '.join(row['line'])})", flush=True)
            elif row["how"] == "unknown":
                bad.append(p.id)
                print(f"{p.id}: unknown (the search was cut short)", flush=True)
            else:
                print(f"{p.id}: no mate in {p.depth - 1} ({row['how']}, {row['seconds']} s)", flush=True)
    finally:
        engine.quit()
    print(
        f"make_puzzles: {len(puzzles) - len(bad)} of {len(puzzles)} exactly as labelled, "
        f"{len(bad)} not ({time.monotonic() - started:.0f} s)"
    )
    if bad:
        print(f"make_puzzles: not exact: {' '.join(bad)}", file=sys.stderr)
        return 2
    return 0


def _existing(out: Path) -> tuple[list[Puzzle], int]:
    if not out.exists():
        return [], 0
    puzzles = load_puzzles(out)
    games = [int(p.source.split("game ")[1].split()[0]) for p in puzzles if "game " in p.source]
    return puzzles, (max(games) + 1 if games else 0)


def _append(out: Path, puzzle: Puzzle) -> None:
    with gzip.open(out, "at", encoding="utf-8") as fh:
        fh.write(puzzle.model_dump_json() + "\n")


def generate(args: argparse.Namespace) -> int:
    path = find_stockfish(args.stockfish)
    if path is None:
        print(f"make_puzzles: Stockfish not found: {INSTALL_HINT}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        have, game_no = _existing(out)
        game_no = max(game_no, args.first_game)
    except PuzzleError as exc:
        print(f"make_puzzles: refusing to extend a bad file: {exc}", file=sys.stderr)
        return 2
    depths = list(range(args.depths[0], args.depths[1] + 1))
    counts = {d: sum(p.depth == d for p in have) for d in depths}
    fens = {p.fen for p in have}
    deadline = time.monotonic() + args.minutes * 60 if args.minutes else None
    engine = open_engine(path)
    try:
        while any(c < args.per_depth for c in counts.values()):
            if deadline is not None and time.monotonic() > deadline:
                print("make_puzzles: time is up; rerun to continue", file=sys.stderr)
                break
            rng = random.Random(f"{args.seed}:{game_no}")
            board = chess.Board()
            for _ in range(rng.randint(2, 8)):
                if board.is_game_over():
                    break
                board.push(rng.choice(list(board.legal_moves)))
            strong = rng.choice([chess.WHITE, chess.BLACK])
            weak_skill = rng.randint(0, 5)
            defend = False  # once the strong side sees a mate, the weak side defends at full strength
            found_here: set[int] = set()
            tried: set[tuple[str, int]] = set()
            while not board.is_game_over() and board.ply() < 300:
                if board.turn != strong:
                    engine.configure({"Skill Level": 20 if defend else weak_skill})
                    limit = STRONG if defend else WEAK
                    move = engine.play(board, limit).move
                    if move is None:
                        break
                    board.push(move)
                    continue
                # The strong side's own search says whether it has a mate: no second search needed.
                engine.configure({"Skill Level": 20})
                played = engine.play(board, STRONG, info=chess.engine.INFO_SCORE)
                mate = _mate_for_mover(played.info, board)
                defend = defend or (mate is not None and mate > 0)
                if mate is not None and 1 <= mate <= max(depths):
                    # Walk back over the same side's earlier moves: a longer mate may have been there.
                    back = board.copy()
                    for k in range(0, 9):
                        if k > 0:
                            if len(back.move_stack) < 2:
                                break
                            back.pop()
                            back.pop()
                        want = mate
                        if k > 0:
                            if (back.fen(), 0) in tried:
                                continue
                            tried.add((back.fen(), 0))
                            pre = engine.analyse(back, WALK_BACK)
                            want = _mate_for_mover(pre, back) or 0
                        if want not in counts or counts[want] >= args.per_depth or want in found_here:
                            continue
                        if back.fen() in fens or (back.fen(), want) in tried:
                            continue
                        tried.add((back.fen(), want))
                        solution = verify(engine, back, want)
                        if solution is None:
                            continue
                        puzzle = Puzzle(
                            id=f"m{want}-{game_no:05d}-{back.ply():03d}",
                            depth=want,
                            fen=back.fen(),
                            solution=solution,
                            source=f"stockfish self-play game {game_no} ply {back.ply()} (seed {args.seed})",
                        )
                        check_puzzle(puzzle)
                        _append(out, puzzle)
                        fens.add(puzzle.fen)
                        found_here.add(want)
                        counts[want] += 1
                        print(f"game {game_no}: mate in {want}  ({dict(counts)})", flush=True)
                if played.move is None:
                    break
                board.push(played.move)
            game_no += 1
    finally:
        engine.quit()
    print(f"make_puzzles: {out}: {dict(counts)}")
    return 0


def _depth_range(text: str) -> tuple[int, int]:
    lo, _, hi = text.partition("-")
    a, b = int(lo), int(hi or lo)
    if not 1 <= a <= b <= 20:
        raise argparse.ArgumentTypeError(f"bad depth range {text!r}")
    return a, b


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-depth", type=int, default=100)
    ap.add_argument("--depths", type=_depth_range, default=(3, 8), help="e.g. 3-8 (also what --check checks)")
    ap.add_argument("--out", default=str(DEFAULT_PATH))
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument(
        "--first-game", type=int, default=0, help="start at this game number at least (parallel runs)"
    )
    ap.add_argument("--minutes", type=float, default=None, help="stop after this long (rerun to resume)")
    ap.add_argument("--stockfish", default=None, help="the stockfish binary")
    ap.add_argument("--check", metavar="FILE", help="validate FILE: structure, then no shorter mates")
    ap.add_argument("--structure-only", action="store_true", help="--check: only the file's structure")
    ap.add_argument("--sample", type=int, default=None, help="--check: only the first K puzzles per depth")
    ap.add_argument(
        "--nodes",
        type=int,
        default=None,
        help=f"--check: Stockfish nodes per puzzle (default {CHECK_NODES:,}; "
        f"{MATE_SEARCH_NODES:,} with --mate-search)",
    )
    ap.add_argument(
        "--mate-search",
        action="store_true",
        help="--check, --derive: the deep check: `go mate N-1` to --nodes (default 50,000,000) per puzzle",
    )
    ap.add_argument(
        "--exhaustive-max", type=int, default=EXHAUSTIVE_MAX, help="--check: prove N-1 <= this exhaustively"
    )
    ap.add_argument("--results", default=None, help="--check: append verdicts here; a rerun skips them")
    ap.add_argument(
        "--relabel", metavar="FILE", help="write FILE to --out with --results' mislabelled puzzles relabelled"
    )
    ap.add_argument(
        "--derive", metavar="FILE", help="write FILE to --out with short depths topped up from the next depth"
    )
    ap.add_argument("--reverify", action="store_true", help="re-check every puzzle of --out with Stockfish")
    args = ap.parse_args(argv)
    if args.nodes is None:
        args.nodes = MATE_SEARCH_NODES if args.mate_search else CHECK_NODES
    if args.nodes < 1:
        ap.error("--nodes must be at least 1")
    if args.check:
        return check(args)
    if args.relabel:
        if not args.results:
            ap.error("--relabel needs --results")
        return relabel(args)
    if args.derive:
        return derive(args)
    if args.reverify:
        path = find_stockfish(args.stockfish)
        if path is None:
            print(f"make_puzzles: Stockfish not found: {INSTALL_HINT}", file=sys.stderr)
            return 2
        return reverify(args, path)
    return generate(args)


if __name__ == "__main__":
    raise SystemExit(main())
