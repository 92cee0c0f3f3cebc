"""The `spielbus` command.

    spielbus run FILE.toml          a whole tournament on one machine (embedded nats-server unless --nats)
    spielbus submit FILE.toml       a tournament for the referees and agents already on --nats
    spielbus referee                a referee worker: pulls match specs and plays them
    spielbus agent KIND --name N    an agent service (`spielbus agent KIND --help` for its options)
    spielbus llm serve              the embedded LLM server (llama.cpp on SmolLM2-135M)
    spielbus selfplay COMMAND       self-play datasets, CFVFP, the LLM Coach, RL export
    spielbus paper NAME             a paper's headline table beside ours, with plots
    spielbus games                  the games that can be played
    spielbus protocol schema        the JSON Schema of every protocol v1 message (one bundle)
    spielbus protocol asyncapi      the AsyncAPI 3 document of protocol v1
    spielbus bot-check NAME         a conformance run against a bot on the bus (pass/fail table)
    spielbus auth init              NATS accounts: the referee, each agent, each bot-check, spectators
    spielbus collect TOURNAMENT_ID  rebuild a run folder from the match stream
    spielbus standings RUN_DIR      a run folder's standings and ratings again (--by-provenance)
    spielbus analyse RUN_DIR        every move of a run scored by a reference (analysis.jsonl)
    spielbus analyst                every match scored as it ends, from the match stream
    spielbus calibrate GAME         a reference ladder rated once: a calibration file for [ratings] anchors
    spielbus ladder FILE.toml       a ladder: agents join any time, matchmaking by information
    spielbus ladder standings       the ladder's table from its results in JetStream
    spielbus ladder audit, bench    its collusion report; bench an account (docs/ladder.md)
    spielbus export pgn RUN_DIR     a run folder's chess matches as one PGN file
    spielbus puzzles, replay, cwm   mate-in-N puzzles; a run replayed from its recorded LLM answers;
                                    code world models

Every command is one row of `COMMANDS`: parsed here, or by its own module, or run in its own
process (agents, research pipelines).

Exit codes: 0 success, 1 runtime failure, 2 bad input (arguments or tournament file).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from bus import loop as bus_loop
from bus.auth import AuthError
from bus.subjects import prefix_arg
from observability.web import port_arg
from referee.config import ConfigError, load_config

if TYPE_CHECKING:
    from bus.connect import Login
    from bus.tls import TlsFiles

EPILOG = (
    "Environment: NATS_URL (default NATS server; several servers of one cluster comma-separated), "
    "NATS_CREDS / NATS_USER / NATS_PASSWORD (credentials; an explicit --auth DIR wins over them), "
    "NATS_TLS_CA (CA file for a TLS server, as --tls-ca), "
    "SPIELBUS_STREAM_REPLICAS (replicas of new streams, default 1)."
)
NATS_HELP = "NATS URL, or several servers of one cluster comma-separated (default $NATS_URL)"
TLS_CA_HELP = (
    "CA file to verify the NATS server's TLS certificate with (default $NATS_TLS_CA; the system's CAs "
    "always): what `auth init --tls-generate` writes as tls/ca.pem"
)


def _add_nats_flags(p: argparse.ArgumentParser, nats_help: str = NATS_HELP, replicas: bool = True) -> None:
    from bus.connect import nats_url_arg
    from bus.streams import replicas_arg

    p.add_argument("--nats", default=None, type=nats_url_arg, metavar="URL[,URL...]", help=nats_help)
    p.add_argument("--tls-ca", default=None, metavar="FILE", help=TLS_CA_HELP)
    if replicas:
        p.add_argument(
            "--stream-replicas",
            type=replicas_arg,
            default=None,
            metavar="N",
            help="replicas of the streams when this process creates them: 3 on a NATS cluster of 3 "
            "or more (default $SPIELBUS_STREAM_REPLICAS or 1)",
        )


HOST_HELP = (
    "address the live page and metrics listen on (default 127.0.0.1: this machine only; "
    "0.0.0.0: every interface, e.g. in a container; the page serves ended matches' full records "
    "without a login)"
)


def _seconds(value: str) -> float:
    """A finite, non-negative number of seconds (argparse type)."""
    try:
        out = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not (out >= 0 and out != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds, 0 or more: {value!r}")
    return out


def _add_wait_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--deadline",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="stop collecting after this long and report the matches without a record (default: none)",
    )
    p.add_argument(
        "--idle-timeout",
        type=_seconds,
        default=600.0,
        metavar="SECONDS",
        help="stop collecting when no match has made progress for this long (default 600)",
    )


def _add_auth_flag(p: argparse.ArgumentParser, who: str) -> None:
    p.add_argument(
        "--auth",
        default=None,
        metavar="DIR",
        help=f"log in as {who} of this `spielbus auth init` folder (wins over NATS_USER/NATS_CREDS)",
    )


def _positive_int(value: str) -> int:
    """argparse type: a whole number of at least 1 (0 would play nothing, forever)."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {n}")
    return n


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("spielbus")
    except PackageNotFoundError:  # a source tree that was never installed
        return "(not installed)"


def _run_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="tournament TOML file")
    _add_nats_flags(p, "use this NATS server (or cluster: URLs comma-separated) instead of an embedded one")
    p.add_argument("--no-referee", action="store_true", help="do not start referee workers here")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="referees: 1 (default) plays in this process; N > 1 starts N `spielbus referee` processes",
    )
    p.add_argument(
        "--run-dir", default=None, help="parent folder of the run folder (default: the file's run_dir)"
    )
    p.add_argument("--prefix", default="spielbus", type=prefix_arg, help="subject prefix")
    p.add_argument("--agent-wait", type=float, default=120.0, help="seconds to wait for agents to join")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--metrics-port",
        type=port_arg,
        default=9400,
        metavar="PORT",
        help="Prometheus metrics of the whole run (referee and agents) on this port; a busy port "
        "falls back to a free one; 0: any free port; off: none (default 9400)",
    )
    p.add_argument(
        "--web-port",
        type=port_arg,
        default=8400,
        metavar="PORT",
        help="live match page on this port, same rules (default 8400)",
    )
    p.add_argument(
        "--keep-serving",
        action="store_true",
        help="after the report, keep the live page and metrics up until Ctrl-C",
    )
    p.add_argument("--host", default="127.0.0.1", help=HOST_HELP)
    p.add_argument(
        "--auth",
        default=None,
        metavar="DIR",
        help="enforce the accounts of this `spielbus auth init` folder (default: none; an embedded run "
        "with an external agent writes its own into the run folder and prints each bot's login file)",
    )
    _add_wait_flags(p)
    p.add_argument(
        "--resume",
        default=None,
        metavar="RUN_DIR",
        help="continue the interrupted run in this run folder (e.g. runs/NAME-DATE-ID): play only the "
        "matches it has no record of, with the same seeds; FILE must be the tournament it ran (exit 2 "
        "naming what differs)",
    )
    p.add_argument(
        "--absent-limit",
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="how long matches wait for an agent that does not answer before its turns are "
        "recorded as no_responder (default 60; 0: never wait)",
    )


def _submit_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("file")
    _add_nats_flags(p)
    p.add_argument("--run-dir", default=None)
    p.add_argument("--prefix", default="spielbus", type=prefix_arg)
    p.add_argument("--agent-wait", type=float, default=60.0)
    p.add_argument("--quiet", action="store_true")
    _add_auth_flag(p, "the referee user")
    _add_wait_flags(p)


def _referee_flags(p: argparse.ArgumentParser) -> None:
    _add_nats_flags(p)
    p.add_argument(
        "--concurrency", type=_positive_int, default=8, help="matches played at once (1 or more, default 8)"
    )
    p.add_argument(
        "--absent-limit",
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="how long matches wait for an agent that does not answer (default 60; 0: never)",
    )
    p.add_argument(
        "--drain-grace",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="on SIGTERM, matches in flight get this long to finish before they are handed back "
        "to the work queue for another referee (default 10)",
    )
    p.add_argument("--prefix", default="spielbus", type=prefix_arg)
    p.add_argument(
        "--metrics-port",
        type=port_arg,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics on this fixed port (0: any free port; default: off)",
    )
    p.add_argument(
        "--web-port",
        type=port_arg,
        default=None,
        metavar="PORT",
        help="serve the live match page (default: off)",
    )
    p.add_argument("--host", default="127.0.0.1", help=HOST_HELP)
    _add_auth_flag(p, "the referee user")


def _games_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="as JSON with type details")
    p.add_argument("filter", nargs="?", default="", help="only names containing this")


def _protocol_flags(p: argparse.ArgumentParser) -> None:
    proto_sub = p.add_subparsers(dest="proto_command", required=True, metavar="SUBCOMMAND")
    schema = proto_sub.add_parser(
        "schema", help="print the JSON Schema bundle of every message (docs/protocol.schema.json)"
    )
    schema.add_argument("--message", default=None, help="only this message, standalone (e.g. turn, move)")
    proto_sub.add_parser(
        "asyncapi", help="print the AsyncAPI 3 document: subjects, messages, schemas (docs/asyncapi.json)"
    )


def _bot_check_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="the bot's agent name")
    _add_nats_flags(p, replicas=False)
    p.add_argument("--prefix", default="spielbus", type=prefix_arg)
    p.add_argument("--deadline-ms", type=int, default=5000, help="turn deadline (default 5000)")
    p.add_argument(
        "--games",
        default=None,
        help="comma-separated games for the full-match checks; the first is also the game of the "
        "single-turn and concurrent checks",
    )
    p.add_argument("--concurrency", type=int, default=10, help="concurrent matches (default 10)")
    _add_auth_flag(p, "the bot's own bot-check user (botcheck-NAME)")
    p.add_argument(
        "--login",
        default=None,
        metavar="FILE",
        help="the bot's login file (agents/NAME.env of `spielbus auth init`, or the one `spielbus run` "
        "writes for an external bot): its bot-check login and NATS_URL",
    )


def _auth_flags(p: argparse.ArgumentParser) -> None:
    auth_sub = p.add_subparsers(dest="auth_command", required=True, metavar="SUBCOMMAND")
    init = auth_sub.add_parser("init", help="write a nats-server config and credentials per agent")
    init.add_argument(
        "tournament", nargs="?", default=None, help="take the agents from this tournament or ladder file"
    )
    init.add_argument("--agents", default=None, help="comma-separated agent names")
    init.add_argument(
        "--registry",
        action="store_true",
        help="operator mode for a ladder open to registration: no agents; bots get their own "
        "accounts at run time from `spielbus ladder registrar` (docs/ladder.md)",
    )
    init.add_argument("--out", required=True, help="folder to write (config, auth.json, *.env)")
    init.add_argument("--prefix", default="spielbus", type=prefix_arg)
    from bus.connect import nats_url_arg

    init.add_argument(
        "--nats",
        type=nats_url_arg,
        default=None,
        help="where bots reach the server, written as NATS_URL into every login file, so "
        "`spielbus bot-check NAME --login FILE` and the example bots need nothing else "
        "(default: $NATS_URL, else nats://127.0.0.1:4222)",
    )
    tls = init.add_argument_group("TLS (clients must then speak TLS; docs/deploy.md)")
    tls.add_argument(
        "--tls-generate",
        default=None,
        metavar="HOST[,HOST...]",
        help="make a private CA and a server certificate for these names and addresses "
        "(OUT/tls/; bots verify with OUT/tls/ca.pem, written as NATS_TLS_CA into every login file)",
    )
    tls.add_argument("--tls-cert", default=None, metavar="FILE", help="the server's certificate (PEM)")
    tls.add_argument("--tls-key", default=None, metavar="FILE", help="its private key (PEM)")
    tls.add_argument(
        "--tls-ca", default=None, metavar="FILE", help="the CA clients verify it with, if not a public one"
    )
    existing = init.add_mutually_exclusive_group()
    existing.add_argument("--force", action="store_true", help="replace an existing folder's passwords")
    existing.add_argument(
        "--if-missing",
        action="store_true",
        help="keep an existing folder that has every agent (exit 0); for one-shot deploy steps",
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="spielbus",
        description="Spielbus: game-playing agents under one referee over NATS.",
        epilog=EPILOG,
    )
    p.add_argument("--log-level", default="WARNING", help="log level (default WARNING)")
    p.add_argument("--version", action="version", version=f"spielbus {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        if command.flags is None:  # parsed by the module or process it hands over to
            sub.add_parser(name, help=command.help, add_help=False)
        else:
            command.flags(sub.add_parser(name, help=command.help))
    return p


def _hand_over(module: str, module_args: list[str]) -> int:
    """A command in its own process image (`python -m module ...`): an agent package or a research
    pipeline keeps its own imports and logging, as when run as a service."""
    os.execv(sys.executable, [sys.executable, "-m", module, *module_args])
    return 0  # not reached


def _with_line(path: str, problem: str) -> str:
    """`agents.NAME: bad options ... KEY: msg` led by `FILE:LINE:` of that agent's KEY, where found."""
    import re
    from pathlib import Path

    from referee.config import line_of

    m = re.match(r"agents\.([A-Za-z0-9_-]+): .*?\): ([A-Za-z0-9_.]+): ", problem)
    if m is None:
        return problem
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return problem
    line = line_of(text, ("agents", m.group(1), "options", *m.group(2).split(".")))
    return f"{path}:{line}: {problem}" if line else problem


def _cmd_run(args: argparse.Namespace, submit_only: bool) -> int:
    from spielbus.report import run_console
    from spielbus.run import RunOptions, run_tournament

    console = run_console()
    try:
        config = load_config(args.file)
        from referee.config import RECORD_BYTES, match_count
        from referee.schedule import check_games
        from spielbus.launch import check_agent_options

        n = match_count(config, check_games(config))
        if n >= 10_000:
            console.print(
                f"Schedule: {n:,} matches (about {n * RECORD_BYTES / 1e9:,.1f} GB of records in the run)",
                highlight=False,
            )
        if not submit_only:
            to_start = {
                n: (a.kind, config.agent_options(n)) for n, a in config.agents.items() if not a.external
            }
            try:
                with console.status("Checking the agents' options..."):
                    problems = check_agent_options(to_start, [g.name for g in config.games])
            except KeyboardInterrupt:
                # Before the run folder exists: there is nothing to resume, so no `--resume` line.
                console.print(
                    "[yellow]interrupted before the run started: no run folder, nothing to resume[/yellow]"
                )
                return 130
            if problems:
                located = [_with_line(args.file, p) for p in problems]
                raise ConfigError(f"{args.file}: bad agent options:\n  " + "\n  ".join(located))
    except ConfigError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return 2
    if submit_only and not (args.nats or os.environ.get("NATS_URL")):
        console.print("[red]error:[/red] submit needs --nats or NATS_URL (the bus the referees are on)")
        return 2
    opts = RunOptions(
        nats=args.nats,
        referee=not (submit_only or getattr(args, "no_referee", False)),
        workers=getattr(args, "workers", 1),
        prefix=args.prefix,
        run_dir=args.run_dir,
        agent_wait_s=args.agent_wait,
        config_path=args.file,
        quiet=args.quiet,
        metrics_port=getattr(args, "metrics_port", None),
        web_port=getattr(args, "web_port", None),
        host=getattr(args, "host", "127.0.0.1"),
        keep_serving=getattr(args, "keep_serving", False),
        auth_dir=getattr(args, "auth", None),
        deadline_s=args.deadline,
        idle_s=args.idle_timeout,
        absent_limit_s=getattr(args, "absent_limit", 60.0),
        resume=getattr(args, "resume", None),
    )
    if submit_only:
        config = config.model_copy(
            update={"agents": {k: v.model_copy(update={"external": True}) for k, v in config.agents.items()}}
        )
    from spielbus.run import Interrupted

    try:
        result = bus_loop.run(run_tournament(config, opts, console))
    except (ConfigError, AuthError) as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return 2
    except (ConnectionError, RuntimeError) as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return 1
    except Interrupted as exc:
        from spielbus.run import resume_command

        kept = (
            f"the run folder keeps every finished match: {exc.path}; continue with\n  "
            f"{resume_command(opts, exc.path)}"
            if exc.finished
            else "no run folder kept"
        )
        console.print(f"[yellow]{exc}: {kept}[/yellow]", highlight=False, soft_wrap=True)
        return 143 if exc.signame == "SIGTERM" else 130
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: the run folder keeps every finished match[/yellow]")
        return 130
    return 1 if result.failed or result.fallbacks or result.timeouts else 0


def _referee_login(args: argparse.Namespace) -> Login:
    """`--auth DIR`: the referee user's keyword arguments for `bus.connect`; none: the environment's."""
    if not args.auth:
        return {}
    from bus.auth import login_for
    from bus.registry import is_registry, service_login

    if is_registry(args.auth):  # operator mode (`auth init --registry`): the referee's creds file
        return service_login(args.auth, "referee")
    user = login_for(args.auth, "referee", prefix=args.prefix)
    return {"user": user.user, "password": user.password}


def _botcheck_login(args: argparse.Namespace) -> Login:
    """`bot-check --auth DIR`: the narrow `botcheck-NAME` user (never the referee's), with its inbox;
    `--login FILE` or the environment: the `SPIELBUS_BOTCHECK_*` login of a bot's one login file
    (its `NATS_URL` too, unless `--nats` names one); else the environment's NATS_USER."""
    from bus.auth import BOTCHECK_CREDS, BOTCHECK_ENV, login_for
    from referee.botcheck import login_from_file

    if args.auth:
        user = login_for(args.auth, "botcheck", agent=args.name, prefix=args.prefix)
        return {"user": user.user, "password": user.password, "inbox_prefix": user.inbox_prefix() or ""}
    if args.login:
        login, url = login_from_file(args.login)
        args.nats = args.nats or url
        return login
    name, password, inbox = (os.environ.get(k, "") for k in BOTCHECK_ENV)
    if os.environ.get(BOTCHECK_CREDS):
        return {"creds": os.environ[BOTCHECK_CREDS], "inbox_prefix": inbox}
    return {"user": name, "password": password, "inbox_prefix": inbox} if name else {}


def _cmd_referee(args: argparse.Namespace) -> int:
    from bus.connect import connect, nats_url, redact
    from bus.streams import StreamError
    from bus.subjects import Subjects
    from observability.web.serve import start_observability
    from referee.worker import RefereeWorker

    try:
        login = _referee_login(args)
    except AuthError as exc:
        print(f"spielbus referee: {exc}", file=sys.stderr)
        return 2

    async def main() -> None:
        nc = await connect(nats_url(args.nats), name="spielbus-referee", service=True, **login)
        subjects = Subjects(args.prefix)
        worker = RefereeWorker(
            nc,
            subjects=subjects,
            concurrency=args.concurrency,
            absent_limit_s=args.absent_limit,
            drain_grace_s=args.drain_grace,
        )
        try:
            obs = await start_observability(
                nc, subjects, metrics_port=args.metrics_port, web_port=args.web_port, host=args.host
            )
        except OSError as exc:
            from observability.metrics import port_free

            await nc.close()
            # The metrics bind first: if the web port is busy the page failed, else the metrics did.
            flag, port = "--metrics-port", args.metrics_port
            if args.web_port and not port_free(args.web_port, args.host):
                flag, port = "--web-port", args.web_port
            raise _PortBusy(f"cannot serve {flag} {port}: {exc.strerror or exc}") from exc
        if obs.metrics is not None:
            worker.publisher.listeners.append(obs.metrics.on_event)
        for line in obs.where():
            print(line, flush=True)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, worker.stop)
        print(
            f"referee worker on {redact(nats_url(args.nats))}, up to {args.concurrency} matches at once",
            flush=True,
        )
        await worker.run()
        # The bus may be down (SIGTERM during an outage): nothing below may hang or raise.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(obs.stop(), 10)
        try:
            if nc.is_connected:
                await asyncio.wait_for(nc.drain(), 10)
        except Exception:
            pass
        finally:
            with contextlib.suppress(Exception):
                await nc.close()

    try:
        bus_loop.run(main())
    except _PortBusy as exc:
        print(f"spielbus referee: {exc}", file=sys.stderr)
        return 2
    except (ConnectionError, StreamError) as exc:
        print(f"spielbus referee: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # e.g. --concurrency 0, refused by RefereeWorker
        print(f"spielbus referee: {exc}", file=sys.stderr)
        return 2
    return 0


class _PortBusy(Exception):
    """A `--metrics-port` / `--web-port` that cannot be bound."""


def _cmd_games(args: argparse.Namespace) -> int:
    import pyspiel

    from games.loader import game_names

    names = [n for n in game_names() if args.filter in n]
    if args.json:
        out = []
        types = {g.short_name: g for g in pyspiel.registered_games()}
        for n in names:
            t = types.get(n)
            out.append(
                {
                    "name": n,
                    "long_name": t.long_name if t else n,
                    "players": [t.min_num_players, t.max_num_players] if t else None,
                    "information": str(t.information).split(".")[-1] if t else None,
                    "dynamics": str(t.dynamics).split(".")[-1] if t else None,
                }
            )
        print(json.dumps(out, indent=2))
    else:
        print("\n".join(names))
    return 0


def _cmd_protocol(args: argparse.Namespace) -> int:
    from bus.asyncapi import asyncapi_document
    from bus.protocol import MESSAGES
    from bus.protocol_schema import message_schema, schema_bundle

    if args.proto_command == "asyncapi":
        document = asyncapi_document()
    elif args.message is None:
        document = schema_bundle()
    elif args.message in MESSAGES:
        document = message_schema(args.message)
    else:
        print(
            f"spielbus protocol schema: unknown message {args.message!r}; known: {', '.join(MESSAGES)}",
            file=sys.stderr,
        )
        return 2
    print(json.dumps(document, indent=2))
    return 0


def _cmd_bot_check(args: argparse.Namespace) -> int:
    from rich.table import Table

    from bus.subjects import check_token
    from referee.botcheck import CheckResult, check_bot, options_for

    console = Console()
    try:
        check_token(args.name, "agent name")
        games = [g.strip() for g in args.games.split(",") if g.strip()] if args.games else None
        opts = options_for(games, args.deadline_ms, args.concurrency)
        login = _botcheck_login(args)
    except ValueError as exc:  # AuthError and unknown games included
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return 2

    async def main() -> list[CheckResult]:
        with console.status(f"checking {args.name}..."):
            report = await check_bot(args.name, args.nats, options=opts, prefix=args.prefix, login=login)
        return report.results

    try:
        results = asyncio.run(main())
    except ConnectionError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return 1
    table = Table(title=f"bot-check {args.name}")
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail")
    for r in results:
        table.add_row(r.name, "PASS" if r.ok else "FAIL", r.detail)
    console.print(table)
    failed = [r for r in results if not r.ok]
    console.print(
        f"{len(results) - len(failed)} of {len(results)} checks passed"
        + (f"; failed: {', '.join(r.name for r in failed)}" if failed else ""),
        highlight=False,
    )
    return 1 if failed else 0


def _file_agents(path: str) -> list[str]:
    """The agents of a tournament file, or of a ladder file (`[agents.NAME]` tables either way)."""
    from referee.ladder.config import load_ladder

    try:
        return list(load_config(path).agents)
    except ConfigError as tournament_error:
        try:
            return list(load_ladder(path).agents)
        except ConfigError:
            raise tournament_error from None


def _tls_files(args: argparse.Namespace) -> TlsFiles | None:
    """`auth init --tls-generate` / `--tls-cert --tls-key [--tls-ca]`: the server's TLS files."""
    from bus.tls import generate, given

    if args.tls_generate and (args.tls_cert or args.tls_key):
        raise AuthError("--tls-generate makes the certificate: give it or --tls-cert/--tls-key, not both")
    held = any((Path(args.out) / f).exists() for f in ("auth.json", "registry.json"))
    if args.tls_generate and held and not (args.force or args.if_missing):
        raise AuthError(f"{args.out} already holds an auth folder; pass --force to replace it")
    if args.tls_generate:
        if args.if_missing and (Path(args.out) / "tls" / "server.pem").exists():
            return None  # keep the certificate bots already trust
        return generate(args.out, args.tls_generate.split(","))
    if args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key):
            raise AuthError("--tls-cert and --tls-key go together")
        return given(args.tls_cert, args.tls_key, args.tls_ca)
    return None


def _auth_init_registry(
    args: argparse.Namespace, url: str, console: Console, tls: TlsFiles | None = None
) -> int:
    """`auth init --registry`: an operator-mode folder (bus/registry.py); bots register themselves."""
    from bus.registry import init_registry

    if args.tournament or args.agents:
        raise AuthError("--registry takes no agents: bots register themselves (`spielbus ladder register`)")
    if args.if_missing and (Path(args.out) / "registry.json").exists():
        console.print(f"kept {args.out}: it holds a registry (--if-missing)", highlight=False)
        return 0
    init_registry(args.out, prefix=args.prefix, url=url, force=args.force, tls=tls)
    console.print(
        f"wrote {args.out}/nats-server.conf (operator mode: bots' accounts are added at run time) and "
        f"{args.out}/registry.json (the operator's keys: keep it private); logins {args.out}/referee.env, "
        f"spectator.env, replay.env, system.env.\n"
        f"Start with: nats-server -js -c {args.out}/nats-server.conf\n"
        f"      then: spielbus ladder registrar LADDER.toml --auth {args.out}   (docs/ladder.md)",
        highlight=False,
    )
    return 0


def _cmd_auth(args: argparse.Namespace) -> int:
    from bus.auth import ensure_auth, write_auth
    from bus.connect import nats_servers, nats_url

    console = Console()
    try:
        url = nats_url(args.nats)
        nats_servers(url, source="--nats")
        tls = _tls_files(args)
        if args.registry:
            return _auth_init_registry(args, url, console, tls)
        agents: list[str] = []
        if args.tournament:
            agents += _file_agents(args.tournament)
        if args.agents:
            agents += [a.strip() for a in args.agents.split(",") if a.strip()]
        if not agents:
            raise AuthError("name the agents: --agents a,b,... or a tournament or ladder file")
        if args.if_missing:
            bundle, written = ensure_auth(agents, args.out, prefix=args.prefix, url=url, tls=tls)
        else:
            bundle, written = (
                write_auth(agents, args.out, prefix=args.prefix, force=args.force, url=url, tls=tls),
                True,
            )
    except (ConfigError, AuthError, ValueError) as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return 2
    if not written:
        console.print(f"kept {args.out}: it has a user for every agent (--if-missing)", highlight=False)
        return 0
    names = [u.agent for u in bundle.users if u.role == "agent"]
    console.print(
        f"wrote {args.out}/nats-server.conf: one account each for the referee, the spectators, "
        "the replay readers and "
        f"{len(names)} agents ({', '.join(n for n in names if n)}), each agent with a bot-check account;\n"
        f"logins: {args.out}/agents/<name>.env (the bot author's one file: the bot's login and its "
        f"bot-check login, `spielbus bot-check <name> --login FILE`), {args.out}/referee.env, "
        f"{args.out}/spectator.env, {args.out}/replay.env (keep them private).\n"
        f"Start with: spielbus run FILE.toml --auth {args.out}\n"
        f"        or: nats-server -js -c {args.out}/nats-server.conf",
        highlight=False,
    )
    return 0


@dataclass(frozen=True)
class Command:
    """One `spielbus` command: its help line and how it runs, one of three ways.

    - `flags` and `run`: parsed here (`flags` adds its arguments), `run(args)` in this process;
    - `module`: parses its own arguments, `module.main(argv)` in this process;
    - `exec_module`: its own process image, `python -m exec_module *exec_args *argv` (agents and
      research pipelines: their own imports and logging); `log_level` passes a global
      `--log-level` on after the first argument (the agent's kind).
    """

    help: str
    flags: Callable[[argparse.ArgumentParser], None] | None = None
    run: Callable[[argparse.Namespace], int] | None = None
    module: str | None = None
    exec_module: str | None = None
    exec_args: tuple[str, ...] = ()
    log_level: bool = False


# Every command, in the order `spielbus --help` lists them.
COMMANDS: dict[str, Command] = {
    "run": Command(
        "run a tournament (embedded nats-server unless --nats)",
        flags=_run_flags,
        run=lambda args: _cmd_run(args, submit_only=False),
    ),
    "submit": Command(
        "submit a tournament to the referees and agents on --nats",
        flags=_submit_flags,
        run=lambda args: _cmd_run(args, submit_only=True),
    ),
    "referee": Command("run a referee worker until SIGTERM", flags=_referee_flags, run=_cmd_referee),
    "agent": Command(
        "run an agent service (spielbus agent KIND --help)", exec_module="agents", log_level=True
    ),
    "llm": Command("`spielbus llm serve`: the embedded LLM server", exec_module="agents", exec_args=("llm",)),
    "cwm": Command(
        "code world models: `spielbus cwm synthesize GAME ...`, `cwm eval DIR`, `cwm reject DIR...`",
        exec_module="research.cwm",
    ),
    "selfplay": Command(
        "self-play datasets, CFVFP and the LLM Coach (spielbus selfplay --help)",
        exec_module="research.coach",
    ),
    "paper": Command(
        "a paper's headline table beside ours (spielbus paper --help)", exec_module="research.papers"
    ),
    "collect": Command(
        "rebuild a run folder from the match stream (spielbus collect --help)", module="spielbus.collect"
    ),
    "puzzles": Command(
        "mate-in-N chess puzzles through the referee (spielbus puzzles --help)", module="spielbus.puzzles"
    ),
    "export": Command("export a run folder: `spielbus export pgn RUN_DIR`", module="spielbus.export"),
    "standings": Command(
        "a run folder's standings again (spielbus standings --help)", module="spielbus.standings"
    ),
    "analyse": Command(
        "score every move of a run folder (spielbus analyse --help)", module="spielbus.analyse"
    ),
    "analyst": Command(
        "score every match as it ends, from the match stream (docs/analysis.md)", module="spielbus.analyst"
    ),
    "calibrate": Command(
        "rate a reference ladder (random, MCTS, Stockfish levels) once (spielbus calibrate --help)",
        module="spielbus.calibrate",
    ),
    "ladder": Command(
        "the ladder: `spielbus ladder FILE.toml` runs it; `standings`, `audit`, `bench` (docs/ladder.md)",
        module="spielbus.ladder",
    ),
    "replay": Command(
        "replay a run folder from its recorded LLM answers (spielbus replay --help)",
        module="spielbus.replay",
    ),
    "games": Command("list the games that can be played", flags=_games_flags, run=_cmd_games),
    "protocol": Command("protocol tools", flags=_protocol_flags, run=_cmd_protocol),
    "bot-check": Command(
        "conformance run against a bot on the bus", flags=_bot_check_flags, run=_cmd_bot_check
    ),
    "auth": Command("accounts and permissions", flags=_auth_flags, run=_cmd_auth),
}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader left (`spielbus games | head`): not an error. Point stdout at /dev/null so
        # that Python's own flush at exit does not complain a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        # Ctrl-C where a command has no handling of its own: a line, not a traceback.
        print("interrupted", file=sys.stderr)
        return 130
    except (bus_loop.EventLoopChoiceError, bus_loop.GcThresholdError) as exc:
        print(f"spielbus: {exc}", file=sys.stderr)
        return 2


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Hand-overs first: their flags belong to their own parsers. Global flags before the command
    # (`spielbus --log-level DEBUG agent ...`) are skipped here and passed on.
    i, level = 0, None
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] == "--log-level" and i + 1 < len(argv):
            level, i = argv[i + 1], i + 2
            continue
        if argv[i].startswith("--log-level="):
            level = argv[i].split("=", 1)[1]
        i += 1
    if i < len(argv) and "-h" not in argv[:i] and "--help" not in argv[:i]:
        command, rest = COMMANDS.get(argv[i]), argv[i + 1 :]
        if command is not None and command.module is not None:
            logging.basicConfig(level=(level or "WARNING").upper())
            return int(importlib.import_module(command.module).main(rest))
        if command is not None and command.exec_module is not None:
            if command.log_level and level is not None and rest and not rest[0].startswith("-"):
                rest = [rest[0], "--log-level", level, *rest[1:]]  # after the kind; a later flag wins
            return _hand_over(command.exec_module, [*command.exec_args, *rest])
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if getattr(args, "stream_replicas", None) is not None:
        from bus.streams import set_stream_replicas

        set_stream_replicas(args.stream_replicas)
    if getattr(args, "tls_ca", None):
        os.environ["NATS_TLS_CA"] = args.tls_ca  # bus.connect reads it, in this process and its children
    run = COMMANDS[args.command].run
    return run(args) if run is not None else 2


if __name__ == "__main__":
    sys.exit(main())
