"""The process inside the sandbox: `python -m agents.cwm.worker REQ_FD RESP_FD NPROC`.

Reads one JSON request per line from REQ_FD, answers one JSON line on RESP_FD (never on
stdout: the model's prints go to stdout, which the sandbox caps). Every answer is
`{"ok": true, "result": ...}` or `{"ok": false, "error": KIND, "detail": TEXT}` where KIND
is syntax, import, api, memory, output, runtime, inference or request; TEXT is at most
`DETAIL_CAP` characters. Ops: ping, load, api (one call of a model function), values (a value
function at given states), search (the `cwm` agent's (IS)MCTS, also the value tournament's),
final (the model's view of a finished match's last state, for the agent's online check).

It answers; it never judges: the expected answers of the unit tests stay with the caller, who
compares (`research.cwm.judge`). Before reading any request it lowers its own process limit
to NPROC (0: none), which then holds for the model's code and every child.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import resource
import sys
import traceback
from typing import Any

from agents.cwm import harness

DETAIL_CAP = 2000  # characters of error text sent back (the caller caps again)
API_CALLS = (*harness.API, "resample_history", "resample_state")
MODULES: dict[str, Any] = {}


def _load(args: dict[str, Any]) -> dict[str, Any]:
    name = str(args.get("name", "model"))
    base = MODULES["model"].__dict__ if name != "model" and "model" in MODULES else None
    code = str(args["code"])
    try:
        compile(code, f"{name}.py", "exec")
    except SyntaxError as exc:
        return {
            "ok": False,
            "error": "syntax",
            "detail": f"{exc.msg} (line {exc.lineno}): {exc.text or ''}".strip()[:DETAIL_CAP],
        }
    try:
        mod = harness.load_module(name, code, base)
    except MemoryError:
        return {"ok": False, "error": "memory", "detail": "MemoryError at import"}
    except OSError as exc:
        if exc.errno == errno.EFBIG:  # RLIMIT_FSIZE (Python ignores SIGXFSZ, so the write fails)
            return {"ok": False, "error": "output", "detail": "output limit: wrote past the file size limit"}
        return {"ok": False, "error": "import", "detail": _tb()}
    except BaseException:
        return {"ok": False, "error": "import", "detail": _tb()}
    if name == "model":
        missing = harness.missing_api(mod, bool(args.get("imperfect")), _inference(args))
        if missing:
            return {"ok": False, "error": "api", "detail": f"missing functions: {', '.join(missing)}"}
    elif not callable(getattr(mod, "value_function", None)):
        return {"ok": False, "error": "api", "detail": "missing function: value_function"}
    MODULES[name] = mod
    return {"ok": True, "result": name}


def _search(args: dict[str, Any]) -> dict[str, Any]:
    m = MODULES["model"]
    rng = random.Random(args.get("seed"))
    seat = int(args["seat"])
    initial = args["initial_state"]
    value = MODULES.get(str(args["value"])) if args.get("value") else None
    value_fn = getattr(value, "value_function", None)
    stats: dict[str, Any] = {}
    if args.get("history") is not None:  # imperfect information: resample, then ISMCTS
        roots = []
        for _ in range(int(args.get("determinizations", 8))):
            if _inference(args) == "state":  # H.4: the inference function gives the state itself
                s = harness.resample_state(m, args["history"], seat, 10)
            else:
                s = harness.resample(m, initial, args["history"], seat, 10, bool(args.get("closed_deck")))
            if s is not None:
                roots.append(s)
        stats["resampled"] = len(roots)
        if not roots:
            return {
                "ok": False,
                "error": "inference",
                "detail": "no resampled state recreates the observation",
            }
        info_sets = True
    else:  # from the given full state, or the initial state and the history's actions
        state = args.get("state")
        roots = [
            state
            if state is not None
            else harness.replay_texts(m, initial, [str(a) for a in args["actions"]])
        ]
        info_sets = False
    legal = [str(a) for a in m.get_legal_actions(roots[0])]
    out = harness.mcts(
        m, roots, seat, int(args["num_players"]), int(args["simulations"]), int(args["rollouts"]),
        float(args["uct_c"]), rng, value_fn, float(args.get("time_limit", 1e9)), info_sets,
    )  # fmt: skip
    out.update(stats)
    out["legal"] = legal
    if args.get("history") is None:  # the root's facts, compared with the turn by the agent
        root = roots[0]
        player = m.get_current_player(root)
        out["current_player"] = player
        if isinstance(player, int) and player >= 0:
            out["observation"] = harness.norm(m.get_observations(root)[seat])
    visits = out["visits"]
    out["action"] = (
        max(visits, key=lambda a: (visits[a], a)) if visits else (rng.choice(legal) if legal else None)
    )
    return {"ok": True, "result": out}


def _inference(args: dict[str, Any]) -> str:
    """The model's inference function: "history" (`resample_history`, H.3/H.5) or "state" (H.4)."""
    return "state" if args.get("inference") == "state" else "history"


def _final(args: dict[str, Any]) -> dict[str, Any]:
    """The model's view of a finished match's last state, for the `cwm` agent's online check of
    the final step: the player to act (terminal: -4), the seat's observation and every player's
    returns (rewards summed along the history). Perfect information: the history's action texts
    replayed; imperfect: a history resampled to end in the seat's final observation."""
    m = MODULES["model"]
    seat = int(args["seat"])
    initial = args["initial_state"]
    if args.get("history") is not None and _inference(args) == "state":
        # H.4: a state, no history to sum along: the returns are the final state's rewards.
        end = harness.resample_state(m, args["history"], seat, 10, terminal=True)
        if end is None:
            return {
                "ok": False,
                "error": "inference",
                "detail": "no resampled state shows the final observation",
            }
        returns = [float(r) for r in list(m.get_rewards(end))[: int(args["num_players"])]]
        return {
            "ok": True,
            "result": {
                "current_player": m.get_current_player(end),
                "observation": harness.norm(m.get_observations(end)[seat]),
                "returns": returns,
                "resampled": True,
            },
        }
    if args.get("history") is not None:
        found = harness.resample_actions(
            m, initial, args["history"], seat, 10, bool(args.get("closed_deck")), terminal=True
        )
        if found is None:
            return {
                "ok": False,
                "error": "inference",
                "detail": "no resampled history ends in the final observation",
            }
        actions = found[1]
    else:
        actions = [str(a) for a in args["actions"]]
    state, returns = harness.replay_returns(m, initial, actions, int(args["num_players"]))
    player = m.get_current_player(state)
    return {
        "ok": True,
        "result": {
            "current_player": player,
            "observation": harness.norm(m.get_observations(state)[seat]),
            "returns": returns,
            "resampled": args.get("history") is not None,
        },
    }


_printed = harness.CappedOut()  # what the model printed since the caller's last `fresh` call


def _api(args: dict[str, Any]) -> dict[str, Any]:
    """One call of a model function on the caller's arguments; the result as it is (JSON)."""
    global _printed
    fn = str(args["fn"])
    if fn not in API_CALLS or not callable(getattr(MODULES["model"], fn, None)):
        return {"ok": False, "error": "request", "detail": f"not a model function: {fn[:60]!r}"}
    if args.get("fresh"):
        _printed = harness.CappedOut()
    try:
        with contextlib.redirect_stdout(_printed):
            result = getattr(MODULES["model"], fn)(*list(args.get("args") or []))
    except harness.OutputLimit as exc:
        return {"ok": False, "error": "output", "detail": str(exc)}
    except MemoryError:
        return {"ok": False, "error": "memory", "detail": "MemoryError", "printed": _printed.tail[-1000:]}
    except BaseException as exc:
        if isinstance(exc, OSError) and exc.errno == errno.EFBIG:  # RLIMIT_FSIZE; SIGXFSZ is ignored
            return {"ok": False, "error": "output", "detail": "output limit: file size"}
        return {"ok": False, "error": "runtime", "detail": _tb(), "printed": _printed.tail[-1000:]}
    kind = type(result).__name__
    if isinstance(result, set | frozenset | tuple):
        result = list(result)
    return {"ok": True, "result": result, "type": kind}


def _values(args: dict[str, Any]) -> dict[str, Any]:
    """`value_function(state, p)` of module `value` for each given state and player, as returned."""
    fn = MODULES[str(args["value"])].value_function
    return {
        "ok": True,
        "result": [[fn(s, p) for p in range(int(args["num_players"]))] for s in args["states"]],
    }


def _tb() -> str:
    return harness.cap(traceback.format_exc(limit=-5), DETAIL_CAP)


def handle(req: dict[str, Any]) -> dict[str, Any]:
    op = req.get("op")
    args = req.get("args") or {}
    if op == "ping":
        return {"ok": True, "result": "pong"}
    if op == "load":
        return _load(args)
    ops = {"api": _api, "search": _search, "values": _values, "final": _final}
    if op not in ops:
        return {"ok": False, "error": "request", "detail": f"unknown op {str(op)[:60]!r}"}
    if "model" not in MODULES:
        return {"ok": False, "error": "request", "detail": "no model loaded"}
    try:
        return ops[str(op)](args)
    except MemoryError:
        return {"ok": False, "error": "memory", "detail": "MemoryError"}
    except harness.OutputLimit as exc:
        return {"ok": False, "error": "output", "detail": str(exc)}
    except BaseException:
        return {"ok": False, "error": "runtime", "detail": _tb()}


def _set(value: Any) -> Any:
    """JSON for what json cannot say itself: sets as lists, anything else as its text."""
    return list(value) if isinstance(value, set | frozenset) else str(value)


def main() -> int:
    req_fd, resp_fd = int(sys.argv[1]), int(sys.argv[2])
    nproc = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    if nproc > 0:  # before any request: the model's code and its children inherit it
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    reader = os.fdopen(req_fd, "rb")
    writer = os.fdopen(resp_fd, "wb")
    for line in reader:
        try:
            req = json.loads(line)
            reply = (
                handle(req)
                if isinstance(req, dict)
                else {"ok": False, "error": "request", "detail": "not an object"}
            )
        except json.JSONDecodeError as exc:
            reply = {"ok": False, "error": "request", "detail": str(exc)}
        try:
            data = json.dumps(reply, default=_set)
        except (TypeError, ValueError, RecursionError) as exc:
            data = json.dumps(
                {"ok": False, "error": "runtime", "detail": f"unserializable result: {exc}"[:500]}
            )
        writer.write(data.encode() + b"\n")
        writer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
