"""The process inside the sandbox: `python -m agents.cwm.worker REQ_FD RESP_FD`.

Reads one JSON request per line from REQ_FD, answers one JSON line on RESP_FD (never on
stdout: the model's prints go to stdout, which the sandbox caps). Every answer is
`{"ok": true, "result": ...}` or `{"ok": false, "error": KIND, "detail": TEXT}` where KIND
is syntax, import, api, memory, output, runtime or request. Ops: ping, load, tests,
search, check, value_check, duel (see `handle`).
"""

from __future__ import annotations

import errno
import json
import os
import random
import sys
import traceback
from pathlib import Path
from typing import Any

from agents.cwm import harness

MODULES: dict[str, Any] = {}


def _source(args: dict[str, Any]) -> str:
    if "code" in args:
        return str(args["code"])
    base = Path(os.environ.get("CWM_MODEL_DIR") or ".")
    path = (base / str(args["file"])).resolve()
    if base.resolve() not in path.parents:
        raise ValueError(f"{args['file']!r} is outside the model folder")
    return path.read_text()


def _load(args: dict[str, Any]) -> dict[str, Any]:
    name = str(args.get("name", "model"))
    base = MODULES["model"].__dict__ if name != "model" and "model" in MODULES else None
    code = _source(args)
    try:
        compile(code, f"{name}.py", "exec")
    except SyntaxError as exc:
        return {
            "ok": False,
            "error": "syntax",
            "detail": f"{exc.msg} (line {exc.lineno}): {exc.text or ''}".strip(),
        }
    try:
        mod = harness.load_module(name, code, base)
    except MemoryError:
        return {"ok": False, "error": "memory", "detail": "MemoryError at import"}
    except OSError as exc:
        if exc.errno == errno.EFBIG:  # RLIMIT_FSIZE (Python ignores SIGXFSZ, so the write fails)
            return {"ok": False, "error": "output", "detail": "output limit: wrote past the file size limit"}
        return {"ok": False, "error": "import", "detail": traceback.format_exc(limit=-5)[-2500:]}
    except BaseException:
        return {"ok": False, "error": "import", "detail": traceback.format_exc(limit=-5)[-2500:]}
    if name == "model":
        missing = harness.missing_api(mod, bool(args.get("imperfect")))
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
    else:
        roots = [harness.replay_texts(m, initial, [str(a) for a in args["actions"]])]
        info_sets = False
    legal = [str(a) for a in m.get_legal_actions(roots[0])]
    out = harness.mcts(
        m, roots, seat, int(args["num_players"]), int(args["simulations"]), int(args["rollouts"]),
        float(args["uct_c"]), rng, value_fn, float(args.get("time_limit", 1e9)), info_sets,
    )  # fmt: skip
    out.update(stats)
    out["legal"] = legal
    if args.get("observation") is not None:  # online check of a perfect-information model
        root = roots[0]
        out["state_agrees"] = bool(
            m.get_current_player(root) == seat
            and harness.norm(m.get_observations(root)[seat]) == harness.norm(args["observation"])
        )
    visits = out["visits"]
    out["action"] = (
        max(visits, key=lambda a: (visits[a], a)) if visits else (rng.choice(legal) if legal else None)
    )
    return {"ok": True, "result": out}


def _check(args: dict[str, Any]) -> dict[str, Any]:
    """Online check of a perfect-information model against what the referee sent."""
    m = MODULES["model"]
    state = harness.replay_texts(m, args["initial_state"], [str(a) for a in args["actions"]])
    seat = int(args["seat"])
    legal = sorted(str(a) for a in m.get_legal_actions(state))
    ok = (
        m.get_current_player(state) == seat
        and legal == sorted(args["legal"])
        and harness.norm(m.get_observations(state)[seat]) == harness.norm(args["observation"])
    )
    return {"ok": True, "result": {"agrees": bool(ok)}}


def _value_check(args: dict[str, Any]) -> dict[str, Any]:
    """H.7's tests: a float for every player at every state; the rewards at terminal states."""
    fn = MODULES[str(args["value"])].value_function
    problems = []
    for s in args["states"]:
        for p in range(int(args["num_players"])):
            v = fn(s["state"], p)
            if not isinstance(v, int | float) or v != v or abs(v) == float("inf"):
                problems.append(f"value_function(state, {p}) returned {v!r}, not a finite float")
            elif s.get("terminal_rewards") is not None and abs(float(v) - s["terminal_rewards"][p]) > 1e-6:
                problems.append(
                    f"terminal state: value_function(state, {p}) = {v!r}, reward {s['terminal_rewards'][p]}"
                )
    return {"ok": True, "result": problems[:5]}


def _duel(args: dict[str, Any]) -> dict[str, Any]:
    """MCTS with value function A against MCTS with value function B on the model, seats
    alternating; both search the model's full state (a tournament between value functions,
    not a test of inference). Returns A's mean return."""
    m = MODULES["model"]
    rng = random.Random(args.get("seed"))
    n = int(args["num_players"])
    fns = [getattr(MODULES.get(str(v)), "value_function", None) for v in args["values"]]
    total = 0.0
    for g in range(int(args["games"])):
        seat_a = g % n
        state = args["initial_state"]
        acc = [0.0] * n
        for _ in range(500):
            p = m.get_current_player(state)
            if p == harness.TERMINAL:
                break
            legal = [str(a) for a in m.get_legal_actions(state)]
            if p < 0:
                action = rng.choice(legal)
            else:
                fn = fns[0] if p == seat_a else fns[1]
                out = harness.mcts(m, [state], p, n, int(args["simulations"]), 1, 1.4, rng, fn, 1e9, False)
                v = out["visits"]
                action = max(v, key=v.__getitem__) if v else rng.choice(legal)
            state = m.apply_action(state, action)
            for i, r in enumerate(m.get_rewards(state)):
                acc[i] += float(r)
        total += acc[seat_a]
    return {"ok": True, "result": total / max(1, int(args["games"]))}


def handle(req: dict[str, Any]) -> dict[str, Any]:
    op = req.get("op")
    args = req.get("args") or {}
    if op == "ping":
        return {"ok": True, "result": "pong"}
    if op == "load":
        return _load(args)
    if op not in ("tests", "search", "check", "value_check", "duel"):
        return {"ok": False, "error": "request", "detail": f"unknown op {op!r}"}
    if "model" not in MODULES:
        return {"ok": False, "error": "request", "detail": "no model loaded"}
    try:
        if op == "tests":
            return {"ok": True, "result": harness.run_tests(MODULES["model"], args["tests"])}
        if op == "search":
            return _search(args)
        if op == "value_check":
            return _value_check(args)
        if op == "duel":
            return _duel(args)
        return _check(args)
    except MemoryError:
        return {"ok": False, "error": "memory", "detail": "MemoryError"}
    except harness.OutputLimit as exc:
        return {"ok": False, "error": "output", "detail": str(exc)}
    except BaseException:
        return {"ok": False, "error": "runtime", "detail": traceback.format_exc(limit=-5)[-2500:]}


def main() -> int:
    req_fd, resp_fd = int(sys.argv[1]), int(sys.argv[2])
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
            data = json.dumps(reply, default=str)
        except (TypeError, ValueError) as exc:
            data = json.dumps({"ok": False, "error": "runtime", "detail": f"unserializable result: {exc}"})
        writer.write(data.encode() + b"\n")
        writer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
