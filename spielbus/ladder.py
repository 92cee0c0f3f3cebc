"""`spielbus ladder FILE.toml` (the ladder service) and `spielbus ladder standings` (its table offline).

`spielbus ladder FILE.toml [--nats URL] [--auth DIR] [--web-port N] [--metrics-port N] [--analysis
DIR]` runs the ladder of the file (referee/ladder/service.py) until SIGINT/SIGTERM: it logs in as the referee
(`--auth DIR`), schedules matches for the referees already on the bus (`spielbus referee`), and
serves the live page with the leaderboard (`/api/ladder`) and the Prometheus series per entry.
`--analysis DIR` (the folder `spielbus analyst --out` writes) adds each entry's move quality to the
leaderboard (spielbus/ladder_quality.py).
Stopping it leaves the matches in flight to the referees; a restart counts them once. Like every
service it waits for the bus to come up (and rides out its restarts). Exit 2 for a bad file, a
busy port or a missing login; 1 when the streams cannot be set up.

`spielbus ladder register|registrar|approve|revoke|bots`: self-registered bots (spielbus/register.py).
With `--auth DIR` a registry folder (`spielbus auth init --registry`), the ladder logs in with
`DIR/referee.creds` and adds the folder's active registered bots to the file's agents each round.

`spielbus ladder standings` reads every result of the ladder's key-value bucket
(referee/ladder/store.py; no ladder process needed, only NATS), rates them with Bradley-Terry
and its 95% profile-likelihood intervals (referee/ladder/board.py) and prints game, entry, games
played, rating and interval (and openskill's mu and sigma for games of more than two players).
Exit 2 when NATS cannot be reached.

`spielbus ladder audit` reads the same results and prints the collusion report
(referee/ladder/audit.py): pairings of accounts whose mutual score departs from what their results
against everyone else predict (exact two-sided binomial test, Bonferroni over the pairings
tested), and accounts that forfeit to one opponent only. `--json` prints it as JSON. Exit 0.

`spielbus ladder bench ACCOUNT --hours H --reason TEXT` benches an account (every entry of that
login, whatever its options) by writing its quarantine state to the bucket; a running ladder
takes it within a round. `--hours 0` lifts a bench.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from nats.aio.client import Client as NATS
from rich.console import Console
from rich.table import Table

from bus import identity
from bus import loop as bus_loop
from bus.auth import AuthError, load_auth
from bus.connect import connect
from bus.registry import is_registry, registered_names, service_login
from observability.web import port_arg
from referee.ladder.audit import audit
from referee.ladder.board import BoardRow, board
from referee.ladder.quarantine import BenchState
from referee.ladder.store import BUCKET, LadderResult, LadderStore

if TYPE_CHECKING:
    from referee.ladder.service import Ladder

REGISTRY_COMMANDS = ("register", "registrar", "approve", "revoke", "bots")
HOST_HELP = "address the live page and metrics listen on (default 127.0.0.1; 0.0.0.0: every interface)"


async def _open(url: str | None, auth: str | None, bucket: str) -> tuple[NATS, LadderStore]:
    login = load_auth(auth).referee() if auth else None
    nc = await connect(
        url,
        name="spielbus-ladder-tool",
        user=login.user if login else None,
        password=login.password if login else None,
    )
    try:
        return nc, await LadderStore.open(nc.jetstream(), bucket)
    except BaseException:
        await nc.close()
        raise


async def _results(url: str | None, auth: str | None, bucket: str) -> list[LadderResult]:
    nc, store = await _open(url, auth, bucket)
    try:
        return await store.results()
    finally:
        await nc.close()


async def _read(url: str | None, auth: str | None, bucket: str) -> list[BoardRow]:
    return board(await _results(url, auth, bucket))


def _store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nats", default=None, help="NATS URL (default $NATS_URL)")
    p.add_argument("--auth", default=None, metavar="DIR", help="log in as the referee of this auth folder")
    p.add_argument("--bucket", default=BUCKET, help=f"key-value bucket (default {BUCKET})")


def _audit(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="spielbus ladder audit",
        description="pairings whose mutual results are improbable given the rest of the ladder (exact "
        "two-sided binomial test against their ratings from every other game, Bonferroni), and accounts "
        "that forfeit to one opponent only (docs/ladder.md)",
    )
    _store_args(p)
    p.add_argument("--alpha", type=float, default=0.01, help="family-wise error rate (default 0.01)")
    p.add_argument("--min-games", type=int, default=10, help="mutual games before a pair is tested (10)")
    p.add_argument("--min-forfeits", type=int, default=3, help="faulted matches to list an account (3)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    args = p.parse_args(argv)
    if not 0 < args.alpha < 1 or args.min_games < 1 or args.min_forfeits < 1:
        p.error("--alpha must be in (0, 1), --min-games and --min-forfeits at least 1")
    try:
        results = asyncio.run(_results(args.nats, args.auth, args.bucket))
    except (ConnectionError, OSError) as exc:
        print(f"spielbus ladder: {exc}")
        return 2
    report = audit(results, identity.account_of, args.alpha, args.min_games, args.min_forfeits)
    if args.json:
        print(report.model_dump_json(indent=2))
        return 0
    out = Table("game", "pairing", "games", "score", "expected", "p-value", "flagged")
    for r in report.pairs:
        out.add_row(
            r.game,
            f"{r.first} vs {r.second}",
            str(r.games),
            f"{r.score:g}",
            f"{r.expected:.1f}",
            f"{r.p_value:.2g}",
            "FLAGGED" if r.flagged else "",
        )
    console = Console()
    console.print(
        f"{report.pairs_tested} pairings tested, flagged under {args.alpha:g} / {report.pairs_tested}"
    )
    console.print(out)
    forfeits = Table("account", "forfeits to", "forfeits", "matches against others")
    for f in report.forfeits:
        forfeits.add_row(f.account, f.opponent, str(f.forfeits), str(f.other_matches))
    console.print("accounts that forfeit to one opponent only:")
    console.print(forfeits)
    return 0


async def _bench(url: str | None, auth: str | None, bucket: str, account: str, state: BenchState) -> None:
    nc, store = await _open(url, auth, bucket)
    try:
        old = await store.get_bench(account)
        if old is not None:
            state = state.model_copy(update={"streak": old.streak, "benches": old.benches})
        await store.put_bench(account, state)
    finally:
        await nc.close()


def _bench_cmd(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="spielbus ladder bench",
        description="bench an account (all its entries, whatever their options) in a running ladder, "
        "or lift its bench with --hours 0",
    )
    p.add_argument("account", help="the account, e.g. agent-mybot (as `spielbus ladder audit` names it)")
    _store_args(p)
    p.add_argument("--hours", type=float, default=24.0, help="how long (default 24; 0 lifts the bench)")
    p.add_argument("--reason", default="benched by the operator", help="shown on the leaderboard")
    args = p.parse_args(argv)
    if not (0 <= args.hours <= 24 * 365) or len(args.reason) > 500:
        p.error("--hours must be between 0 and 8760, --reason at most 500 characters")
    until = time.time() + args.hours * 3600
    state = BenchState(until=until, reason=args.reason if args.hours else "")
    try:
        asyncio.run(_bench(args.nats, args.auth, args.bucket, args.account, state))
    except (ConnectionError, OSError) as exc:
        print(f"spielbus ladder: {exc}")
        return 2
    print(f"{args.account}: " + (f"benched for {args.hours:g} h" if args.hours else "bench lifted"))
    return 0


def _standings(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="spielbus ladder standings",
        description="the ladder's table from the results stored in JetStream",
    )
    _store_args(p)
    args = p.parse_args(argv)
    try:
        rows = asyncio.run(_read(args.nats, args.auth, args.bucket))
    except (ConnectionError, OSError) as exc:
        print(f"spielbus ladder: {exc}")
        return 2
    out = Table("game", "entry", "games", "Bradley-Terry", "95% interval", "openskill mu ± sigma")
    for r in rows:
        pl = f"{r.pl_mu:.1f} ± {r.pl_sigma:.1f}" if r.pl_mu is not None and r.pl_sigma is not None else ""
        out.add_row(r.game, r.entry, str(r.games), f"{r.bt:.0f}", f"{r.bt_low:.0f} .. {r.bt_high:.0f}", pl)
    Console().print(out)
    return 0


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="spielbus ladder",
        description="Run a ladder until SIGINT/SIGTERM (docs/ladder.md). `spielbus ladder standings` "
        "prints its table offline from JetStream, `spielbus ladder audit` its collusion report, "
        "`spielbus ladder bench ACCOUNT` benches an account; `spielbus ladder register|registrar|approve|"
        "revoke|bots` are self-registered bots (see each one's --help).",
    )
    p.add_argument("file", metavar="FILE.toml", help="the ladder file (examples/ladder.toml)")
    p.add_argument("--nats", default=None, help="NATS URL (default $NATS_URL)")
    p.add_argument(
        "--auth",
        default=None,
        metavar="DIR",
        help="log in as the referee of this auth folder (a registry folder: its registered bots join too)",
    )
    p.add_argument("--web-port", type=port_arg, default=None, help="live page with the leaderboard (off)")
    p.add_argument("--metrics-port", type=port_arg, default=None, help="Prometheus metrics (off)")
    p.add_argument("--host", default="127.0.0.1", help=HOST_HELP)
    p.add_argument(
        "--analysis",
        default=None,
        metavar="DIR",
        help="the folder (or analysis.jsonl) `spielbus analyst --out` writes: move-quality columns",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p


async def _serve(args: argparse.Namespace) -> None:
    from bus.connect import nats_url, redact
    from bus.subjects import Subjects
    from observability.web.serve import start_observability
    from referee.ladder.config import load_ladder
    from referee.ladder.service import Ladder, check_ladder_games

    config = load_ladder(args.file)
    check_ladder_games(config)
    registered = None
    if args.auth and is_registry(args.auth):
        # Operator mode (`auth init --registry`): the referee's creds, and the registered bots join
        # the pool beside the file's agents (read again every round: no restart to admit one).
        folder = args.auth
        nc = await connect(
            nats_url(args.nats),
            name="spielbus-ladder",
            service=True,
            **service_login(folder, "referee"),
        )

        def registered() -> list[str]:
            return registered_names(folder)

    else:
        login = load_auth(args.auth).referee() if args.auth else None
        nc = await connect(
            nats_url(args.nats),
            name="spielbus-ladder",
            service=True,
            user=login.user if login else None,
            password=login.password if login else None,
        )
    ladder = Ladder(nc, config, subjects=Subjects(), registered=registered)
    try:
        obs = await start_observability(
            nc,
            ladder.subjects,
            metrics_port=args.metrics_port,
            web_port=args.web_port,
            host=args.host,
            ladder=ladder.leaderboard,
        )
    except OSError:
        await nc.close()
        raise
    if obs.metrics is not None:
        ladder.on_board.append(obs.metrics.set_ladder)
    for line in obs.where():
        print(line, flush=True)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, ladder.stop)
    print(
        f"ladder {config.name} on {redact(nats_url(args.nats))}: {len(config.agents)} agents allowed, "
        f"{', '.join(g.label() for g in config.games)}",
        flush=True,
    )
    watch = asyncio.create_task(_watch_quality(ladder, args.analysis)) if args.analysis else None
    try:
        await ladder.run()
    finally:
        if watch is not None:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watch
        with contextlib.suppress(Exception):
            await asyncio.wait_for(obs.stop(), 10)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(nc.drain(), 10)
        with contextlib.suppress(Exception):
            await nc.close()
    print(f"ladder {config.name} stopped: {ladder.scheduled} scheduled, {ladder.counted} counted", flush=True)


async def _watch_quality(ladder: Ladder, path: str) -> None:
    """The analyst's rows of the ladder's matches as the board's quality columns, re-read when the
    file changes (spielbus/ladder_quality.py), off the event loop."""
    from spielbus.ladder_quality import QualityFile

    qf = QualityFile(path)
    while True:
        try:
            if await asyncio.to_thread(qf.refresh, list(ladder.results)):
                ladder.quality = qf.figures
        except Exception:  # a bad file must not stop the ladder: keep the last figures
            logging.getLogger(__name__).warning("ladder: reading %s failed", qf.path, exc_info=True)
        await asyncio.sleep(max(1.0, ladder.config.probe_s))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["standings"]:
        return _standings(argv[1:])
    if argv[:1] == ["audit"]:
        return _audit(argv[1:])
    if argv[:1] == ["bench"]:
        return _bench_cmd(argv[1:])
    if argv[:1] and argv[0] in REGISTRY_COMMANDS:
        from spielbus.register import main as register_main

        return register_main(argv)
    args = _run_parser().parse_args(argv)
    # `spielbus` set up logging already (at its --log-level, without times); this service logs at
    # its own, each line with its time (a summary per `[limits] log_interval_s`, not one per match).
    logging.basicConfig(format="%(asctime)s %(name)s %(levelname)s %(message)s", force=True)
    logging.getLogger().setLevel(args.log_level.upper())
    from bus.streams import StreamError
    from referee.config import ConfigError

    try:
        bus_loop.run(_serve(args))
    except (ConfigError, AuthError) as exc:
        print(f"spielbus ladder: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        if isinstance(exc, ConnectionError):
            print(f"spielbus ladder: {exc}", file=sys.stderr)
            return 1
        print(f"spielbus ladder: cannot serve: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except StreamError as exc:
        print(f"spielbus ladder: {exc}", file=sys.stderr)
        return 1
    return 0
