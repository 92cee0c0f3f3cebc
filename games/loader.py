"""Load any OpenSpiel game from a `GameSpec` or a spec string, our own Python games included.

Our games register with `pyspiel.register_game` when `games.word` and `games.cwm` are imported;
`load_game` imports them first so that every caller sees the same catalogue.
Loaded games are cached per spec: pyspiel games are immutable and shareable.
A first load can take a while (Ghost reads and indexes a word list: about half a
second), so async callers use `load_game_async`: a cached game returns at once,
a first load runs in a worker thread instead of blocking every match on the loop.

Chess takes a `fen` parameter (a start position), which open_spiel 2.0.2's chess
lacks: the game is loaded without it and `initial_state(game)` (used by `replay`
and the referee) starts from the FEN; see games/chess/position.py.
"""

from __future__ import annotations

import asyncio
import importlib
import re
import threading

import pyspiel

from bus.protocol import GameSpec

# Modules whose import registers extra games with pyspiel (absent ones are skipped).
_GAME_MODULES = ("games.word", "games.cwm")
_registered = False


class GameSpecError(ValueError):
    pass


def register_our_games() -> None:
    global _registered
    if _registered:
        return
    _registered = True
    for name in _GAME_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise


_SPEC_RE = re.compile(r"^\s*([A-Za-z0-9_]+)\s*(?:\((.*)\))?\s*$", re.S)


def _coerce(value: str) -> bool | int | float | str:
    v = value.strip()
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v


def parse_spec(text: str) -> GameSpec:
    """`"kuhn_poker(players=3)"` -> GameSpec(name="kuhn_poker", params={"players": 3})."""
    m = _SPEC_RE.match(text)
    if not m:
        raise GameSpecError(f"not a game spec: {text!r} (expected name or name(key=value,...))")
    params: dict[str, bool | int | float | str] = {}
    if m.group(2):
        for part in m.group(2).split(","):
            if not part.strip():
                continue
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise GameSpecError(f"bad parameter {part!r} in {text!r}: expected key=value")
            params[key.strip()] = _coerce(value)
    return GameSpec(name=m.group(1), params=params)


_Key = tuple[str, tuple[tuple[str, object], ...]]
_MAX_CACHED = 256
_cache: dict[_Key, pyspiel.Game] = {}
_load_lock = threading.Lock()  # one load at a time: loads in worker threads must not race


def _load_uncached(name: str, frozen_params: tuple[tuple[str, object], ...]) -> pyspiel.Game:
    register_our_games()
    if name not in pyspiel.registered_names():
        raise GameSpecError(f"unknown game {name!r}; `spielbus games` lists what can be played")
    params = dict(frozen_params)
    try:
        if name == "chess" and "fen" in params:
            return _load_chess_from_fen(params)
        return pyspiel.load_game(name, params)
    except GameSpecError:
        raise
    except (pyspiel.SpielError, RuntimeError, TypeError, ValueError) as exc:
        raise GameSpecError(f"cannot load {name} with {dict(frozen_params)}: {exc}") from exc


def _load_chess_from_fen(params: dict[str, object]) -> pyspiel.Game:
    # Lazy: python-chess costs most loads nothing. The import goes one way (position knows
    # nothing of the loader): its BadFen becomes our GameSpecError, with its own message.
    from games.chess.position import BadFen, load_chess_from_fen

    try:
        return load_chess_from_fen(params)
    except BadFen as exc:
        raise GameSpecError(str(exc)) from None


def _key(spec: GameSpec) -> _Key:
    return spec.name, tuple(sorted(spec.params.items()))


def load_game(spec: GameSpec | str) -> pyspiel.Game:
    if isinstance(spec, str):
        spec = parse_spec(spec)
    key = _key(spec)
    game = _cache.get(key)
    if game is not None:
        return game
    with _load_lock:
        game = _cache.get(key)
        if game is None:
            game = _load_uncached(*key)
            while len(_cache) >= _MAX_CACHED:
                _cache.pop(next(iter(_cache)))
            _cache[key] = game
    return game


async def load_game_async(spec: GameSpec | str) -> pyspiel.Game:
    """`load_game` for the event loop: a cached game at once, a first load in a worker thread."""
    if isinstance(spec, str):
        spec = parse_spec(spec)
    game = _cache.get(_key(spec))
    if game is not None:
        return game
    return await asyncio.to_thread(load_game, spec)


def game_names() -> list[str]:
    register_our_games()
    return sorted(pyspiel.registered_names())


def initial_state(game: pyspiel.Game) -> pyspiel.State:
    """The game's start state: `new_initial_state()`, or the chess position of its `fen` parameter."""
    from games.chess.position import start_fen

    fen = start_fen(game)
    return game.new_initial_state() if fen is None else game.new_initial_state(fen)


def replay(game: pyspiel.Game, actions: list[int]) -> pyspiel.State:
    """Rebuild a perfect-information state from its full action history."""
    state = initial_state(game)
    for a in actions:
        state.apply_action(a)
    return state
