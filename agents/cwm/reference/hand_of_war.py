"""A code world model of Hand of war (16 cards J Q K A, hands of three, battles and showdowns) in
the CWM API (states {"history", "text"}), with the hidden-history inference function
`resample_history` (appendix H.3 / H.5): the seat's log gives every event in order; the
opponent's hidden draws and the burned cards are filled with cards the seat has not seen, each
card the opponent played drawn by it before."""

import random

RANKS = "JQKA"
SUITS = "shdc"
DECK = [r + s for r in RANKS for s in SUITS]
HAND = 3
PILE = 8


def _rank(card):
    return RANKS.index(card[0])


def _names(cards):
    return " ".join(cards) if cards else "(none)"


def _sorted(cards):
    return sorted(cards, key=DECK.index)


def _new():
    return {"unseen": list(DECK), "pile": [PILE, PILE], "hands": [[], []], "wins": [[], []], "stake": [],
            "burned": 0, "chosen": [None, None], "showdown": 0, "revealed": [],
            "pending": [[0, "draw"]] * HAND + [[1, "draw"]] * HAND, "over": False, "winner": None,
            "reason": "", "log": []}  # fmt: skip


def _player(s):
    if s["over"]:
        return -4
    if s["pending"]:
        return -1
    return 0 if s["chosen"][0] is None else 1


def _end(s, reason, winner=None):
    s["over"], s["pending"] = True, []
    if winner is None:
        n0, n1 = len(s["wins"][0]), len(s["wins"][1])
        winner = 0 if n0 > n1 else 1 if n1 > n0 else None
        reason += f"; win piles {n0} to {n1}"
    s["winner"] = winner
    s["reason"] = reason + (f": player {winner} wins" if winner is not None else ": a draw")
    s["log"].append((f"game over: {s['reason']}", {}))


def _battle(s):
    a, b = s["chosen"]
    if not s["showdown"]:
        s["revealed"] += [a, b]
    s["chosen"] = [None, None]
    if _rank(a) == _rank(b):
        s["showdown"] += 1
        s["log"].append((f"battle: {a} against {b}: a tie, showdown", {}))
        s["pending"] = [[0, "burn"], [1, "burn"]]
        return
    w = 0 if _rank(a) > _rank(b) else 1
    s["log"].append((f"battle: {a} against {b}: player {w} wins {len(s['stake'])} cards", {}))
    s["wins"][w] += s["stake"]
    s["stake"], s["burned"], s["showdown"] = [], 0, 0
    if len(s["wins"][w]) + len(s["hands"][w]) + s["pile"][w] == len(DECK):
        _end(s, f"player {w} owns all {len(DECK)} cards", w)
        return
    s["pending"] = [[p, "draw"] for p in (0, 1) for _ in range(HAND - len(s["hands"][p]))]


def _step(s, action):
    if s["pending"]:
        card = action.split(" ")[1]
        player, kind = s["pending"].pop(0)
        s["unseen"].remove(card)
        s["pile"][player] -= 1
        if kind == "draw":
            s["hands"][player].append(card)
            s["log"].append((f"player {player} drew a card", {player: f"you drew {card}"}))
        else:
            s["stake"].append(card)
            s["burned"] += 1
            s["log"].append((f"player {player} burned a card face down", {}))
    else:
        player = _player(s)
        s["hands"][player].remove(action)
        s["chosen"][player] = action
        s["stake"].append(action)
        if s["showdown"]:
            s["revealed"].append(action)
            s["log"].append((f"player {player} played {action} face up", {}))
        else:
            s["log"].append(
                (f"player {player} placed a card face down", {player: f"you placed {action} face down"})
            )
        if player == 1:
            _battle(s)
    if s["over"]:
        return
    if s["pending"]:
        player, kind = s["pending"][0]
        if s["pile"][player] == 0:
            _end(s, f"player {player} must {kind} a card but its draw pile is empty")
    elif not s["hands"][_player(s)]:
        _end(s, f"player {_player(s)} must play a card but its hand is empty")


def _replay(history):
    s = _new()
    for action in history:
        _step(s, action)
    return s


def _text(s):
    over = f"; over: {s['reason']}" if s["over"] else ""
    return (f"hands {_names(s['hands'][0])} | {_names(s['hands'][1])}; piles {s['pile']}; "
            f"win piles {len(s['wins'][0])} {len(s['wins'][1])}; stake {_names(s['stake'])}; "
            f"unseen {_names(_sorted(s['unseen']))}" + over)  # fmt: skip


def get_current_player(state):
    return _player(_replay(state["history"]))


def get_player_name(player_id):
    return {-1: "chance", -4: "terminal"}.get(player_id, str(player_id))


def get_rewards(state):
    s = _replay(state["history"])
    if not s["over"] or s["winner"] is None:
        return [0.0, 0.0]
    return [1.0 if p == s["winner"] else -1.0 for p in range(2)]


def get_legal_actions(state):
    s = _replay(state["history"])
    p = _player(s)
    if p == -4:
        return []
    if p == -1:
        return [f"deal {c}" for c in _sorted(s["unseen"])]
    return _sorted(s["hands"][p])


def apply_action(state, action):
    history = state["history"] + [action]
    return {"history": history, "text": _text(_replay(history))}


def _view(s, seat):
    other = 1 - seat
    lines = [f"Hand of War. You are player {seat}.", f"Your hand: {_names(_sorted(s['hands'][seat]))}."]
    lines.append(f"Draw piles: you {s['pile'][seat]} cards, opponent {s['pile'][other]} cards.")
    lines.append(f"Win piles: you {len(s['wins'][seat])} cards, opponent {len(s['wins'][other])} cards.")
    if s["stake"]:
        mode = f"Showdown {s['showdown']}" if s["showdown"] else "Battle"
        lines.append(f"{mode}: {len(s['stake'])} cards at stake, {s['burned']} of them burned face down.")
    for p in (0, 1):
        card = s["chosen"][p]
        if card is not None:
            who = "you" if p == seat else f"player {p}"
            shown = card if s["showdown"] or p == seat else "a card"
            lines.append(f"On the table: {who} placed {shown} face {'up' if s['showdown'] else 'down'}.")
    lines.append(f"PubliclyRevealedCards: {_names(s['revealed'])}.")
    if s["over"]:
        lines.append(f"Game over: {s['reason']}.")
    elif s["pending"]:
        lines.append("Cards are being drawn.")
    else:
        turn = _player(s)
        what = "place a card face up" if s["showdown"] else "place a card face down"
        lines.append(f"Turn: {'you' if turn == seat else f'player {turn}'} ({what}).")
    seen = [private.get(seat, public) for public, private in s["log"]]
    seen = [x for x in seen if x is not None]
    return (
        "\n".join(lines)
        + "\nWhat you have seen so far:\n"
        + "\n".join(f"{i + 1}. {x}" for i, x in enumerate(seen))
    )


def get_observations(state):
    s = _replay(state["history"])
    return [_view(s, seat) for seat in range(2)]


def resample_history(obs_action_history, player_id, last_is_terminal=False):
    seat, opp = player_id, 1 - player_id
    tail = obs_action_history[-1][0].split("What you have seen so far:\n", 1)[1]
    events = [line.split(". ", 1)[1] for line in tail.split("\n") if line.strip()]
    known = set()
    for e in events:
        if e.startswith("you drew "):
            known.add(e.split(" ")[2])
        elif e.startswith("battle: "):
            parts = e.split(" ")
            known.update([parts[1], parts[3].rstrip(":")])
        elif " face up" in e:
            known.add(e.split(" ")[3])
    # Slots: a hidden card, filled at the end; the opponent's hand holds slot indices.
    slots, history, hand, pending = [], [], [], None
    for e in events:
        if e.startswith("you drew "):
            history.append("deal " + e.split(" ")[2])
        elif e == f"player {opp} drew a card" or e.endswith("burned a card face down"):
            slots.append(None)
            history.append(len(slots) - 1)  # an index: "deal <slot's card>"
            if e.startswith(f"player {opp} drew"):
                hand.append(len(slots) - 1)
        elif e.startswith("you placed "):
            history.append(e.split(" ")[2])
        elif e == f"player {opp} placed a card face down":
            pending = hand.pop(random.randrange(len(hand)))
            history.append(("play", pending))
        elif e.startswith(f"player {seat} played "):
            history.append(e.split(" ")[3])
        elif e.startswith(f"player {opp} played "):
            slot = hand.pop(random.randrange(len(hand)))
            slots[slot] = e.split(" ")[3]
            history.append(("play", slot))
        elif e.startswith("battle: ") and pending is not None:
            parts = e.split(" ")
            slots[pending] = parts[1] if opp == 0 else parts[3].rstrip(":")
            pending = None
    free = [c for c in DECK if c not in known and c not in slots]
    random.shuffle(free)
    slots = [c if c is not None else free.pop() for c in slots]
    out = []
    for h in history:
        if isinstance(h, int):
            out.append("deal " + slots[h])
        elif isinstance(h, tuple):
            out.append(slots[h[1]])
        else:
            out.append(h)
    return out
