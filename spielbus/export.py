"""`spielbus export pgn RUN_DIR [-o FILE]`: every chess match of a run folder in one PGN file
(default RUN_DIR/tournament.pgn), written by referee/pgn.py.

Exit 0 when games were written, 1 when the folder has no chess match (no file is left behind:
an empty PGN would look like a successful export), 2 for a folder that is not a run folder or a
file that cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from referee.pgn import export


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="spielbus export", description="Export a run folder.")
    sub = p.add_subparsers(dest="what", required=True, metavar="FORMAT")
    pg = sub.add_parser(
        "pgn", help="every chess match of RUN_DIR in one PGN file (default RUN_DIR/tournament.pgn)"
    )
    pg.add_argument("run_dir", metavar="RUN_DIR")
    pg.add_argument("-o", "--output", default=None, help="the PGN file to write")
    args = p.parse_args(argv)
    run_dir = Path(args.run_dir)
    if not (run_dir / "matches.jsonl").is_file():
        print(f"spielbus export: {run_dir} is not a run folder (no matches.jsonl)", file=sys.stderr)
        return 2
    try:
        target, n = export(run_dir, Path(args.output) if args.output else None)
    except OSError as exc:
        print(f"spielbus export: {exc}", file=sys.stderr)
        return 2
    if n == 0:
        # No chess match: an empty PGN file would look like a successful export.
        target.unlink(missing_ok=True)
        print(f"spielbus export: {run_dir} has no chess games: nothing written", file=sys.stderr)
        return 1
    print(f"{n} chess games written to {target}")
    return 0
