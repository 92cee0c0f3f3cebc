"""`spielbus standings RUN_DIR`: a run folder's standings and ratings again, from matches.jsonl.

Offline (no bus): reads the records of the folder, rates them with the folder's
`tournament.toml` (else `--file`, else the defaults) and prints the report. `--by-provenance`
splits every agent by the provenance hash in its records (`name@hash`: a changed prompt or
configuration is a new row), the same as `[ratings] split_by = "provenance"` in the file. An
SPRT run's test is printed again from its records, and a scored run's move quality
(`spielbus analyse`) from its analysis.jsonl.
Nothing in the folder is changed. Exit 2 for a folder without matches.jsonl, an unreadable
tournament file or a line that is no match record (named by its line number).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from analysis.summary import agent_quality
from bus.protocol import MatchRecord
from referee.config import ConfigError, RatingsConfig, TournamentConfig, load_config
from referee.provenance import split_by_provenance
from referee.ratings import ratings, standings
from referee.records import JsonlError, read_jsonl
from referee.sprt import status_of_records
from spielbus.analyse import ANALYSIS_FILE, print_quality, read_analysis
from spielbus.report import print_report, print_sprt


def read_run_records(run_dir: Path) -> list[MatchRecord]:
    """Every record of `run_dir/matches.jsonl`; a ConfigError names the first bad line."""
    try:
        return list(read_jsonl(run_dir / "matches.jsonl", MatchRecord))
    except JsonlError as exc:
        raise ConfigError(str(exc)) from exc


def _config(run_dir: Path, file: str | None) -> TournamentConfig | None:
    """`--file`, else the folder's tournament.toml, else None (default rating settings)."""
    own = run_dir / "tournament.toml"
    if file is None and not own.is_file():
        return None
    return load_config(file if file is not None else own)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="spielbus standings", description=__doc__.split("\n")[0])
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--file", default=None, help="tournament file for the ratings (default: the folder's)")
    p.add_argument(
        "--by-provenance", action="store_true", help="one row per (agent, provenance hash): name@hash"
    )
    args = p.parse_args(argv)
    console = Console()
    run_dir = Path(args.run_dir)
    try:
        config = _config(run_dir, args.file)
        records = read_run_records(run_dir)
    except ConfigError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return 2
    cfg = config.ratings if config is not None else RatingsConfig()
    if args.by_provenance or cfg.split_by == "provenance":
        records = split_by_provenance(records)
    table, rates = standings(records, cfg.count_provider_faults), ratings(records, cfg)
    threshold = config.fallback_threshold if config is not None else 0.05
    print_report(console, records, table, rates, str(run_dir), fallback_threshold=threshold)
    if config is not None and config.format == "sprt":
        tested, baseline = list(config.agents)
        print_sprt(console, status_of_records(config.sprt_config, tested, baseline, records))
    print_quality(console, agent_quality(read_analysis(run_dir / ANALYSIS_FILE, repair=False)))
    return 0
