"""Start a game once, in a child process, before a tournament relies on it.

OpenSpiel's C++ games take their parameters on trust: `connect_four(rows=0)`
crashes the process (SIGSEGV) at `new_initial_state()`, `rows=-1` throws, and
`rows=100000` builds a 700,000-cell board whose every turn would be the size of
the bus's largest message. `check_game(spec)` therefore loads the game and plays
up to its first decision in a child process with a memory and time limit, and
turns every way that can fail into a `GameSpecError` naming the parameters. Games
with default parameters, and our own Python games, are checked in-process (no child).

Limits: only the start of the game is checked (a parameter that breaks a later
state is found by the match, which records `error`); the child costs about a
second per distinct spec (cached per process).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

from bus.protocol import GameSpec
from games.loader import GameSpecError, load_game

# A turn larger than this could not be sent (NATS's default maximum message is 1 MiB).
MAX_TURN_BYTES = 512 * 1024
MEMORY_LIMIT = 2 * 1024**3
TIME_LIMIT_S = 60.0
_checked: dict[str, int] = {}


def _first_turn_bytes(spec: GameSpec) -> tuple[int, int]:
    """Players, and the size of the first decision's turn (observation and legal actions)."""
    import random

    from games.view import legal_actions, observation_text

    game = load_game(spec)
    state = game.new_initial_state()
    rng = random.Random(0)
    for _ in range(100):  # chance nodes before the first decision
        if not state.is_chance_node():
            break
        outcomes = [a for a, _ in state.chance_outcomes()]
        state.apply_action(rng.choice(outcomes))
    size = 0
    if not state.is_terminal():
        seats = range(game.num_players()) if state.is_simultaneous_node() else [state.current_player()]
        for seat in seats:
            legal = legal_actions(state, seat)
            size = max(size, len(observation_text(state, seat)) + sum(len(la.text) + 24 for la in legal))
    return game.num_players(), size


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _params(spec: GameSpec) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in sorted(spec.params.items()))


def check_game(spec: GameSpec) -> int:
    """Check that `spec` starts and its turns fit on the bus; returns its number of players."""
    key = spec.model_dump_json()
    if key in _checked:
        return _checked[key]
    game = load_game(spec)  # unknown names and parameters fail here, fast, in-process
    # Default parameters are trusted; so are our Python games (they validate their parameters and
    # raise Python errors). A C++ game with parameters is started in a child it cannot crash.
    if not spec.params or not type(game).__module__.startswith("pyspiel"):
        try:
            players, size = _first_turn_bytes(spec)
        except (GameSpecError, MemoryError):
            raise
        except Exception as exc:
            raise GameSpecError(f"params ({_params(spec)}): cannot start the game: {exc}") from exc
    else:
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "games.probe", key],
                capture_output=True,
                text=True,
                timeout=TIME_LIMIT_S,
                preexec_fn=_limit,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
            )
        except subprocess.TimeoutExpired:
            raise GameSpecError(
                f"params ({_params(spec)}): the game did not reach its first move within {TIME_LIMIT_S:.0f} s"
            ) from None
        if proc.returncode < 0:
            raise GameSpecError(
                f"params ({_params(spec)}): the game crashed while starting (signal {-proc.returncode})"
            )
        try:
            out = json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise GameSpecError(f"params ({_params(spec)}): the game failed while starting: {tail}") from None
        if "error" in out:
            raise GameSpecError(f"params ({_params(spec)}): {out['error']}")
        players, size = int(out["players"]), int(out["turn_bytes"])
    if size > MAX_TURN_BYTES:
        raise GameSpecError(
            f"params ({_params(spec)}): a turn would carry {size:,} bytes of observation and legal "
            f"actions; the bus carries at most {MAX_TURN_BYTES:,}"
        )
    _checked[key] = players
    return players


def main(argv: list[str]) -> int:
    spec = GameSpec.model_validate_json(argv[0])
    try:
        players, size = _first_turn_bytes(spec)
    except MemoryError:
        print(json.dumps({"error": f"the game needs more than {MEMORY_LIMIT // 1024**3} GiB to start"}))
        return 0
    except Exception as exc:  # the game's own error, whatever its type: reported, not raised
        print(json.dumps({"error": f"cannot start the game: {type(exc).__name__}: {exc}"[:500]}))
        return 0
    print(json.dumps({"players": players, "turn_bytes": size}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
