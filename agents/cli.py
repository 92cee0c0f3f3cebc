"""`spielbus agent KIND --name NAME [options]`: run one agent service until SIGTERM.

Every field of the kind's options model is a flag, made from the model by
`add_option_flags` (`--simulations 200`; a structured field takes JSON:
`--llm '{"model": "x"}'`); `--options '{...}'` gives several at once as JSON (flags
override it). `spielbus agent KIND --help` lists the kind's flags.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from agents.base import Strategy
from agents.registry import KINDS, UnknownKind, strategy_class
from bus import loop as bus_loop
from bus.auth import AuthError, login_for
from bus.connect import nats_url, nats_url_arg
from bus.subjects import check_token, prefix_arg


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None


def _flag_shape(annotation: Any) -> tuple[Any, list[str] | None]:
    """The argparse `type` of one option field (int, float, str, bool, or JSON for anything
    structured) and the choices of a Literal of strings."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _flag_shape(args[0]) if len(args) == 1 else (_json_value, None)
    if annotation in (int, float, str, bool):
        return annotation, None
    if origin is typing.Literal and all(isinstance(a, str) for a in typing.get_args(annotation)):
        return str, list(typing.get_args(annotation))
    return _json_value, None


def _default_text(f: FieldInfo) -> str:
    if f.is_required():
        return " (required)"
    default = f.get_default(call_default_factory=True)
    if isinstance(default, BaseModel):
        return f" (JSON; default: {type(default).__name__}'s defaults)"
    return f" (default: {default!r})"


def add_option_flags(parser: argparse.ArgumentParser, title: str, model: type[BaseModel]) -> list[str]:
    """One flag per field of `model` (`seed_count` -> `--seed-count`, value in `opt_seed_count`):
    booleans as --x/--no-x, scalars typed, Literals with their choices, structured fields as JSON.
    Returns the field names, in order."""
    group = parser.add_argument_group(title)
    for name, f in model.model_fields.items():
        kind, choices = _flag_shape(f.annotation)
        flag = "--" + name.replace("_", "-")
        help_text = ((f.description or "") + _default_text(f)).replace("%", "%%")  # argparse formats help
        if kind is bool:
            action = argparse.BooleanOptionalAction
            group.add_argument(flag, dest=f"opt_{name}", action=action, help=help_text)
        else:
            metavar = "JSON" if kind is _json_value else (None if choices else name.upper())
            group.add_argument(
                flag, dest=f"opt_{name}", type=kind, choices=choices, metavar=metavar, help=help_text
            )
    return list(model.model_fields)


def build_parser(kind: str | None) -> tuple[argparse.ArgumentParser, list[str]]:
    parser = argparse.ArgumentParser(
        prog="spielbus agent",
        description="Run one agent service on the bus. Kinds: " + ", ".join(sorted(KINDS)),
    )
    parser.add_argument("kind", help="agent kind")
    parser.add_argument("--name", required=True, help="agent name: its turn subject and queue group")
    parser.add_argument(
        "--check", action="store_true", help="only validate the options and exit (0 valid, 2 invalid)"
    )
    parser.add_argument(
        "--games",
        default=None,
        metavar="NAME[,NAME...]",
        help="the games it will be asked to play (a tournament's): refused (exit 2) when the kind "
        "plays only others, as stockfish plays only chess",
    )
    parser.add_argument(
        "--nats",
        default=None,
        type=nats_url_arg,
        metavar="URL[,URL...]",
        help="NATS URL, or several servers of one cluster comma-separated "
        "(default: $NATS_URL or nats://127.0.0.1:4222)",
    )
    parser.add_argument(
        "--tls-ca",
        default=None,
        metavar="FILE",
        help="CA file to verify the NATS server's TLS certificate with (default $NATS_TLS_CA)",
    )
    parser.add_argument("--prefix", default="spielbus", type=prefix_arg, help="subject prefix")
    parser.add_argument("--max-concurrency", type=int, default=16, help="turns handled at once")
    parser.add_argument(
        "--max-backlog",
        type=int,
        default=64,
        help="turns that may wait for a slot; beyond that a turn is refused at once (default 64)",
    )
    parser.add_argument(
        "--auth",
        default=None,
        metavar="DIR",
        help="log in as this agent's user of a `spielbus auth init` folder (wins over NATS_USER/NATS_CREDS)",
    )
    parser.add_argument("--options", default=None, help="options as JSON (flags override it)")
    parser.add_argument(
        "--metrics-port", type=int, default=None, help="serve Prometheus metrics on this port"
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address the metrics listen on (default 127.0.0.1; 0.0.0.0: every interface)",
    )
    parser.add_argument("--log-level", default="INFO")
    names: list[str] = []
    if kind is not None and kind in KINDS:
        names = add_option_flags(parser, f"options of {kind}", strategy_class(kind).Options)
    return parser, names


def options_raw(args: argparse.Namespace, names: list[str]) -> dict[str, Any]:
    """The options as given: `--options` JSON, each flag that was given overriding its field.
    ValueError when `--options` is not a JSON object."""
    raw: dict[str, Any] = {}
    if args.options:
        try:
            raw = json.loads(args.options)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--options is not JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise ValueError("--options must be a JSON object")
    for name in names:
        value = getattr(args, f"opt_{name}")
        if value is not None:
            raw[name] = value
    return raw


def _unplayable(strategy: Strategy, games: str | None) -> list[str]:
    """The games of `--games` (names) the strategy does not play (none when it plays any game).
    By name: a `cwm` model's game may carry parameters (`leduc_poker(players=2)`), checked per turn."""
    names = [g.strip() for g in (games or "").split(",") if g.strip()]
    plays = {g.split("(", 1)[0] for g in strategy.games}
    return [g for g in dict.fromkeys(names) if plays and g not in plays]


def _login(args: argparse.Namespace) -> dict[str, str]:
    """`--auth DIR`: this agent's own user (never the referee's); none: the environment decides."""
    if not args.auth:
        return {}
    user = login_for(args.auth, "agent", args.name, prefix=args.prefix)
    return {"user": user.user, "password": user.password}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    kind = next((a for a in argv if not a.startswith("-")), None)
    try:
        parser, names = build_parser(kind)
    except UnknownKind as exc:
        print(f"spielbus agent: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if args.tls_ca:
        os.environ["NATS_TLS_CA"] = args.tls_ca  # read by bus.connect
    try:
        check_token(args.name, "agent name")  # it becomes subject tokens: refuse it before anything starts
        if args.max_concurrency < 1 or args.max_backlog < 0:
            raise ValueError("--max-concurrency must be at least 1 and --max-backlog at least 0")
        cls = strategy_class(args.kind)
    except (UnknownKind, ValueError) as exc:
        print(f"spielbus agent: {exc}", file=sys.stderr)
        return 2
    try:
        raw = options_raw(args, names)
    except ValueError as exc:
        print(f"spielbus agent: {exc}", file=sys.stderr)
        return 2
    try:
        strategy = cls.from_options(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(options)'}: {e['msg']}" for e in exc.errors()
        )
        print(f"spielbus agent: bad options for {args.name} ({args.kind}): {problems}", file=sys.stderr)
        return 2
    unplayable = _unplayable(strategy, args.games)
    if unplayable:
        print(
            f"spielbus agent: {args.name} ({args.kind}) plays only {', '.join(strategy.games)}, "
            f"not {', '.join(unplayable)}: every match of those would be forfeited",
            file=sys.stderr,
        )
        return 2
    try:
        login = _login(args)
    except AuthError as exc:
        print(f"spielbus agent: {exc}", file=sys.stderr)
        return 2
    if args.check:
        return 0
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from agents.runtime import serve

    on_turn = None
    if args.metrics_port is not None:
        from agents.metrics import start_agent_metrics

        try:
            on_turn = start_agent_metrics(
                args.metrics_port, args.name, args.kind, strategy.models(), host=args.host
            )
        except OSError as exc:
            print(
                f"spielbus agent: cannot serve --metrics-port {args.metrics_port}: {exc.strerror or exc}",
                file=sys.stderr,
            )
            return 2
    try:
        bus_loop.run(
            serve(
                strategy,
                name=args.name,
                url=nats_url(args.nats),
                prefix=args.prefix,
                max_concurrency=args.max_concurrency,
                max_backlog=args.max_backlog,
                ready=lambda: print(f"agent {args.name} ({args.kind}) ready", flush=True),
                on_turn=on_turn,
                **login,
            )
        )
    except ConnectionError as exc:
        print(f"spielbus agent: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"spielbus agent: {exc}", file=sys.stderr)
        return 2
    return 0
