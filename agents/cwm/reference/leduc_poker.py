"""A code world model of two-player Leduc poker in the CWM API (states {"history", "text"}),
with the hidden-history inference function `resample_history` (appendix H.3 / H.5) and the
hidden-state one `resample_state` (H.4).

Cards 0..5 are J, J, Q, Q, K, K (rank = card // 2). Each player antes 1 of 100 chips; a
round ends when everyone called after the last raise (or all checked); raises are 2 in the
first round and 4 in the second, at most two per round; fold only when facing a bet."""

import random

NONE = -10000
CODES = {"Fold": 0, "Call": 1, "Raise": 2}


def _replay(history):
    s = {
        "round": 1,
        "cur": -1,
        "pot": 2,
        "money": [99.0, 99.0],
        "ante": [1, 1],
        "stakes": 1,
        "calls": 0,
        "raises": 0,
        "folded": [False, False],
        "public": NONE,
        "private": [NONE, NONE],
        "seq": [[], []],
        "over": False,
    }
    for action in history:
        if s["cur"] == -1:
            card = int(action.split(":")[1])
            if s["private"][1] == NONE:
                s["private"][0 if s["private"][0] == NONE else 1] = card
                if s["private"][1] != NONE:
                    s["cur"] = 0
            else:
                s["public"] = card
                s["cur"] = _next(s, from_chance=True)
            continue
        p = s["cur"]
        s["seq"][s["round"] - 1].append(CODES[action])
        if action == "Fold":
            s["folded"][p] = True
        elif action == "Call":
            _put(s, p, s["stakes"] - s["ante"][p])
            s["calls"] += 1
        else:
            _put(s, p, s["stakes"] - s["ante"][p])
            raise_by = 2 if s["round"] == 1 else 4
            s["stakes"] += raise_by
            _put(s, p, raise_by)
            s["raises"] += 1
            s["calls"] = 0
        left = s["folded"].count(False)
        ready = (s["raises"] == 0 and s["calls"] == left) or (s["raises"] > 0 and s["calls"] == left - 1)
        if left == 1 or (s["round"] == 2 and ready and action != "Raise"):
            _resolve(s)
        elif ready and action != "Raise":
            s["round"], s["raises"], s["calls"], s["cur"] = 2, 0, 0, -1
        else:
            s["cur"] = _next(s)
    return s


def _put(s, p, amount):
    s["pot"] += amount
    s["ante"][p] += amount
    s["money"][p] -= amount


def _next(s, from_chance=False):
    start = 1 if from_chance else s["cur"]
    for i in range(1, 3):
        q = (start + i) % 2
        if not s["folded"][q]:
            return q
    return s["cur"]


def _rank(s, p):
    lo, hi = sorted((s["public"], s["private"][p]))
    if lo % 2 == 0 and hi == lo + 1:
        return 36 + lo
    return (hi // 2) * 6 + lo // 2


def _resolve(s):
    s["over"] = True
    alive = [p for p in range(2) if not s["folded"][p]]
    if len(alive) == 1:
        winners = alive
    else:
        best = max(_rank(s, p) for p in alive)
        winners = [p for p in alive if _rank(s, p) == best]
    for p in winners:
        s["money"][p] += s["pot"] / len(winners)
    s["pot"] = 0


def _num(x):
    return f"{x:g}"


def _text(s):
    return (
        f"Round: {s['round']}\nPlayer: {s['cur']}\nPot: {s['pot']}\n"
        f"Money (player_0 player_1): {_num(s['money'][0])} {_num(s['money'][1])}\n"
        f"Cards (public player_0 player_1): {s['public']} {s['private'][0]} {s['private'][1]} \n"
        f"Round 1 sequence: {', '.join(_name(c) for c in s['seq'][0])}\n"
        f"Round 2 sequence: {', '.join(_name(c) for c in s['seq'][1])}\n"
    )


def _name(code):
    return {v: k for k, v in CODES.items()}[code]


def get_current_player(state):
    s = _replay(state["history"])
    return -4 if s["over"] else s["cur"]


def get_player_name(player_id):
    return {-1: "chance", -4: "terminal"}.get(player_id, str(player_id))


def get_rewards(state):
    s = _replay(state["history"])
    return [m - 100.0 for m in s["money"]] if s["over"] else [0.0, 0.0]


def get_legal_actions(state):
    s = _replay(state["history"])
    if s["over"]:
        return []
    if s["cur"] == -1:
        used = set(s["private"]) | {s["public"]}
        return [f"Chance outcome:{c}" for c in range(6) if c not in used]
    out = ["Fold"] if s["stakes"] > s["ante"][s["cur"]] else []
    out.append("Call")
    if s["raises"] < 2:
        out.append("Raise")
    return out


def apply_action(state, action):
    history = state["history"] + [action]
    return {"history": history, "text": _text(_replay(history))}


def get_observations(state):
    s = _replay(state["history"])
    out = []
    for p in range(2):
        text = (
            f"[Observer: {p}][Private: {s['private'][p]}][Round {s['round']}][Player: {s['cur']}]"
            f"[Pot: {s['pot']}][Money: {_num(s['money'][0])} {_num(s['money'][1])}]"
        )
        if s["public"] != NONE:
            text += f"[Public: {s['public']}]"
        text += f"[Round1: {' '.join(map(str, s['seq'][0]))}][Round2: {' '.join(map(str, s['seq'][1]))}]"
        out.append(text)
    return out


def _field(obs, name):
    start = obs.find(f"[{name}")
    if start < 0:
        return None
    return obs[start + len(name) + 1 : obs.index("]", start)].lstrip(": ").strip()


def resample_history(obs_action_history, player_id, last_is_terminal=False):
    """The betting is public and the seat's own card known: sample the opponent's card among
    those that recreate the last observation (at a showdown the money tells)."""
    last = obs_action_history[-1][0]
    mine = int(_field(last, "Private"))
    public = _field(last, "Public")
    public = int(public) if public is not None else None
    names = {str(v): k for k, v in CODES.items()}
    round1 = [names[c] for c in (_field(last, "Round1") or "").split()]
    round2 = [names[c] for c in (_field(last, "Round2") or "").split()]
    candidates = [c for c in range(6) if c not in (mine, public)]
    random.shuffle(candidates)
    history = []
    for other in candidates:
        deals = [mine, other] if player_id == 0 else [other, mine]
        history = [f"Chance outcome:{c}" for c in deals] + round1
        if public is not None:
            history += [f"Chance outcome:{public}", *round2]
        if get_observations({"history": history})[player_id] == last:
            break
    return history


def resample_state(obs_action_history, player_id):
    """Appendix H.4: a state (not a history) that recreates the seat's last observation."""
    state = {"history": [], "text": _text(_replay([]))}
    for action in resample_history(obs_action_history, player_id):
        state = apply_action(state, action)
    return state
